"""``manager run --gc-interval``: a real manager collects at the end of a tick, and nothing it needs goes.

The manager is the installed ``httk`` executable (or, where a fault must be injected, a :class:`Manager`
in this process); its job is the scripted runner of ``tests/runners.py``. The workspace carries garbage
of several categories and the most aggressive retention policy.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._journal import scan_segment
from httk.workflow.engine.core._workspace import Workspace, attach, init
from httk.workflow.engine.maintenance import _gc
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops._history import job_history
from httk.workflow.protocol import RecordRef

from tests.engine.maintenance.test_gc import AGGRESSIVE, gc_frames, make_old, make_old_tree, set_retention
from tests.runners import current_marker, publish_scripted_runner, scripted_job, submit

BIN = Path(sys.executable).parent


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = init(tmp_path / "ws", durable=False)
    yield workspace
    workspace.close()


@pytest.fixture
def job(ws: Workspace, tmp_path: Path) -> dict[str, Any]:
    """A job that succeeds, submitted, with garbage beside it and every retention limit at zero."""
    job = scripted_job({"prepare": {"stdout": "working\n"}}, publish_scripted_runner(ws, tmp_path))
    submit(ws, job)
    (ws.tmp_dir / "interrupted-submission").mkdir()
    make_old(ws.tmp_dir / "interrupted-submission", 2)
    dead = ws.managers_dir / "0d1e0d1e-0000-4000-8000-000000000000"
    dead.mkdir()
    (dead / "manager.json").write_text(json.dumps({"writer_id": "0d1e0d1e-0000-4000-8000-0000000000ff"}))
    make_old_tree(dead)
    set_retention(ws, **AGGRESSIVE)
    return job


def run_manager(ws: Workspace, *options: str) -> str:
    """Run ``httk workflow manager run`` until it is idle; return its manager id."""
    result = subprocess.run(
        [str(BIN / "httk"), "workflow", "manager", "run", str(ws.root), "--json", *options],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    manager_id: str = json.loads(result.stdout.splitlines()[-1])["manager_id"]
    return manager_id


def test_a_manager_with_gc_interval_collects_at_a_ticks_end_and_keeps_what_it_needs(
    ws: Workspace, job: dict[str, Any]
) -> None:
    manager_id = run_manager(ws, "--gc-interval", "3600")
    marker = current_marker(ws, job)
    assert marker.kind.value == "succeeded"
    assert not (ws.tmp_dir / "interrupted-submission").exists()
    assert not (ws.managers_dir / "0d1e0d1e-0000-4000-8000-000000000000").exists()
    own = ws.managers_dir / manager_id
    assert (own / "manager.json").exists() and (own / "heartbeat.json").exists()
    writer = json.loads((own / "manager.json").read_text())["writer_id"]
    # One collection (the interval is an hour), in the manager's own writer, between the job's frames:
    # the job was running when it happened, and its history reads straight past it.
    [frame] = gc_frames(ws)
    assert frame["categories"]["tmp_entries"]["removed"] == 1
    assert frame["categories"]["manager_directory"]["removed"] == 1
    history = job_history(attach(ws.root, writable=False), marker)
    assert [entry["kind"] for entry in history] == ["ready", "claimed", "running", "committing", "succeeded"]
    assert all("problem" not in entry for entry in history)
    refs = [RecordRef.parse(entry["record_ref"]) for entry in history]
    assert {(ref.writer, ref.segment) for ref in refs} == {(writer, 0)}
    assert [path.name for path in (ws.journal_dir / writer).iterdir()] == ["0.hwj"]
    order = [record.get("kind", "gc") for record in records(ws.journal_dir / writer / "0.hwj")]
    assert order.index("running") < order.index("gc") < order.index("committing")


def records(segment: Path) -> list[dict[str, Any]]:
    return [scanned.record for scanned in scan_segment(segment) if scanned.record is not None]


def test_without_gc_interval_a_manager_collects_nothing(ws: Workspace, job: dict[str, Any]) -> None:
    run_manager(ws)
    assert current_marker(ws, job).kind.value == "succeeded"
    assert (ws.tmp_dir / "interrupted-submission").exists()
    assert gc_frames(ws) == []


def test_a_failed_collection_is_logged_and_scheduling_goes_on(
    ws: Workspace, job: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise OSError(5, "Input/output error", str(ws.journal_dir))

    monkeypatch.setattr(_gc, "collect_garbage", broken)  # the fault stands in for a failing filesystem
    manager = Manager(ws, ManagerConfig(gc_interval=3600.0))
    with caplog.at_level(logging.ERROR, logger="httk.workflow.manager"):
        summary = manager.run()
    assert summary.census.as_dict()["kinds"] == {"succeeded": 1}
    assert current_marker(ws, job).kind.value == "succeeded"
    assert manager.gc.failures == 1 and manager.gc.reports == []
    assert "garbage collection failed; scheduling goes on" in caplog.text
