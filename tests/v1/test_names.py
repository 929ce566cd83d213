"""The v1 task name grammar: nine dot-separated fields, parsed by position, never guessed."""

from __future__ import annotations

import pytest
from httk.workflow.v1._errors import TaskNameError
from httk.workflow.v1._names import Status, TaskName, looks_like_task
from hypothesis import given, settings
from hypothesis import strategies as st

FIELD = st.text(alphabet="abcXYZ019_-+:@", min_size=1, max_size=12)


@pytest.mark.parametrize("status", list(Status))
def test_every_status_parses_and_round_trips(status: Status) -> None:
    text = f"ht.task.any.t1.start.0.unclaimed.3.{status.value}"
    name = TaskName.parse(text)
    assert name == TaskName("any", "t1", "start", 0, "unclaimed", 3, status)
    assert str(name) == text


def test_status_classes_partition_what_v1_does() -> None:
    assert {s for s in Status if s.waiting} == {Status.WAITSTART, Status.WAITSTEP, Status.WAITSUBTASKS}
    assert {s for s in Status if s.active} == {s for s in Status if s.waiting} | {Status.RUNNING}
    assert {s for s in Status if s.terminal} == {
        Status.FINISHED,
        Status.BROKEN,
        Status.TIMEOUT,
        Status.STOPPED,
    }
    assert {s for s in Status if s.legacy} == {Status.SINGLEJOB, Status.WAITING, Status.SUBRUNS}
    for status in Status:
        assert [status.active or status.terminal, status.legacy].count(True) == 1


def test_fields_are_read_by_position() -> None:
    name = TaskName.parse("ht.task.hpc--main.Si-a1b2.relax2.11.tskmgr-2024-01-01_00_00_00_7.5.stopped")
    assert (name.set, name.id, name.step, name.restarts) == ("hpc--main", "Si-a1b2", "relax2", 11)
    assert (name.owner, name.priority, name.status) == ("tskmgr-2024-01-01_00_00_00_7", 5, Status.STOPPED)
    assert name.stem == "ht.task.hpc--main.Si-a1b2"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("ht.task.any.a.b.start.0.unclaimed.3.waitstart", "not 8"),  # a dot inside the id
        ("ht.task.any.start.0.unclaimed.3.waitstart", "not 6"),
        ("ht.tusk.any.a.start.0.unclaimed.3.waitstart", "must be ht.task."),
        ("ht.task.any..start.0.unclaimed.3.waitstart", "the id field is empty"),
        ("ht.task.any.a b.start.0.unclaimed.3.waitstart", "the id field holds whitespace"),
        ("ht.task.any.a.start.x.unclaimed.3.waitstart", "restarts field 'x'"),
        ("ht.task.any.a.start.-1.unclaimed.3.waitstart", "restarts field '-1'"),
        ("ht.task.any.a.start.0.unclaimed.0.waitstart", "priority field '0' is not 1-5"),
        ("ht.task.any.a.start.0.unclaimed.6.waitstart", "priority field '6' is not 1-5"),
        ("ht.task.any.a.start.0.unclaimed.3.done", "status field 'done' is not a v1 status"),
        ("ht.task.any.a.start.0.unclaimed.3.", "the status field is empty"),
    ],
)
def test_a_name_outside_the_grammar_is_refused_with_the_rule(text: str, rule: str) -> None:
    with pytest.raises(TaskNameError) as caught:
        TaskName.parse(text)
    assert rule in caught.value.rule
    assert caught.value.name == text
    assert text in str(caught.value)


@settings(deadline=None, max_examples=200)
@given(
    fields=st.tuples(FIELD, FIELD, FIELD, FIELD),
    restarts=st.integers(min_value=0, max_value=10**6),
    priority=st.integers(min_value=1, max_value=5),
    status=st.sampled_from(list(Status)),
)
def test_every_accepted_name_round_trips(
    fields: tuple[str, str, str, str], restarts: int, priority: int, status: Status
) -> None:
    set_, id_, step, owner = fields
    text = f"ht.task.{set_}.{id_}.{step}.{restarts}.{owner}.{priority}.{status.value}"
    assert str(TaskName.parse(text)) == text


def test_renamed_keeps_the_stable_fields() -> None:
    name = TaskName.parse("ht.task.any.t.start.0.none.2.waitstart")
    moved = name.renamed(step="second", restarts=1, owner="unclaimed", status=Status.WAITSTEP)
    assert str(moved) == "ht.task.any.t.second.1.unclaimed.2.waitstep"
    assert moved.stem == name.stem


def test_looks_like_task_is_the_prefix_only() -> None:
    assert looks_like_task("ht.task.whatever")
    assert not looks_like_task("ht.tmp.task.any.a.start.0.none.3.waitstart")
    assert not looks_like_task("ht.taskmgrstats")
