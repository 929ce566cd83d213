"""A scheduling pass that uses half of the manager's lease is a warning, nine tenths an error (spec/03)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig, ManagerState

from tests.runners import (
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    ws_fixture,  # noqa: F401 (a fixture)
)


@pytest.mark.parametrize(
    ("seconds", "level"), [(4.9, None), (5.0, logging.WARNING), (8.9, logging.WARNING), (9.0, logging.ERROR)]
)
def test_a_slow_pass_is_logged_by_its_share_of_the_lease(
    ws: Workspace,
    runner: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    seconds: float,
    level: int | None,
) -> None:
    submit(ws, scripted_job({"prepare": {}}, runner))
    clock = ManualClock()
    manager = Manager(ws, ManagerConfig(lease_seconds=10.0), clock=clock)

    def slow(_state: ManagerState, _marker: MarkerLocation) -> bool:
        clock.advance(seconds)
        return False

    with caplog.at_level(logging.INFO, logger="httk.workflow.manager"):
        manager._pass(Kind.SUBMITTED, slow)

    slow_lines = [r for r in caplog.records if "pass took" in r.getMessage()]
    if level is None:
        assert slow_lines == []
    else:
        (record,) = slow_lines
        assert record.levelno == level
        assert record.getMessage().startswith(f"the submitted pass took {seconds:.1f} s, ")
        assert "of the 10 s lease: raise lease_seconds, split the workspace" in record.getMessage()
