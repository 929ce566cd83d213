"""The manager's request pass: deciding one claimed request against its job, and applying it by one
verified transition (the life of the request file is :mod:`httk.workflow.engine.requests._requests`).

The checks run in this order, each one final (``spec/01``, "Manual continuation and control requests"):

0. the signature (DECISIONS D20, :mod:`httk.workflow.engine.requests._signatures`), against format.json's
   ``request_signatures`` read again for this request, so ``workspace trust`` reaches live managers: a
   signature that does not verify, or (when signatures are required) an unsigned request or one whose
   key the workspace does not trust, is quarantined; a trust list that cannot be read holds the request;
1. the job is resolved by probing the finite state set at the request's placement — never a scan. No
   job there: when the frame the request was published against is a frame of exactly that job, at that
   placement and generation, the job existed and has since been deleted, and a request that can never
   apply is retired (``job_not_found``); otherwise the request names a job that does not exist, which is
   malformed input (quarantine, ``spec/01``). A request published against a generation-0 marker has no
   frame to prove it, so it is quarantined; a collected segment makes that one read wait out the
   visibility deadline before it does the same;
2. a request this manager (or a dead one) already applied is recognized by its ``request_id`` in the
   frame one generation above the expected one, so a crash between the marker rename and the removal
   of the claimed file never applies a request twice;
3. the exact expected generation and record reference, else retire: a delayed request never applies to
   a newer state;
4. the narrow action validity of :func:`~httk.workflow.engine.requests._documents.refusal`, else retire;
5. for continue and override_step, the decided-join revival guard and then the job's budgets, else
   retire (an unreadable parent frame holds the request for a later pass instead).

Then one :func:`move_marker`; losing its rename means the job moved while the request was applied,
which retires it too. Every frame a request causes records ``operator``, ``operator_reason``,
``request_id`` and, for a verified signature, ``operator_key``; its ``reason`` is the transition code
(``operator_continue``, ...).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from httk.workflow.engine.core._frames import (
    Frame,
    another_attempt,
    first_activation,
    kept,
    next_activation,
    operator_paused,
)
from httk.workflow.engine.core._jobs import LoadedJob, check_identity
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import TransitionResult
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker, read_format_document
from httk.workflow.engine.requests._documents import (
    APPLIED,
    HOLD,
    QUARANTINE,
    RETIRE,
    Request,
    Verdict,
    refusal,
)
from httk.workflow.engine.requests._requests import (
    DEFAULT_BUDGET,
    RequestMemory,
    RequestStatistics,
)
from httk.workflow.engine.requests._requests import handle_requests as serve_requests
from httk.workflow.engine.requests._signatures import signature_refusal
from httk.workflow.protocol import (
    InvalidDocumentError,
    TransitionError,
    WorkflowError,
    WorkspaceError,
    WorkspaceUnavailableError,
)
from httk.workflow.protocol._signing import TRUST_MEMBER, SignatureFormatError, parse_trust

from . import _cancel
from ._rules import check_advance, check_retry
from ._state import ManagerState, PerManager

log = logging.getLogger("httk.workflow.manager")

JOB_NOT_FOUND = "job_not_found"
"""How a retirement's reason starts when the job was deleted after the request was published."""

APPLIED_LOOKBACK = 16
"""How many generations past the expected one a re-claimed request is still recognized as applied."""


Current = Frame | None
"""The job's current frame (``None`` at generation 0, where its marker names none)."""

_MEMORY = PerManager(RequestMemory)


def handle_requests(state: ManagerState, *, budget: int = DEFAULT_BUDGET) -> bool:
    """The manager's request pass, deciding each request by :func:`apply_request`; whether any was
    applied, retired, quarantined or re-claimed (the pass itself is the requests layer's)."""
    return serve_requests(
        state,
        _MEMORY.of(state),
        lambda request: apply_request(state, request),
        budget=budget,
        only_jobs=state.config.only_jobs,
    )


def statistics(state: ManagerState) -> RequestStatistics:
    """What this manager did with requests so far."""
    return _MEMORY.of(state).statistics()


def apply_request(state: ManagerState, request: Request) -> Verdict:
    """Decide ``request`` against the job's current marker and apply it when every check admits it."""
    checked = check_signature(state.workspace, request)
    if isinstance(checked, Verdict):
        return checked
    request = checked
    try:
        current = probe_marker(state.workspace, request.placement, request.job_key)
    except TransitionError as exc:
        return Verdict(HOLD, f"the job's markers cannot be resolved now: {exc}")
    if current is None:
        return _no_job(state, request)
    if _applied_earlier(state, current, request):
        return Verdict(APPLIED, "it was applied before its claimed file could be removed")
    stop = _mismatch(current, request) or refusal(request.action, current.kind)
    if stop is not None:
        return Verdict(RETIRE, stop)
    frame = state.frame_or_none(current)
    if frame is None and current.name.ref is not None:
        return Verdict(RETIRE, "the job's current state frame cannot be read (run workspace fsck --repair)")
    try:
        return _ACTIONS[request.action](state, current, frame, request)
    except WorkspaceUnavailableError as exc:
        return Verdict(HOLD, str(exc))


def check_signature(workspace: Workspace, request: Request) -> Request | Verdict:
    """``request`` with its signature verified (or unsigned and admitted), or the verdict that stops it."""
    try:
        trust = parse_trust(read_format_document(workspace.root).get(TRUST_MEMBER))
    except WorkspaceError as exc:
        return Verdict(HOLD, f"the workspace's trust list cannot be read now: {exc}")
    except SignatureFormatError as exc:
        return Verdict(HOLD, f"format.json: {exc}; correct it there")
    stop = signature_refusal(request.document, request.operator_key, request.signature, trust)
    if stop is not None:
        return Verdict(QUARANTINE, stop)
    return request if request.operator_key is None else request.verified()


def _no_job(state: ManagerState, request: Request) -> Verdict:
    """No marker at the request's placement: a deleted job (retire) or one that never was (quarantine)."""
    key, placement = request.job_key, request.placement
    if _published_against_job(state, request):
        return Verdict(
            RETIRE,
            f"{JOB_NOT_FOUND}: job {key} no longer exists at {placement}; it was removed after the "
            "request was published",
        )
    return Verdict(QUARANTINE, f"it names job {key}, which does not exist at {placement}")


def _published_against_job(state: ManagerState, request: Request) -> bool:
    """Whether the request's expected record is a frame of its job, at its placement and generation."""
    if request.expected_generation == 0:
        return False  # the generation-0 marker names no frame (init)
    try:
        frame = state.workspace.reader.read(request.expected_record_ref)
    except WorkflowError:
        return False
    named = (frame.get("job_id"), frame.get("job_key"), frame.get("placement"), frame.get("state_generation"))
    return named == (request.job_id, request.job_key, request.placement, request.expected_generation)


def _mismatch(current: MarkerLocation, request: Request) -> str | None:
    name = current.name
    if name.generation != request.expected_generation:
        return (
            f"the job is {current.kind.value} at generation {name.generation}, not at the expected "
            f"generation {request.expected_generation}"
        )
    if name.ref_text != request.expected_record_ref:
        expected = request.expected_record_ref
        return f"the job's marker names record {name.ref_text}, not the expected {expected}"
    return None


def _applied_earlier(state: ManagerState, current: MarkerLocation, request: Request) -> bool:
    """Whether the frame at the expected generation + 1, on the job's chain, was written for this request."""
    gap = current.name.generation - request.expected_generation
    if not 1 <= gap <= APPLIED_LOOKBACK:
        return False
    ref: str | None = current.name.ref_text
    try:
        for _ in range(gap):
            assert ref is not None
            frame = state.workspace.reader.read(ref)
            if frame.get("state_generation") == request.expected_generation + 1:
                return frame.get("request_id") == request.request_id
            ref = frame.get("previous_record_ref")
            if not isinstance(ref, str):
                return False
    except WorkflowError:
        return False
    return False


def _moved(result: TransitionResult | None) -> Verdict:
    if result is None or result.won:
        return Verdict(APPLIED)
    now = result.current
    where = "its marker vanished" if now is None else f"it is now {now.kind.value} at generation"
    suffix = "" if now is None else f" {now.name.generation}"
    return Verdict(RETIRE, f"the job moved while the request was being applied: {where}{suffix}")


def _base(state: ManagerState, request: Request, reason: str) -> dict[str, Any]:
    return {**request.frame_members(), "manager_id": state.manager_id, "reason": reason}


# -- the actions ---------------------------------------------------------------------------------------
def _cancel_job(state: ManagerState, current: MarkerLocation, frame: Current, request: Request) -> Verdict:
    return _moved(_cancel.cancel(state, current, frame, request.frame_members()))


def _pause(state: ManagerState, current: MarkerLocation, frame: Current, request: Request) -> Verdict:
    pause = {"reason": request.reason or f"paused by {request.operator}"}
    paused = operator_paused(frame, pause, **_base(state, request, "operator_pause"))
    return _moved(state.move(current, paused, Trigger.PAUSE))


def _set_priority(state: ManagerState, current: MarkerLocation, frame: Current, request: Request) -> Verdict:
    moved = kept(
        current.kind, frame, priority=request.priority, **_base(state, request, "operator_set_priority")
    )
    return _moved(state.move(current, moved, Trigger.SET_PRIORITY))


def _continue(state: ManagerState, current: MarkerLocation, frame: Current, request: Request) -> Verdict:
    job, hazard = _guarded_job(state, current, request)
    if isinstance(job, Verdict):
        return job
    base = {**_base(state, request, "operator_continue"), **hazard}
    if frame is None or "activation_id" not in frame:
        ready = first_activation(job.document, job.digest, **base)  # paused before any registration
    else:
        verdict = check_retry(job.document, frame.counters)
        if verdict.code is not None:
            return Verdict(RETIRE, _budget_reason(verdict.code, verdict.message, "continue"))
        failed_with = frame.failure if current.kind is Kind.FAILED else None
        last = {} if failed_with is None else {"last_failure": failed_with}
        ready = another_attempt(frame, "manual_continue", unclean=False, **last, **base)
    return _moved(state.move(current, ready, Trigger.OPERATOR_CONTINUE))


def _override_step(state: ManagerState, current: MarkerLocation, frame: Current, request: Request) -> Verdict:
    job, hazard = _guarded_job(state, current, request)
    if isinstance(job, Verdict):
        return job
    assert request.step is not None  # parse_request requires it of override_step
    base = {**_base(state, request, "operator_override_step"), **hazard}
    if frame is None or "activation_id" not in frame:
        ready = first_activation(job.document, job.digest).with_members(
            step=request.step,
            activation_id=str(uuid.uuid4()),
            activation_reason="override_step",
            attempt_reason="override_step",
            **base,
        )
    else:
        verdict = check_advance(job.document, frame.counters)
        if verdict.code is not None:
            return Verdict(RETIRE, _budget_reason(verdict.code, verdict.message, "override_step"))
        # A new activation follows no join: what belonged to the old one (its join summary) stays there.
        ready = next_activation(frame, request.step, "override_step", **base)
    return _moved(state.move(current, ready, Trigger.OPERATOR_CONTINUE))


_ACTIONS: dict[str, Callable[[ManagerState, MarkerLocation, Current, Request], Verdict]] = {
    "cancel": _cancel_job,
    "continue": _continue,
    "override_step": _override_step,
    "pause": _pause,
    "set_priority": _set_priority,
}


def _budget_reason(code: str, message: str, action: str) -> str:
    text = f"the job's budgets refuse the {action}: {message} ({code})"
    if action == "continue":
        text += "; override_step starts a new activation instead"
    return text + ". Raising a budget by request is not supported by this version"


# -- the decided-join revival guard ----------------------------------------------------------------
def _guarded_job(
    state: ManagerState, current: MarkerLocation, request: Request
) -> tuple[LoadedJob | Verdict, dict[str, Any]]:
    """The job's definition and the hazard a forced revival accepts, or the verdict that stops it."""
    try:
        job = state.jobs.get(current)
        check_identity(current, job)
    except (InvalidDocumentError, WorkflowError) as exc:
        return Verdict(RETIRE, f"the job's definition cannot be used: {exc}"), {}
    guard = revival_guard(state, job, request.force)
    if isinstance(guard, Verdict):
        return guard, {}
    return job, ({} if guard is None else {"revival_hazard": guard})


def revival_guard(state: ManagerState, job: LoadedJob, force: bool) -> Verdict | dict[str, Any] | None:
    """``spec/01`` "Reviving a child a decided join consumed".

    ``None`` when no decided join of the job's parent observed it; the refusal (retire) without
    ``force``; with ``force`` the ``revival_hazard`` the new frame must record. Cost: one probe of the
    parent's finite state set at its recorded placement and one frame read, never a scan. A child whose
    job.json lacks the parent's placement probes nothing (the guard is advisory).
    """
    parent = job.document.get("parent")
    if not isinstance(parent, dict) or parent.get("workspace_id") != state.workspace.workspace_id:
        return None
    placement, key = parent.get("placement"), parent.get("job_key")
    if not isinstance(placement, str) or not isinstance(key, str):
        return None
    try:
        marker = probe_marker(state.workspace, placement, key)
    except TransitionError as exc:
        return Verdict(HOLD, f"the parent's markers cannot be resolved now: {exc}")
    if marker is None or marker.name.ref is None:
        return None
    frame = state.frame_or_none(marker)
    if frame is None:
        return Verdict(HOLD, f"the state frame of the parent {key} cannot be read now")
    observation = _observation_of(frame.join_summary, job.job_id, state.workspace.workspace_id)
    if observation is None:
        return None
    where = (
        f"the parent {key} at {placement} ({marker.kind.value}, generation {marker.name.generation}) "
        f"decided a join that observed this job {observation.get('kind')} at generation "
        f"{observation.get('state_generation')}"
    )
    if not force:
        return Verdict(
            RETIRE, f"{where}; continue the parent instead, or repeat the request with force to revive it"
        )
    log.warning("forced revival of %s: %s", job.job_id, where)
    return {
        "parent": {name: parent[name] for name in ("workspace_id", "job_id", "job_key", "placement")},
        "parent_kind": marker.kind.value,
        "parent_state_generation": marker.name.generation,
        "parent_record_ref": marker.name.ref_text,
        "observation": observation,
    }


def _observation_of(summary: object, job_id: str, workspace_id: str) -> dict[str, Any] | None:
    if not isinstance(summary, dict) or not isinstance(summary.get("observations"), list):
        return None
    for observation in summary["observations"]:
        if (
            isinstance(observation, dict)
            and observation.get("job_id") == job_id
            and observation.get("workspace_id", workspace_id) == workspace_id
        ):
            return observation
    return None
