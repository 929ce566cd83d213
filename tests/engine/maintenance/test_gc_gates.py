"""``engine/_gc``: each retention-gated category is collected when its gate allows and kept otherwise.

An absent ``policy.retention`` member keeps its category whole (DECISIONS D4). Ages come from
``os.utime`` and from heartbeats written with an old ``updated_at``; nothing sleeps.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from httk.workflow.engine.core._frames import Frame, attempt_evidence, carried
from httk.workflow.engine.core._segments import segment_name
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach
from httk.workflow.engine.maintenance._gc import collect_garbage
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.ops._history import job_history
from httk.workflow.protocol import RecordRef

from tests.engine.maintenance.test_gc import (
    attempt_dir,
    make_old,
    make_old_tree,
    publish_record,
    root_fixture,  # noqa: F401 (a fixture)
    set_retention,
    silence,
    state_fixture,  # noqa: F401 (a fixture)
    ws_fixture,  # noqa: F401 (a fixture)
)
from tests.jobkinds import FAILURE, frame_of, job_in, new_state


def payload(ws: Workspace, marker: MarkerLocation) -> Path:
    return ws.payload_path(marker.placement, marker.job_key)


def failed_by_its_attempt(state: ManagerState) -> tuple[MarkerLocation, str]:
    """A job failed at its commit, whose failed frame names the attempt that decided it (as a manager's)."""
    committing = job_in(state, Kind.COMMITTING)
    frame = frame_of(state, committing)
    members = {**carried(frame), **attempt_evidence(frame), "failure": FAILURE, "reason": "failure"}
    result = state.move(committing, Frame(Kind.FAILED, members), Trigger.COMMIT)
    assert result.won and result.current is not None
    return result.current, frame["attempt_id"]


# -- attempt-control directories -----------------------------------------------------------------------
def test_old_attempt_control_dirs_of_a_terminal_job_go_but_never_its_newest(
    ws: Workspace, state: ManagerState
) -> None:
    failed, attempt_id = failed_by_its_attempt(state)
    newest = attempt_dir(ws, failed, attempt_id, 1)  # the frame names it, whatever its context says
    older = [attempt_dir(ws, failed, str(uuid.uuid4()), total) for total in (2, 3)]
    young = attempt_dir(ws, failed, str(uuid.uuid4()), 4)
    for directory in (newest, *older):
        make_old_tree(directory, 10)
    make_old_tree(young, 0.5)
    collect_garbage(ws)
    assert all(path.exists() for path in (newest, *older, young)), "no attempt_control_days: keep"
    set_retention(ws, attempt_control_days=1)
    report = collect_garbage(ws)
    assert newest.exists() and young.exists() and not any(path.exists() for path in older)
    counts = report.categories["attempt_control"]
    assert (counts.candidates, counts.removed) == (2, 2) and counts.bytes_reclaimed > 0


def test_without_the_deciding_dir_the_highest_total_attempts_is_the_newest(
    ws: Workspace, state: ManagerState
) -> None:
    succeeded = job_in(state, Kind.SUCCEEDED)  # D5 retired the deciding attempt's directory
    first, second = (attempt_dir(ws, succeeded, str(uuid.uuid4()), total) for total in (1, 2))
    make_old_tree(payload(ws, succeeded))
    set_retention(ws, attempt_control_days=0)
    collect_garbage(ws)
    assert second.exists() and not first.exists()


def test_attempt_dirs_are_all_kept_when_the_newest_cannot_be_told(ws: Workspace, state: ManagerState) -> None:
    cancelled = job_in(state, Kind.CANCELLED)  # cancelled from ready: its frame names no attempt
    first, second = (attempt_dir(ws, cancelled, str(uuid.uuid4()), total) for total in (1, 2))
    (second / "context.json").unlink()  # a preparation that never finished
    make_old_tree(payload(ws, cancelled))
    set_retention(ws, attempt_control_days=0)
    collect_garbage(ws)
    assert first.exists() and second.exists()


def test_a_non_terminal_job_keeps_every_attempt_dir(ws: Workspace, state: ManagerState) -> None:
    paused = job_in(state, Kind.PAUSED)
    dirs = [attempt_dir(ws, paused, str(uuid.uuid4()), total) for total in (1, 2)]
    make_old_tree(payload(ws, paused))
    set_retention(ws, attempt_control_days=0)
    collect_garbage(ws)
    assert all(directory.exists() for directory in dirs)


# -- transaction trash ---------------------------------------------------------------------------------
def trash_of(ws: Workspace, marker: MarkerLocation, days: float) -> Path:
    control = attempt_dir(ws, marker, str(uuid.uuid4()), 1)
    trash = control / "outcome.ready" / "transaction" / "trash"
    (trash / "op-1" / "removed").mkdir(parents=True)
    (trash / "op-1" / "removed" / "old.dat").write_text("old data")
    make_old_tree(control, days)
    return trash


def test_transaction_trash_goes_once_the_job_is_quiescent(ws: Workspace, state: ManagerState) -> None:
    quiescent = {kind: trash_of(ws, job_in(state, kind), 2) for kind in (Kind.SUCCEEDED, Kind.PAUSED)}
    young = trash_of(ws, job_in(state, Kind.READY), 0.5)
    replaying = trash_of(ws, job_in(state, Kind.COMMITTING), 2)  # a replay may still consult it
    collect_garbage(ws)
    assert all(trash.exists() for trash in (*quiescent.values(), young, replaying)), "no trash_days: keep"
    set_retention(ws, trash_days=1)
    report = collect_garbage(ws)
    assert not any(trash.exists() for trash in quiescent.values())
    assert all(trash.parent.is_dir() for trash in quiescent.values())  # only the trash went
    assert young.exists() and replaying.exists()
    assert report.categories["transaction_trash"].removed == 2
    assert report.categories["transaction_trash"].bytes_reclaimed == 2 * len("old data")


# -- journal segments ----------------------------------------------------------------------------------
def segment_keys(ws: Workspace, writer: str = "*") -> set[tuple[str, int]]:
    return {(path.parent.name, int(path.stem, 36)) for path in ws.journal_dir.glob(f"{writer}/*.hwj")}


def chain_refs(ws: Workspace, marker: MarkerLocation) -> list[RecordRef]:
    """The references of the marker's chain, newest first."""
    refs: list[RecordRef] = []
    ref = marker.name.ref
    while ref is not None:
        refs.append(ref)
        previous = ws.reader.read(ref)["previous_record_ref"]
        ref = None if previous is None else RecordRef.parse(previous)
    return refs


def chain_keys(ws: Workspace, marker: MarkerLocation) -> set[tuple[str, int]]:
    return {(ref.writer, ref.segment) for ref in chain_refs(ws, marker)}


def current_key(marker: MarkerLocation) -> set[tuple[str, int]]:
    return set() if marker.name.ref is None else {(marker.name.ref.writer, marker.name.ref.segment)}


def dead_history(state: ManagerState, ws: Workspace) -> dict[str, MarkerLocation]:
    """Jobs moved by a manager that then died; its segments are ten days old."""
    publish_record(state)
    jobs = {
        "succeeded": job_in(state, Kind.SUCCEEDED),
        "waiting": job_in(state, Kind.WAITING),
        "failed": job_in(state, Kind.FAILED),
        "ready": job_in(state, Kind.READY),
    }
    silence(ws, state.manager_id)
    for segment in ws.journal_dir.glob("*/*.hwj"):
        make_old(segment, 10)
    return jobs


def test_unreferenced_segments_of_a_dead_writer_go_and_chains_of_live_jobs_stay(
    ws: Workspace, state: ManagerState
) -> None:
    jobs = dead_history(state, ws)
    protected = set().union(
        *(current_key(marker) for marker in jobs.values()),
        chain_keys(ws, jobs["waiting"]),
        chain_keys(ws, jobs["ready"]),
    )
    expected_gone = segment_keys(ws) - protected
    assert expected_gone, "the scenario must leave a segment holding only terminal history"
    assert collect_garbage(ws).categories["journal_segment"].removed == 0, "no journal_days: keep"
    set_retention(ws, journal_days=1)
    report = collect_garbage(ws)
    assert segment_keys(ws) == protected | _gc_writer(report.frame_ref)
    assert report.categories["journal_segment"].removed == len(expected_gone)
    history = job_history(attach(ws.root, writable=False), jobs["succeeded"])
    assert history[0]["problem"]["code"] == "missing_segment"  # its deep history went, as spec/01 says
    assert history[-1]["kind"] == "succeeded" and "problem" not in history[-1]


def _gc_writer(frame_ref: str | None) -> set[tuple[str, int]]:
    return set() if frame_ref is None else {(RecordRef.parse(frame_ref).writer, 0)}


@pytest.mark.parametrize(
    "gate",
    [
        pytest.param((True, 1, 10, False), id="the-writer's-manager-heartbeats"),
        pytest.param((False, 1, 0.5, False), id="younger-than-journal_days"),
        pytest.param((False, 0, 0, False), id="written-within-one-lease"),
        pytest.param((False, 0, 10, True), id="the-collecting-process's-own-writer"),
    ],
)
def test_segments_are_kept_when_a_gate_forbids(
    ws: Workspace, state: ManagerState, gate: tuple[bool, float, float, bool]
) -> None:
    live, days, segment_age, protect_own = gate
    dead_history(state, ws)
    if live:
        publish_heartbeat_again(ws, state)
    for segment in ws.journal_dir.glob("*/*.hwj"):
        make_old(segment, segment_age)
    before = segment_keys(ws, state.writer_id)
    set_retention(ws, journal_days=days)
    report = collect_garbage(ws, protect_writers=(state.writer_id,) if protect_own else ())
    assert report.categories["journal_segment"].candidates == 0
    assert segment_keys(ws, state.writer_id) == before


def publish_heartbeat_again(ws: Workspace, state: ManagerState) -> None:
    from httk.workflow.engine.manager._manager import ManagerIdentity, ManagerRecord

    record = ManagerRecord(ws, ManagerIdentity(state.manager_id, ("default",), ()), state.writer_id)
    record.beat()


def test_an_unreadable_chain_stops_journal_collection(ws: Workspace, state: ManagerState) -> None:
    jobs = dead_history(state, ws)
    waiting = jobs["waiting"]
    oldest = chain_refs(ws, waiting)[-1]
    assert (oldest.writer, oldest.segment) not in current_key(waiting)
    segment = ws.journal_dir / oldest.writer / segment_name(oldest.segment)
    data = bytearray(segment.read_bytes())
    data[oldest.offset + 10] ^= 0x01  # inside the frame's JSON: its checksum no longer verifies
    segment.write_bytes(bytes(data))
    make_old(segment, 10)
    set_retention(ws, journal_days=1)
    before = segment_keys(ws, state.writer_id)
    report = collect_garbage(ws)
    assert "run workspace fsck" in report.skipped["journal_segment"]
    assert segment_keys(ws, state.writer_id) == before


# -- manager directories -------------------------------------------------------------------------------
def test_a_dead_managers_directory_goes_once_its_writer_kept_nothing(root: Path, ws: Workspace) -> None:
    dead, live, writing = new_state(root), new_state(root), new_state(root)
    for manager in (dead, live, writing):
        publish_record(manager)
        (ws.requests_dir / "claimed" / manager.manager_id).mkdir()
    job_in(writing, Kind.READY)  # a marker references this writer's segment: it is retained
    for manager in (dead, writing):
        silence(ws, manager.manager_id)
    directory = {m.manager_id: ws.managers_dir / m.manager_id for m in (dead, live, writing)}
    make_old_tree(ws.managers_dir)
    collect_garbage(ws)
    assert all(path.exists() for path in directory.values()), "no journal_days: keep"
    set_retention(ws, journal_days=1)
    report = collect_garbage(ws)
    assert not directory[dead.manager_id].exists()
    assert not (ws.requests_dir / "claimed" / dead.manager_id).exists()
    assert directory[live.manager_id].exists() and directory[writing.manager_id].exists()
    assert report.categories["manager_directory"].removed == 1


def test_what_an_interrupted_manager_directory_removal_leaves_is_removed_again(
    root: Path, ws: Workspace
) -> None:
    dead = new_state(root)
    publish_record(dead)
    directory = ws.managers_dir / dead.manager_id
    (directory / "heartbeat.json").unlink()  # removed first; manager.json is removed last
    make_old_tree(directory, 10)
    set_retention(ws, journal_days=1)
    collect_garbage(ws)
    assert not directory.exists()
