"""``job new`` in the engine: a plan is checked whole and written only when submitted.

The command line's front ends and refusals are tested through the real executable
(``tests/cli/test_new_cmd.py``); these are the library's promises a process cannot reach: a plan writes
nothing, the packaged workflows are found by their entry points, and a shared runner that changes between
the plan and its submission is refused with nothing stored.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from httk.workflow.engine import (
    attach,
    find_workflow,
    init,
    packaged_workflows,
    plan_job,
    plan_runner_job,
    submit_plan,
)
from httk.workflow.protocol import RunnerStoreError, SubmissionError
from httk.workflow.sdk.packaged import WorkflowInputError
from httk.workflow.vasp import VASP_RELAX, WORKFLOWS

from tests.cli.newkit import SILICON, snapshot


@pytest.fixture
def root(tmp_path: Path) -> Path:
    init(tmp_path / "ws", durable=False, extensions=("transactional-data-v1",)).close()
    return tmp_path / "ws"


def test_the_packaged_workflows_are_found_by_their_entry_points() -> None:
    entries = {entry.name: entry for entry in packaged_workflows()}
    for workflow in WORKFLOWS:
        assert entries[workflow.name].workflow is workflow and entries[workflow.name].problem is None
        assert find_workflow(workflow.name) is workflow


def test_a_plan_writes_nothing_and_its_submission_places_what_it_holds(root: Path, tmp_path: Path) -> None:
    poscar = tmp_path / "POSCAR"
    poscar.write_text(SILICON)
    workspace = attach(root)
    before = snapshot(root)

    plan = plan_job(workspace, VASP_RELAX, {"structure": str(poscar), "kpoint_density": 800}, tag="si")

    assert snapshot(root) == before
    assert plan.files == {"files/POSCAR": SILICON.encode()} and plan.shared_runner is None
    assert plan.placement == f"vasp-relax/{plan.job['id'][:2]}" and plan.job_key == f"si--{plan.job['id']}"
    assert plan.job["inputs"] == {"structure": "files/POSCAR", "kpoint_density": 800}
    result = submit_plan(workspace, plan)
    assert (result.job_key, result.placement) == (plan.job_key, plan.placement)
    assert (plan.payload(workspace) / "files" / "POSCAR").read_text() == SILICON


def test_an_input_refusal_keeps_the_sdk_s_error_as_its_cause(root: Path) -> None:
    with pytest.raises(SubmissionError, match="input 'structure': is required") as raised:
        plan_job(attach(root), VASP_RELAX, {})
    assert isinstance(raised.value.__cause__, WorkflowInputError)
    assert raised.value.__cause__.name == "structure"


def test_a_shared_runner_changed_after_the_plan_is_refused_and_nothing_is_stored(
    root: Path, tmp_path: Path
) -> None:
    runner = tmp_path / "step.sh"
    runner.write_text("#!/bin/sh\nexit 0\n")
    workspace = attach(root)
    plan = plan_runner_job(workspace, runner, shared=True)
    runner.write_text("#!/bin/sh\nexit 1\n")
    before = snapshot(root)

    with pytest.raises(RunnerStoreError, match="the runner changed while it was being published"):
        submit_plan(workspace, plan)

    assert snapshot(root) == before
    assert not (root / ".httk-workflow" / "runners" / "step.sh").exists()
