"""The waiting pass: the four conditions, on_impossible, unreadable joins, and the persisted grace (D7).

Children are real jobs driven to their state by real transitions (``tests/joinkit.py``); the pass is
:func:`_waiting.on_waiting` on a :class:`ManagerState` whose clock is a :class:`ManualClock`, so the join
grace is measured in the manager's own time and a restart is a fresh state on the same clock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager import _waiting
from httk.workflow.engine.manager._launch import claim_frame, plan
from httk.workflow.engine.manager._state import ManagerState

from tests.joinkit import (
    PARENT_PLACEMENT,
    children,
    current,
    frame_of,
    fresh_workspace,
    make_child,
    manager_state,
    missing_child,
    waiting_parent,
)

K = Kind
GRACE = 60.0
S, F, C, R, W = K.SUCCEEDED, K.FAILED, K.CANCELLED, K.RUNNING, K.WAITING


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ws(tmp_path: Path, clock: ManualClock) -> Iterator[Workspace]:
    workspace = fresh_workspace(tmp_path / "ws", clock)
    yield workspace
    workspace.close()


@pytest.fixture
def state(ws: Workspace, clock: ManualClock) -> ManagerState:
    return manager_state(ws, clock, join_grace_seconds=GRACE)


# -- the four conditions on real children ----------------------------------------------------------
# (condition, count, child kinds, on_impossible, expected parent kind, expected decision)
CASES = [
    ("all_succeeded", None, [S, S, S], False, "ready", "satisfied"),
    ("all_succeeded", None, [S, R, S], False, "waiting", None),
    ("all_succeeded", None, [S, F, R], True, "ready", "impossible"),
    ("all_succeeded", None, [S, F, R], False, "failed", "impossible"),
    ("all_terminal", None, [S, F, C], False, "ready", "satisfied"),
    ("all_terminal", None, [S, F, R], True, "waiting", None),
    ("any_succeeded", None, [F, R, S], False, "ready", "satisfied"),
    ("any_succeeded", None, [F, R, F], False, "waiting", None),
    ("any_succeeded", None, [F, C, F], True, "ready", "impossible"),
    ("any_succeeded", None, [F, C, F], False, "failed", "impossible"),
    ("at_least", 2, [S, F, S], False, "ready", "satisfied"),
    ("at_least", 2, [S, F, R], False, "waiting", None),
    ("at_least", 2, [C, F, S], True, "ready", "impossible"),
    ("at_least", 2, [C, F, S], False, "failed", "impossible"),
]


def _case_id(case: tuple[Any, ...]) -> str:
    condition, count, kinds, fallback, kind, _decision = case
    shown = "".join(k.value[0] for k in kinds)
    return f"{condition}{count or ''}-{shown}-{'on_impossible' if fallback else 'plain'}-{kind}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_a_join_decides_like_its_condition(state: ManagerState, case: tuple[Any, ...]) -> None:
    condition, count, kinds, fallback, kind, decision = case
    ws = state.workspace
    members = children(state, kinds)
    join: dict[str, Any] = {"children": members, "condition": condition}
    if count is not None:
        join["count"] = count
    if fallback:
        join["on_impossible"] = {"action": "advance", "next_step": "mourn"}
    waiting, key = waiting_parent(state, join)
    moved = _waiting.on_waiting(state, waiting)
    assert moved is (decision is not None)
    frame = frame_of(ws, current(ws, PARENT_PLACEMENT, key))
    assert frame["kind"] == kind
    if decision is None:
        assert frame["state_generation"] == waiting.name.generation  # nothing written while pending
        return
    summary = frame["join_summary"]
    assert (summary["condition"], summary["decision"], summary.get("count")) == (condition, decision, count)
    assert [o["job_key"] for o in summary["observations"]] == [m["job_key"] for m in members]
    assert [o["kind"] for o in summary["observations"]] == [k.value for k in kinds]
    if kind == "ready":
        assert frame["step"] == ("gather" if decision == "satisfied" else "mourn")
        assert frame["activation_reason"] == ("join" if decision == "satisfied" else "on_impossible")
        assert frame["activation_ordinal"] == 2 and frame["attempt_ordinal"] == 0
    else:
        failure = frame["failure"]
        assert failure["code"] == "dependency_failure"
        loser = next(m for m, k in zip(members, kinds, strict=True) if k in (F, C))
        assert loser["job_key"] in failure["message"], failure["message"]


def test_the_observations_reach_the_next_attempt(state: ManagerState) -> None:
    ws = state.workspace
    failure = {"code": "vasp.nonconvergent", "message": "did not converge", "details": {"steps": 61}}
    ok = make_child(state, "proj/kids", S, tag="good")
    bad = make_child(state, "proj/kids", F, failure=failure, tag="bad")
    waiting, key = waiting_parent(state, {"children": [ok, bad], "condition": "all_terminal"})
    assert _waiting.on_waiting(state, waiting) is True
    ready = current(ws, PARENT_PLACEMENT, key)
    frame = frame_of(ws, ready)
    first, second = frame["join_summary"]["observations"]
    assert first == {
        "workspace_id": ws.workspace_id,
        "label": ok["label"],
        "job_id": ok["job_id"],
        "job_key": ok["job_key"],
        "placement": "proj/kids",
        "kind": "succeeded",
        "state_generation": 5,
        "record_ref": current(ws, "proj/kids", ok["job_key"]).name.ref_text,
        "failure": None,
        "data_generation": None,
        "payload_path": f"proj/kids/{ok['job_key']}",
        "workdir_path": f"proj/kids/{ok['job_key']}/run",
    }
    assert (second["kind"], second["failure"], second["label"]) == ("failed", failure, bad["label"])
    # The claim carries the summary into the attempt; the plan hands it to the context as join/children.
    job = state.jobs.get(ready)
    claim = claim_frame(state, frame, job)
    assert claim["join_summary"] == frame["join_summary"]
    claimed = state.move(ready, Frame(Kind.CLAIMED, claim), Trigger.CLAIM).current
    assert claimed is not None
    attempt = plan(state, claimed, claim, job)
    assert attempt.join == frame["join_summary"]
    assert attempt.children == [first, second]
    assert attempt.activation_reason == "join"


def test_an_on_impossible_with_another_action_fails_the_parent(state: ManagerState) -> None:
    members = children(state, [F, S])
    join = {"children": members, "condition": "all_succeeded", "on_impossible": {"action": "retry"}}
    waiting, key = waiting_parent(state, join)
    assert _waiting.on_waiting(state, waiting) is True
    frame = frame_of(state.workspace, current(state.workspace, PARENT_PLACEMENT, key))
    assert (frame["kind"], frame["failure"]["code"]) == ("failed", "dependency_failure")
    assert frame["failure"]["details"]["on_impossible_action"] == "retry"


def test_a_waiting_frame_whose_join_cannot_be_read_is_a_protocol_error(state: ManagerState) -> None:
    waiting, key = waiting_parent(state, {"children": [], "condition": "all_succeeded"})
    assert _waiting.on_waiting(state, waiting) is True
    frame = frame_of(state.workspace, current(state.workspace, PARENT_PLACEMENT, key))
    assert (frame["kind"], frame["failure"]["code"], frame["reason"]) == (
        "failed",
        "protocol_error",
        "invalid_join",
    )
    assert "join cannot be read" in frame["failure"]["message"]


# -- unresolvable children and the persisted grace (D7) --------------------------------------------
def test_the_grace_is_persisted_and_survives_a_manager_restart(
    ws: Workspace, state: ManagerState, clock: ManualClock
) -> None:
    present = make_child(state, "proj/kids", S)
    waiting, key = waiting_parent(
        state, {"children": [present, missing_child(ws)], "condition": "all_succeeded"}
    )
    started = clock.now()
    assert _waiting.on_waiting(state, waiting) is True  # waiting -> waiting records the first instant
    marker = current(ws, PARENT_PLACEMENT, key)
    frame = frame_of(ws, marker)
    assert (marker.kind, frame["reason"]) == (Kind.WAITING, "join_unresolved")
    assert frame["first_unresolved_at"] == started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert frame["unresolved"] == [missing_child(ws)["job_key"]]
    assert frame["join"]["children"][1]["label"] == "ghost" and frame["next_step"] == "gather"
    clock.advance(GRACE - 1)
    assert _waiting.on_waiting(state, marker) is False  # within the grace: nothing written
    restarted = manager_state(ws, clock, join_grace_seconds=GRACE)  # a new manager keeps the deadline
    assert _waiting.on_waiting(restarted, marker) is False
    clock.advance(1)
    assert _waiting.on_waiting(restarted, marker) is True
    frame = frame_of(ws, current(ws, PARENT_PLACEMENT, key))
    assert (frame["kind"], frame["failure"]["code"]) == ("failed", "dependency_failure")
    message = frame["failure"]["message"]
    assert "ghost" in message and missing_child(ws)["job_key"] in message and "proj/nowhere" in message
    assert frame["failure"]["details"]["first_unresolved_at"] == frame_of(ws, marker)["first_unresolved_at"]


def test_a_child_that_resolves_again_clears_the_instant(state: ManagerState, clock: ManualClock) -> None:
    ws = state.workspace
    child = make_child(state, "proj/kids", R)
    marker_path = current(ws, "proj/kids", child["job_key"]).path(ws)
    hidden = marker_path.with_name("hidden")
    os.rename(marker_path, hidden)  # transient nonvisibility of the child's marker
    waiting, key = waiting_parent(state, {"children": [child], "condition": "all_succeeded"})
    assert _waiting.on_waiting(state, waiting) is True
    os.rename(hidden, marker_path)
    clock.advance(GRACE * 2)  # past the grace, but the child is back: no failure
    marker = current(ws, PARENT_PLACEMENT, key)
    assert _waiting.on_waiting(state, marker) is True
    frame = frame_of(ws, current(ws, PARENT_PLACEMENT, key))
    assert (frame["kind"], frame["first_unresolved_at"], frame["reason"]) == (
        "waiting",
        None,
        "join_resolved",
    )
    assert _waiting.on_waiting(state, current(ws, PARENT_PLACEMENT, key)) is False
