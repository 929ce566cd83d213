"""Helpers of the ``job why`` and ``precheck`` tests: managers that register the way a real one does.

The fixtures ``state`` and ``clock`` are imported by the test modules that use them.

:func:`register` publishes a manager's manifest and first heartbeat through the real
:class:`ManagerRecord`, at the time of the workspace's clock; a test makes it stale by diagnosing at a
later ``now`` (no sleeping), or makes it old by attaching the workspace with a clock set in the past.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, cast

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.manager._manager import ManagerIdentity, ManagerRecord
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.ops._why import WhyContext, diagnose
from httk.workflow.engine.ops._why_report import Diagnosis, Finding

from tests.joinkit import fresh_workspace, manager_state

LEASE = 30.0
"""The lease of the manager state the fixtures make (its claims record it)."""


@pytest.fixture(name="state")
def state_fixture(tmp_path: Path) -> ManagerState:
    """A manager's state (no loop, no heartbeat) in a fresh workspace on a manual clock."""
    clock = ManualClock()
    return manager_state(fresh_workspace(tmp_path / "ws", clock), clock, lease_seconds=LEASE)


@pytest.fixture(name="clock")
def clock_fixture(state: ManagerState) -> ManualClock:
    """The manual clock of ``state`` and of its workspace."""
    return cast(ManualClock, state.clock)


def register(ws: Workspace, manager_id: str | None = None, **identity: Any) -> ManagerRecord:
    """A manager record (manifest and heartbeat) as a manager writes it at start; ``identity`` overrides."""
    members: dict[str, Any] = {"pools": ("default",), "capabilities": (), "lease_seconds": 60.0}
    members.update(identity)
    record = ManagerRecord(ws, ManagerIdentity(manager_id=manager_id or str(uuid.uuid4()), **members), "w")
    record.create()
    return record


def why(ws: Workspace, marker: MarkerLocation, *, later: float = 0.0) -> Diagnosis:
    """The diagnosis of ``marker`` as read ``later`` seconds after the workspace clock's now."""
    from datetime import timedelta

    return diagnose(ws, marker, WhyContext.read(ws, now=ws.clock.now() + timedelta(seconds=later)))


def finding(diagnosis: Diagnosis, topic: str) -> Finding:
    """The first finding about ``topic`` (the test fails if there is none)."""
    found = [item for item in diagnosis.findings if item.topic == topic]
    assert found, (topic, diagnosis.lines())
    return found[0]


def topics(diagnosis: Diagnosis) -> list[str]:
    return [item.topic for item in diagnosis.findings]
