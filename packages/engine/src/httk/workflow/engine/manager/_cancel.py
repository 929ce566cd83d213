"""Cancellation: fence first, then stop the recorded process group, then finish against evidence.

``spec/01`` "Cancellation". :func:`cancel` applies an operator cancel to the job's current marker:

- ``running``: the fence. The marker is renamed to ``cancelling`` before anything is signalled, so no
  outcome of the attempt can commit from that instant. The cancelling frame copies the running frame —
  attempt, claim, lease, ``process`` identity, and ``manager_id``, which stays the *previous owner*:
  the manager that launched the process is the one that stops and reaps it while it heartbeats — and
  adds ``cancellation`` naming the attempt, its control directory, the previous owner and the manager
  that fenced it. When the fencing manager already knows it can never verify the exit (the process
  ran on another host or in another boot), the frame says so in ``cancellation.unverified_reason``:
  that is the journaled "why" of a cancellation that stays ``cancelling``.
- any other nonterminal kind: straight to ``cancelled`` with ``verified: no_live_attempt``;
  ``claimed`` records ``no_launched_process``, because the launch gate is released only after the
  running rename, which this rename has now made impossible.
- ``cancelling``: nothing; the first cancel is still being carried out.

:func:`on_cancelling` is the manager's pass over ``cancelling`` markers, also run at startup (step 5 of
"Task-manager startup and recovery"). It acts when this manager owns the attempt, or when the owner's
heartbeat has expired: SIGTERM to the recorded process group, SIGKILL once ``cancel_grace_seconds``
have passed since the first SIGTERM, and ``cancelled`` only with evidence:

=====================  ============================================================================
process_exited         this manager launched the process and reaped it (status recorded), and no
                       member of its group is left
process_group_absent   recorded on this host, in this boot, and neither the process nor a member of
                       its group is alive (a pid recycled as an unrelated group's leader counts as gone)
no_launched_process    no process identity was ever recorded for the attempt
allocation_ended       the process ran elsewhere, but its manager's Slurm job ended on a cluster
                       that kills every process of a job (:mod:`._slurm`)
=====================  ============================================================================

A process recorded on another host (or before a reboot) cannot be proven stopped here: the marker stays
``cancelling``, still fenced, and a warning is logged at most every :data:`WARN_INTERVAL_SECONDS`. The
protocol has no ``cancelling → cancelling`` row, so that retry cannot be journaled; the reason was
journaled at the fence when it was already known then.

The instant of the first SIGTERM is kept in this process's memory per attempt: a restarted manager
starts the grace over, which only delays the SIGKILL. What this module remembers lives beside the
:class:`ManagerState` (a weak mapping), so the manager's own state class does not grow for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from httk.workflow.engine.core._frames import Frame, cancelled_directly, kept
from httk.workflow.engine.core._liveness import (
    group_alive,
    hostname,
    proc_stat,
    process_alive,
    read_process_file,
)
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import TransitionResult
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.protocol import InvalidDocumentError

from ._recovery import ORPHAN_EXIT_SECONDS
from ._slurm import allocation_evidence
from ._state import LiveAttempt, ManagerState, PerManager

log = logging.getLogger("httk.workflow.manager")

WARN_INTERVAL_SECONDS = 300.0
"""How often a cancellation this manager cannot verify is warned about again."""

ATTEMPT_DIR_PREFIX = ".httk-attempt."
REQUEST_ECHO = ("operator", "operator_key", "operator_reason", "request_id")
"""What the verified cancelled frame repeats from the cancelling frame about the request behind it."""
_DEAD_STATES = frozenset({"Z", "X", "x"})


@dataclass
class CancelMemory:
    """What one manager incarnation remembers about the cancellations it is carrying out."""

    # Invariant: an attempt is in ``signalled`` exactly while this manager has signalled its group and
    # not yet seen it verified (or lost the marker); ``killed`` is a subset of it.
    signalled: dict[str, float] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)
    reaped: dict[str, int] = field(default_factory=dict)  # attempt id -> exit status, fenced attempts only
    warned: dict[str, float] = field(default_factory=dict)


_MEMORY = PerManager(CancelMemory)


def memory(state: ManagerState) -> CancelMemory:
    """This manager's cancellation memory (created on first use, gone with the state)."""
    return _MEMORY.of(state)


def in_progress(state: ManagerState) -> int:
    """How many cancelled attempts this manager has signalled and not yet verified (keep it awake)."""
    return len(memory(state).signalled)


# -- applying an operator cancel -----------------------------------------------------------------------
def cancel(
    state: ManagerState,
    marker: MarkerLocation,
    frame: Frame | None,
    request: Mapping[str, Any],
) -> TransitionResult | None:
    """Apply an operator cancel to ``marker``, the job's current marker; ``frame`` is its frame.

    ``request`` holds the members the request records in every frame it causes (operator, operator
    reason, request id). Returns the move's result, or ``None`` for a job already ``cancelling``.
    """
    if marker.kind is Kind.CANCELLING:
        return None
    if marker.kind is Kind.RUNNING:
        assert frame is not None, "a running marker always names a frame"
        result = fence(state, marker, frame, request)
        if result.won and result.current is not None:
            on_cancelling(state, result.current)  # then signal, right away when it is ours to stop
        return result
    direct = cancelled_directly(marker.kind, frame, state.manager_id, **request, reason="operator_cancel")
    return state.move(marker, direct, Trigger.CANCEL)


def fence(
    state: ManagerState, marker: MarkerLocation, frame: Frame, request: Mapping[str, Any]
) -> TransitionResult:
    """Rename the exact running marker to cancelling; nothing has been signalled yet."""
    attempt_id = frame.attempt_id
    cancellation: dict[str, Any] = {
        "attempt_id": attempt_id,
        "control_dir": f"{ATTEMPT_DIR_PREFIX}{attempt_id}",
        "previous_manager_id": frame.manager_id,
        "fenced_by": state.manager_id,
    }
    identity = frame.process
    if identity and process_alive(identity) is None:
        cancellation["unverified_reason"] = _unprovable(identity)
    fenced = kept(Kind.CANCELLING, frame, **request, cancellation=cancellation, reason="operator_cancel")
    result = state.move(marker, fenced, Trigger.CANCEL_FENCE)
    if result.won:
        log.info("fenced attempt %s of %s for cancellation", attempt_id, marker.job_key)
    return result


# -- the cancelling pass ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Evidence:
    """Why nothing of the fenced attempt runs any more: ``cancellation.verified`` and its details."""

    verified: str
    exit_status: int | None = None
    batch: dict[str, Any] | None = None


def on_cancelling(state: ManagerState, marker: MarkerLocation) -> bool | None:
    """Carry a cancellation forward: ``True`` once cancelled, ``False`` while this manager stops it,
    ``None`` when it is not ours to stop (its owner heartbeats) or cannot be verified from here."""
    frame = state.frame_or_none(marker)
    if frame is None:
        return None
    attempt_id = str(frame.attempt_id or (frame.get("cancellation") or {}).get("attempt_id"))
    live = state.live.get(attempt_id)
    if live is None and frame.manager_id != state.manager_id and state.owner(frame).alive:
        return None  # the launching manager stops and reaps its own process
    identity = _identity(state, marker, frame, attempt_id)
    if identity is None:
        return None
    evidence = _stop(state, attempt_id, identity, live)
    if evidence is None:
        return False
    if evidence.verified == "unprovable":
        batch = allocation_evidence(state, frame)
        if batch is None or not batch["sufficient"]:
            _warn(state, marker, attempt_id, identity)
            return None
        evidence = Evidence("allocation_ended", batch=batch)
    return _finish(state, marker, frame, attempt_id, evidence)


def note_reaped(state: ManagerState, live: LiveAttempt, status: int) -> bool:
    """Tell the cancellation machinery that this manager reaped ``live`` with ``status``.

    Call it from the reap loop for every reaped attempt. Returns whether the attempt's running marker is
    gone, which means a cancellation fenced it: then the caller must not commit the attempt (a commit
    would only lose its rename), and the exit status becomes ``process_exited`` evidence.
    """
    if os.path.lexists(live.marker.path(state.workspace)):
        return False
    memory(state).reaped[str(live.frame.attempt_id)] = status
    return True


def _identity(
    state: ManagerState, marker: MarkerLocation, frame: Mapping[str, Any], attempt_id: str
) -> dict[str, Any] | None:
    """The recorded process identity; ``{}`` when none was ever recorded, ``None`` when unreadable."""
    identity = frame.get("process")
    if isinstance(identity, dict) and identity:
        return identity
    control = state.workspace.payload_path(marker.placement, marker.job_key) / (
        ATTEMPT_DIR_PREFIX + attempt_id
    )
    try:
        return read_process_file(control) or {}
    except InvalidDocumentError as exc:
        if state.first_time(f"unreadable process.json {control}"):
            log.error("cannot verify the cancellation of %s: %s", marker.job_key, exc)
        return None


def _stop(
    state: ManagerState, attempt_id: str, identity: Mapping[str, Any], live: LiveAttempt | None
) -> Evidence | None:
    """One step of stopping the group; the evidence once it is gone, ``None`` while it is not yet."""
    if not identity:
        return Evidence("no_launched_process")
    running = _group_running(identity)
    if running is None:
        return Evidence("unprovable")
    if running:
        _signal(state, attempt_id, identity)
        if _group_running(identity):
            return None
    if not _reap(state, attempt_id, live):
        return None  # the leader is not reapable yet (stopped, say): look again next pass
    status = memory(state).reaped.get(attempt_id)
    if status is not None:
        return Evidence("process_exited", status)
    return Evidence("process_group_absent")


def _reap(state: ManagerState, attempt_id: str, live: LiveAttempt | None) -> bool:
    """Reap this manager's own runner if it has exited; whether it is reaped (or not ours at all)."""
    if live is None or attempt_id not in state.live:
        return True
    status = live.process.poll()
    if status is None:
        return False
    del state.live[attempt_id]
    memory(state).reaped[attempt_id] = status
    return True


def _group_running(identity: Mapping[str, Any]) -> bool | None:
    """Whether the recorded process or any member of its group still runs; ``None`` if unprovable here."""
    alive = process_alive(identity)
    if alive is not False:
        return alive
    pgid = _pgid(identity)
    if pgid <= 1 or not group_alive(pgid):
        return False
    # The leader is gone but its group is not. While any member of group P lives the kernel cannot
    # reuse pid P, so a *live* process P that started at another tick leads an unrelated group: ours is
    # gone. Otherwise the members are the attempt's orphans.
    leader = proc_stat(pgid)
    return not (
        leader is not None and leader[0] not in _DEAD_STATES and leader[2] != identity.get("start_ticks")
    )


def _signal(state: ManagerState, attempt_id: str, identity: Mapping[str, Any]) -> None:
    """SIGTERM the group the first time, SIGKILL it once the grace has passed (then wait, bounded)."""
    remembered = memory(state)
    pgid = _pgid(identity)
    now = state.clock.monotonic()
    if attempt_id not in remembered.signalled:
        remembered.signalled[attempt_id] = now
        log.info("cancelling attempt %s: SIGTERM to process group %s", attempt_id, pgid)
        _killpg(pgid, signal.SIGTERM)
        return
    if now - remembered.signalled[attempt_id] < state.config.cancel_grace_seconds:
        return
    _killpg(pgid, signal.SIGKILL)  # again on every later pass: a member stuck in the kernel dies late
    if attempt_id in remembered.killed:
        return
    remembered.killed.add(attempt_id)
    log.warning("attempt %s outlived the cancel grace: SIGKILL to process group %s", attempt_id, pgid)
    deadline = now + ORPHAN_EXIT_SECONDS
    while _group_running(identity) and state.clock.monotonic() < deadline:
        state.clock.sleep(0.01)


def _pgid(identity: Mapping[str, Any]) -> int:
    """The recorded process group (the runner leads its own session), or 0 when none is recorded."""
    for member in ("pgid", "pid"):
        value = identity.get(member)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            return value
    return 0


def _killpg(pgid: int, sig: int) -> None:
    if pgid <= 1:
        return  # never signal "every process" or init
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _finish(
    state: ManagerState, marker: MarkerLocation, frame: Frame, attempt_id: str, evidence: Evidence
) -> bool:
    previous: dict[str, Any] = frame.get("cancellation") or {}
    cancellation = {key: value for key, value in previous.items() if key != "unverified_reason"}
    cancellation["verified"] = evidence.verified
    if evidence.verified == "process_exited":
        cancellation["exit_status"] = evidence.exit_status
        if evidence.exit_status is not None and evidence.exit_status < 0:
            cancellation["signal"] = -evidence.exit_status
    if evidence.batch is not None:
        cancellation["batch"] = evidence.batch
    requested: dict[str, Any] = {key: frame[key] for key in REQUEST_ECHO if key in frame}
    verified = kept(
        Kind.CANCELLED,
        frame,
        **requested,
        manager_id=state.manager_id,
        cancellation=cancellation,
        reason="cancel_verified",
    )
    result = state.move(marker, verified, Trigger.CANCEL_VERIFIED)
    _forget(state, attempt_id)
    if result.won:
        log.info("cancelled %s (%s)", marker.job_key, evidence.verified)
    return result.won


def _forget(state: ManagerState, attempt_id: str) -> None:
    remembered = memory(state)
    remembered.signalled.pop(attempt_id, None)
    remembered.killed.discard(attempt_id)
    remembered.reaped.pop(attempt_id, None)
    remembered.warned.pop(attempt_id, None)


def _unprovable(identity: Mapping[str, Any]) -> str:
    host, here = identity.get("host"), hostname()
    what = f"the attempt's process (pid {identity.get('pid')})"
    if host != here:
        return f"{what} ran on host {host!r}, not on {here!r}; only a manager on {host!r} can verify its exit"
    return f"{what} was recorded on this host in another boot or pid namespace: its exit cannot be verified"


def _warn(state: ManagerState, marker: MarkerLocation, attempt_id: str, identity: Mapping[str, Any]) -> None:
    remembered = memory(state)
    now = state.clock.monotonic()
    last = remembered.warned.get(attempt_id)
    if last is not None and now - last < WARN_INTERVAL_SECONDS:
        return
    remembered.warned[attempt_id] = now
    log.warning("%s stays cancelling: %s", marker.job_key, _unprovable(identity))
