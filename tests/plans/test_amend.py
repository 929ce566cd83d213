"""Amendments under the real manager: each type, the invalidation cascade of a diamond with its old
outputs kept, refusals that change nothing, and waking a paused and a waiting coordinator."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, probe_marker
from httk.workflow.plans import PlanControlError, PlanError, SubmittedPlan, amend_plan, plan_status

from tests.plans.plankit import plan, progress_log, run_manager, stage, stage_frames, statuses, submit
from tests.runners import run_bounded


def _amend(ws: Workspace, submitted: SubmittedPlan, kind: str, name: str, **options: Any) -> str:
    return amend_plan(
        ws,
        submitted.job_key,
        kind,
        name,
        values=options.get("values", {}),
        stage_file=options.get("stage_file"),
        before=options.get("before", []),
        operator="ann",
        reason=options.get("reason", "for the test"),
        wait=options.get("wait", 0.0),
    )


def _jobs(ws: Workspace, submitted: SubmittedPlan) -> dict[str, str]:
    return {row.id: row.job or "" for row in plan_status(ws, submitted.job_key).stages}


def _stage_payload(ws: Workspace, submitted: SubmittedPlan, job_key: str) -> Path:
    return ws.payload_path(f"{submitted.placement}/{submitted.job_key}.stages", job_key)


def _current_plan(submitted: SubmittedPlan) -> dict[str, Any]:
    return json.loads((submitted.payload / "plan" / "plan.json").read_text())  # type: ignore[no-any-return]


def _job(ws: Workspace, submitted: SubmittedPlan, job_key: str) -> dict[str, Any]:
    return json.loads((_stage_payload(ws, submitted, job_key) / "job.json").read_text())  # type: ignore[no-any-return]


def test_amending_the_root_of_a_diamond_reruns_everything_downstream_and_keeps_the_old_outputs(
    ws: Workspace, tmp_path: Path
) -> None:
    needs = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    stages = [stage(name, *deps, write=f"{name} v1") for name, deps in needs.items()]
    stages[0]["parameters"] = {"write": "a v1"}
    submitted = submit(ws, tmp_path, plan("diamond", stages))
    run_manager(ws)
    old = _jobs(ws, submitted)
    task_list = submitted.payload / "plan" / "workflow-state.json"
    created = json.loads(task_list.read_text())["created"]

    said = _amend(ws, submitted, "parameter_change", "a", values={"write": "a v2"}, reason="sharper")
    assert said == "queued amendment 000001.parameter_change.json; " + (
        "the coordinator was paused and is asked to continue"
    )
    run_manager(ws)

    report = plan_status(ws, submitted.job_key)
    assert (report.version, report.unamended) == (2, [])
    assert json.loads(task_list.read_text())["created"] == created  # the plan's, kept across activations
    assert {row.id: row.status for row in report.stages} == dict.fromkeys(needs, "completed")
    new = _jobs(ws, submitted)
    assert all(new[name] != old[name] and new[name].startswith(f"{name}-v2--") for name in needs)
    for name in needs:  # the old outputs stay where they were
        assert (_stage_payload(ws, submitted, old[name]) / "run" / "out.txt").read_text() == f"{name} v1\n"
    assert (_stage_payload(ws, submitted, new["a"]) / "run" / "out.txt").read_text() == "a v2\n"
    frames = stage_frames(ws, submitted)
    for name, deps in needs.items():
        for dep in deps:
            done = next(f["created_at"] for f in frames[dep] if f["kind"] == "succeeded")
            assert next(f["created_at"] for f in frames[name] if f["kind"] == "running") > done
    [entry] = _current_plan(submitted)["amendments"]
    assert set(entry) == {
        "id", "version", "timestamp", "type", "stage_id", "description", "changes", "invalidated_stages",
        "approved_by",
    }  # fmt: skip
    assert (entry["id"], entry["version"], entry["type"], entry["stage_id"]) == (
        "amend-1",
        2,
        "parameter_change",
        "a",
    )
    assert (entry["description"], entry["approved_by"]) == ("sharper", "ann")
    assert entry["changes"] == {"parameters": {"write": {"old": "a v1", "new": "a v2"}}}
    assert entry["invalidated_stages"] == ["a", "b", "d", "c"]
    log = progress_log(submitted)
    [line] = [line for line in log if "amendment amend-1" in line]
    assert line.endswith("invalidated: a, b, d, c")
    invalidated = [line.split("stage ")[1].split(" ")[0] for line in log if line.endswith("-> invalidated")]
    assert sorted(invalidated) == ["a", "b", "c", "d"]
    assert log[-1].endswith("plan diamond: plan complete")


def test_a_criteria_change_reruns_the_check_and_leaves_its_dependant_invalidated(
    ws: Workspace, tmp_path: Path
) -> None:
    checked = stage("a", write="converged")
    checked["success_criteria"] = {
        "description": "it converged",
        "check": ["grep", "-q", "converged", "run/out.txt"],
    }
    submitted = submit(ws, tmp_path, plan("criteria", [checked, stage("b", "a")]))
    run_manager(ws)
    assert statuses(ws, submitted) == {"a": "completed", "b": "completed"}

    stricter = ["grep", "-q", "diverged", "run/out.txt"]
    _amend(ws, submitted, "criteria_change", "a", values={"check": stricter})
    run_manager(ws)

    assert statuses(ws, submitted) == {"a": "failed", "b": "invalidated"}
    [entry] = _current_plan(submitted)["amendments"]
    assert entry["changes"] == {
        "success_criteria": {"check": {"old": ["grep", "-q", "converged", "run/out.txt"], "new": stricter}}
    }
    assert entry["invalidated_stages"] == ["a", "b"]
    assert plan_status(ws, submitted.job_key).message == "plan blocked: stage a failed (not started: b)"


def test_a_stage_inserted_before_a_completed_one_runs_and_the_later_stage_runs_again(
    ws: Workspace, tmp_path: Path
) -> None:
    submitted = submit(ws, tmp_path, plan("insert", [stage("a"), stage("c", "a")]))
    run_manager(ws)
    old = _jobs(ws, submitted)
    new_stage = tmp_path / "validate.json"
    new_stage.write_text(json.dumps({"id": "v", "runner": "stage", "depends_on": ["a"]}))

    _amend(ws, submitted, "stage_insert", "v", stage_file=new_stage, before=["c"])
    run_manager(ws)

    assert statuses(ws, submitted) == {"a": "completed", "c": "completed", "v": "completed"}
    jobs = _jobs(ws, submitted)
    assert jobs["a"] == old["a"] and jobs["c"] != old["c"] and jobs["v"].startswith("v-v2--")
    frames = stage_frames(ws, submitted)
    v_done = next(f["created_at"] for f in frames["v"] if f["kind"] == "succeeded")
    assert next(f["created_at"] for f in frames["c"] if f["kind"] == "ready") > v_done
    document = _current_plan(submitted)
    assert [item["id"] for item in document["stages"]] == ["a", "c", "v"]
    assert document["stages"][1]["depends_on"] == ["a", "v"]
    [entry] = document["amendments"]
    assert entry["changes"]["depends_on"] == {"c": {"old": ["a"], "new": ["a", "v"]}}
    assert entry["invalidated_stages"] == ["c"]


def test_a_skipped_failed_stage_counts_as_satisfied_for_its_dependants(ws: Workspace, tmp_path: Path) -> None:
    submitted = submit(
        ws, tmp_path, plan("skip", [stage("a"), stage("b", "a", fail="broken"), stage("c", "b")])
    )
    run_manager(ws)
    assert statuses(ws, submitted) == {"a": "completed", "b": "failed", "c": "pending"}

    _amend(ws, submitted, "stage_skip", "b", reason="not needed")
    run_manager(ws)

    assert statuses(ws, submitted) == {"a": "completed", "b": "skipped", "c": "completed"}
    report = plan_status(ws, submitted.job_key)
    assert (report.version, report.message) == (2, "plan complete")
    [entry] = _current_plan(submitted)["amendments"]
    assert (entry["changes"], entry["invalidated_stages"]) == (
        {"status": {"old": "failed", "new": "skipped"}},
        [],
    )
    assert any(line.endswith("stage b (b): status -> skipped") for line in progress_log(submitted))
    with pytest.raises(PlanControlError) as refused:
        _amend(ws, submitted, "stage_rerun", "b")
    assert str(refused.value) == "stage 'b' is skipped; a skipped stage is not amended"


def test_a_rerun_runs_the_stage_and_what_lies_downstream_again_only(ws: Workspace, tmp_path: Path) -> None:
    submitted = submit(ws, tmp_path, plan("rerun", [stage("a"), stage("b", "a"), stage("c", "b")]))
    run_manager(ws)
    old = _jobs(ws, submitted)

    _amend(ws, submitted, "stage_rerun", "b")
    run_manager(ws)

    jobs = _jobs(ws, submitted)
    assert (jobs["a"] == old["a"], jobs["b"] != old["b"], jobs["c"] != old["c"]) == (True, True, True)
    [entry] = _current_plan(submitted)["amendments"]
    assert (entry["invalidated_stages"], entry["changes"]) == (
        ["b", "c"],
        {"status": {"old": "completed", "new": "invalidated"}},
    )
    assert statuses(ws, submitted) == dict.fromkeys("abc", "completed")


@pytest.mark.parametrize(
    "case",
    [
        ("stage_split", "a", {}, "unknown amendment type 'stage_split' (one of parameter_change, "
         "criteria_change, stage_insert, stage_skip, stage_rerun)"),
        ("stage_rerun", "zz", {}, "the plan has no stage 'zz' (its stages: a, b)"),
        ("parameter_change", "a", {"values": {"wirte": "x"}},
         "stage 'a' has no parameter or input 'wirte' (its keys: write)"),
        ("criteria_change", "a", {"values": {"chek": ["true"]}},
         "stage 'a' has no success criterion 'chek' (its keys: check, description)"),
        ("parameter_change", "a", {}, "a parameter_change names what it changes with --set KEY=VALUE"),
        ("stage_skip", "a", {"values": {"write": "x"}},
         "a stage_skip takes no --set (only parameter_change and criteria_change do)"),
        ("stage_insert", "v", {"stage": {"runner": "stage", "depends_on": ["zz"]}},
         "the amended plan is refused: stages[2].depends_on: stage 'v' depends on 'zz', which is not a "
         "stage of the plan"),
        ("stage_insert", "v", {"stage": {"runner": "stage", "depends_on": ["b"]}, "before": ["a"]},
         "the amended plan is refused: stages: the dependencies have a cycle: a -> v -> b -> a"),
        ("stage_insert", "a", {"stage": {"runner": "stage"}}, "the plan already has a stage 'a'"),
        ("stage_rerun", "b", {}, "stage 'b' has not completed; only a completed stage is rerun (plan retry "
         "runs a failed one again)"),
    ],
)  # fmt: skip
def test_a_refused_amendment_names_what_is_wrong_and_changes_nothing(
    ws: Workspace, tmp_path: Path, case: tuple[str, str, dict[str, Any], str]
) -> None:
    kind, name, options, message = case
    submitted = submit(ws, tmp_path, plan("refuse", [stage("a", write="x"), stage("b", "a", fail="no")]))
    run_manager(ws)
    before = probe_marker(ws, submitted.placement, submitted.job_key)
    if "stage" in options:
        options["stage_file"] = tmp_path / "new.json"
        options["stage_file"].write_text(json.dumps(options.pop("stage")))

    with pytest.raises(PlanControlError) as refused:
        _amend(ws, submitted, kind, name, **options)

    assert str(refused.value) == message
    assert not (submitted.payload / "plan" / "amendments").exists()
    assert not (submitted.payload / "plan" / "plan.json").exists()
    assert probe_marker(ws, submitted.placement, submitted.job_key) == before
    assert sorted((ws.root / ".httk-workflow" / "requests" / "ready").glob("*")) == []


def test_a_stage_file_that_is_not_a_stage_is_refused(ws: Workspace, tmp_path: Path) -> None:
    submitted = submit(ws, tmp_path, plan("file", [stage("a")]))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(PlanError, match="is not UTF-8 JSON"):
        _amend(ws, submitted, "stage_insert", "v", stage_file=broken)
    assert not (submitted.payload / "plan" / "amendments").exists()


def test_a_plan_document_changed_without_an_amendment_is_reported(ws: Workspace, tmp_path: Path) -> None:
    submitted = submit(ws, tmp_path, plan("drift", [stage("a", write="x"), stage("b", "a", write="x")]))
    run_manager(ws)
    _amend(ws, submitted, "parameter_change", "b", values={"write": "y"})
    run_manager(ws)
    assert plan_status(ws, submitted.job_key).unamended == []

    current = submitted.payload / "plan" / "plan.json"
    document = json.loads(current.read_text())
    document["stages"][0]["inputs"]["write"] = "edited by hand"
    current.write_text(json.dumps(document))

    assert plan_status(ws, submitted.job_key).unamended == ["a"]


def test_amending_a_waiting_coordinator_pauses_it_and_continues_it(ws: Workspace, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    submitted = submit(
        ws, tmp_path, plan("waiting", [stage("a", wait_for=str(gate)), stage("b", "a", write="b v1")])
    )
    from httk.workflow.engine.manager._manager import Manager
    from httk.workflow.engine.manager._state import ManagerConfig

    manager = Manager(ws.root, ManagerConfig(workers=2, lease_seconds=600.0))
    summaries: list[Any] = []
    thread = threading.Thread(target=lambda: summaries.append(run_bounded(manager)))
    thread.start()
    try:
        _until(lambda: _kind(ws, submitted) == "waiting" and statuses(ws, submitted)["a"] == "running")
        said = _amend(ws, submitted, "parameter_change", "b", values={"write": "amended"}, wait=60.0)
        assert said == "queued amendment 000001.parameter_change.json; " + (
            "the coordinator was paused and is asked to continue"
        )
        _until(lambda: plan_status(ws, submitted.job_key).version == 2)
    finally:
        gate.touch()
        thread.join(timeout=120)
    assert not thread.is_alive() and summaries[0].exit_reason == "idle"

    assert statuses(ws, submitted) == {"a": "completed", "b": "completed"}
    jobs = _jobs(ws, submitted)
    assert jobs["b"].startswith("b-v2--") and _job(ws, submitted, jobs["b"])["inputs"]["write"] == "amended"
    [entry] = _current_plan(submitted)["amendments"]
    assert entry["invalidated_stages"] == []
    kinds = [frame.get("reason") for frame in _coordinator_frames(ws, submitted)]
    assert kinds.index("operator_pause") < kinds.index("operator_override_step")
    assert "operator_continue" not in kinds  # a new activation, not another attempt of the paused one


def test_twenty_amendments_to_a_paused_coordinator_each_start_a_new_activation(
    ws: Workspace, tmp_path: Path
) -> None:
    """A blocked plan stays paused after each amendment of its blocked stage: its wake-ups must not
    spend the attempts of one activation (12), or the thirteenth would be refused."""
    submitted = submit(ws, tmp_path, plan("patient", [stage("a", fail="no"), stage("b", "a")]))
    run_manager(ws)
    for number in range(1, 21):
        said = _amend(
            ws, submitted, "criteria_change", "b", values={"description": f"take {number}"}, wait=0.0
        )
        assert said.endswith("the coordinator was paused and is asked to continue"), said
        run_manager(ws)
        assert plan_status(ws, submitted.job_key).version == 1 + number
    status = plan_status(ws, submitted.job_key)
    assert (status.coordinator_kind, status.message) == (
        "paused",
        "plan blocked: stage a failed (not started: b)",
    )
    assert _current_plan(submitted)["stages"][1]["success_criteria"] == {"description": "take 20"}
    frames = _coordinator_frames(ws, submitted)
    assert [frame.get("reason") for frame in frames].count("operator_override_step") == 20
    assert max(int(frame.get("attempt_ordinal") or 1) for frame in frames) == 1


def _kind(ws: Workspace, submitted: SubmittedPlan) -> str | None:
    marker = probe_marker(ws, submitted.placement, submitted.job_key)
    return None if marker is None else marker.kind.value


def _coordinator_frames(ws: Workspace, submitted: SubmittedPlan) -> list[dict[str, Any]]:
    from tests.plans.plankit import coordinator_frames

    return coordinator_frames(ws, submitted)


def _until(condition: Any, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the condition did not hold in time"
        time.sleep(0.05)


def test_a_rebuilt_stage_reads_its_file_inputs_beside_the_plan_document_wherever_amend_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from httk.workflow.engine.core._workspace import init

    vasp = init(tmp_path / "vasp-ws", durable=False, extensions=("transactional-data-v1",))
    try:
        study = tmp_path / "study"
        study.mkdir()
        poscar = "Si\n1\n5.4 0 0\n0 5.4 0\n0 0 5.4\nSi\n2\nDirect\n0 0 0\n0.25 0.25 0.25\n"
        (study / "si.vasp").write_text(poscar)
        document = plan(
            "rebuilt", [{"id": "relax", "workflow": "vasp-relax", "inputs": {"structure": "si.vasp"}}]
        )
        submitted = submit(vasp, study, document)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)  # no si.vasp here: only the plan's directory has it
        _amend(vasp, submitted, "parameter_change", "relax", values={"vasp.energy_tolerance": 0.001})
        [queued] = (submitted.payload / "plan" / "amendments").glob("*.json")
        template = json.loads(queued.read_text())["template"]
        assert template["job"]["inputs"]["vasp.energy_tolerance"] == 0.001
        assert base64.b64decode(template["files"]["files/POSCAR"]).decode() == poscar
    finally:
        vasp.close()
