"""Operator requests against jobs in every state kind, with real files and the real journal.

The table below is the specification's "Action validity is deliberately narrow" list, written out here
independently of the implementation's own table: every action is tried against every state kind, and it
must apply exactly where the list allows it and be retired with the reason everywhere else.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._frames import Frame, kept_members
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, init, probe_marker
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._request_apply import handle_requests, statistics
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.models import validator

from tests.conftest import minimal_job
from tests.jobkinds import (
    ALL_KINDS,
    RUNNER_STEPS,
    assert_frames_valid,
    chain,
    frame_of,
    job_in,
    new_state,
    write_raw,
    write_request,
)

K = Kind
SPEC_VALIDITY: dict[str, set[Kind]] = {
    "continue": {K.FAILED, K.PAUSED},
    "override_step": {K.FAILED, K.PAUSED},
    "set_priority": {K.SUBMITTED, K.READY, K.WAITING, K.PAUSED, K.FAILED},
    "pause": {K.SUBMITTED, K.READY, K.WAITING},
    "cancel": {K.SUBMITTED, K.READY, K.CLAIMED, K.RUNNING, K.COMMITTING, K.CANCELLING, K.WAITING, K.PAUSED},
}
REASON_CODES = {
    "continue": "operator_continue",
    "override_step": "operator_override_step",
    "set_priority": "operator_set_priority",
    "pause": "operator_pause",
    "cancel": "operator_cancel",
}


@pytest.fixture
def state(tmp_path: Path) -> ManagerState:
    return new_state(init(tmp_path / "ws", durable=False).root)


def current(ws: Workspace, marker: MarkerLocation) -> MarkerLocation:
    found = probe_marker(ws, marker.placement, marker.job_key)
    assert found is not None
    return found


def request_files(ws: Workspace) -> dict[str, list[str]]:
    """Every file below requests/ (and quarantine/), by area; staging leftovers excluded."""
    found: dict[str, list[str]] = {}
    for area in ("tmp", "ready", "claimed", "retired"):
        root = ws.requests_dir / area
        found[area] = sorted(
            str(path.relative_to(root))
            for path in root.rglob("*")
            if path.is_file() and "tmp." not in path.name
        )
    found["quarantine"] = sorted(path.name for path in ws.quarantine_dir.iterdir())
    return found


def retirement(ws: Workspace, request: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(
        (ws.requests_dir / "retired" / f"{request.name}.retirement").read_text()
    )
    assert validator("retired-request").is_valid(record), record
    assert record["request"] == request.name
    assert (ws.requests_dir / "retired" / request.name).is_file()
    return record


CASES = [(action, kind) for action in SPEC_VALIDITY for kind in ALL_KINDS]


@pytest.mark.parametrize(("action", "kind"), CASES, ids=[f"{a}-{k.value}" for a, k in CASES])
def test_every_action_against_every_kind(state: ManagerState, action: str, kind: Kind) -> None:
    ws = state.workspace
    before = job_in(state, kind)
    previous = frame_of(state, before) if before.name.ref is not None else None
    request = write_request(ws, before, action)
    acted = handle_requests(state)
    after = current(ws, before)
    files = request_files(ws)
    assert files["ready"] == [] and files["claimed"] == [] and files["quarantine"] == []
    if kind not in SPEC_VALIDITY[action]:
        assert acted
        assert after == before, "a refused request moved the job"
        record = retirement(ws, request)
        assert f"the job is {'already ' if action == 'cancel' else ''}{kind.value}" in record["reason"]
        assert action in record["reason"]
        assert statistics(state).retired == 1
        return
    assert files["retired"] == [], files
    assert statistics(state).applied == 1
    if kind is K.CANCELLING:
        assert after == before  # a second cancel changes nothing
        return
    frames = chain(ws, after)
    assert_frames_valid(frames)
    newest = frames[0]
    assert newest["request_id"] == request.stem and newest["operator"] == "ann"
    assert newest["operator_reason"] == "testing" and newest["reason"] == REASON_CODES[action]
    assert newest["manager_id"] == state.manager_id
    _check_effect(action, kind, before=before, after=after, frame=newest, previous=previous)


def _check_effect(
    action: str,
    kind: Kind,
    *,
    before: MarkerLocation,
    after: MarkerLocation,
    frame: dict[str, Any],
    previous: Mapping[str, Any] | None,
) -> None:
    assert after.name.generation == before.name.generation + 1
    if action == "set_priority":
        assert after.kind is kind and after.name.priority == 7 and frame["priority"] == 7
        if previous is not None:  # everything the state records is kept: a join, a failure, a pause
            for member in ("join", "failure", "pause", "step", "activation_id", "attempt_ordinal"):
                assert frame.get(member) == previous.get(member), member
        return
    assert after.name.priority == before.name.priority
    if action == "pause":
        assert after.kind is K.PAUSED and frame["pause"] == {"reason": "testing"}
    elif action == "cancel":
        expected = K.CANCELLING if kind is K.RUNNING else K.CANCELLED
        assert after.kind is expected
        cancellation = frame["cancellation"]
        if kind is K.RUNNING:
            assert previous is not None
            assert cancellation["attempt_id"] == previous["attempt_id"]
            assert cancellation["previous_manager_id"] == previous["manager_id"]
            assert cancellation["control_dir"] == f".httk-attempt.{previous['attempt_id']}"
            assert "elsewhere.invalid" in cancellation["unverified_reason"]
            assert frame["process"] == previous["process"]  # what a recovering manager needs
        elif kind is K.CLAIMED:
            assert cancellation["verified"] == "no_launched_process"
        else:
            assert cancellation == {"verified": "no_live_attempt"}
    elif action == "continue":
        assert previous is not None
        assert after.kind is K.READY and frame["attempt_reason"] == "manual_continue"
        assert frame["unclean_restart"] is False
        assert frame["activation_id"] == previous["activation_id"] and frame["step"] == previous["step"]
        assert frame["attempt_ordinal"] == previous["attempt_ordinal"]
        assert frame["runner_steps"] == RUNNER_STEPS
        if kind is K.FAILED:
            assert frame["last_failure"] == previous["failure"]
    else:
        assert previous is not None
        assert after.kind is K.READY and frame["step"] == "relax"
        assert frame["activation_id"] != previous["activation_id"]
        assert frame["activation_reason"] == "override_step"
        assert frame["activation_ordinal"] == previous["activation_ordinal"] + 1
        assert frame["attempt_ordinal"] == 0 and frame["total_attempts"] == previous["total_attempts"]
        assert "join_summary" not in frame


def test_set_priority_before_registration_is_registered_at_the_new_priority(state: ManagerState) -> None:
    ws = state.workspace
    marker = job_in(state, K.SUBMITTED)
    write_request(ws, marker, "set_priority", priority=3)
    handle_requests(state)
    submitted = current(ws, marker)
    assert submitted.kind is K.SUBMITTED and submitted.name.generation == 1 and submitted.name.priority == 3
    _launch.register(state, submitted)
    ready = current(ws, marker)
    assert ready.kind is K.READY and ready.name.priority == 3


def test_a_job_paused_before_registration_continues_at_its_first_activation(state: ManagerState) -> None:
    ws = state.workspace
    marker = job_in(state, K.SUBMITTED)
    write_request(ws, marker, "pause")
    handle_requests(state)
    paused = current(ws, marker)
    assert paused.kind is K.PAUSED
    write_request(ws, paused, "continue")
    handle_requests(state)
    ready = current(ws, marker)
    frame = frame_of(state, ready)
    assert ready.kind is K.READY and frame["step"] == "prepare" and frame["activation_ordinal"] == 1
    assert frame["attempt_ordinal"] == 0 and frame["job_digest"]
    assert_frames_valid(chain(ws, ready))


# -- the expected generation and record reference -------------------------------------------------
def test_a_delayed_request_never_applies_to_a_newer_generation(state: ManagerState) -> None:
    ws = state.workspace
    marker = job_in(state, K.READY)
    delayed = write_request(ws, marker, "pause")
    os.rename(delayed, ws.requests_dir / "tmp" / delayed.name)  # held back while the job moves on
    write_request(ws, marker, "set_priority", priority=9)
    handle_requests(state)
    moved = current(ws, marker)
    assert moved.name.generation == 2
    os.rename(ws.requests_dir / "tmp" / delayed.name, delayed)
    assert handle_requests(state)
    assert current(ws, marker) == moved
    record = retirement(ws, delayed)
    assert record["reason"] == "the job is ready at generation 2, not at the expected generation 1"


def test_a_request_naming_another_record_at_the_same_generation_is_retired(state: ManagerState) -> None:
    ws = state.workspace
    marker = job_in(state, K.READY)
    other = job_in(state, K.READY)  # a real reference of the same generation, not this job's
    request = write_request(ws, marker, "pause", expected_record_ref=other.name.ref_text)
    handle_requests(state)
    assert current(ws, marker) == marker
    assert "not the expected" in retirement(ws, request)["reason"]


# -- malformed requests ---------------------------------------------------------------------------
def _valid_document(marker: MarkerLocation) -> dict[str, Any]:
    request_id = str(uuid.uuid4())
    return {
        "format": "httk-workflow-request",
        "format_version": 1,
        "request_id": request_id,
        "job_id": marker.job_id,
        "job_key": marker.job_key,
        "placement": marker.placement,
        "expected_generation": marker.name.generation,
        "expected_record_ref": marker.name.ref_text,
        "action": "pause",
        "operator": "ann",
        "reason": "",
        "created_at": "2026-07-26T09:12:44.512314Z",
    }


MALFORMED: dict[str, Any] = {
    "not json": b"{not json",
    "an array": b"[]",
    "wrong format": {"format": "httk-workflow-outcome"},
    "no placement": {"placement": None},
    "placement escapes": {"placement": "../x"},
    "unknown action": {"action": "relocate"},
    "key and id disagree": {"job_id": str(uuid.uuid4())},
    "init at generation 1": {"expected_generation": 1},
    "no operator": {"operator": ""},
    "force is not a boolean": {"force": "yes"},
    "set_priority without priority": {"action": "set_priority"},
    "override_step with a bad step": {"action": "override_step", "step": "../x"},
    "no such job at the placement": {"placement": "elsewhere"},
    "named after another id": "rename",
}


@pytest.mark.parametrize("defect", list(MALFORMED))
def test_malformed_requests_are_quarantined_never_retired(state: ManagerState, defect: str) -> None:
    ws = state.workspace
    marker = job_in(state, K.SUBMITTED)
    document = _valid_document(marker)
    name = f"{document['request_id']}.json"
    change = MALFORMED[defect]
    if isinstance(change, bytes):
        data = change
    else:
        if isinstance(change, dict):
            document.update(change)
            document = {key: value for key, value in document.items() if value is not None}
        else:
            name = f"{uuid.uuid4()}.json"
        data = json.dumps(document).encode()
    write_raw(ws, name, data)
    assert handle_requests(state)
    assert current(ws, marker) == marker
    files = request_files(ws)
    assert files["ready"] == files["claimed"] == files["retired"] == []
    [entry, record_name] = files["quarantine"]
    assert record_name == f"{entry}.quarantine"
    assert (ws.quarantine_dir / entry).read_bytes() == data
    record = json.loads((ws.quarantine_dir / record_name).read_text())
    assert record["original_path"] == f".httk-workflow/requests/ready/{name}"
    assert record["entry"] == entry and record["manager_id"] == state.manager_id and record["reason"]
    assert statistics(state).quarantined == 1


def test_entries_that_are_no_files_are_quarantined(state: ManagerState) -> None:
    ws = state.workspace
    ready = ws.requests_dir / "ready"
    (ready / "a-directory.json").mkdir()
    (ready / f"{uuid.uuid4()}.json").symlink_to("/etc/hostname")
    handle_requests(state)
    assert request_files(ws)["ready"] == [] and not list(ready.iterdir())
    assert len(list(ws.quarantine_dir.glob("*.quarantine"))) == 2


# -- who serves what, budgets, holding --------------------------------------------------------------
def test_a_request_for_another_backend_is_left_and_not_reread(
    state: ManagerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    from httk.workflow.engine.requests import _requests

    ws = state.workspace
    job = minimal_job(runner={"backend": "slurm", "path": "files/runner", "arguments": []})
    marker = job_in(state, K.SUBMITTED, job=job)
    request = write_request(ws, marker, "pause")
    assert not handle_requests(state)
    assert request.is_file() and statistics(state).unserved == 1
    reads: list[Path] = []
    original = _requests._load

    def counting(path: Path, name: str) -> Any:
        reads.append(path)
        return original(path, name)

    monkeypatch.setattr(_requests, "_load", counting)
    assert not handle_requests(state)
    assert reads == [] and request.is_file()
    request.unlink()
    handle_requests(state)
    assert statistics(state).unserved == 0  # forgotten once it left ready/


def test_a_pass_decides_at_most_its_budget(state: ManagerState) -> None:
    ws = state.workspace
    for _ in range(3):
        write_request(ws, job_in(state, K.READY), "pause")
    handle_requests(state, budget=2)
    assert len(request_files(ws)["ready"]) == 1
    handle_requests(state, budget=2)
    assert request_files(ws)["ready"] == [] and statistics(state).applied == 3


def test_a_job_that_cannot_be_resolved_now_is_held_and_retried(state: ManagerState) -> None:
    ws = state.workspace
    marker = job_in(state, K.READY)
    request = write_request(ws, marker, "pause")
    twin = ws.marker_dir(K.PAUSED, marker.placement) / str(marker.name)
    twin.parent.mkdir(parents=True)
    twin.write_bytes(b"")  # two markers: corruption that fsck, not this request, must resolve
    assert not handle_requests(state)
    assert statistics(state).held == 1
    assert (ws.requests_dir / "claimed" / state.manager_id / request.name).is_file()
    twin.unlink()
    assert handle_requests(state)
    assert current(ws, marker).kind is K.PAUSED and statistics(state).held == 0


# -- requests a dead manager claimed ---------------------------------------------------------------
def _dead_claim(ws: Workspace, request: Path, *, age: float) -> Path:
    directory = ws.requests_dir / "claimed" / str(uuid.uuid4())
    directory.mkdir()
    os.rename(request, directory / request.name)
    stamp = directory.stat().st_mtime - age
    os.utime(directory, (stamp, stamp))
    return directory


def test_requests_of_a_silent_manager_are_reclaimed(state: ManagerState) -> None:
    ws = state.workspace
    marker = job_in(state, K.READY)
    directory = _dead_claim(ws, write_request(ws, marker, "pause"), age=ws.policy.lease_seconds + 60)
    assert handle_requests(state)
    assert current(ws, marker).kind is K.PAUSED
    assert not directory.exists() and statistics(state).reclaimed == 1


def test_requests_of_a_manager_within_its_lease_are_left_alone(state: ManagerState) -> None:
    ws = state.workspace
    marker = job_in(state, K.READY)
    directory = _dead_claim(ws, write_request(ws, marker, "pause"), age=10)
    assert not handle_requests(state)
    assert current(ws, marker) == marker and len(list(directory.iterdir())) == 1


def test_a_reclaimed_request_that_was_applied_is_only_removed(tmp_path: Path) -> None:
    """A manager applied the request and died before removing its claimed file: never apply it twice."""
    first = new_state(init(tmp_path / "ws", durable=False).root)
    ws = first.workspace
    marker = job_in(first, K.FAILED)
    request = write_request(ws, marker, "continue")
    from httk.workflow.engine.manager._request_apply import apply_request
    from httk.workflow.engine.requests._documents import parse_request

    parsed = parse_request(request.read_bytes(), request.name)
    assert apply_request(first, parsed).what == "applied"  # ... and then the manager died
    _dead_claim(ws, request, age=ws.policy.lease_seconds + 60)
    second = new_state(ws.root)
    assert handle_requests(second)
    after = current(ws, marker)
    assert after.kind is K.READY and after.name.generation == marker.name.generation + 1
    assert request_files(ws)["retired"] == [] and request_files(ws)["claimed"] == []
    assert sum(frame.get("request_id") == parsed.request_id for frame in chain(ws, after)) == 1


# -- budgets ---------------------------------------------------------------------------------------
def test_continue_stays_within_the_retry_budget(state: ManagerState) -> None:
    ws = state.workspace
    job = minimal_job()
    job["retry_policy"]["maximum_attempts_per_activation"] = 1
    marker = job_in(state, K.FAILED, job=job)
    request = write_request(ws, marker, "continue")
    handle_requests(state)
    assert current(ws, marker) == marker
    reason = retirement(ws, request)["reason"]
    assert "retry_exhausted" in reason and "override_step" in reason


def test_override_step_stays_within_the_activation_budget(state: ManagerState) -> None:
    ws = state.workspace
    job = minimal_job()
    job["retry_policy"]["maximum_activations"] = 1
    marker = job_in(state, K.FAILED, job=job)
    request = write_request(ws, marker, "override_step")
    handle_requests(state)
    assert current(ws, marker) == marker
    assert "budget_exhausted" in retirement(ws, request)["reason"]


# -- the decided-join revival guard ----------------------------------------------------------------
def _family(state: ManagerState, *, observed: bool) -> tuple[MarkerLocation, MarkerLocation]:
    """A failed child and its parent, whose current (ready) frame carries a decided join's summary."""
    ws = state.workspace
    parent_job = minimal_job(tag="parent")
    parent = job_in(state, K.READY, job=parent_job, placement="fam")
    parent_frame = frame_of(state, parent)
    child_job = minimal_job(
        tag="child",
        parent={
            "workspace_id": ws.workspace_id,
            "job_id": parent.job_id,
            "job_key": parent.job_key,
            "placement": parent.placement,
            "activation_id": parent_frame["activation_id"],
            "spawn_id": str(uuid.uuid4()),
        },
    )
    child = job_in(state, K.FAILED, job=child_job, placement="fam/kids")
    observation = {
        "workspace_id": ws.workspace_id,
        "label": "c0",
        "job_id": child.job_id,
        "job_key": child.job_key,
        "placement": child.placement,
        "kind": "failed",
        "state_generation": child.name.generation,
        "record_ref": child.name.ref_text,
        "failure": {"code": "test.broken", "message": "the step broke"},
        "data_generation": None,
    }
    summary = {"condition": "all_terminal", "decision": "satisfied", "observations": [observation]}
    if not observed:
        summary["observations"] = []
    # A same-kind move stands in for the join's waiting -> ready: the parent's current frame now
    # carries the summary of the join its activation follows.
    members = {**kept_members(frame_of(state, parent)), "join_summary": summary, "reason": "join_satisfied"}
    joined = state.move(parent, Frame(K.READY, members), Trigger.SET_PRIORITY)
    assert joined.won and joined.current is not None
    return joined.current, child


@pytest.mark.parametrize("action", ["continue", "override_step"])
def test_reviving_a_consumed_child_is_refused_without_force(state: ManagerState, action: str) -> None:
    ws = state.workspace
    parent, child = _family(state, observed=True)
    request = write_request(ws, child, action)
    handle_requests(state)
    assert current(ws, child) == child
    reason = retirement(ws, request)["reason"]
    assert parent.job_key in reason and "continue the parent" in reason and "force" in reason


@pytest.mark.parametrize("action", ["continue", "override_step"])
def test_forced_revival_records_the_hazard(state: ManagerState, action: str) -> None:
    ws = state.workspace
    parent, child = _family(state, observed=True)
    write_request(ws, child, action, force=True)
    handle_requests(state)
    revived = current(ws, child)
    assert revived.kind is K.READY
    frames = chain(ws, revived)
    assert_frames_valid(frames)
    hazard = frames[0]["revival_hazard"]
    assert hazard["parent"] == {
        "workspace_id": ws.workspace_id,
        "job_id": parent.job_id,
        "job_key": parent.job_key,
        "placement": parent.placement,
    }
    assert hazard["parent_kind"] == "ready"
    assert hazard["parent_state_generation"] == parent.name.generation
    assert hazard["parent_record_ref"] == parent.name.ref_text
    assert hazard["observation"]["job_id"] == child.job_id


def test_a_child_no_current_join_observed_is_revived_freely(state: ManagerState) -> None:
    ws = state.workspace
    _parent, child = _family(state, observed=False)
    write_request(ws, child, "continue")
    handle_requests(state)
    revived = current(ws, child)
    assert revived.kind is K.READY and "revival_hazard" not in frame_of(state, revived)


@pytest.mark.parametrize(("action", "keeps"), [("continue", True), ("override_step", False)])
def test_a_join_summary_belongs_to_its_activation(state: ManagerState, action: str, keeps: bool) -> None:
    """continue retries the activation a join started (its summary stays); override_step starts anew."""
    ws = state.workspace
    paused = job_in(state, K.PAUSED)
    summary = {"condition": "all_terminal", "decision": "satisfied", "observations": []}
    members = {**kept_members(frame_of(state, paused)), "join_summary": summary, "reason": "stand-in"}
    moved = state.move(paused, Frame(K.PAUSED, members), Trigger.SET_PRIORITY).current
    assert moved is not None
    write_request(ws, moved, action)
    handle_requests(state)
    frame = frame_of(state, current(ws, moved))
    assert ("join_summary" in frame) is keeps
