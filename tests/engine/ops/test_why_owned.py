"""``job why`` for claimed, running, committing and cancelling jobs: the owner, its lease, what recovers them.

The owner's heartbeat is written by the real manager record at the manual clock's time; a lease expires
by diagnosing later. A wedged commit is shown both ways its evidence arises: managers that served the
job after it was abandoned and stopped without finishing it, and warnings in the managers' logs.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, attach
from httk.workflow.engine.manager._state import ManagerState

from tests.conftest import minimal_job
from tests.jobkinds import job_in
from tests.whykit import LEASE, clock_fixture, finding, register, state_fixture, why  # noqa: F401

PLACEMENT = "proj/a"


def owned(state: ManagerState, kind: Kind, *, workdir: str = "persistent") -> MarkerLocation:
    """A job in ``kind`` owned by ``state``'s manager, its process on another host (tests/jobkinds.py)."""
    mode = {"mode": "persistent", "path": "run"} if workdir == "persistent" else {"mode": "isolated"}
    return job_in(state, kind, job=minimal_job(workdir=mode), placement=PLACEMENT)


def owner_then_silence(state: ManagerState, clock: ManualClock, seconds: float = 4 * LEASE) -> None:
    """The owner registers and then stops heartbeating for ``seconds``."""
    register(state.workspace, state.manager_id, lease_seconds=LEASE)
    clock.advance(seconds)


# -- claimed -----------------------------------------------------------------------------------------
def test_a_claim_of_a_live_manager_is_not_stuck(state: ManagerState) -> None:
    marker = owned(state, Kind.CLAIMED)
    register(state.workspace, state.manager_id, lease_seconds=LEASE)

    diagnosis = why(state.workspace, marker, later=1.0)

    assert not diagnosis.blocked
    assert diagnosis.answer == f"claimed by live manager {state.manager_id}, which launches it next"
    assert finding(diagnosis, "owner").text.startswith(
        f"manager {state.manager_id}: heartbeat 1.0 s old, lease 30 s"
    )


def test_an_expired_claim_is_recovery_when_a_manager_is_live(state: ManagerState, clock: ManualClock) -> None:
    marker = owned(state, Kind.CLAIMED)
    owner_then_silence(state, clock)

    alone = why(state.workspace, marker)
    assert alone.blocked and alone.answer == "its manager's lease expired and no live manager can recover it"
    assert "its lease has expired" in finding(alone, "owner").text

    register(state.workspace, "rescuer")
    rescued = why(state.workspace, marker)
    assert not rescued.blocked
    assert rescued.answer.startswith("its manager's lease expired: recovery, not a stuck job")
    assert "rescuer" in finding(rescued, "recovery").text


# -- running -----------------------------------------------------------------------------------------
def test_a_running_job_of_a_live_manager(state: ManagerState) -> None:
    marker = owned(state, Kind.RUNNING)
    register(state.workspace, state.manager_id, lease_seconds=LEASE)

    diagnosis = why(state.workspace, marker)

    assert not diagnosis.blocked and diagnosis.answer == f"running under live manager {state.manager_id}"
    assert (
        finding(diagnosis, "process").text
        == "pid 4242 on host elsewhere.invalid: cannot be checked from this host"
    )


def test_a_persistent_attempt_whose_writer_ran_elsewhere_is_blocked_on_that_host(
    state: ManagerState, clock: ManualClock
) -> None:
    marker = owned(state, Kind.RUNNING)
    owner_then_silence(state, clock)
    register(state.workspace, "here")

    diagnosis = why(state.workspace, marker)

    assert diagnosis.blocked
    assert "its writer ran on host elsewhere.invalid" in diagnosis.answer
    assert finding(diagnosis, "recovery").status == "blocked"
    assert diagnosis.next_steps == (
        "run a manager on host elsewhere.invalid",
        "or pass --unsafe-persistent-takeover to a manager (unsafe)",
    )


def test_an_isolated_attempt_is_taken_over_after_the_grace(state: ManagerState, clock: ManualClock) -> None:
    marker = owned(state, Kind.RUNNING, workdir="isolated")
    owner_then_silence(state, clock, seconds=LEASE + 10)
    register(state.workspace, "here")

    inside = why(state.workspace, marker)
    assert not inside.blocked
    assert "taken over once the heartbeat has been silent 60 s (in 20 s)" in finding(inside, "recovery").text

    outside = why(state.workspace, marker, later=30.0)
    assert "silent 70 s, past the takeover grace of 60 s" in finding(outside, "recovery").text


def test_an_abandoned_attempt_that_published_an_outcome_is_committed(
    state: ManagerState, clock: ManualClock
) -> None:
    marker = owned(state, Kind.RUNNING)
    frame = state.workspace.reader.read(str(marker.name.ref))
    control = state.workspace.payload_path(PLACEMENT, marker.job_key) / f".httk-attempt.{frame['attempt_id']}"
    (control / "outcome.ready").mkdir(parents=True)
    owner_then_silence(state, clock)
    register(state.workspace, "here")

    diagnosis = why(state.workspace, marker)

    assert not diagnosis.blocked
    assert finding(diagnosis, "outcome").text.startswith("the attempt published an outcome")
    assert "its published outcome is committed" in diagnosis.answer


# -- committing --------------------------------------------------------------------------------------
def test_a_commit_in_progress_and_one_resumed_after_its_owner_stopped(
    state: ManagerState, clock: ManualClock
) -> None:
    marker = owned(state, Kind.COMMITTING)
    register(state.workspace, state.manager_id, lease_seconds=LEASE)
    assert why(state.workspace, marker).answer == (
        f"its published outcome is being committed by live manager {state.manager_id}"
    )

    clock.advance(2 * LEASE)
    register(state.workspace, "heir")
    resumed = why(state.workspace, marker)
    assert not resumed.blocked
    assert (
        "its commit is resumed from the committing frame by the next pass of heir"
        in finding(resumed, "recovery").text
    )


def test_a_commit_that_managers_keep_failing_to_finish_is_wedged(
    state: ManagerState, clock: ManualClock
) -> None:
    marker = owned(state, Kind.COMMITTING)  # its owner never registered: abandoned at once
    clock.advance(5.0)
    register(state.workspace, "first", lease_seconds=10.0)
    clock.advance(20.0)
    assert "wedged" not in why(state.workspace, marker).answer  # one manager came and went: not "repeated"

    register(state.workspace, "second", lease_seconds=10.0)
    clock.advance(20.0)
    register(state.workspace, "elsewhere", lease_seconds=10.0, placement_prefixes=("proj/b",))  # out of scope
    diagnosis = why(state.workspace, marker, later=20.0)

    assert diagnosis.blocked
    assert diagnosis.answer == "a wedged commit: the same attempt's commit keeps failing"
    assert finding(diagnosis, "commit").text.endswith(
        "2 managers stopped without finishing it: first, second"
    )


def test_repeated_commit_warnings_in_the_managers_logs_mean_a_wedged_commit(
    state: ManagerState, clock: ManualClock
) -> None:
    marker = owned(state, Kind.COMMITTING)
    register(state.workspace, state.manager_id, lease_seconds=LEASE)
    log = state.workspace.managers_dir / state.manager_id / "log"
    before, after = clock.now() - timedelta(seconds=10), clock.now() + timedelta(seconds=1)
    lines = [
        _text_line(before, "WARNING", f"{marker.job_key}: an older warning of the same job"),
        _text_line(after, "INFO", f"replaying the abandoned commit of {marker.job_key}"),
        _text_line(after, "WARNING", f"{marker.job_key}: the transaction cannot be replayed now: EIO"),
    ]
    log.write_text("\n".join(lines) + "\n")

    once = why(state.workspace, marker)
    assert not once.blocked
    assert finding(once, "commit").status == "warning" and "EIO" in finding(once, "commit").text

    record = {"time": (after + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S%z"), "level": "error"}
    record["message"] = f"{marker.job_key}: the transaction cannot be replayed now: ENOSPC"
    with log.open("a") as handle:
        handle.write(json.dumps(record) + "\n")

    twice = why(state.workspace, marker)
    assert twice.blocked and twice.answer.startswith("a wedged commit")
    assert finding(twice, "commit").text.endswith(
        f"latest: error by manager {state.manager_id}: {marker.job_key}: "
        "the transaction cannot be replayed now: ENOSPC"
    )


def _text_line(moment: datetime, level: str, message: str) -> str:
    """A line as ``_logging``'s text formatter writes it (asctime in local time, milliseconds)."""
    local = moment.astimezone()
    return f"{local:%Y-%m-%d %H:%M:%S},{local.microsecond // 1000:03d} {level} [m] {message}"


# -- cancelling --------------------------------------------------------------------------------------
def test_a_cancellation_on_another_host_waits_for_a_manager_there(
    state: ManagerState, clock: ManualClock
) -> None:
    marker = owned(state, Kind.CANCELLING)
    register(state.workspace, state.manager_id, lease_seconds=LEASE)
    assert not why(state.workspace, marker).blocked  # its live owner stops and verifies it

    clock.advance(4 * LEASE)
    register(state.workspace, "here")
    diagnosis = why(attach(state.workspace.root, writable=False, clock=clock), marker)

    assert diagnosis.blocked
    assert (
        diagnosis.answer
        == "fenced, waiting for a manager on host elsewhere.invalid to verify the process stopped"
    )
    assert diagnosis.next_steps == (
        "run a manager on host elsewhere.invalid to finish the cancellation; "
        "the attempt stays fenced meanwhile",
    )
