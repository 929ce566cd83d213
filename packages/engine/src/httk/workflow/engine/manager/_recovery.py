"""Recovering what a dead manager left: abandoned commits, claims and running attempts.

Nothing is recovered while its owner heartbeats within its lease, unless the owner is known dead: its
recorded process is provably gone from this host (DECISIONS D17), and then its lease counts as expired
at once (``manager_process_gone`` in the evidence). An abandoned committing marker is
finished from the outcome its committing frame embeds. An abandoned claim is released to ready with its
counters undone: its process was never released from the launch gate, because that happens only after
the running rename. An abandoned running attempt is first inspected for a published outcome, which is
committed rather than mistaken for a crash; otherwise a takeover rule must admit it:

=================  ==================================================================================
persistent workdir the recorded process is provably gone on this host, or the batch system reports the
                   manager's allocation ended where it tracks every process of a job
                   (``allocation_ended``, :mod:`._slurm`), or --unsafe-persistent-takeover
isolated workdir   either of those, or the heartbeat silent for takeover_grace_factor leases, or
                   --unsafe-isolated-takeover
=================  ==================================================================================

A process recorded on this host that is still alive is killed first (its whole group) and recovered in
the same pass once the group is provably gone (rule ``process_gone`` with ``killed_orphan``). The
evidence — rule, heartbeat age, previous manager, whether that manager's process is gone — is recorded
in the ready frame and carried into the next attempt's claimed and running frames. So a crashed manager
restarted on its host resumes its jobs in its first pass.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

from httk.workflow.engine.core._frames import Frame, failure_of, released
from httk.workflow.engine.core._jobs import LoadedJob
from httk.workflow.engine.core._liveness import group_alive, process_alive
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.engine.publish._outcome import UnusableOutcomeError, read_outcome
from httk.workflow.protocol import InvalidDocumentError, WorkflowError

from ._commit import commit, finish_committing
from ._rules import retry_or_fail
from ._slurm import allocation_evidence
from ._state import ManagerState, Owner

log = logging.getLogger("httk.workflow.manager")

ORPHAN_EXIT_SECONDS = 1.0
"""How long a recoverer waits for an orphaned runner group it killed to disappear."""


def on_committing(state: ManagerState, marker: MarkerLocation) -> bool | None:
    """Finish a commit whose manager died, or one of ours an I/O error deferred; ``None`` when not now."""
    frame = state.frame_or_none(marker)
    if frame is None:
        return None
    ours = frame.manager_id == state.manager_id
    if (ours and not state.commit_retry_due(marker.job_key)) or (not ours and state.owner(frame).alive):
        return None
    job = _job_or_none(state, marker)
    if job is None:
        return None
    log.info("%s the commit of %s", "retrying" if ours else "replaying the abandoned", marker.job_key)
    finish_committing(state, marker, frame, job, None)
    return True


def on_claimed_or_running(state: ManagerState, marker: MarkerLocation) -> bool | None:
    """Recover an abandoned claim or attempt; ``False`` for our own, ``None`` when not recoverable now.

    One of this manager's own that it no longer works on is abandoned too: a launch a storage error cut
    short left its claim (never released from the gate) or its running marker (its gate aborted).
    """
    if state.holds(marker):
        return False
    frame = state.frame_or_none(marker)
    if frame is None:
        return None
    owner = Owner(False, 0.0) if frame.manager_id == state.manager_id else state.owner(frame)
    if owner.alive:
        return None
    if marker.kind is Kind.CLAIMED:
        release_stale_claim(state, marker, frame, owner)
        return True
    return recover_running(state, marker, frame, owner)


def release_stale_claim(state: ManagerState, marker: MarkerLocation, frame: Frame, owner: Owner) -> None:
    state.move(marker, released(frame, state.manager_id, owner.evidence()), Trigger.RELEASE)


def recover_running(state: ManagerState, marker: MarkerLocation, frame: Frame, owner: Owner) -> bool | None:
    job = _job_or_none(state, marker)
    if job is None:
        return None
    control = job.payload_dir / f".httk-attempt.{frame.get('attempt_id')}"
    try:
        outcome = read_outcome(control)
    except UnusableOutcomeError as exc:
        commit(state, marker, frame, job, outcome=None, defect=str(exc))
        return True
    if outcome is not None:
        identity = frame.process
        if identity and process_alive(identity) is True and not stop_orphan(state, identity):
            return None  # its runner is still finishing on this host; commit once it is gone
        log.info("the abandoned attempt of %s published an outcome; committing it", marker.job_key)
        commit(state, marker, frame, job, outcome=outcome)
        return True
    evidence = takeover_evidence(state, job, frame, owner)
    if evidence is None:
        return None
    gone = "'s process is gone from this host" if owner.manager_process_gone else " stopped heartbeating"
    failure = failure_of("lease_lost", f"the owning manager {frame.manager_id}{gone}", **owner.evidence())
    decision = retry_or_fail(
        job.document,
        frame,
        failure,
        declared=False,
        unclean=True,
        attempt_reason="lease_lost",
        extra={"takeover": evidence},
    )
    state.apply(marker, decision, Trigger.RETRY if decision.kind is Kind.READY else Trigger.FAILURE)
    return True


def takeover_evidence(
    state: ManagerState, job: LoadedJob, frame: Frame, owner: Owner
) -> dict[str, Any] | None:
    """Which rule admits recovering this abandoned attempt, or ``None`` to leave it alone for now."""
    identity = frame.process
    mode = job.document["workdir"]["mode"]
    age = owner.heartbeat_age
    base = {"previous_manager_id": frame.manager_id, **owner.evidence(), "workdir_mode": mode}
    alive = process_alive(identity) if identity else False
    if alive is False:
        return {**base, "rule": "process_gone" if identity else "no_launched_process"}
    if alive is True:
        # Killing the orphan is this pass's progress: recover it now that it is provably gone, rather
        # than leave a running marker behind for a pass that a manager about to go idle never makes.
        if not stop_orphan(state, identity):
            return None
        return {**base, "rule": "process_gone", "killed_orphan": True}
    batch = allocation_evidence(state, frame)
    if batch is not None and batch["sufficient"]:
        return {**base, "rule": "allocation_ended", "batch": batch}
    config = state.config
    if mode == "persistent":
        if config.unsafe_persistent_takeover:
            return {**base, "rule": "unsafe_persistent_takeover", "unsafe": True}
        if state.first_time(f"foreign writer {frame.get('attempt_id')}"):
            log.info(
                "leaving attempt %s: its writer ran on host %s, where only a manager can prove it stopped",
                frame.attempt_id,
                identity.get("host"),
            )
        return None
    grace = config.takeover_grace_factor * (frame.lease_seconds or state.lease_seconds)
    if age is None or age >= grace:
        return {**base, "rule": "heartbeat_silent", "grace_seconds": grace}
    if config.unsafe_isolated_takeover:
        return {**base, "rule": "unsafe_isolated_takeover", "unsafe": True}
    if state.first_time(f"inside grace {frame.get('attempt_id')}"):
        log.info(
            "leaving isolated attempt %s: its manager has been silent %.0f s, less than the takeover grace "
            "of %.0f s, and its process ran on host %s",
            frame.attempt_id,
            age or 0.0,
            grace,
            identity.get("host"),
        )
    return None


def stop_orphan(state: ManagerState, identity: dict[str, Any]) -> bool:
    """A dead manager's runner still runs on this host: kill its group; return whether it is gone.

    SIGKILL takes effect as soon as the kernel schedules the victims, so this waits (bounded by
    :data:`ORPHAN_EXIT_SECONDS`) until no member of the group is left; a group that outlives the bound
    (uninterruptible sleep on a hung filesystem) is left for a later pass.
    """
    pgid = identity.get("pgid")
    if not isinstance(pgid, int) or isinstance(pgid, bool) or pgid <= 1:
        return False
    log.info("killing process group %s, the orphaned runner of a dead manager", pgid)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    deadline = state.clock.monotonic() + ORPHAN_EXIT_SECONDS
    while group_alive(pgid):
        if state.clock.monotonic() >= deadline:
            log.warning(
                "process group %s survived SIGKILL for %s s; recovering it later", pgid, ORPHAN_EXIT_SECONDS
            )
            return False
        state.clock.sleep(0.01)
    return True


def _job_or_none(state: ManagerState, marker: MarkerLocation) -> LoadedJob | None:
    try:
        return state.jobs.get(marker)
    except (InvalidDocumentError, WorkflowError) as exc:
        if state.first_time(f"unreadable definition {marker.kind.value} {marker.job_key}"):
            log.error("%s job %s has an unreadable definition: %s", marker.kind.value, marker.job_key, exc)
        return None
