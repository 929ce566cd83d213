"""Building children, joins and published spawn sets directly, for the tests of children and joins.

Markers are driven through the real transition function (:func:`move_marker`) with hand-made frames, so
a test reaches ``running``, ``waiting`` or a terminal child state in microseconds and without a runner
process. Child bundles are written by hand exactly as docs/outcome-documents.md lays them out, so the
engine's validation is tested apart from the SDKs (which have their own byte tests).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._jobs import LoadedJob, load_job, read_frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init, probe_marker
from httk.workflow.engine.manager._launch import claim_frame, register
from httk.workflow.engine.manager._state import ManagerConfig, ManagerState
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job

PARENT_PLACEMENT = "proj/p"
RUNNER = {"backend": "path", "path": "files/runner", "arguments": []}


def manager_state(ws: Workspace, clock: ManualClock | None = None, **config: Any) -> ManagerState:
    """A manager's shared state without a running loop (no heartbeat, no journal writer yet)."""
    return ManagerState(ws, ManagerConfig(**config), clock or ManualClock())


def fresh_workspace(path: Path, clock: ManualClock | None = None) -> Workspace:
    init(path, durable=False).close()
    return attach(path, clock=clock or ManualClock())


@pytest.fixture(name="ws")
def ws_fixture(tmp_path: Path) -> Iterator[Workspace]:
    """A fresh non-durable workspace on a manual clock, closed afterwards."""
    workspace = fresh_workspace(tmp_path / "ws")
    yield workspace
    workspace.close()


@pytest.fixture(name="state")
def state_fixture(ws: Workspace) -> ManagerState:
    """A manager's shared state on the ``ws`` fixture."""
    return manager_state(ws)


def current(ws: Workspace, placement: str, key: str) -> MarkerLocation:
    marker = probe_marker(ws, placement, key)
    assert marker is not None, f"{key} has no marker at {placement}"
    return marker


def frame_of(ws: Workspace, marker: MarkerLocation) -> Frame:
    frame = read_frame(ws, marker)
    assert frame is not None
    return frame


# -- jobs driven to a state ------------------------------------------------------------------------
def submit_job(ws: Workspace, placement: str, **overrides: Any) -> tuple[dict[str, Any], str]:
    """Submit a job (no runner needed: nothing runs it); return its document and job key."""
    job = minimal_job(runner=dict(RUNNER), **overrides)
    [result] = submit_jobs(
        ws, [JobSpec(job, placement, {"files/runner": b"#!/bin/sh\n"}, frozenset({"files/runner"}))]
    )
    return job, result.job_key


def to_running(state: ManagerState, placement: str, key: str) -> tuple[MarkerLocation, Frame]:
    """Register, claim and 'launch' a submitted job (no process); create its attempt control dir."""
    ws = state.workspace
    register(state, current(ws, placement, key))
    ready = current(ws, placement, key)
    job = state.jobs.get(ready)
    claim = claim_frame(state, frame_of(ws, ready), job)
    claimed = state.move(ready, Frame(Kind.CLAIMED, claim), Trigger.CLAIM).current
    assert claimed is not None
    workdir = job.payload_dir / "run"
    running = Frame(Kind.RUNNING, {**claim, "workdir": str(workdir.absolute()), "reason": "launched"})
    result = state.move(claimed, running, Trigger.LAUNCH)
    assert result.won and result.current is not None
    control_dir(job, running).mkdir()
    workdir.mkdir(exist_ok=True)
    return result.current, running


def control_dir(job: LoadedJob, frame: Mapping[str, Any]) -> Path:
    return job.payload_dir / f".httk-attempt.{frame['attempt_id']}"


def make_child(
    state: ManagerState,
    placement: str,
    kind: Kind,
    *,
    failure: Mapping[str, Any] | None = None,
    tag: str = "c",
) -> dict[str, Any]:
    """A job at ``placement`` driven to ``kind`` by real transitions; its join child member (with a label)."""
    ws = state.workspace
    job, key = submit_job(ws, placement, tag=tag)
    if kind is Kind.READY:
        register(state, current(ws, placement, key))
    elif kind is not Kind.SUBMITTED:
        marker, frame = to_running(state, placement, key)
        if kind is Kind.FAILED:
            members = {**frame, "failure": dict(failure or {"code": "test.broken", "message": "it broke"})}
            state.move(marker, Frame(Kind.FAILED, {**members, "reason": "failure"}), Trigger.FAILURE)
        elif kind is Kind.SUCCEEDED:
            committing = state.move(
                marker, Frame(Kind.COMMITTING, {**frame, "reason": "outcome"}), Trigger.OUTCOME
            )
            assert committing.current is not None
            state.move(
                committing.current, Frame(Kind.SUCCEEDED, {**frame, "reason": "succeed"}), Trigger.COMMIT
            )
        elif kind is Kind.CANCELLED:
            state.move(marker, Frame(Kind.CANCELLED, {**frame, "reason": "cancel"}), Trigger.CANCEL)
        else:
            assert kind is Kind.RUNNING, kind
    return {
        "workspace_id": ws.workspace_id,
        "job_id": job["id"],
        "job_key": key,
        "placement_hint": placement,
        "label": f"{tag}-{job['id'][:8]}",
    }


def waiting_parent(
    state: ManagerState,
    join: Mapping[str, Any],
    *,
    next_step: str = "gather",
    first_unresolved_at: str | None = None,
    **job_overrides: Any,
) -> tuple[MarkerLocation, str]:
    """A parent driven to ``waiting`` on ``join`` (through committing, as a wait commit leaves it)."""
    ws = state.workspace
    _job, key = submit_job(ws, PARENT_PLACEMENT, **job_overrides)
    marker, frame = to_running(state, PARENT_PLACEMENT, key)
    committing = state.move(
        marker, Frame(Kind.COMMITTING, {**frame, "reason": "outcome"}), Trigger.OUTCOME
    ).current
    assert committing is not None
    members = {
        **{
            k: frame[k]
            for k in ("step", "activation_id", "activation_reason", "data_generation", "resources")
        },
        "activation_ordinal": frame["activation_ordinal"],
        "attempt_ordinal": frame["attempt_ordinal"],
        "total_attempts": frame["total_attempts"],
        "join": dict(join),
        "next_step": next_step,
        "first_unresolved_at": first_unresolved_at,
        "reason": "wait",
    }
    waiting = state.move(committing, Frame(Kind.WAITING, members), Trigger.COMMIT).current
    assert waiting is not None
    return waiting, key


# -- published outcomes with child bundles ---------------------------------------------------------
@dataclass
class Bundle:
    """One child bundle of a published outcome, as a test wants it (mutable, to inject defects)."""

    label: str
    placement: str
    job: dict[str, Any]
    entry: dict[str, Any]
    directory: str  # the bundle directory name below children/jobs/
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.job['tag']}--{self.job['id']}"


@dataclass
class Publication:
    """A parent in ``running`` with its attempt control directory, ready to receive an outcome."""

    state: ManagerState
    marker: MarkerLocation
    frame: Frame
    job: LoadedJob
    key: str

    @property
    def control(self) -> Path:
        return control_dir(self.job, self.frame)

    def parent_reference(self, spawn_id: str) -> dict[str, Any]:
        return {
            "workspace_id": self.state.workspace.workspace_id,
            "job_id": self.marker.job_id,
            "job_key": self.key,
            "placement": PARENT_PLACEMENT,
            "activation_id": self.frame["activation_id"],
            "spawn_id": spawn_id,
        }

    def bundle(self, label: str, placement: str | None = None, step: str = "work") -> Bundle:
        job_id, spawn_id = str(uuid.uuid4()), str(uuid.uuid4())
        placement = placement or f"{PARENT_PLACEMENT}/{self.key}.children/0"
        job = minimal_job(
            id=job_id,
            tag=label,
            initial_step=step,
            runner=dict(RUNNER),
            parent=self.parent_reference(spawn_id),
        )
        entry = {
            "workspace_id": self.state.workspace.workspace_id,
            "job_id": job_id,
            "job_key": f"{label}--{job_id}",
            "label": label,
            "placement": placement,
            "spawn_id": spawn_id,
        }
        return Bundle(label, placement, job, entry, f"{label}--{job_id}", {"files/runner": b"#!/bin/sh\n"})

    def outcome(self, action: str, **members: Any) -> dict[str, Any]:
        return {
            "format": "httk-workflow-outcome",
            "format_version": 1,
            "job_id": self.marker.job_id,
            "activation_id": self.frame["activation_id"],
            "attempt_id": self.frame["attempt_id"],
            "action": action,
            **members,
        }

    def publish(
        self,
        outcome: Mapping[str, Any],
        bundles: list[Bundle] | None = None,
        *,
        spawn: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write ``outcome.ready/`` (outcome.json, spawn.json and the bundles); return the outcome."""
        ready = self.control / "outcome.ready"
        ready.mkdir()
        (ready / "outcome.json").write_text(json.dumps(outcome))
        if bundles is not None:
            jobs = ready / "children" / "jobs"
            jobs.mkdir(parents=True)
            document = spawn or {
                "format": "httk-workflow-spawn",
                "format_version": 1,
                "children": [bundle.entry for bundle in bundles],
            }
            (ready / "children" / "spawn.json").write_text(json.dumps(document))
            for bundle in bundles:
                directory = jobs / bundle.directory
                directory.mkdir()
                (directory / "job.json").write_text(json.dumps(bundle.job))
                for relative, content in bundle.files.items():
                    (directory / relative).parent.mkdir(parents=True, exist_ok=True)
                    (directory / relative).write_bytes(content)
        return dict(outcome)


def running_parent(state: ManagerState, **job_overrides: Any) -> Publication:
    ws = state.workspace
    _job, key = submit_job(ws, PARENT_PLACEMENT, **job_overrides)
    marker, frame = to_running(state, PARENT_PLACEMENT, key)
    return Publication(state, marker, frame, load_job(ws, PARENT_PLACEMENT, key), key)


def join_of(bundles: list[Bundle], condition: str = "all_succeeded", **extra: Any) -> dict[str, Any]:
    return {
        "children": [
            {
                "workspace_id": bundle.entry["workspace_id"],
                "job_id": bundle.job["id"],
                "job_key": bundle.key,
                "placement_hint": bundle.placement,
            }
            for bundle in bundles
        ],
        "condition": condition,
        **extra,
    }


def all_markers(ws: Workspace) -> Iterator[tuple[str, Path]]:
    """(job key, marker path) of every regular file below state/."""
    for path in (ws.control / "state").rglob("*"):
        if path.is_file():
            yield path.name.rsplit(".", 3)[0], path


def children(state: ManagerState, kinds: list[Kind], placement: str = "proj/kids") -> list[dict[str, Any]]:
    """One child per kind at ``placement``, tagged c0, c1, ...; their join child members."""
    return [make_child(state, placement, kind, tag=f"c{index}") for index, kind in enumerate(kinds)]


def missing_child(ws: Workspace) -> dict[str, Any]:
    """A join child member naming a job that exists nowhere."""
    job_id = "0f0f0f0f-0000-4000-8000-00000000abcd"
    return {
        "workspace_id": ws.workspace_id,
        "job_id": job_id,
        "job_key": f"ghost--{job_id}",
        "placement_hint": "proj/nowhere",
        "label": "ghost",
    }
