"""What the engine really writes validates against the schemas, and every member it writes is described.

A full manager run — advances, a failure, a step's retry and pause, operator requests (continue,
set_priority, pause, cancel of a running attempt), a retired and a quarantined request and a ``job
delete`` fence — leaves its frames in the journal; every state frame found there must validate against
``state-frame.schema.json``, and against a *closed* copy of the schemas (``additionalProperties: false``
wherever a schema lists its properties), so a member the engine adds without describing it fails here.
Both writers of quarantine records (a manager's request pass, ``workspace fsck
--quarantine-unrepairable``) are held to ``quarantine.schema.json`` the same way.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from pathlib import Path
from typing import Any

from httk.workflow import models
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._journal import scan_segment
from httk.workflow.engine.core._workspace import Workspace, attach
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops._delete import delete_jobs, plan_delete
from httk.workflow.engine.requests._requests import publish_request
from httk.workflow.models._validation import build_registry, build_validator

from tests.engine.maintenance.test_fsck_repair import unrepairable_workspace
from tests.runners import (
    WAIT_SECONDS,
    current_marker,
    job_key,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)

GPU = {"pool": "gpu", "required_capabilities": []}
BROKEN = {"code": "app.broken", "message": "broken"}


def _closed(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("additionalProperties") is True and "properties" in node:
            node["additionalProperties"] = False
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)
    return node


@functools.cache
def closed_validator(name: str) -> Any:
    """A validator of schema ``name`` in which no object admits a member its schema does not list."""
    names = [path.name.removesuffix(".schema.json") for path in models.schema_path("common").parent.iterdir()]
    schemas = {other: _closed(copy.deepcopy(models.load_schema(other))) for other in names}
    return build_validator(schemas[name], build_registry(list(schemas.values())))


def assert_valid(name: str, document: dict[str, Any]) -> None:
    for check in (models.validator(name), closed_validator(name)):
        errors = [f"{list(error.absolute_path)}: {error.message}" for error in check.iter_errors(document)]
        assert errors == [], (document, errors)


def journal_frames(ws: Workspace) -> list[dict[str, Any]]:
    """Every state frame in the workspace's journal, orphans of lost races included."""
    frames: list[dict[str, Any]] = []
    for segment in sorted(ws.journal_dir.glob("*/*.hwj")):
        for scanned in scan_segment(segment):
            assert scanned.record is not None, (segment, scanned.problem)
            if scanned.record.get("format") == "httk-workflow-state":
                frames.append(scanned.record)
    return frames


def run(ws: Workspace) -> RunSummary:
    return Manager(ws.root, ManagerConfig(workers=4)).run()


def request(ws: Workspace, job: dict[str, Any], action: str, **members: Any) -> None:
    publish_request(ws, "p", job_key(job), action, operator="ann", reason=f"{action} it", **members)


def run_cancelling(ws: Workspace, job: dict[str, Any]) -> None:
    """Run a manager; once ``job`` runs, publish its cancel, which that manager fences and verifies."""
    manager = Manager(ws.root, ManagerConfig(workers=4))
    watchdog = threading.Timer(WAIT_SECONDS, manager.request_drain)
    thread = threading.Thread(target=manager.run)
    watchdog.start()
    thread.start()
    try:
        wait_until(lambda: current_marker(ws, job).kind.value == "running" or None, "the attempt to run")
        request(ws, job, "cancel")
    finally:
        thread.join()
        watchdog.cancel()


def test_every_frame_of_a_run_with_requests_and_a_cancellation_is_described(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    two_steps = scripted_job(
        {
            "prepare": {"action": "advance", "next_step": "collect", "runner_steps": ["prepare", "collect"]},
            "collect": {},
        },
        runner,
    )
    failing = scripted_job({"prepare": {"action": "fail", "failure": BROKEN}}, runner)
    pausing = scripted_job({"prepare": {"attempts": [{"action": "pause", "reason": "look"}, {}]}}, runner)
    retrying = scripted_job({"prepare": {"attempts": [{"action": "retry", "reason": "again"}, {}]}}, runner)
    endless = scripted_job({"prepare": {"wait_for": str(tmp_path / "never")}}, runner)
    queued = scripted_job({"prepare": {}}, runner, claim=GPU)
    doomed = scripted_job({"prepare": {}}, runner, claim=GPU)
    for job in (two_steps, failing, pausing, retrying, endless, queued, doomed):
        submit(ws, job)

    run_cancelling(ws, endless)
    request(ws, failing, "continue")
    request(ws, pausing, "set_priority", priority=100)
    request(ws, queued, "pause")
    request(ws, failing, "set_priority", priority=300)  # one of the two applies, the other is retired
    (ws.requests_dir / "ready" / "not-a-request.json").write_text("{")
    run(ws)
    request(ws, pausing, "continue")
    run(ws)
    manual = attach(ws.root, clock=ManualClock())
    [deleted] = delete_jobs(manual, [plan_delete(manual, current_marker(manual, doomed))], operator="ann")
    manual.close()

    assert deleted.error is None
    finals = [current_marker(ws, job).kind.value for job in (two_steps, failing, pausing, retrying, endless)]
    assert finals == ["succeeded", "failed", "succeeded", "succeeded", "cancelled"]
    assert current_marker(ws, queued).kind.value == "paused"
    assert len(list((ws.requests_dir / "retired").glob("*.retirement"))) == 1
    frames = journal_frames(ws)
    reasons = {frame["reason"] for frame in frames}
    assert {"advance", "retry", "pause", "failure", "operator_continue", "operator_set_priority"} <= reasons
    assert {"operator_pause", "operator_cancel", "cancel_verified", "operator_delete"} <= reasons
    for frame in frames:
        assert_valid("state-frame", frame)
        if frame["kind"] == "committing" and frame["outcome"] is not None:
            assert models.validator("outcome").is_valid(frame["outcome"]), frame["outcome"]
    [quarantined] = ws.quarantine_dir.glob("*.quarantine")
    assert_valid("quarantine", json.loads(quarantined.read_text()))


def test_fsck_quarantine_records_are_described(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    unrepairable_workspace(root)

    fsck(attach(root, clock=ManualClock()), repair=True, quarantine_unrepairable=True)

    records = sorted((root / ".httk-workflow" / "quarantine").glob("*.quarantine"))
    assert len(records) == 2  # a marker whose only frame is damaged, and a stray file where markers live
    for path in records:
        assert_valid("quarantine", json.loads(path.read_text()))
