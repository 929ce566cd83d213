"""Join evaluation: the verdict of each condition, and listings bounded per placement and kind.

The decisions the waiting pass takes on these verdicts are tests/engine/manager/test_waiting.py.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from httk.workflow.engine.core._states import CORE_KINDS, Kind
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.publish import _joins

from tests.joinkit import (
    children,
    frame_of,
    missing_child,
    state_fixture,  # noqa: F401 (a fixture)
    waiting_parent,
    ws_fixture,  # noqa: F401 (a fixture)
)

K = Kind


# -- the pure verdict -------------------------------------------------------------------------------
S, F, C, R, W = K.SUCCEEDED, K.FAILED, K.CANCELLED, K.RUNNING, K.WAITING

VERDICTS = [
    ("all_succeeded", None, [S, S, S], "satisfied"),
    ("all_succeeded", None, [S, R, S], "pending"),
    ("all_succeeded", None, [S, F, R], "impossible"),
    ("all_succeeded", None, [S, C, S], "impossible"),
    ("all_terminal", None, [S, F, C], "satisfied"),
    ("all_terminal", None, [F, F, W], "pending"),
    ("all_terminal", None, [F, F, F], "satisfied"),
    ("any_succeeded", None, [F, R, S], "satisfied"),
    ("any_succeeded", None, [F, R, K.PAUSED], "pending"),
    ("any_succeeded", None, [F, C, F], "impossible"),
    ("at_least", 2, [S, S, F], "satisfied"),
    ("at_least", 2, [S, F, R], "pending"),
    ("at_least", 2, [S, F, C], "impossible"),
    ("at_least", 1, [K.SUBMITTED, K.READY, F], "pending"),
]


@pytest.mark.parametrize(("condition", "count", "kinds", "verdict"), VERDICTS)
def test_the_verdict_of_each_condition(
    condition: str, count: int | None, kinds: list[Kind], verdict: str
) -> None:
    assert _joins.judge(condition, count, kinds) == verdict


# -- bounded listings ------------------------------------------------------------------------------
def test_siblings_in_one_placement_are_listed_once_per_kind(
    state: ManagerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = children(state, [S] * 40)
    waiting, _key = waiting_parent(state, {"children": members, "condition": "all_succeeded"})
    listed: list[str] = []
    original = os.scandir

    def counting(path: Any) -> Any:
        listed.append(str(path))
        return original(path)

    monkeypatch.setattr(os, "scandir", counting)
    join = _joins.parse_join(
        frame_of(state.workspace, waiting)["join"], workspace_id=state.workspace.workspace_id
    )
    evaluation = _joins.evaluate(state.workspace, join)
    assert evaluation.verdict == "satisfied"
    assert len(listed) == len(CORE_KINDS)
    assert len(evaluation.observations or []) == 40


def test_a_child_found_nowhere_is_looked_for_twice_only(
    state: ManagerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = state.workspace
    join = _joins.parse_join(
        {"children": [missing_child(ws)], "condition": "all_terminal"}, workspace_id=ws.workspace_id
    )
    listed: list[str] = []
    original = os.scandir

    def counting(path: Any) -> Any:
        listed.append(str(path))
        return original(path)

    monkeypatch.setattr(os, "scandir", counting)
    assert _joins.evaluate(ws, join).unresolved == [0]
    assert len(listed) == 2 * len(CORE_KINDS)
