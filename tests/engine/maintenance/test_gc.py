"""``engine/_gc``: the always-safe categories, dry runs, the census, and the gc frame.

Ages are made by setting modification times (``os.utime``) into the past and, for heartbeats, by
writing an old ``updated_at``: nothing here sleeps. Jobs reach their kinds through the legal transitions
of ``tests/jobkinds.py``. The helpers at the top are shared by the other ``test_gc*`` files.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._journal import scan_segment
from httk.workflow.engine.core._states import TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init
from httk.workflow.engine.maintenance._gc import (
    CENSUS_KEYS,
    PHASES,
    GcReport,
    PeriodicCollection,
    always_safe_census,
    collect_garbage,
)
from httk.workflow.engine.manager._manager import ManagerIdentity, ManagerRecord
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.ops._history import job_history
from httk.workflow.models import validator
from httk.workflow.protocol import RecordRef
from httk.workflow.protocol._policy import set_policy_member

from tests.inspectkit import snapshot
from tests.jobkinds import ALL_KINDS, job_in, new_state

DAY = 86400.0
T = TypeVar("T", Workspace, ManagerState)


# -- helpers shared by the test_gc* files --------------------------------------------------------------
def make_old(path: Path, days: float = 40.0) -> None:
    """Set ``path``'s modification time ``days`` into the past (never following a symlink)."""
    moment = time.time() - days * DAY
    os.utime(path, (moment, moment), follow_symlinks=False)


def make_old_tree(path: Path, days: float = 40.0) -> None:
    """Age everything below ``path`` and ``path`` itself, children first (a parent's time is its own)."""
    for directory, dirnames, filenames in os.walk(path, topdown=False):
        for name in [*filenames, *dirnames]:
            make_old(Path(directory) / name, days)
    make_old(path, days)


def set_retention(ws: Workspace, **limits: Any) -> None:
    policy = ws.document.get("policy")
    for key, value in limits.items():
        policy = set_policy_member(policy, f"retention.{key}", value)
    ws.update_document({"policy": policy})


AGGRESSIVE = {"attempt_control_days": 0, "trash_days": 0, "journal_days": 0}


def publish_record(state: ManagerState, *, lease_seconds: float = 900.0) -> ManagerRecord:
    """Give ``state``'s manager its manifest and a fresh heartbeat, as a started manager has."""
    identity = ManagerIdentity(state.manager_id, ("default",), (), lease_seconds=lease_seconds)
    record = ManagerRecord(state.workspace, identity, state.writer_id)
    record.create()
    return record


def silence(ws: Workspace, manager_id: str) -> None:
    """Make a manager's heartbeat years old (it stands in for a manager that died long ago)."""
    path = ws.managers_dir / manager_id / "heartbeat.json"
    heartbeat = json.loads(path.read_text())
    heartbeat["updated_at"] = "2000-01-01T00:00:00.000000Z"
    path.write_text(json.dumps(heartbeat))


def attempt_dir(ws: Workspace, marker: MarkerLocation, attempt_id: str, total: int) -> Path:
    """An attempt-control directory with a context.json and a log, as an attempt leaves it."""
    directory = ws.payload_path(marker.placement, marker.job_key) / f".httk-attempt.{attempt_id}"
    directory.mkdir()
    (directory / "context.json").write_text(json.dumps({"attempt_id": attempt_id, "total_attempts": total}))
    (directory / "stdout.log").write_text("output\n")
    return directory


def writers(ws: Workspace) -> set[str]:
    return {path.name for path in ws.journal_dir.iterdir()}


def gc_frames(ws: Workspace) -> list[dict[str, Any]]:
    """Every gc frame in the workspace's journal, found by scanning the segments forwards."""
    frames = []
    for segment in sorted(ws.journal_dir.glob("*/*.hwj")):
        for scanned in scan_segment(segment):
            if scanned.record is not None and scanned.record.get("format") == "httk-workflow-gc":
                frames.append(scanned.record)
    return frames


def small_segment_workspace(tmp_path: Path) -> Path:
    """A fresh workspace whose small segments let a few jobs spread their frames over several."""
    workspace = init(tmp_path / "ws", durable=False)
    workspace.update_document({"policy": {**workspace.document["policy"], "journal_segment_bytes": 4096}})
    workspace.close()
    return tmp_path / "ws"


def attached(root: Path, factory: Callable[[Path], T]) -> Iterator[T]:
    """A fixture body: ``factory(root)`` (a workspace or a manager state), closed afterwards."""
    value = factory(root)
    yield value
    (value if isinstance(value, Workspace) else value.workspace).close()


@pytest.fixture(name="root")
def root_fixture(tmp_path: Path) -> Path:
    return small_segment_workspace(tmp_path)


@pytest.fixture(name="ws")
def ws_fixture(root: Path) -> Iterator[Workspace]:
    yield from attached(root, attach)


@pytest.fixture(name="state")
def state_fixture(root: Path) -> Iterator[ManagerState]:
    yield from attached(root, new_state)


def every_kind(state: ManagerState, placement: str = "p") -> dict[Kind, MarkerLocation]:
    return {kind: job_in(state, kind, placement=f"{placement}/{kind.value}") for kind in ALL_KINDS}


# -- nothing to do, dry runs ---------------------------------------------------------------------------
def test_a_collection_that_removes_nothing_writes_nothing(ws: Workspace, state: ManagerState) -> None:
    every_kind(state)
    collect_garbage(ws)  # the mirrors the jobs' moves left empty
    make_old_tree(ws.root, 400)  # old is not enough: nothing here is garbage without a policy
    before = snapshot(ws.root)
    report = collect_garbage(attach(ws.root))
    assert report.removed == 0 and report.frame_ref is None
    assert snapshot(ws.root) == before  # no frame, no writer directory, nothing at all


def test_a_dry_run_counts_and_writes_nothing(ws: Workspace, state: ManagerState) -> None:
    markers = every_kind(state)
    collect_garbage(ws)  # the mirrors the jobs' moves left empty
    for kind in (Kind.READY, Kind.SUCCEEDED):
        shutil.rmtree(ws.payload_path(markers[kind].placement, markers[kind].job_key))
    (ws.tmp_dir / "stale").write_text("x")
    (ws.marker_dir(Kind.FAILED, "empty/below")).mkdir(parents=True)
    make_old_tree(ws.root)
    set_retention(ws, **AGGRESSIVE)
    before = snapshot(ws.root)
    dry = collect_garbage(attach(ws.root, writable=False), dry_run=True)
    assert snapshot(ws.root) == before
    assert dry.dry_run and dry.removed == 0 and dry.frame_ref is None
    assert dry.categories["removed_jobs"].candidates == 2
    assert dry.categories["tmp_entries"].candidates == 1
    # The two removed jobs' mirrors empty too once their markers go; "empty" and "empty/below" as well.
    assert dry.categories["placement_directories"].candidates == 2 + 2 + 2
    real = collect_garbage(ws)
    assert {name: count.removed for name, count in real.categories.items()} == {
        name: count.candidates for name, count in dry.categories.items()
    }


def test_the_census_has_exactly_its_keys_and_ignores_the_policy(ws: Workspace, state: ManagerState) -> None:
    marker = job_in(state, Kind.SUCCEEDED)
    shutil.rmtree(ws.payload_path(marker.placement, marker.job_key))
    old_tmp = ws.requests_dir / "tmp" / "r.json"
    old_tmp.write_text("{}")
    retired = ws.requests_dir / "retired"
    (retired / "a.json").write_text("{}")
    (retired / "a.json.retirement").write_text("{}")
    make_old_tree(ws.root)
    census = always_safe_census(attach(ws.root, writable=False))
    assert tuple(census) == CENSUS_KEYS
    assert census == {
        "total": 9,
        "removed_jobs": 1,
        "tmp_entries": 1,
        "retired_requests": 1,
        "placement_directories": 6,  # p below submitted, ready, claimed, running, committing, succeeded
    }
    assert old_tmp.exists() and marker.path(ws).exists()


# -- always safe ---------------------------------------------------------------------------------------
def test_empty_placement_mirrors_go_bottom_up_and_kind_directories_stay(ws: Workspace) -> None:
    deep = ws.marker_dir(Kind.READY, "a/b/c")
    deep.mkdir(parents=True)
    keeps = ws.marker_dir(Kind.READY, "a/keep")
    keeps.mkdir(parents=True)
    (keeps / "not-a-marker").write_text("fsck reports this; collection leaves it")
    report = collect_garbage(ws)
    assert not (ws.marker_dir(Kind.READY, "a/b")).exists()
    assert (keeps / "not-a-marker").exists()
    assert report.categories["placement_directories"].removed == 2
    assert ws.state_dir(Kind.READY).is_dir()


def test_tmp_entries_go_after_a_day_and_not_before(ws: Workspace) -> None:
    stale_tree = ws.tmp_dir / "payload.staging"
    (stale_tree / "files").mkdir(parents=True)
    (stale_tree / "files" / "runner").write_text("#!/bin/sh\n")
    stale_file = ws.requests_dir / "tmp" / "abc.json"
    stale_file.write_text("{}")
    young = ws.tmp_dir / "in-progress"
    young.write_text("")
    make_old_tree(stale_tree, 1.01)
    make_old(stale_file, 2)
    make_old(young, 0.99)
    report = collect_garbage(ws)
    assert not stale_tree.exists() and not stale_file.exists() and young.exists()
    counts = report.categories["tmp_entries"]
    assert (counts.candidates, counts.removed, counts.bytes_reclaimed) == (2, 2, len("#!/bin/sh\n") + 2)


def test_claimed_requests_go_after_a_month_once_their_manager_is_silent(root: Path, ws: Workspace) -> None:
    dead, live = new_state(root), new_state(root)
    publish_record(dead)
    publish_record(live)
    silence(ws, dead.manager_id)
    claimed = ws.requests_dir / "claimed"
    paths = {}
    for label, manager, days in (("dead-old", dead, 31), ("dead-young", dead, 29), ("live-old", live, 31)):
        (claimed / manager.manager_id).mkdir(exist_ok=True)
        paths[label] = claimed / manager.manager_id / f"{label}.json"
        paths[label].write_text("{}")
        make_old(paths[label], days)
    orphan = claimed / "gone-manager"  # its manager directory was collected long ago
    orphan.mkdir()
    (orphan / "orphan.json").write_text("{}")
    make_old_tree(orphan, 31)
    report = collect_garbage(ws)
    assert not paths["dead-old"].exists() and not (orphan / "orphan.json").exists()
    assert paths["dead-young"].exists() and paths["live-old"].exists()
    assert report.categories["claimed_requests"].removed == 2


def test_retired_requests_go_with_their_record_after_a_month(ws: Workspace) -> None:
    retired = ws.requests_dir / "retired"
    for name, days in (("old", 31), ("young", 29)):
        (retired / f"{name}.json").write_text("{}")
        (retired / f"{name}.json.retirement").write_text('{"reason": "stale generation"}')
        make_old(retired / f"{name}.json", 60)  # published long before it was retired
        make_old(retired / f"{name}.json.retirement", days)  # the record says when it was retired
    lone = retired / "lone.json.retirement"  # what an interrupted removal leaves: it still ages
    lone.write_text("{}")
    make_old(lone, 31)
    report = collect_garbage(ws)
    assert sorted(path.name for path in retired.iterdir()) == ["young.json", "young.json.retirement"]
    assert report.categories["retired_requests"].removed == 2


def test_a_job_whose_payload_was_removed_loses_its_marker_only_when_unowned(
    ws: Workspace, state: ManagerState
) -> None:
    markers = every_kind(state)
    for marker in markers.values():
        shutil.rmtree(ws.payload_path(marker.placement, marker.job_key))
        make_old(marker.path(ws), 1)
    young = job_in(state, Kind.READY, placement="young")
    shutil.rmtree(ws.payload_path(young.placement, young.job_key))  # just now: maybe not visible yet
    report = collect_garbage(ws)
    unowned = {Kind.SUBMITTED, Kind.READY, *TERMINAL_KINDS}
    for kind, marker in markers.items():
        assert marker.path(ws).exists() == (kind not in unowned), kind
        assert ws.marker_dir(kind, marker.placement).exists() == (kind not in unowned), kind
    assert young.path(ws).exists()
    assert report.categories["removed_jobs"].removed == len(unowned)


# -- the gc frame ---------------------------------------------------------------------------------------
def test_a_collection_that_removed_something_appends_one_valid_gc_frame(ws: Workspace) -> None:
    (ws.tmp_dir / "stale").write_text("12345")
    make_old(ws.tmp_dir / "stale")
    set_retention(ws, journal_days=30)
    report = collect_garbage(ws)
    assert report.frame_ref is not None
    frame = ws.reader.read(report.frame_ref)
    assert frame == report.frame()
    assert list(validator("gc").iter_errors(frame)) == []
    assert frame["retention"] == {"journal_days": 30.0}
    assert frame["removed"] == 1 and frame["bytes_reclaimed"] == 5
    assert frame["categories"] == {
        "tmp_entries": {"candidates": 1, "removed": 1, "bytes_reclaimed": 5, "candidate_bytes": 5}
    }
    assert gc_frames(ws) == [frame]


def test_job_log_reads_past_a_gc_frame_in_the_same_segment(tmp_path: Path) -> None:
    """The manager's own writer holds state frames before and after its gc frame, in one segment."""
    init(tmp_path / "big", durable=False).close()  # the default 64 MiB segments
    state = new_state(tmp_path / "big")
    marker = job_in(state, Kind.RUNNING)
    (state.workspace.tmp_dir / "stale").write_text("")
    make_old(state.workspace.tmp_dir / "stale")
    report = collect_garbage(state.workspace)  # the same process and writer that moved the job
    later = job_in(state, Kind.SUCCEEDED)
    assert report.frame_ref is not None
    gc_ref = RecordRef.parse(report.frame_ref)
    reader = attach(tmp_path / "big", writable=False)
    for job in (marker, later):
        assert job.name.ref is not None
        assert (job.name.ref.writer, job.name.ref.segment) == (gc_ref.writer, gc_ref.segment)
        history = job_history(reader, job)
        assert [entry.get("problem") for entry in history] == [None] * len(history)
        assert history[-1]["kind"] == job.kind.value and history[0]["from"] == "submitted"
    state.workspace.close()


# -- the periodic collection of a manager --------------------------------------------------------------
def test_a_manager_collects_at_most_once_per_interval(ws: Workspace) -> None:
    clock = ManualClock()
    periodic = PeriodicCollection(3600.0, clock)
    assert periodic.due()
    report = periodic.collect(ws, heartbeat=lambda: None, writer_id=ws.journal().writer_id)
    assert report is not None and periodic.reports == [report]
    assert not periodic.due()
    clock.advance(3599.0)
    assert not periodic.due()
    clock.advance(1.0)
    assert periodic.due()
    assert not PeriodicCollection(None, clock).due()


def test_a_report_names_every_category_and_its_totals(ws: Workspace) -> None:
    report = collect_garbage(ws, dry_run=True)
    assert isinstance(report, GcReport)
    data = report.as_dict()
    assert list(data["categories"]) == [
        "removed_jobs",
        "placement_directories",
        "tmp_entries",
        "claimed_requests",
        "retired_requests",
        "attempt_control",
        "transaction_trash",
        "journal_segment",
        "manager_directory",
        "retired_bundles",
        "transfer_receipts",
    ]
    assert data["skipped"]["journal_segment"] == "retention.journal_days is not set (keep)"


def test_a_collection_reports_its_progress_phase_by_phase(ws: Workspace, state: ManagerState) -> None:
    every_kind(state)
    set_retention(ws, **AGGRESSIVE)
    heard: list[tuple[str, int]] = []
    collect_garbage(ws, dry_run=True, progress=lambda what, done: heard.append((what, done)))
    phases = [what for what, _done in heard]
    assert set(phases) <= set(PHASES) and phases[0] == PHASES[0]
    assert phases == sorted(phases, key=PHASES.index)  # phase after phase, never back
    assert [done for _what, done in heard] == list(range(1, len(heard) + 1))  # every entry visited
    assert sum(1 for what in phases if what == PHASES[0]) >= len(ALL_KINDS)  # at least each marker
