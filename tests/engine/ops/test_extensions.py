"""Enabling an extension against the managers' liveness, with the clock driven instead of slept.

The refusals through the real executable (a live manager, an unimplemented extension) are in
``tests/cli/test_extension_cmd.py``. What a process cannot stage on purpose is a manager starting in the
instant between the liveness check and the write: a clock that reads a day ahead for the first check
makes a live manager's heartbeat look expired once, which is the same world seen from the enabler.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from httk.workflow.engine import Manager, ManagerConfig, attach, enable_extension, init, list_extensions
from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.protocol import WorkspaceError


class FirstLookLate:
    """The system clock, except that the first reading of the time is one day late."""

    def __init__(self) -> None:
        self.readings = 0

    def monotonic(self) -> float:
        return SYSTEM_CLOCK.monotonic()

    def sleep(self, seconds: float) -> None:
        SYSTEM_CLOCK.sleep(seconds)

    def now(self) -> datetime:
        self.readings += 1
        return SYSTEM_CLOCK.now() + (timedelta(days=1) if self.readings == 1 else timedelta())


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A workspace with a manager that has published its heartbeat (and is not running its loop)."""
    root = tmp_path / "ws"
    init(root, durable=False).close()
    live = Manager(attach(root), ManagerConfig())
    live.start()
    try:
        yield root, live.manager_id
    finally:
        live.workspace.close()


def test_a_manager_live_only_after_the_check_is_returned_for_a_warning(manager: tuple[Path, str]) -> None:
    root, manager_id = manager
    with pytest.raises(WorkspaceError, match=f"while manager {manager_id} is live"):
        enable_extension(attach(root), "transactional-data-v1")

    changed, live = enable_extension(attach(root, clock=FirstLookLate()), "transactional-data-v1")

    assert changed and [view.manager_id for view in live] == [manager_id]
    assert attach(root).extensions == ("transactional-data-v1",)
    assert [view.name for view in list_extensions(attach(root)) if view.enabled] == ["transactional-data-v1"]
