"""A manager inside a Slurm job drains once its allocation's end is closer than its margin."""

from __future__ import annotations

from datetime import datetime, timedelta

from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.manager._run import host_capacities, split
from httk.workflow.engine.manager._slurm import CHECK_SECONDS, AllocationWatch

START = datetime(2026, 1, 1, 12, 0, 0)


def test_the_end_is_read_once_per_check_interval_and_drains_within_the_margin() -> None:
    clock = ManualClock()
    asked: list[str] = []
    ends = [START + timedelta(seconds=600), START + timedelta(seconds=120)]  # an operator shortened it

    def end_of(job_id: str) -> datetime:
        asked.append(job_id)
        return ends[min(len(asked), len(ends)) - 1]

    def now() -> datetime:
        return START + timedelta(seconds=clock.monotonic() - 1000.0)

    watch = AllocationWatch("4711", 300, clock, end_of=end_of, now=now)

    assert not watch.ending()
    clock.advance(CHECK_SECONDS / 2)
    assert not watch.ending() and asked == ["4711"]
    clock.advance(CHECK_SECONDS / 2)
    assert watch.ending() and asked == ["4711", "4711"]  # 60 s in, 60 s left of a 120 s limit


def test_a_job_without_an_end_never_drains_by_itself() -> None:
    watch = AllocationWatch("4711", 300, ManualClock(), end_of=lambda _job: None, now=lambda: START)

    assert not watch.ending()
    assert AllocationWatch.of(300, {}, ManualClock()) is None
    assert AllocationWatch.of(None, {"SLURM_JOB_ID": "1"}, ManualClock()) is None


def test_host_capacities_split_with_the_remainder_going_first() -> None:
    assert [split(10, index, 4) for index in range(4)] == [3, 3, 2, 2]
    whole = host_capacities()
    parts = [host_capacities((index, 3)) for index in range(3)]
    assert sum(part["procs"] for part in parts) == whole["procs"]
    assert sum(part["mem"] for part in parts) == whole["mem"]
