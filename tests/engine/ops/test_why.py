"""``job why`` for submitted, ready and the operator-facing kinds: every precondition against live managers.

Jobs are moved through the real transitions (``tests/joinkit.py``, ``tests/jobkinds.py``) and managers
register through the real manager record (``tests/whykit.py``); liveness is driven by diagnosing at a
later instant of the workspace's manual clock, never by sleeping.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from httk.workflow.engine.core._frames import failed
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, attach
from httk.workflow.engine.manager._launch import register as register_job
from httk.workflow.engine.manager._state import ManagerState

from tests.conftest import minimal_job
from tests.inspectkit import set_visibility_deadline
from tests.jobkinds import job_in
from tests.joinkit import current, submit_job, to_running
from tests.whykit import finding, register, state_fixture, topics, why  # noqa: F401 (a fixture)

PLACEMENT = "proj/a"
PRECONDITIONS = [
    "executor",
    "pool",
    "capabilities",
    "placement",
    "runner reach",
    "runner",
    "maintenance lock",
    "core profile",
    "budgets",
    "claimed by",
]


def ready_job(state: ManagerState, placement: str = PLACEMENT, **overrides: object) -> MarkerLocation:
    """A registered job whose payload runner exists and is executable (or the given ``runner``)."""
    if "runner" in overrides:
        return job_in(state, Kind.READY, job=minimal_job(**overrides), placement=placement)
    _job, key = submit_job(state.workspace, placement, **overrides)
    register_job(state, current(state.workspace, placement, key))
    marker = current(state.workspace, placement, key)
    assert marker.kind is Kind.READY
    return marker


# -- submitted -----------------------------------------------------------------------------------------
def test_a_submitted_job_is_registered_by_a_live_manager_or_waits_for_one(state: ManagerState) -> None:
    ws = state.workspace
    _job, key = submit_job(ws, PLACEMENT)
    marker = current(ws, PLACEMENT, key)

    alone = why(ws, marker)
    assert alone.blocked and alone.answer == "not registered: no live manager serves it"
    assert finding(alone, "job.json").status == "ok"

    manager = register(ws, label="node7")
    served = why(ws, marker)
    assert not served.blocked
    assert served.answer.startswith("not registered yet")
    assert f"{manager.identity.manager_id} (node7)" in finding(served, "registered by").text


def test_a_submitted_job_whose_job_json_broke_will_fail_registration(state: ManagerState) -> None:
    ws = state.workspace
    _job, key = submit_job(ws, PLACEMENT)
    (ws.payload_path(PLACEMENT, key) / "job.json").write_text("{}")
    register(ws)

    found = finding(why(ws, current(ws, PLACEMENT, key)), "job.json")

    assert found.status == "blocked" and "registration fails it with protocol_error" in found.text


# -- ready ---------------------------------------------------------------------------------------------
def test_a_claimable_ready_job_lists_every_precondition_and_who_would_claim_it(state: ManagerState) -> None:
    marker = ready_job(state)
    manager = register(state.workspace)

    diagnosis = why(state.workspace, marker)

    assert topics(diagnosis) == PRECONDITIONS
    assert all(item.status == "ok" for item in diagnosis.findings), diagnosis.lines()
    assert not diagnosis.blocked
    assert (
        diagnosis.answer == f"claimable: {manager.identity.manager_id} would claim it at its next ready pass"
    )
    assert finding(diagnosis, "maintenance lock").text.startswith("not held")
    assert diagnosis.history is not None
    assert (
        diagnosis.history.line() == "0 attempts across 1 activation at step 'prepare'; 0 after unclean exits"
    )


def test_an_unclaimable_job_names_the_closest_managers_unmet_requirement(state: ManagerState) -> None:
    marker = ready_job(state, claim={"pool": "gpu", "required_capabilities": ["cuda"]})
    register(state.workspace, "m-default")
    register(state.workspace, "m-gpu", pools=("gpu",))

    diagnosis = why(state.workspace, marker)

    assert diagnosis.blocked
    assert (
        diagnosis.answer
        == "no live manager can claim it: manager m-gpu lacks capabilities 'cuda' (it has none)"
    )
    assert finding(diagnosis, "pool").status == "ok" and "m-gpu" in finding(diagnosis, "pool").text
    capabilities = finding(diagnosis, "capabilities")
    assert capabilities.status == "blocked"
    assert "m-default: capabilities 'cuda' (it has none)" in capabilities.text
    assert finding(diagnosis, "claimed by").status == "blocked"
    assert diagnosis.next_steps == ("run a manager with --capability cuda",)


def test_a_resource_beyond_every_managers_capacity_names_the_flag_that_serves_it(
    state: ManagerState,
) -> None:
    marker = ready_job(state, resources={"gpus": 2, "procs": 4})
    register(state.workspace, "m-cpu", resources={"procs": 8})
    register(state.workspace, "m-gpu", resources={"procs": 8, "gpus": 1})

    diagnosis = why(state.workspace, marker)

    assert diagnosis.blocked
    assert diagnosis.answer == (
        "no live manager can claim it: manager m-cpu lacks resources gpus=2 (it advertises procs=8)"
    )
    assert diagnosis.next_steps == ("run a manager with --worker-resource gpus 2",)
    resources = finding(diagnosis, "resources")
    assert resources.status == "blocked" and resources.text.startswith("resources gpus=2,procs=4: ")
    assert "m-gpu: resources gpus=2 (it advertises gpus=1,procs=8)" in resources.text
    assert topics(diagnosis) == [*PRECONDITIONS[:-1], "resources", "claimed by"]

    register(state.workspace, "m-big", resources={"procs": 4, "gpus": 2})
    served = why(state.workspace, marker)
    assert served.answer.startswith("claimable: m-big would claim it")
    assert finding(served, "resources").text == "resources gpus=2,procs=4: served by m-big"


def test_a_placement_outside_every_managers_prefixes_is_named(state: ManagerState) -> None:
    marker = ready_job(state)
    register(state.workspace, "m", placement_prefixes=("proj/b",))

    diagnosis = why(state.workspace, marker)

    assert finding(diagnosis, "placement").status == "blocked"
    assert "placement 'proj/a', outside its placement prefixes (proj/b)" in diagnosis.answer


def test_a_manager_restricted_to_other_jobs_is_named_and_serves_its_own(state: ManagerState) -> None:
    other, debugged = ready_job(state), ready_job(state)
    register(state.workspace, "m-debug", only_jobs=(debugged.job_key,))

    blocked = why(state.workspace, other)
    assert blocked.answer == (
        "no live manager can claim it: manager m-debug lacks this job: "
        f"it serves only {debugged.job_key} (a job debug session)"
    )
    assert "wait for the debug session to end, or run another manager" in blocked.next_steps

    served = why(state.workspace, debugged)
    assert served.answer.startswith("claimable: m-debug would claim it")


def test_a_runner_module_outside_a_managers_allowlist_is_named_not_offered(state: ManagerState) -> None:
    runner = {"backend": "path", "source": "installed", "path": "pkg:elsewhere_pkg/run", "sha256": "0" * 64}
    marker = ready_job(state, runner=runner)
    register(state.workspace, "m")

    refused = why(state.workspace, marker)

    assert refused.blocked
    assert "'elsewhere_pkg' is not in its runner module allowlist (httk.workflow)" in refused.answer
    assert finding(refused, "runner reach").status == "blocked"
    assert finding(refused, "runner").status == "indeterminate"  # the module is not installed here

    register(state.workspace, "m-allowing", runner_modules=("elsewhere_pkg",))
    assert why(state.workspace, marker).answer.startswith("claimable: m-allowing would claim it")


def test_a_packaged_workflow_below_the_namespace_needs_no_runner_module(state: ManagerState) -> None:
    path = "pkg:httk.workflow.vasp/run"
    marker = ready_job(
        state, runner={"backend": "path", "source": "installed", "path": path, "sha256": "0" * 64}
    )
    register(state.workspace, "m-narrow", runner_modules=("httk.workflow.v1",))

    refused = why(state.workspace, marker)
    assert "'httk.workflow.vasp' is not in its runner module allowlist (httk.workflow.v1)" in refused.answer

    register(state.workspace, "m")  # the default allowlist, httk.workflow, admits its subpackages
    assert why(state.workspace, marker).answer.startswith("claimable: m would claim it")


def test_an_installed_runner_needs_a_managers_search_path(state: ManagerState, tmp_path: Path) -> None:
    runner = {"backend": "path", "source": "installed", "path": "tools/run", "sha256": "0" * 64}
    marker = ready_job(state, runner=runner)
    register(state.workspace, "m")
    (tmp_path / "roots").mkdir()
    register(state.workspace, "m-searching", runner_search_paths=(str(tmp_path / "roots"),))

    diagnosis = why(state.workspace, marker)

    reach = finding(diagnosis, "runner reach").text
    assert "m: installed runner 'tools/run' needs a runner search path, and it has none" in reach
    roots = tmp_path / "roots"
    assert (
        f"m-searching: installed runner 'tools/run' is not below its runner search paths ({roots})" in reach
    )


def test_a_manager_whose_heartbeat_is_older_than_its_lease_is_absent(state: ManagerState) -> None:
    marker = ready_job(state)
    register(state.workspace, lease_seconds=60.0)

    diagnosis = why(state.workspace, marker, later=61.0)

    assert diagnosis.blocked and diagnosis.answer == "no manager is live"
    assert finding(diagnosis, "pool").status == "info"
    assert finding(diagnosis, "claimed by").text.startswith("no manager is live")


def test_a_missing_payload_runner_is_named_although_a_manager_would_claim(state: ManagerState) -> None:
    marker = job_in(state, Kind.READY, job=minimal_job(), placement=PLACEMENT)  # files/runner never written
    register(state.workspace, "m")

    diagnosis = why(state.workspace, marker)

    assert finding(diagnosis, "runner").status == "blocked"
    assert diagnosis.answer.startswith("claimable: m would claim it")
    assert "the claim would fail (runner_unavailable:" in diagnosis.answer


def test_an_unreadable_frame_sends_the_operator_to_fsck(state: ManagerState, tmp_path: Path) -> None:
    marker = ready_job(state)
    state.workspace.close()
    shutil.rmtree(state.workspace.journal_dir)
    set_visibility_deadline(state.workspace.root, 0.01)

    diagnosis = why(attach(state.workspace.root, writable=False), marker)

    assert diagnosis.blocked and finding(diagnosis, "frame").text.startswith("missing_segment")
    assert diagnosis.next_steps == ("run httk workspace fsck (--repair re-points the marker)",)


# -- failed, paused, succeeded, cancelled -------------------------------------------------------------
def test_a_failed_job_with_budget_left_can_be_continued(state: ManagerState) -> None:
    marker = job_in(state, Kind.FAILED, placement=PLACEMENT)

    diagnosis = why(state.workspace, marker)

    assert diagnosis.blocked and diagnosis.answer == "failed: test.broken: the step broke"
    assert finding(diagnosis, "continue").status == "ok"
    assert finding(diagnosis, "override_step").status == "ok"
    assert diagnosis.next_steps[0].startswith("httk job request continue")
    assert diagnosis.history is not None and diagnosis.history.attempts == 1


def test_a_failed_job_without_budget_left_says_so(state: ManagerState) -> None:
    policy = {"maximum_attempts_per_activation": 1, "maximum_activations": 1, "retry_on": []}
    marker = job_in(state, Kind.FAILED, job=minimal_job(retry_policy=policy), placement=PLACEMENT)

    diagnosis = why(state.workspace, marker)

    assert finding(diagnosis, "continue").status == "blocked"
    assert "retry_exhausted" in finding(diagnosis, "continue").text
    assert "budget_exhausted" in finding(diagnosis, "override_step").text
    assert diagnosis.next_steps == ("its budgets are used up: submit a new job to run it again",)


def test_a_failed_job_shows_its_last_attempts_breadcrumb(state: ManagerState) -> None:
    _job, key = submit_job(state.workspace, PLACEMENT)
    running, frame = to_running(state, PLACEMENT, key)  # creates the attempt's control directory
    state.apply(
        running, failed(frame, {"code": "test.broken", "message": "it broke"}, "failure"), Trigger.FAILURE
    )
    marker = current(state.workspace, PLACEMENT, key)
    control = state.workspace.payload_path(PLACEMENT, key) / f".httk-attempt.{frame['attempt_id']}"
    assert finding(why(state.workspace, marker), "breadcrumb").text.endswith(
        "left no error.json and no stderr"
    )

    (control / "stderr.log").write_text("loading\n\nKILLED by signal 9\n")
    assert finding(why(state.workspace, marker), "breadcrumb").text.endswith("loading | KILLED by signal 9")

    (control / "error.json").write_text(json.dumps({"message": "segmentation fault in relax"}))
    assert "segmentation fault in relax" in finding(why(state.workspace, marker), "breadcrumb").text


@pytest.mark.parametrize(
    ("kind", "answer", "blocked"),
    [
        (Kind.PAUSED, "paused: look first", True),
        (Kind.SUCCEEDED, "succeeded: nothing to do", False),
        (Kind.CANCELLED, "cancelled: nothing runs it again", False),
    ],
)
def test_paused_succeeded_and_cancelled_say_how_to_proceed(
    state: ManagerState, kind: Kind, answer: str, blocked: bool
) -> None:
    diagnosis = why(state.workspace, job_in(state, kind, placement=PLACEMENT))

    assert (diagnosis.answer, diagnosis.blocked) == (answer, blocked)
    assert diagnosis.next_steps
    assert diagnosis.history is None  # the history line belongs to ready, running and failed jobs


def test_text_and_json_say_the_same(state: ManagerState) -> None:
    marker = ready_job(state, claim={"pool": "gpu", "required_capabilities": []})
    register(state.workspace, "m")
    diagnosis = why(state.workspace, marker)

    document = json.loads(json.dumps(diagnosis.as_dict()))
    lines = diagnosis.lines()

    assert document["answer"] == diagnosis.answer and f"answer: {diagnosis.answer}" in lines
    assert [f["topic"] for f in document["findings"]] == PRECONDITIONS
    assert any(line.split()[:2] == ["BLOCKED", "pool"] for line in lines)
    assert lines[-1] == "next: run a manager with --pool gpu"
    assert document["history"]["line"] in lines[-2]
