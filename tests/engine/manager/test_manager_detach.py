"""An acknowledged detach (``workspace detach``) honoured by the library's ``Manager.run`` and ``job debug``.

``manager run`` refuses a workspace whose ``.httk-workflow/detach.json`` is there and, serving one when
the request arrives, finishes what it holds, acknowledges and stops (``tests/cli/test_manager_watch.py``).
The same must hold for a :class:`Manager` run from Python and for the private manager of ``job debug``:
real runner processes, a held attempt released by a file, no timing assumptions.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, attach
from httk.workflow.engine.manager._detach import detach_quiescence, request_detach
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops._debug import DebugOptions, debug_job
from httk.workflow.protocol import WorkspaceError

from tests.engine.manager.test_manager_e2e import kill_group, kill_manager, payload, start_manager
from tests.runners import (
    WAIT_SECONDS,
    current_marker,
    frame_chain,
    job_key,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)


def _held_job(ws: Workspace, runner: dict[str, Any], release: Path) -> dict[str, Any]:
    """A job submitted to ``ws`` whose attempt runs until ``release`` exists."""
    job = scripted_job({"prepare": {"action": "succeed", "wait_for": str(release)}}, runner)
    submit(ws, job)
    return job


def _tree(root: Path) -> list[str]:
    """Every path below ``root``: nothing published, submitted or started may appear."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def _kind(ws: Workspace, job: dict[str, Any]) -> str:
    return current_marker(attach(ws.root, writable=False), job).kind.value


def _logged(ws: Workspace, text: str) -> bool:
    return any(text in path.read_text() for path in ws.managers_dir.glob("*/log"))


def _acknowledgements(ws: Workspace) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(ws.managers_dir.glob("*/detached.json"))]


def test_a_library_manager_finishes_what_it_holds_then_acknowledges_and_stops(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    release = tmp_path / "release"
    held = _held_job(ws, runner, release)
    manager = Manager(attach(ws.root), ManagerConfig(idle=True))
    summaries: list[RunSummary] = []
    thread = threading.Thread(target=lambda: summaries.append(manager.run(rescan_interval=0.05)))
    watchdog = threading.Timer(WAIT_SECONDS, manager.request_drain)
    watchdog.start()
    thread.start()
    try:
        wait_until(lambda: _kind(ws, held) == "running" or None, "the held job to run")
        detach_id = request_detach(attach(ws.root))
        manager_log = ws.managers_dir / manager.manager_id
        late = scripted_job({"prepare": {"action": "succeed"}}, runner)
        submit(ws, late)  # after the request: never claimed by a detaching manager
        assert not detach_quiescence(attach(ws.root), detach_id).quiescent
        assert not (manager_log / "detached.json").exists()  # it still holds the attempt
        release.touch()
        thread.join(WAIT_SECONDS)
    finally:
        watchdog.cancel()
    assert not thread.is_alive()
    [summary] = summaries
    assert summary.exit_reason == "detached"
    assert _kind(ws, held) == "succeeded" and _kind(ws, late) in ("submitted", "ready")
    assert [(a["manager_id"], a["detach_id"]) for a in _acknowledgements(ws)] == [
        (manager.manager_id, detach_id)
    ]
    assert detach_quiescence(attach(ws.root), detach_id).quiescent


def test_a_detaching_manager_recovers_what_a_dead_manager_left_running_before_it_acknowledges(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    """A manager killed with an attempt running leaves its marker running, and no manager is waited
    for that is not live, but the marker is: only a recovery settles it. The live manager asked to
    detach claims nothing more, yet recovers it (the dead manager's process is gone: DECISIONS D17)
    before it acknowledges, so the detach is quiescent instead of held up forever."""
    never = tmp_path / "never-created"
    steps = {"prepare": {"attempts": [{"wait_for": str(never)}, {"action": "succeed"}]}}
    job = scripted_job(steps, runner, retry_on=["lease_lost"])
    submit(ws, job)
    dead = start_manager(ws)
    try:
        wait_until(lambda: _kind(ws, job) == "running" or None, "the attempt to run")
        kill_manager(dead)
        manager = Manager(attach(ws.root), ManagerConfig(idle=True))
        manager.start()
        detach_id = request_detach(attach(ws.root))
        watchdog = threading.Timer(WAIT_SECONDS, manager.request_drain)
        watchdog.start()
        try:
            summary = manager.run(rescan_interval=0.0)
        finally:
            watchdog.cancel()
    finally:
        dead.kill()
        kill_group(payload(ws, job))
    assert summary.exit_reason == "detached"
    marker = current_marker(attach(ws.root, writable=False), job)
    assert marker.kind.value == "ready"  # retried by the recovery, and not claimed while detaching
    frame = _last_frame(ws, job)
    assert (frame["manager_id"], frame["attempt_reason"]) == (manager.manager_id, "lease_lost")
    assert frame["takeover"]["rule"] == "process_gone"
    state = detach_quiescence(attach(ws.root), detach_id)
    assert (state.quiescent, state.held, state.acknowledged) == (True, {}, (manager.manager_id,))


def _last_frame(ws: Workspace, job: dict[str, Any]) -> dict[str, Any]:
    return frame_chain(attach(ws.root, writable=False), current_marker(attach(ws.root, writable=False), job))[
        -1
    ]


def test_a_library_manager_refuses_a_detached_workspace_before_publishing_anything(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    submit(ws, scripted_job({"prepare": {"action": "succeed"}}, runner))
    request_detach(ws)
    before = _tree(ws.control)

    with pytest.raises(WorkspaceError, match="this workspace is detached"):
        Manager(attach(ws.root), ManagerConfig()).run()

    assert _tree(ws.control) == before


def test_job_debug_refuses_a_detached_workspace_and_submits_nothing(ws: Workspace, tmp_path: Path) -> None:
    request_detach(ws)
    payload = tmp_path / "payload"
    payload.mkdir()
    (payload / "job.json").write_text("{}")  # never read: the refusal comes first
    before = _tree(ws.control)

    with pytest.raises(WorkspaceError, match="this workspace is detached"):
        debug_job(ws.root, str(payload), DebugOptions(), echo=lambda _line: None)

    assert _tree(ws.control) == before


def test_job_debug_stops_when_a_detach_arrives_after_its_manager_acknowledged(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    release = tmp_path / "release"
    job = _held_job(ws, runner, release)
    requested: list[str] = []

    def detach_while_it_runs() -> None:
        wait_until(lambda: _kind(ws, job) == "running" or None, "the debugged job to run")
        requested.append(request_detach(attach(ws.root)))
        wait_until(lambda: _logged(ws, "detach requested"), "the private manager to see the request")
        release.touch()

    helper = threading.Thread(target=detach_while_it_runs)
    watchdog = threading.Timer(WAIT_SECONDS, os.kill, (os.getpid(), signal.SIGINT))
    helper.start()
    watchdog.start()
    lines: list[str] = []
    try:
        result = debug_job(ws.root, job_key(job), DebugOptions(), echo=lines.append)
    finally:
        watchdog.cancel()
        helper.join(WAIT_SECONDS)

    assert "[debug] stopped: the workspace is being detached (the private manager acknowledged)" in lines
    assert result.interrupted and _kind(ws, job) == "succeeded"
    [acknowledgement] = _acknowledgements(ws)
    assert acknowledgement["detach_id"] == requested[0]
    assert detach_quiescence(attach(ws.root), requested[0]).quiescent
