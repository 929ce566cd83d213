"""A stage's input taken from a dependency's output (``{"from_stage", "path"}``), under the real manager:
refused at submission when it cannot work, copied into the stage's job when the stage starts, read
from the dependency's job of the current plan version after an amendment, and a missing file failing
the stage (with the reason) until ``plan retry``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.plans import PlanError, amend_plan, check_plan, plan_status, retry_stage

from tests.plans.plankit import plan, progress_log, run_manager, stage, statuses, submit


def _from(source: str, path: str = "run/out.txt") -> dict[str, str]:
    return {"from_stage": source, "path": path}


def _payload(ws: Workspace, submitted: Any, stage_id: str) -> Path:
    [row] = [row for row in plan_status(ws, submitted.job_key).stages if row.id == stage_id]
    assert row.job is not None, row
    return ws.payload_path(f"{submitted.placement}/{submitted.job_key}.stages", row.job)


@pytest.mark.parametrize(
    ("inputs", "member", "rule"),
    [
        (
            {"got": _from("c")},
            "stages[1].inputs.got.from_stage",
            "from stage 'c', which is not one of its depends_on (a)",
        ),
        ({"got": _from("a", "../a/run/out.txt")}, "stages[1].inputs.got.path", "is not a path relative to"),
        ({"got": _from("a", "/etc/passwd")}, "stages[1].inputs.got.path", "is not a path relative to"),
        (
            {"got": {**_from("a"), "mode": "copy"}},
            "stages[1].inputs.got",
            "exactly the members from_stage and path",
        ),
        ({"sub/got": _from("a")}, "stages[1].inputs.sub/got", "must be a plain file name"),
    ],
    ids=["not a dependency", "dot-dot", "absolute", "extra member", "not a file name"],
)
def test_a_reference_that_cannot_work_is_refused_naming_it(
    inputs: dict[str, Any], member: str, rule: str
) -> None:
    stages = [stage("a"), stage("b", "a", **inputs), stage("c")]
    with pytest.raises(PlanError) as caught:
        check_plan(plan("refs", stages), "plan.json")
    assert caught.value.member == member
    assert rule in caught.value.rule


def test_a_workflow_takes_only_a_file_input_from_a_stage(tmp_path: Path) -> None:
    vasp = init(tmp_path / "vasp-ws", durable=False, extensions=("transactional-data-v1",))
    try:
        document = plan(
            "refs",
            [
                {"id": "relax", "runner": "pkg:httk.workflow.plans/runners/stage"},
                {
                    "id": "static",
                    "workflow": "vasp-static",
                    "depends_on": ["relax"],
                    "inputs": {"species": _from("relax")},
                },
            ],
        )
        with pytest.raises(PlanError, match="input 'species': is not a file input of workflow 'vasp-static'"):
            submit(vasp, tmp_path, document)
    finally:
        vasp.close()


def test_the_coordinator_copies_the_dependency_s_file_into_the_stage_it_starts(
    ws: Workspace, tmp_path: Path
) -> None:
    stages = [
        stage("a", write="made by a"),
        stage("b", "a", got=_from("a"), write="b v1"),
    ]
    submitted = submit(ws, tmp_path, plan("refs", stages))
    run_manager(ws)
    assert statuses(ws, submitted) == {"a": "completed", "b": "completed"}
    b = _payload(ws, submitted, "b")
    assert json.loads((b / "job.json").read_text())["inputs"]["got"] == "files/got"
    assert (b / "files" / "got").read_text() == "made by a\n"
    template = json.loads((submitted.payload / "stages" / "b" / "stage.json").read_text())
    assert template["stage_outputs"] == {"files/got": _from("a")}

    # amended, a runs again as a-v2, and b-v2 takes a-v2's output, not the old job's
    amend_plan(
        ws, submitted.job_key, "parameter_change", "a", values={"write": "made by a-v2"},
        stage_file=None, before=[], operator="ann", reason="new text", wait=0.0,
    )  # fmt: skip
    run_manager(ws)
    assert statuses(ws, submitted) == {"a": "completed", "b": "completed"}
    b2 = _payload(ws, submitted, "b")
    assert b2.name.startswith("b-v2--") and (b2 / "files" / "got").read_text() == "made by a-v2\n"
    assert (b / "files" / "got").read_text() == "made by a\n"  # the old output stays


def test_a_file_the_dependency_did_not_make_fails_the_stage_until_it_is_retried(
    ws: Workspace, tmp_path: Path
) -> None:
    stages = [stage("a"), stage("b", "a", got=_from("a", "run/missing.txt")), stage("c", "b")]
    submitted = submit(ws, tmp_path, plan("refs", stages))
    run_manager(ws)
    report = plan_status(ws, submitted.job_key)
    rows = {row.id: row for row in report.stages}
    assert (rows["b"].status, rows["b"].job, rows["c"].status) == ("failed", None, "pending")
    assert rows["b"].last_error is not None and "run/missing.txt of stage 'a'" in rows["b"].last_error
    assert report.message == "plan blocked: stage b failed (not started: c)"
    state = json.loads((submitted.payload / "plan" / "workflow-state.json").read_text())
    assert [item["status"] for item in state["stages"]] == ["completed", "failed", "pending"]
    lines = progress_log(submitted)
    assert sum("stage b (b): status -> failed" in line for line in lines) == 1
    assert sum("stage b cannot start (retries 0): run/missing.txt" in line for line in lines) == 1

    (_payload(ws, submitted, "a") / "run" / "missing.txt").write_text("late\n")
    retry_stage(ws, submitted.job_key, "b", operator="ann", reason="made it")
    run_manager(ws)
    assert statuses(ws, submitted) == dict.fromkeys("abc", "completed")
    assert (_payload(ws, submitted, "b") / "files" / "got").read_text() == "late\n"
    lines = progress_log(submitted)
    assert sum("stage b (b): status -> ready" in line for line in lines) == 2
    assert sum("cannot start" in line for line in lines) == 1


def test_a_stage_whose_output_another_reads_is_not_skipped(ws: Workspace, tmp_path: Path) -> None:
    from httk.workflow.plans import PlanControlError

    submitted = submit(ws, tmp_path, plan("refs", [stage("a", fail="no"), stage("b", "a", got=_from("a"))]))
    run_manager(ws)
    with pytest.raises(PlanControlError, match="stage 'a' is not skipped: b take"):
        amend_plan(
            ws, submitted.job_key, "stage_skip", "a", values={}, stage_file=None, before=[],
            operator="ann", reason="skip", wait=0.0,
        )  # fmt: skip
    assert not (submitted.payload / "plan" / "amendments").exists()


def test_a_checked_stage_s_output_is_read_from_the_work_it_checked(ws: Workspace, tmp_path: Path) -> None:
    checked = stage("a", write="made by the work")
    checked["success_criteria"] = {"check": ["grep", "-q", "made by", "run/out.txt"]}
    submitted = submit(ws, tmp_path, plan("refs", [checked, stage("b", "a", got=_from("a"))]))
    run_manager(ws)
    assert statuses(ws, submitted) == {"a": "completed", "b": "completed"}
    assert not (_payload(ws, submitted, "a") / "run" / "out.txt").exists()  # the stage job only checked
    assert (_payload(ws, submitted, "b") / "files" / "got").read_text() == "made by the work\n"
