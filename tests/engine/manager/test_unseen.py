"""Unseen: a job a manager moved into ready is owed a listing until a pass shows it, it moves on, or both
the visibility deadline and a whole cycle of ready passes since its publication went by without it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import TransitionResult, move_marker
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.engine.manager._storage import Unseen
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job

DEADLINE = 5.0


def ready_jobs(ws: Workspace, count: int) -> list[TransitionResult]:
    specs = [JobSpec(minimal_job(tag=f"t{index}", initial_step="start"), "p") for index in range(count)]
    return [
        move_marker(ws, result.marker, Frame(Kind.READY, {"step": "start"}), Trigger.REGISTER)
        for result in submit_jobs(ws, specs)
    ]


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return init(tmp_path / "ws", durable=False)


def test_a_job_is_owed_until_a_pass_lists_it(ws: Workspace) -> None:
    unseen = Unseen(ws, ManualClock(), DEADLINE)
    first, second = ready_jobs(ws, 2)
    unseen.published([first, second])
    assert unseen.owed_kinds() == {Kind.READY}
    assert first.current is not None and second.current is not None
    unseen.listed(Kind.READY, [first.current], cycle_ended=False)
    assert unseen.owed_kinds() == {Kind.READY}
    unseen.listed(Kind.WAITING, [second.current], cycle_ended=True)  # another kind's pass owes nothing
    assert unseen.owed_kinds() == {Kind.READY}
    unseen.listed(Kind.READY, [second.current], cycle_ended=False)
    assert unseen.owed_kinds() == set()


def test_a_slow_cycle_is_not_a_lagging_listing(ws: Workspace, caplog: pytest.LogCaptureFixture) -> None:
    """Past the deadline, a job is still owed while no whole cycle of ready passes began after it was
    published: over a large workspace the pass that shows it comes in the next cycle."""
    clock = ManualClock()
    unseen = Unseen(ws, clock, DEADLINE)
    caplog.set_level(logging.WARNING, logger="httk.workflow.manager")
    unseen.published(ready_jobs(ws, 3))
    clock.advance(DEADLINE * 10)
    assert unseen.owed_kinds() == {Kind.READY}
    unseen.listed(Kind.READY, [], cycle_ended=True)  # the cycle under way when they were published
    assert unseen.owed_kinds() == {Kind.READY}
    assert caplog.records == []


def test_a_job_no_whole_cycle_showed_is_given_up_after_the_deadline_in_one_line(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    unseen = Unseen(ws, clock, DEADLINE)
    caplog.set_level(logging.WARNING, logger="httk.workflow.manager")
    results = ready_jobs(ws, 4)
    unseen.published(results)
    unseen.listed(Kind.READY, [], cycle_ended=True)
    unseen.listed(Kind.READY, [], cycle_ended=True)  # a whole cycle after publication, without them
    assert unseen.owed_kinds() == {Kind.READY}  # ... but the deadline has not passed
    clock.advance(DEADLINE)
    assert unseen.owed_kinds() == set()
    keys = [r.current.job_key for r in results if r.current is not None]
    assert [record.getMessage() for record in caplog.records] == [
        "4 jobs which this manager moved to ready are still missing from listings of ready after the "
        f"visibility deadline (5.0 s) and a whole pass over ready ({', '.join(keys[:3])}, ...); a later "
        "pass or manager will find them"
    ]


def test_a_job_moved_on_is_owed_nothing(ws: Workspace) -> None:
    unseen = Unseen(ws, ManualClock(), DEADLINE)
    (result,) = ready_jobs(ws, 1)
    unseen.published([result])
    assert result.current is not None
    claimed = move_marker(ws, result.current, Frame(Kind.CLAIMED, {"step": "start"}), Trigger.CLAIM)
    assert claimed.won  # another manager's claim: this one's record of it is not told
    assert unseen.owed_kinds() == set()


def test_a_move_of_its_own_out_of_ready_ends_what_is_owed(ws: Workspace) -> None:
    unseen = Unseen(ws, ManualClock(), DEADLINE)
    (result,) = ready_jobs(ws, 1)
    unseen.published([result])
    assert result.current is not None
    unseen.published([move_marker(ws, result.current, Frame(Kind.CLAIMED, {"step": "start"}), Trigger.CLAIM)])
    assert unseen.owed_kinds() == set()


def test_beyond_its_bound_what_is_owed_is_kept_per_directory(
    ws: Workspace, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past OWED_JOBS a job is owed as part of its placement directory: the kind stays owed until the
    deadline and a whole cycle after the latest such publication, whatever the passes listed."""
    monkeypatch.setattr(Unseen, "OWED_JOBS", 2)
    clock = ManualClock()
    unseen = Unseen(ws, clock, DEADLINE)
    caplog.set_level(logging.WARNING, logger="httk.workflow.manager")
    results = ready_jobs(ws, 4)
    unseen.published(results)
    markers = [r.current for r in results if r.current is not None]
    unseen.listed(Kind.READY, markers, cycle_ended=False)  # shows all four: the first two are let go
    assert unseen.owed_kinds() == {Kind.READY}  # ... the directory the last two went to is not
    unseen.listed(Kind.READY, [], cycle_ended=True)
    unseen.listed(Kind.READY, [], cycle_ended=True)
    assert unseen.owed_kinds() == {Kind.READY}  # a whole cycle since, but not the deadline
    clock.advance(DEADLINE)
    assert unseen.owed_kinds() == set()
    assert caplog.records == []
