"""``httk workflow run`` in this process: the log routing a run installs is gone, and its file closed, when
the run ends — after a normal stop, twice in a row, and after an error.

A run that left its handlers behind kept its ``--log-file`` open (pytest reports the unclosed file when a
later run drops the handler) and kept writing the next run's records to the previous run's file and to a
captured stream that no longer exists.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager._run import run_manager
from httk.workflow.engine.manager._state import ManagerConfig

from tests.cli.conftest import Invoke
from tests.runners import (
    current_marker,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    ws_fixture,  # noqa: F401 (a fixture)
)

LOGGER = logging.getLogger("httk.workflow")


@pytest.fixture
def routing() -> Iterator[tuple[list[logging.Handler], int, bool]]:
    """The ``httk.workflow`` logger's routing before the test, restored after it whatever happened."""
    saved = (list(LOGGER.handlers), LOGGER.level, LOGGER.propagate)
    yield saved
    for handler in LOGGER.handlers:
        if handler not in saved[0]:
            handler.close()
    LOGGER.handlers[:] = saved[0]
    LOGGER.setLevel(saved[1])
    LOGGER.propagate = saved[2]


def open_files() -> set[str]:
    """What this process's file descriptors point at."""
    found: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # the descriptor listing the directory itself, closed meanwhile
    return found


def current_routing() -> tuple[list[logging.Handler], int, bool]:
    return list(LOGGER.handlers), LOGGER.level, LOGGER.propagate


def test_two_runs_in_process_leave_no_handler_and_no_open_log_file(
    invoke: Invoke,
    ws: Workspace,
    runner: dict[str, Any],
    tmp_path: Path,
    routing: tuple[list[logging.Handler], int, bool],
) -> None:
    logs: dict[Path, str] = {}
    for run in ("first", "second"):
        job = scripted_job({"prepare": {}}, runner)
        submit(ws, job)
        log_file = tmp_path / f"{run}.log"

        result = invoke("workflow", "run", ws.root, "--log-file", log_file)

        assert result.exit_code == 0, result.output
        assert current_marker(ws, job).kind.value == "succeeded"
        assert current_routing() == routing
        assert str(log_file) not in open_files()
        logs[log_file] = log_file.read_text()
        assert f"claimed {job['tag']}--{job['id']}" in logs[log_file]
    assert {path: path.read_text() for path in logs} == logs  # the second run wrote nothing to the first log


def test_a_run_that_fails_after_routing_its_log_still_removes_and_closes_it(
    ws: Workspace, tmp_path: Path, routing: tuple[list[logging.Handler], int, bool]
) -> None:
    log_file = tmp_path / "failing.log"

    def echo(line: str) -> None:
        raise OSError(f"standard output is gone (writing {line[:20]!r})")

    with pytest.raises(OSError, match="standard output is gone"):
        run_manager(ws.root, ManagerConfig(), log_file=log_file, echo=echo)

    assert current_routing() == routing
    assert str(log_file) not in open_files()
