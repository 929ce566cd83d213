"""Plans under the real manager: DAG order read from the journal, parallel branches, failure blocking
only its dependants, a retry as a new job, checks, closing, the progress log and the task list."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.plans import SubmittedPlan, close_plan, log_path, plan_status, read_lines, retry_stage

from tests.plans.plankit import (
    coordinator_frames,
    first,
    plan,
    progress_log,
    run_manager,
    stage,
    stage_frames,
    statuses,
    submit,
)

LINE = re.compile(
    r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\] (stage \S+ \(.*\): status -> [a-z_]+.*|plan \S+: .+)$"
)


def _parent_activation(ws: Workspace, submitted: SubmittedPlan, job_key: str | None) -> str:
    assert job_key is not None
    payload = ws.payload_path(f"{submitted.placement}/{submitted.job_key}.stages", job_key)
    return str(json.loads((payload / "job.json").read_text())["parent"]["activation_id"])


def _check_order(
    ws: Workspace, submitted: SubmittedPlan, needs: dict[str, list[str]]
) -> dict[str, list[dict[str, Any]]]:
    frames = stage_frames(ws, submitted)
    for name, deps in needs.items():
        for dep in deps:
            done = first(frames[dep], "succeeded")
            assert first(frames[name], "ready") > done, (name, dep)
            assert first(frames[name], "running") > done, (name, dep)
    return frames


def test_a_diamond_runs_each_stage_after_its_dependencies_and_the_branches_together(
    ws: Workspace, tmp_path: Path
) -> None:
    needs = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    submitted = submit(ws, tmp_path, plan("diamond", [stage(name, *deps) for name, deps in needs.items()]))
    assert (submitted.placement, submitted.stages) == ("plans/diamond", 4)

    run_manager(ws)

    assert statuses(ws, submitted) == dict.fromkeys(needs, "completed")
    _check_order(ws, submitted, needs)
    rows = {row.id: row for row in plan_status(ws, submitted.job_key).stages}
    assert _parent_activation(ws, submitted, rows["b"].job) == _parent_activation(
        ws, submitted, rows["c"].job
    )
    assert _parent_activation(ws, submitted, rows["a"].job) != _parent_activation(
        ws, submitted, rows["b"].job
    )
    final = coordinator_frames(ws, submitted)[-1]
    assert (final["kind"], final["pause"]["reason"]) == ("paused", "plan complete")
    # each join woke the coordinator: at_least 1, back to schedule when impossible
    waits = [frame["join"] for frame in coordinator_frames(ws, submitted) if frame["kind"] == "waiting"]
    assert [(join["condition"], join["count"], join["on_impossible"]["next_step"]) for join in waits] == [
        ("at_least", 1, "schedule")
    ] * len(waits)
    assert [len(join["children"]) for join in waits][:2] == [1, 2]  # a alone, then b and c together


def test_a_wide_plan_spawns_every_ready_stage_in_one_activation(ws: Workspace, tmp_path: Path) -> None:
    middle = [f"m{i:02d}" for i in range(12)]
    needs = {"root": [], **{name: ["root"] for name in middle}, "sink": middle}
    submitted = submit(ws, tmp_path, plan("wide", [stage(name, *deps) for name, deps in needs.items()]))

    run_manager(ws, workers=2)

    assert statuses(ws, submitted) == dict.fromkeys(needs, "completed")
    _check_order(ws, submitted, needs)
    rows = {row.id: row for row in plan_status(ws, submitted.job_key).stages}
    assert len({_parent_activation(ws, submitted, rows[name].job) for name in middle}) == 1


def test_a_failed_stage_blocks_only_its_dependants_until_it_is_retried(ws: Workspace, tmp_path: Path) -> None:
    fixed = tmp_path / "fixed"
    stages = [
        stage("a"),
        stage("b", "a", fail="b broke", fail_unless=str(fixed)),
        stage("c", "a"),
        stage("d", "b"),
        stage("e", "c"),
    ]
    submitted = submit(ws, tmp_path, plan("blocked", stages))

    run_manager(ws)

    assert statuses(ws, submitted) == {
        "a": "completed",
        "b": "failed",
        "c": "completed",
        "d": "pending",
        "e": "completed",
    }
    report = plan_status(ws, submitted.job_key)
    [b] = [row for row in report.stages if row.id == "b"]
    assert b.last_error == "b broke"
    assert (report.coordinator_kind, report.message) == (
        "paused",
        "plan blocked: stage b failed (not started: d)",
    )
    assert progress_log(submitted)[-1].endswith("plan blocked: plan blocked: stage b failed (not started: d)")
    failed_job = b.job

    fixed.touch()
    message = retry_stage(ws, submitted.job_key, "b", operator="ann", reason="fixed the input")
    assert "the coordinator was paused and is asked to continue" in message
    run_manager(ws)

    assert statuses(ws, submitted) == dict.fromkeys("abcde", "completed")
    rows = {row.id: row for row in plan_status(ws, submitted.job_key).stages}
    assert rows["b"].retries == 1 and rows["b"].job != failed_job
    old = ws.payload_path(f"{submitted.placement}/{submitted.job_key}.stages", str(failed_job))
    assert (old / "run" / "out.txt").read_text() == "done\n"  # the failed job stays, as history
    assert any("stage b retried by ann: fixed the input" in line for line in progress_log(submitted))

    close_plan(ws, submitted.job_key, operator="ann", reason="done")
    run_manager(ws)
    final = coordinator_frames(ws, submitted)[-1]
    assert final["kind"] == "succeeded"


def test_closing_a_blocked_plan_fails_it_naming_what_failed(ws: Workspace, tmp_path: Path) -> None:
    submitted = submit(ws, tmp_path, plan("closed", [stage("a", fail="no"), stage("b", "a"), stage("c")]))
    run_manager(ws)
    close_plan(ws, submitted.job_key, operator="ann", reason="giving up")
    run_manager(ws)
    final = coordinator_frames(ws, submitted)[-1]
    assert final["kind"] == "failed"
    assert final["failure"]["code"] == "plans.stage_failed"
    assert final["failure"]["message"] == "plan closed: failed: a; not completed: b"


def test_a_check_runs_as_the_stage_jobs_last_step_and_fails_a_stage_that_misses_it(
    ws: Workspace, tmp_path: Path
) -> None:
    passing = {
        **stage("good", write="converged"),
        "success_criteria": {"check": ["grep", "-q", "converged", "run/out.txt"]},
    }
    failing = {
        **stage("bad", write="diverged"),
        "success_criteria": {"check": ["grep", "-q", "converged", "run/out.txt"]},
    }
    submitted = submit(ws, tmp_path, plan("checked", [passing, failing, stage("after", "bad")]))

    run_manager(ws)

    assert statuses(ws, submitted) == {"good": "completed", "bad": "failed", "after": "pending"}
    frames = stage_frames(ws, submitted)
    assert [frame["step"] for frame in frames["good"] if frame["kind"] == "running"] == ["work", "check"]
    bad = frames["bad"][-1]
    assert bad["failure"]["code"] == "plans.check_failed"
    assert bad["failure"]["message"] == "the check grep -q converged run/out.txt exited 1"
    assert any(
        ": status -> post_processing (" in line and "stage good" in line for line in progress_log(submitted)
    )


def test_the_progress_log_is_whole_lines_in_order_and_never_repeats_a_change(
    ws: Workspace, tmp_path: Path
) -> None:
    needs = {"a": [], "b": ["a"], "c": ["b"]}
    submitted = submit(ws, tmp_path, plan("logged", [stage(name, *deps) for name, deps in needs.items()]))
    seen: list[str] = []
    finished = threading.Event()
    path = log_path(ws, submitted.job_key)
    reader = threading.Thread(
        target=lambda: seen.extend(read_lines(path, follow=True, poll=0.005, stop=finished.is_set)),
        daemon=True,
    )
    reader.start()
    try:
        run_manager(ws)
    finally:
        finished.set()
        reader.join(timeout=30)
    lines = progress_log(submitted)
    assert seen == lines  # a follower saw exactly the lines, each whole
    assert all(LINE.match(line) for line in lines), lines
    assert path.read_bytes().endswith(b"\n")
    for name in needs:
        changes = [line.split(": status -> ")[1].split(" ")[0] for line in lines if f"stage {name} (" in line]
        assert changes == ["ready", "preparing", "running", "completed"], (name, changes)
    assert lines[-1].endswith("plan logged: plan complete")
    state = json.loads((submitted.payload / "plan" / "workflow-state.json").read_text())
    assert [(s["id"], s["status"]) for s in state["stages"]] == [(name, "completed") for name in needs]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", state["created"]), state["created"]
    assert state["created"] <= state["updated"]
    assert not list((submitted.payload / "plan").glob(".workflow-state.json.tmp.*"))


def test_the_coordinator_and_its_stages_run_confined(ws: Workspace, tmp_path: Path) -> None:
    from httk.workflow.engine.manager._landlock import landlock

    submitted = submit(ws, tmp_path, plan("confined", [stage("a"), stage("b", "a")]))
    run_manager(ws)
    assert statuses(ws, submitted) == {"a": "completed", "b": "completed"}
    running = [frame for frame in coordinator_frames(ws, submitted) if frame["kind"] == "running"]
    expected = landlock().abi is not None
    assert running and all(frame["confinement"]["enforced"] is expected for frame in running)
