"""Workspaces with detached-transfer-v1 and finished or queued jobs, for the transfer tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace, attach, init
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig

from tests.runners import publish_scripted_runner, run_bounded, scripted_job, submit

EXTENSION = "detached-transfer-v1"
SUCCEED = {"prepare": {"action": "succeed"}}


def transfer_workspace(path: Path, *, durable: bool = False) -> Workspace:
    return init(path, durable=durable, extensions=(EXTENSION,))


def run_manager(root: Path) -> RunSummary:
    """Run a manager on ``root`` until it is quiet (drained after the test deadline)."""
    return run_bounded(Manager(attach(root), ManagerConfig()))


def jobs_in(ws: Workspace, scratch: Path, count: int, placement: str = "p") -> list[dict[str, Any]]:
    """``count`` one-step jobs on the scripted store runner, submitted to ``ws`` at ``placement``."""
    runner = publish_scripted_runner(ws, scratch)
    jobs = [scripted_job(SUCCEED, runner) for _ in range(count)]
    for job in jobs:
        submit(ws, job, placement)
    return jobs
