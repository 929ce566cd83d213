"""A pending request whose job was deleted after it was published: retired (``job_not_found``), never
quarantined as malformed input.

End to end: the job reaches its state under a real manager, the request is published by the client code,
``job delete`` removes the job, and a second real manager decides the request. A request naming a job
that never existed where it says is still malformed input (``spec/01``: quarantined, not retired).
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._workspace import Workspace, attach, probe_marker
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops._delete import delete_jobs, plan_delete
from httk.workflow.engine.requests._requests import publish_request
from httk.workflow.models import validator

from tests.runners import (
    current_marker,
    job_key,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    ws_fixture,  # noqa: F401 (a fixture)
)

FAIL = {"prepare": {"action": "fail", "failure": {"code": "app.broken", "message": "broken"}}}
GPU = {"pool": "gpu", "required_capabilities": []}


def run(ws: Workspace) -> RunSummary:
    return Manager(ws.root, ManagerConfig()).run()


def delete(ws: Workspace, job: dict[str, Any]) -> None:
    """``job delete`` on a workspace whose clock is manual, so the linger after a fence costs no time."""
    workspace = attach(ws.root, clock=ManualClock())
    try:
        marker = probe_marker(workspace, "p", job_key(job))
        assert marker is not None
        [result] = delete_jobs(workspace, [plan_delete(workspace, marker)], operator="ann")
        assert result.error is None
    finally:
        workspace.close()
    assert probe_marker(ws, "p", job_key(job)) is None


def files(ws: Workspace, area: str) -> list[str]:
    root = ws.requests_dir / area if area != "quarantine" else ws.quarantine_dir
    return sorted(path.name for path in root.rglob("*") if path.is_file()) if root.exists() else []


# id -> (the job's steps, its claim, the request's action, the kind the job is in when it is deleted)
DELETED: dict[str, tuple[dict[str, Any], dict[str, Any] | None, str, str]] = {
    "continue-a-failed-job": (FAIL, None, "continue", "failed"),
    "pause-a-ready-job": ({"prepare": {}}, GPU, "pause", "ready"),
}


@pytest.mark.parametrize("case", list(DELETED))
def test_a_request_for_a_deleted_job_is_retired_as_job_not_found(
    ws: Workspace, runner: dict[str, Any], caplog: pytest.LogCaptureFixture, case: str
) -> None:
    steps, claim, action, kind = DELETED[case]
    job = scripted_job(steps, runner) if claim is None else scripted_job(steps, runner, claim=claim)
    submit(ws, job)
    run(ws)
    assert current_marker(ws, job).kind.value == kind
    published = publish_request(ws, "p", job_key(job), action, operator="ann", reason="look again")
    name = published.path.name
    delete(ws, job)

    with caplog.at_level(logging.INFO, logger="httk.workflow"):
        run(ws)

    assert files(ws, "ready") == files(ws, "claimed") == files(ws, "quarantine") == []
    assert files(ws, "retired") == [name, f"{name}.retirement"]
    assert json.loads((ws.requests_dir / "retired" / name).read_text()) == published.document
    record = json.loads((ws.requests_dir / "retired" / f"{name}.retirement").read_text())
    assert validator("retired-request").is_valid(record), record
    assert record["request"] == name
    assert record["reason"].startswith(f"job_not_found: job {job_key(job)} no longer exists at p")
    messages = [(r.levelname, r.getMessage()) for r in caplog.records if name in r.getMessage()]
    assert messages == [("WARNING", f"retired request {name}: {record['reason']}")]


def test_a_request_against_a_job_deleted_before_registration_is_quarantined(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    """Published against the generation-0 marker (``init``), the request names no frame that could show
    the job ever existed; without a scan it cannot be told from one naming a job that never did."""
    job = scripted_job({"prepare": {}}, runner)
    submit(ws, job)
    publish_request(ws, "p", job_key(job), "pause", operator="ann", reason="x")
    delete(ws, job)

    run(ws)

    assert files(ws, "retired") == []
    assert len(files(ws, "quarantine")) == 2


def test_a_request_naming_a_record_of_another_job_is_still_quarantined(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    """Evidence that the job existed is a frame *of that job*: a record reference borrowed from another
    job's chain proves nothing, and the request is malformed input."""
    other = scripted_job({"prepare": {}}, runner, claim=GPU)
    submit(ws, other)
    run(ws)
    marker = current_marker(ws, other)
    stranger = str(uuid.uuid4())
    document = publish_request(ws, "p", job_key(other), "pause", operator="ann", reason="x").document
    path = ws.requests_dir / "ready" / f"{document['request_id']}.json"
    path.write_text(json.dumps({**document, "job_id": stranger, "job_key": stranger}))
    assert marker.name.ref_text == document["expected_record_ref"]

    run(ws)

    assert files(ws, "retired") == []
    [entry, record] = files(ws, "quarantine")
    assert record == f"{entry}.quarantine"
    reason = json.loads((ws.quarantine_dir / record).read_text())["reason"]
    assert reason == f"it names job {stranger}, which does not exist at p"
