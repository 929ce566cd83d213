"""The monitor's data (``engine/ops/_monitor.py``): bounded counts that say how sure they are, pages, a job.

Every test runs real workspaces in temporary directories; the counts are compared with the exhaustive
``workspace status`` of the same workspace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from httk.workflow.engine import workspace_status as status
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import CORE_KINDS, Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init
from httk.workflow.engine.ops._monitor import (
    Certainty,
    JobQuery,
    KindCount,
    Monitor,
    MonitorSnapshot,
    job_detail,
    jobs_page,
)
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import InvalidNameError

from tests.conftest import minimal_job
from tests.inspectkit import snapshot as tree_snapshot

# placement -> (jobs, the kind they end in)
LAYOUT = {"a/x": (4, Kind.READY), "a/y": (3, Kind.SUBMITTED), "b": (5, Kind.FAILED)}


def move(ws: Workspace, marker: MarkerLocation, kind: Kind, trigger: Trigger) -> MarkerLocation:
    current = move_marker(ws, marker, Frame(kind, {"reason": trigger.value}), trigger).current
    assert current is not None
    return current


def populate(ws: Workspace, layout: dict[str, tuple[int, Kind]]) -> None:
    for placement, (count, end) in layout.items():
        specs = [JobSpec(minimal_job(tag=f"{end.value}-{n}"), placement) for n in range(count)]
        for result in submit_jobs(ws, specs):
            marker = result.marker
            if end in (Kind.READY, Kind.FAILED):
                marker = move(ws, marker, Kind.READY, Trigger.REGISTER)
            if end is Kind.FAILED:
                marker = move(ws, marker, Kind.CLAIMED, Trigger.CLAIM)
                move(ws, marker, Kind.FAILED, Trigger.PREPARE_FAILURE)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = init(tmp_path / "ws", durable=False)
    populate(ws, LAYOUT)
    ws.close()
    return ws.root


@pytest.fixture
def ws(root: Path) -> Iterator[Workspace]:
    yield attach(root, writable=False)


def counts(snapshot: MonitorSnapshot) -> dict[str, int]:
    return {count.kind.value: count.count for count in snapshot.counts}


# -- counts -------------------------------------------------------------------------------------------
def test_a_small_workspace_is_counted_exactly_in_one_refresh(ws: Workspace) -> None:
    with Monitor(ws) as monitor:
        snapshot = monitor.refresh()

    assert [count.kind for count in snapshot.counts] == list(CORE_KINDS)
    assert counts(snapshot) == status(ws).kinds
    assert snapshot.total == 12 and snapshot.certainty is Certainty.EXACT
    assert all(count.age_seconds == 0.0 and count.refreshes == 1 for count in snapshot.counts)
    ready = snapshot.counts[CORE_KINDS.index(Kind.READY)]
    assert dict(ready.by_placement) == {"a": 4}
    assert snapshot.placements == ["a", "b"]
    assert snapshot.anomalies == 0 and snapshot.managers == ()
    assert snapshot.entries_visited <= snapshot.budget


def test_counts_per_placement_follow_the_depth(ws: Workspace) -> None:
    with Monitor(ws, depth=2) as monitor:
        snapshot = monitor.refresh()
    by_kind = {count.kind: dict(count.by_placement) for count in snapshot.counts if count.count}
    assert by_kind == {Kind.READY: {"a/x": 4}, Kind.SUBMITTED: {"a/y": 3}, Kind.FAILED: {"b": 5}}


def test_a_kind_larger_than_the_budget_is_partial_then_sampled_and_converges(tmp_path: Path) -> None:
    clock = ManualClock()
    ws = init(tmp_path / "ws", durable=False, clock=clock)
    populate(ws, {"big/0": (120, Kind.SUBMITTED), "big/1": (80, Kind.SUBMITTED), "small": (3, Kind.READY)})
    ws.close()
    reader = attach(ws.root, writable=False, clock=clock)
    budget = 11 * 8  # eight entries a pass for each kind: the 200 submitted markers need many passes
    with Monitor(reader, budget=budget) as monitor:
        first = monitor.refresh()
        submitted = first.counts[CORE_KINDS.index(Kind.SUBMITTED)]
        assert submitted.certainty is Certainty.PARTIAL and 0 < submitted.count < 200
        assert first.counts[CORE_KINDS.index(Kind.READY)].certainty is Certainty.EXACT
        assert first.certainty is Certainty.PARTIAL
        assert first.entries_visited <= budget + 8  # a round never exceeds the budget by more than a pass

        refreshes = 1
        snapshot = first
        while snapshot.counts[CORE_KINDS.index(Kind.SUBMITTED)].certainty is Certainty.PARTIAL:
            clock.advance(1.0)
            snapshot = monitor.refresh()
            refreshes += 1
            assert refreshes < 100, "the count never finished"
        submitted = snapshot.counts[CORE_KINDS.index(Kind.SUBMITTED)]
        assert submitted.certainty is Certainty.SAMPLED and submitted.count == 200
        assert dict(submitted.by_placement) == {"big": 200}
        assert submitted.refreshes == refreshes and submitted.age_seconds == refreshes - 1.0
        assert snapshot.certainty is Certainty.SAMPLED
        assert counts(snapshot) == status(reader).kinds


def test_a_sampled_count_follows_the_workspace_cycle_by_cycle(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    populate(ws, {"big": (150, Kind.SUBMITTED)})
    with Monitor(attach(ws.root, writable=False), budget=11 * 8) as monitor:
        assert _refresh_until_finished(monitor, Kind.SUBMITTED).count == 150
        monitor.refresh()  # a new cycle is under way ...
        populate(ws, {"big": (15, Kind.SUBMITTED)})  # ... when 15 more jobs arrive
        during = _refresh_until_finished(monitor, Kind.SUBMITTED)
        after = _refresh_until_finished(monitor, Kind.SUBMITTED)
    ws.close()
    # A live listing may or may not meet entries added behind it; the next whole cycle counts them all.
    assert 150 <= during.count <= 165
    assert after.count == 165 and after.certainty is Certainty.SAMPLED


def _refresh_until_finished(monitor: Monitor, kind: Kind) -> KindCount:
    """Refresh until a cycle of ``kind`` finishes within the refresh just made; that refresh's count."""
    index = CORE_KINDS.index(kind)
    for _ in range(100):
        before = monitor.statistics()[kind].cycles
        snapshot = monitor.refresh()
        if monitor.statistics()[kind].cycles > before:
            return snapshot.counts[index]
    raise AssertionError("no cycle finished in 100 refreshes")


def test_every_kind_is_served_every_refresh_so_none_starves(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    populate(ws, {"s": (40, Kind.SUBMITTED), "r": (40, Kind.READY), "f": (40, Kind.FAILED)})
    ws.close()
    with Monitor(attach(ws.root, writable=False), budget=11 * 4) as monitor:
        for _ in range(60):
            monitor.refresh()
        cycles = {
            kind: monitor.statistics()[kind].cycles for kind in (Kind.SUBMITTED, Kind.READY, Kind.FAILED)
        }
    assert min(cycles.values()) >= 1 and max(cycles.values()) - min(cycles.values()) <= 1, cycles


def test_refreshing_writes_nothing_and_works_read_only(root: Path, ws: Workspace) -> None:
    before = tree_snapshot(root)
    with Monitor(ws, budget=11 * 2) as monitor:
        for _ in range(10):
            monitor.refresh(JobQuery(kinds=(Kind.READY,), limit=2))
    assert ws.writable is False
    assert tree_snapshot(root) == before


def test_entries_that_are_not_markers_are_counted_as_anomalies(root: Path, ws: Workspace) -> None:
    (ws.state_dir(Kind.READY) / "a" / "x" / "junk").write_text("")
    with Monitor(ws) as monitor:
        snapshot = monitor.refresh()
    assert snapshot.anomalies == 1
    assert counts(snapshot)["ready"] == 4


def test_bad_settings_are_refused_naming_them(ws: Workspace) -> None:
    with pytest.raises(InvalidNameError, match="count budget"):
        Monitor(ws, budget=3)
    with pytest.raises(InvalidNameError, match="placement depth"):
        Monitor(ws, depth=0)


def test_the_monitor_shows_its_state(ws: Workspace) -> None:
    with Monitor(ws, budget=1024) as monitor:
        monitor.refresh()
        assert repr(monitor) == f"Monitor(root={str(ws.root)!r}, budget=1024, refreshes=1)"
        assert set(monitor.statistics()) == set(CORE_KINDS)


# -- the page of jobs ---------------------------------------------------------------------------------
def test_the_page_follows_the_query(ws: Workspace) -> None:
    with Monitor(ws) as monitor:
        every = monitor.refresh().page
        assert len(every.jobs) == 12 and every.next_after is None
        failed = monitor.refresh(JobQuery.of(["failed"], limit=2)).page
        assert [job.kind for job in failed.jobs] == [Kind.FAILED, Kind.FAILED]
        assert failed.next_after is not None
        rest = monitor.refresh(replace(JobQuery.of(["failed"], limit=10), after=failed.next_after)).page
        assert len(rest.jobs) == 3 and rest.next_after is None
        tagged = monitor.refresh(JobQuery.of(tag_contains="ready-1")).page
        assert [job.job_key.split("--")[0] for job in tagged.jobs] == ["ready-1"]
        placed = monitor.refresh(JobQuery.of(placement="a/y")).page
        assert {job.placement for job in placed.jobs} == {"a/y"} and len(placed.jobs) == 3


def test_a_bad_query_is_refused_naming_what_is_wrong(ws: Workspace) -> None:
    with pytest.raises(InvalidNameError, match="state kind"):
        JobQuery.of(["running", "sleeping"])
    with pytest.raises(InvalidNameError, match="tag query"):
        JobQuery.of(tag_contains="")
    with pytest.raises(InvalidNameError, match="placement"):
        JobQuery.of(placement="../outside")
    with pytest.raises(InvalidNameError, match="page size"):
        jobs_page(ws, JobQuery(limit=0))


def test_kinds_of_a_query_are_put_in_listing_order() -> None:
    assert JobQuery.of(["failed", "submitted"]).kinds == (Kind.SUBMITTED, Kind.FAILED)


# -- one job ------------------------------------------------------------------------------------------
def test_job_detail_reads_show_log_and_why_where_the_job_is_now(root: Path, ws: Workspace) -> None:
    listed = jobs_page(ws, JobQuery.of(["ready"], limit=1)).jobs[0]
    writer = attach(root)
    move(writer, listed, Kind.PAUSED, Trigger.PAUSE)  # it moves after it was listed
    writer.close()

    detail = job_detail(ws, listed.placement, listed.job_key)

    assert detail is not None
    assert detail.marker.kind is Kind.PAUSED and detail.marker.job_key == listed.job_key
    assert detail.show["kind"] == "paused" and detail.show["job_key"] == listed.job_key
    assert [entry["kind"] for entry in detail.log] == ["ready", "paused"]
    assert detail.why.kind == "paused"


def test_job_detail_of_a_job_that_is_not_there_is_none(ws: Workspace) -> None:
    listed = jobs_page(ws, JobQuery(limit=1)).jobs[0]
    assert job_detail(ws, "elsewhere", listed.job_key) is None


def test_the_monitor_is_on_the_engine_s_public_face() -> None:
    from httk.workflow import engine

    for name in ("Certainty", "JobDetail", "JobQuery", "JobsPage", "KindCount", "Monitor", "MonitorSnapshot"):
        assert name in engine.__all__
    assert engine.Monitor is Monitor and engine.job_detail is job_detail and engine.JobQuery is JobQuery
    assert engine.__all__ == sorted(engine.__all__)
