"""Publishing a request: the exact marker it is written against, the client-side checks, the file's path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import attach, init, probe_marker
from httk.workflow.engine.manager._request_apply import handle_requests
from httk.workflow.engine.requests._requests import PublishedRequest, RequestError, publish_request
from httk.workflow.models import validator

from tests.jobkinds import RUNNER_STEPS, job_in, new_state


def test_a_request_captures_the_current_marker(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=True).root)
    marker = job_in(state, Kind.READY)
    client = attach(state.workspace.root)
    writers = sorted(client.journal_dir.iterdir())
    published = publish_request(client, marker.placement, marker.job_key, "pause", operator="ann", reason="r")
    document = json.loads(published.path.read_text())
    assert published.path == client.requests_dir / "ready" / f"{document['request_id']}.json"
    assert document == published.document and validator("request").is_valid(document)
    assert document["expected_generation"] == marker.name.generation == 1
    assert document["expected_record_ref"] == marker.name.ref_text
    assert (document["job_key"], document["placement"]) == (marker.job_key, marker.placement)
    assert published.kind is Kind.READY and published.notes == ()
    assert list((client.requests_dir / "tmp").iterdir()) == []
    assert sorted(client.journal_dir.iterdir()) == writers  # a client writes no journal
    assert handle_requests(state)
    assert probe_marker(client, marker.placement, marker.job_key).kind is Kind.PAUSED  # type: ignore[union-attr]


def test_a_request_against_a_submission_marker_expects_init(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    marker = job_in(state, Kind.SUBMITTED)
    published = publish_request(
        state.workspace, marker.placement, marker.job_key, "set_priority", operator="a", reason="", priority=1
    )
    assert published.document["expected_generation"] == 0
    assert published.document["expected_record_ref"] == "init"
    assert published.document["priority"] == 1


@pytest.mark.parametrize(
    ("kind", "action"), [(Kind.READY, "continue"), (Kind.RUNNING, "pause"), (Kind.SUCCEEDED, "cancel")]
)
def test_what_a_manager_would_refuse_is_not_published(tmp_path: Path, kind: Kind, action: str) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    marker = job_in(state, kind)
    with pytest.raises(RequestError, match=f"the job is .*{kind.value}"):
        publish_request(state.workspace, marker.placement, marker.job_key, action, operator="a", reason="")
    assert list((state.workspace.requests_dir / "ready").iterdir()) == []


def test_no_job_no_request(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    marker = job_in(state, Kind.READY)
    with pytest.raises(RequestError, match="no job"):
        publish_request(state.workspace, "elsewhere", marker.job_key, "pause", operator="a", reason="")


def test_override_step_is_checked_against_the_recorded_runner_steps(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    marker = job_in(state, Kind.FAILED)
    ws = state.workspace

    def publish(step: str, force: bool = False) -> PublishedRequest:
        return publish_request(
            ws,
            marker.placement,
            marker.job_key,
            "override_step",
            operator="a",
            reason="",
            step=step,
            force=force,
        )

    assert publish("relax").notes == ()
    with pytest.raises(RequestError) as refused:
        publish("bogus")
    assert all(step in str(refused.value) for step in RUNNER_STEPS) and "--force" in str(refused.value)
    forced = publish("bogus", force=True)
    assert "publishing anyway" in forced.notes[0] and forced.document["force"] is True


def test_override_step_before_any_attempt_is_published_with_a_note(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    marker = job_in(state, Kind.SUBMITTED)
    publish_request(state.workspace, marker.placement, marker.job_key, "pause", operator="a", reason="")
    handle_requests(state)
    paused = probe_marker(state.workspace, marker.placement, marker.job_key)
    assert paused is not None and paused.kind is Kind.PAUSED
    published = publish_request(
        state.workspace, paused.placement, paused.job_key, "override_step", operator="a", reason="", step="x"
    )
    assert "no attempt has run yet" in published.notes[0]


def test_a_second_cancel_is_published_with_a_note(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    marker = job_in(state, Kind.CANCELLING)
    published = publish_request(
        state.workspace, marker.placement, marker.job_key, "cancel", operator="a", reason=""
    )
    assert "changes nothing" in published.notes[0]


@pytest.mark.parametrize(
    ("action", "members", "message"),
    [
        ("relocate", {}, "unknown action"),
        ("set_priority", {}, "a priority"),
        ("pause", {"priority": 3}, "a priority"),
        ("override_step", {}, "a step"),
        ("pause", {"operator": ""}, "operator"),
    ],
)
def test_arguments_are_checked_before_anything_is_read(
    tmp_path: Path, action: str, members: dict[str, Any], message: str
) -> None:
    ws = init(tmp_path / "ws", durable=False)
    arguments: dict[str, Any] = {"operator": "a", "reason": "", **members}
    with pytest.raises(RequestError, match=message):
        publish_request(ws, "p", "01234567-89ab-cdef-0123-456789abcdef", action, **arguments)
