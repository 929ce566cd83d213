"""Jobs in every state kind, reached by the legal transitions a manager makes, with realistic frames.

:func:`job_in` submits a job and moves its marker with the same engine calls the passes use
(registration, the claim frame, a launch frame naming a process identity, a committing frame embedding an
outcome, ...), so every frame on the chain is the kind a real run would leave. Nothing executes: a
``running`` job's recorded process is a made-up identity, on another host unless ``process`` says
otherwise. Requests are written the way any client may write them, straight into ``requests/ready/``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import SYSTEM_CLOCK, utc_timestamp
from httk.workflow.engine.core._frames import Counters, Frame, carried
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, probe_marker
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._state import ManagerConfig, ManagerState
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.engine.requests._documents import request_document
from httk.workflow.models import validator

from tests.conftest import minimal_job

OTHER_HOST = {
    "host": "elsewhere.invalid",
    "pid": 4242,
    "pgid": 4242,
    "start_ticks": 1,
    "boot_id": "not-this-boot",
    "pid_namespace": None,
}
"""A process identity no manager on this machine can verify."""

RUNNER_STEPS = ["prepare", "relax", "collect"]


def new_state(root: Path, config: ManagerConfig | None = None) -> ManagerState:
    """A manager's state for the workspace at ``root`` (no heartbeat, no loop)."""
    return ManagerState(attach(root), config or ManagerConfig(), SYSTEM_CLOCK)


def job_in(
    state: ManagerState,
    kind: Kind,
    *,
    job: Mapping[str, Any] | None = None,
    placement: str = "p",
    process: Mapping[str, Any] | None = None,
) -> MarkerLocation:
    """Submit ``job`` (default a minimal one) and move it to ``kind``; return its current marker."""
    ws = state.workspace
    [result] = submit_jobs(ws, [JobSpec(dict(job or minimal_job()), placement)])
    marker = result.marker
    if kind is Kind.SUBMITTED:
        return marker
    _launch.register(state, marker)
    marker = _current(ws, marker)
    path = _PATHS[kind]
    for step in path:
        marker = step(state, marker, process)
    assert marker.kind is kind, (marker.kind, kind)
    return marker


def _current(ws: Workspace, marker: MarkerLocation) -> MarkerLocation:
    found = probe_marker(ws, marker.placement, marker.job_key)
    assert found is not None
    return found


def _move(
    state: ManagerState, marker: MarkerLocation, kind: Kind, trigger: Trigger, members: Mapping[str, Any]
) -> MarkerLocation:
    result = state.move(marker, Frame(kind, members), trigger)
    assert result.won and result.current is not None
    return result.current


def frame_of(state: ManagerState, marker: MarkerLocation) -> Frame:
    frame = state.frame_or_none(marker)
    assert frame is not None
    return frame


def _claim(state: ManagerState, marker: MarkerLocation, _process: Any) -> MarkerLocation:
    claim = _launch.claim_frame(state, frame_of(state, marker), state.jobs.get(marker))
    return _move(state, marker, Kind.CLAIMED, Trigger.CLAIM, claim)


def _launch_it(state: ManagerState, marker: MarkerLocation, process: Any) -> MarkerLocation:
    frame = frame_of(state, marker)
    identity = dict(process or OTHER_HOST)
    workdir = str(state.workspace.payload_path(marker.placement, marker.job_key) / "run")
    members = {**_own(frame), "process": identity, "workdir": workdir, "reason": "launched"}
    return _move(state, marker, Kind.RUNNING, Trigger.LAUNCH, members)


def _own(frame: Mapping[str, Any]) -> dict[str, Any]:
    common = {"format", "format_version", "workspace_id", "job_id", "job_key", "placement"}
    common |= {"state_generation", "kind", "previous_record_ref", "created_at", "priority"}
    return {key: value for key, value in frame.items() if key not in common}


def _outcome(action: str, **members: Any) -> dict[str, Any]:
    return {"action": action, "runner_steps": RUNNER_STEPS, **members}


def _commit(outcome: dict[str, Any]) -> Any:
    def step(state: ManagerState, marker: MarkerLocation, _process: Any) -> MarkerLocation:
        frame = frame_of(state, marker)
        members = {
            **carried(frame),
            **Counters.of(frame).as_members(),
            "attempt_id": frame["attempt_id"],
            "manager_id": state.manager_id,
            "writer_id": state.writer_id,
            "outcome": outcome,
            "runner_steps": RUNNER_STEPS,
            "reason": "outcome",
        }
        return _move(state, marker, Kind.COMMITTING, Trigger.OUTCOME, members)

    return step


def _to(kind: Kind, **extra: Any) -> Any:
    def step(state: ManagerState, marker: MarkerLocation, _process: Any) -> MarkerLocation:
        frame = frame_of(state, marker)
        members = {**carried(frame), **Counters.of(frame).as_members(), "reason": kind.value, **extra}
        return _move(state, marker, kind, Trigger.COMMIT, members)

    return step


def _fence(state: ManagerState, marker: MarkerLocation, _process: Any) -> MarkerLocation:
    frame = frame_of(state, marker)
    cancellation = {
        "attempt_id": frame["attempt_id"],
        "previous_manager_id": frame["manager_id"],
        "control_dir": f".httk-attempt.{frame['attempt_id']}",
    }
    members = {**_own(frame), "cancellation": cancellation, "reason": "operator_cancel"}
    return _move(state, marker, Kind.CANCELLING, Trigger.CANCEL_FENCE, members)


def _cancelled(state: ManagerState, marker: MarkerLocation, _process: Any) -> MarkerLocation:
    members = {"cancellation": {"verified": "no_live_attempt"}, "reason": "operator_cancel"}
    return _move(state, marker, Kind.CANCELLED, Trigger.CANCEL, members)


JOIN = {
    "condition": "all_succeeded",
    "children": [
        {
            "workspace_id": str(uuid.uuid4()),
            "job_id": "01234567-89ab-cdef-0123-456789abcdef",
            "job_key": "01234567-89ab-cdef-0123-456789abcdef",
            "placement_hint": "kids",
        }
    ],
}
FAILURE = {"code": "test.broken", "message": "the step broke"}
_RUN = [_claim, _launch_it]
_PATHS: dict[Kind, list[Any]] = {
    Kind.READY: [],
    Kind.CLAIMED: [_claim],
    Kind.RUNNING: _RUN,
    Kind.COMMITTING: [*_RUN, _commit(_outcome("succeed"))],
    Kind.CANCELLING: [*_RUN, _fence],
    Kind.WAITING: [*_RUN, _commit(_outcome("wait", next_step="collect")), _to(Kind.WAITING, join=JOIN)],
    Kind.PAUSED: [*_RUN, _commit(_outcome("pause")), _to(Kind.PAUSED, pause={"reason": "look first"})],
    Kind.SUCCEEDED: [*_RUN, _commit(_outcome("succeed")), _to(Kind.SUCCEEDED)],
    Kind.FAILED: [*_RUN, _commit(_outcome("fail", failure=FAILURE)), _to(Kind.FAILED, failure=FAILURE)],
    Kind.CANCELLED: [_cancelled],
}

ALL_KINDS = (Kind.SUBMITTED, *_PATHS)


def write_request(ws: Workspace, marker: MarkerLocation, action: str, **members: Any) -> Path:
    """Write a D13 request against ``marker`` into ``requests/ready/`` (as any client may)."""
    document = request_document(
        request_id=str(uuid.uuid4()),
        job_key=marker.job_key,
        placement=marker.placement,
        expected_generation=marker.name.generation,
        expected_record_ref=marker.name.ref_text,
        action=action,
        operator=members.pop("operator", "ann"),
        reason=members.pop("reason", "testing"),
        created_at=utc_timestamp(SYSTEM_CLOCK.now()),
        priority=members.pop("priority", 7 if action == "set_priority" else None),
        step=members.pop("step", "relax" if action == "override_step" else None),
        force=members.pop("force", False),
    )
    document.update(members)
    assert validator("request").is_valid(document), list(validator("request").iter_errors(document))
    return write_raw(ws, f"{document['request_id']}.json", json.dumps(document).encode())


def write_raw(ws: Workspace, name: str, data: bytes) -> Path:
    ready = ws.requests_dir / "ready"
    staging = ws.requests_dir / "tmp" / name
    staging.write_bytes(data)
    os.rename(staging, ready / name)
    return ready / name


def chain(ws: Workspace, marker: MarkerLocation) -> list[dict[str, Any]]:
    """The job's frames, newest first."""
    frames: list[dict[str, Any]] = []
    ref: str | None = None if marker.name.ref is None else marker.name.ref_text
    while ref is not None:
        frame = ws.reader.read(ref)
        frames.append(frame)
        ref = frame["previous_record_ref"]
    return frames


def assert_frames_valid(frames: list[dict[str, Any]]) -> None:
    check = validator("state-frame")
    for frame in frames:
        errors = [error.message for error in check.iter_errors(frame)]
        assert not errors, (frame, errors)
