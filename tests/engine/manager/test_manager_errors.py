"""An error the manager cannot handle stops it, and its log says so before the traceback propagates."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, init
from httk.workflow.engine.manager import _manager
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig, ManagerState
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job


def break_registration(monkeypatch: pytest.MonkeyPatch, broken: _manager.Handler) -> None:
    """Replace the registration pass's handler (the pass table holds the handlers themselves)."""
    passes = tuple((kind, broken if kind is Kind.SUBMITTED else h) for kind, h in _manager.PASSES)
    monkeypatch.setattr(_manager, "PASSES", passes)


def test_an_unexpected_error_is_logged_then_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ws = init(tmp_path / "ws", durable=False)
    submit_jobs(ws, [JobSpec(minimal_job(), "p")])

    def broken(state: ManagerState, marker: MarkerLocation) -> bool:
        raise RuntimeError("registration exploded")

    break_registration(monkeypatch, broken)
    manager = Manager(ws.root, ManagerConfig(workers=1))
    with (
        caplog.at_level(logging.ERROR, "httk.workflow.manager"),
        pytest.raises(RuntimeError, match="exploded"),
    ):
        manager.run()
    [record] = [r for r in caplog.records if "unexpected error" in r.getMessage()]
    assert manager.manager_id in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError


def test_the_workspace_is_closed_after_an_unexpected_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = init(tmp_path / "ws", durable=False)
    submit_jobs(ws, [JobSpec(minimal_job(), "p")])

    def broken(state: ManagerState, marker: MarkerLocation) -> bool:
        state.workspace.journal()  # the writer exists (as it would after any transition)
        raise RuntimeError("registration exploded")

    break_registration(monkeypatch, broken)
    manager = Manager(ws.root, ManagerConfig(workers=1))
    closed: list[bool] = []
    real_close = manager.workspace.close

    def close() -> None:
        closed.append(True)
        real_close()

    monkeypatch.setattr(manager.workspace, "close", close)
    with pytest.raises(RuntimeError, match="exploded"):
        manager.run()
    assert closed == [True]
