"""The attempt-history line, the flapping flag, and the operator requests ``job why`` surfaces."""

from __future__ import annotations

import os

from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.engine.manager._launch import claim_frame
from httk.workflow.engine.manager._launch import register as register_job
from httk.workflow.engine.manager._rules import retry_or_fail
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.ops._why_report import FLAPPING_ATTEMPTS
from httk.workflow.engine.requests._requests import retire

from tests.jobkinds import OTHER_HOST, write_request
from tests.joinkit import current, frame_of, submit_job
from tests.whykit import clock_fixture, finding, register, state_fixture, why  # noqa: F401 (fixtures)

PLACEMENT = "proj/a"
UNLIMITED = {"retry_on": ["process_failure"]}


def ready_job(state: ManagerState, **overrides: object) -> MarkerLocation:
    _job, key = submit_job(state.workspace, PLACEMENT, **overrides)
    register_job(state, current(state.workspace, PLACEMENT, key))
    return current(state.workspace, PLACEMENT, key)


def crash_and_retry(state: ManagerState, marker: MarkerLocation, times: int) -> MarkerLocation:
    """Claim, launch and lose ``times`` attempts that exit without an outcome, as the manager records it."""
    ws = state.workspace
    for _ in range(times):
        job = state.jobs.get(marker)
        claim = claim_frame(state, frame_of(ws, marker), job)
        claimed = state.move(marker, Frame(Kind.CLAIMED, claim), Trigger.CLAIM).current
        assert claimed is not None
        running_frame = {**claim, "process": OTHER_HOST, "reason": "launched"}
        running = state.move(claimed, Frame(Kind.RUNNING, running_frame), Trigger.LAUNCH).current
        assert running is not None
        failure = {"code": "process_failure", "message": "the runner exited with status 1 without an outcome"}
        decision = retry_or_fail(
            job.document,
            running_frame,
            failure,
            declared=False,
            unclean=True,
            attempt_reason="process_failure",
        )
        assert decision.kind is Kind.READY
        assert state.apply(running, decision, Trigger.RETRY)
        marker = current(ws, PLACEMENT, marker.job_key)
    return marker


def test_the_history_line_counts_attempts_activations_and_unclean_exits(state: ManagerState) -> None:
    marker = crash_and_retry(state, ready_job(state), 3)

    diagnosis = why(state.workspace, marker)

    assert diagnosis.history is not None
    assert (
        diagnosis.history.line() == "3 attempts across 1 activation at step 'prepare'; 3 after unclean exits"
    )
    assert not diagnosis.history.flapping
    assert f"history: {diagnosis.history.line()}" in diagnosis.lines()


def test_a_job_retried_without_end_under_an_unlimited_budget_is_flapping(state: ManagerState) -> None:
    flapping = crash_and_retry(state, ready_job(state, retry_policy=UNLIMITED), FLAPPING_ATTEMPTS)
    bounded = crash_and_retry(
        state, ready_job(state, retry_policy={**UNLIMITED, "maximum_total_attempts": 1000}), FLAPPING_ATTEMPTS
    )
    early = crash_and_retry(state, ready_job(state, retry_policy=UNLIMITED), FLAPPING_ATTEMPTS - 1)

    diagnosis = why(state.workspace, flapping)

    assert diagnosis.history is not None and diagnosis.history.flapping
    assert finding(diagnosis, "history").status == "warning"
    assert "history: FLAPPING under an unlimited retry budget, not progressing" in diagnosis.lines()
    assert diagnosis.next_steps[-1] == "read its failures (httk job log) and pause or cancel it"
    for calm in (bounded, early):
        history = why(state.workspace, calm).history
        assert history is not None and not history.flapping


def test_pending_requests_are_surfaced_in_ready_and_claimed(state: ManagerState) -> None:
    marker = ready_job(state)
    waiting = write_request(state.workspace, marker, "pause", operator="ann", reason="inspection")
    taken = write_request(state.workspace, marker, "set_priority", operator="bob")
    claimed_dir = state.workspace.requests_dir / "claimed" / "m1"
    claimed_dir.mkdir()
    os.rename(taken, claimed_dir / taken.name)
    other = ready_job(state)
    write_request(state.workspace, other, "cancel")

    requests = [item for item in why(state.workspace, marker).findings if item.topic == "request"]

    assert sorted(item.text for item in requests) == sorted(
        [
            f"pause request {waiting.stem} by ann is pending: waiting in requests/ready for a manager",
            f"set_priority request {taken.stem} by bob is pending: claimed by manager m1, not yet applied",
        ]
    )
    by_action = {item.details["action"]: item.details for item in requests}
    assert by_action["pause"]["operator_reason"] == "inspection"


def test_the_latest_retired_request_and_its_reason_are_surfaced(
    state: ManagerState, clock: ManualClock
) -> None:
    marker = ready_job(state)
    claimed = state.workspace.requests_dir / "claimed" / state.manager_id
    claimed.mkdir(parents=True)
    for reason in ("an older reason", "the job moved on to generation 2"):
        published = write_request(state.workspace, marker, "pause")
        os.rename(published, claimed / published.name)
        retire(state, claimed / published.name, reason)
        clock.advance(1.0)
    register(state.workspace)

    retired = finding(why(state.workspace, marker), "retired request")

    assert retired.status == "warning"
    assert retired.text.endswith("can never apply: the job moved on to generation 2")
    assert retired.details["request_id"] == published.stem
