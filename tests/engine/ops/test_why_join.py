"""``job why`` of a waiting job: the join, each child with its label and state, blockers, unresolvables."""

from __future__ import annotations

from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.manager._state import ManagerState

from tests.joinkit import children, missing_child, waiting_parent
from tests.whykit import finding, register, state_fixture, why  # noqa: F401 (a fixture)


def join(members: list[dict[str, object]], condition: str = "all_succeeded") -> dict[str, object]:
    return {"condition": condition, "children": members}


def child_lines(diagnosis: object) -> list[str]:
    return [item.text for item in diagnosis.findings if item.topic == "child"]  # type: ignore[attr-defined]


def test_each_child_is_listed_and_the_open_ones_block(state: ManagerState) -> None:
    members = children(state, [Kind.SUCCEEDED, Kind.RUNNING])
    marker, _key = waiting_parent(state, join(members))
    register(state.workspace, "m")

    diagnosis = why(state.workspace, marker)

    assert diagnosis.answer == "waiting for 1 of 2 children to finish" and not diagnosis.blocked
    assert finding(diagnosis, "join").text == (
        "all_succeeded of 2 children, then step 'gather'; "
        "if it becomes impossible, fails with dependency_failure"
    )
    assert child_lines(diagnosis) == [
        f"{members[0]['label']} {members[0]['job_key']}: succeeded",
        f"{members[1]['label']} {members[1]['job_key']}: running",
    ]
    assert (
        finding(diagnosis, "blocking").text
        == f"1 open children: {members[1]['label']} ({members[1]['job_key']})"
    )
    assert finding(diagnosis, "evaluated by").text == "m (at every scan)"


def test_a_child_that_cannot_be_resolved_is_named_with_the_grace(state: ManagerState) -> None:
    ghost = missing_child(state.workspace)
    members = [*children(state, [Kind.SUCCEEDED]), ghost]
    marker, _key = waiting_parent(state, join(members), first_unresolved_at="2026-01-01T00:00:00.000000Z")
    register(state.workspace, "m")

    diagnosis = why(state.workspace, marker)

    assert diagnosis.answer == "1 join children cannot be resolved in this workspace"
    assert finding(diagnosis, "child").status == "ok"
    assert child_lines(diagnosis)[1] == (
        f"ghost {ghost['job_key']}: cannot be resolved at its placement hint 'proj/nowhere'"
    )
    unresolvable = finding(diagnosis, "unresolvable")
    assert unresolvable.status == "warning"
    assert "first recorded unresolvable at 2026-01-01T00:00:00.000000Z" in unresolvable.text
    assert "after the join grace (default 3600 s), at 2026-01-01T01:00:00Z" in unresolvable.text


def test_a_decided_join_says_where_the_next_pass_moves_it(state: ManagerState) -> None:
    satisfied, _ = waiting_parent(state, join(children(state, [Kind.SUCCEEDED, Kind.SUCCEEDED], "kids/a")))
    lost, _ = waiting_parent(state, join(children(state, [Kind.SUCCEEDED, Kind.FAILED], "kids/b")))
    rescued, _ = waiting_parent(
        state,
        {
            **join(children(state, [Kind.CANCELLED], "kids/c")),
            "on_impossible": {"action": "advance", "next_step": "salvage"},
        },
    )
    register(state.workspace, "m")

    assert why(state.workspace, satisfied).answer == (
        "the join is satisfied: the next waiting pass moves it to ready at step 'gather'"
    )
    assert why(state.workspace, lost).answer == (
        "the join can no longer succeed: the next waiting pass fails it with dependency_failure"
    )
    assert why(state.workspace, rescued).answer == (
        "the join can no longer succeed: the next waiting pass moves it to ready at step 'salvage'"
    )


def test_without_a_live_manager_nothing_evaluates_the_join(state: ManagerState) -> None:
    marker, _ = waiting_parent(state, join(children(state, [Kind.READY])))

    diagnosis = why(state.workspace, marker)

    assert diagnosis.blocked
    assert finding(diagnosis, "evaluated by").status == "blocked"
