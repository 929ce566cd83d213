"""A group commit through the fault seam, in process: the shared fsync of a batch's frames and the shared
synchronization of its renames answer for every mutation of the batch, and one rename's failure is that
move's alone.

Each test registers three submitted jobs of a durable workspace as one batch
(:func:`~httk.workflow.engine.core._transition.move_markers`): three appends, one fsync of the segment,
three renames, one synchronization of their directories. A fault is planned at one mutation of the batch
that is not the last of its kind, where only a seam that remembers the whole batch can see it.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
from httk.workflow.engine.core import _faults, _fsops
from httk.workflow.engine.core._faults import Fault, Plan
from httk.workflow.engine.core._frames import first_activation
from httk.workflow.engine.core._jobs import load_job
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import Move, move_markers
from httk.workflow.engine.core._workspace import Workspace, attach, probe_marker
from httk.workflow.protocol import JournalError

from tests.crash._scenarios import PLACEMENT
from tests.crash.test_group_commit_crash import JOBS, new_batch


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    """A durable workspace with JOBS submitted jobs (the group-commit crash suite's case)."""
    root, _logs = new_batch(tmp_path / "case")
    ws = attach(root)
    try:
        yield ws
    finally:
        _faults.install(None)
        ws.close()


def registrations(workspace: Workspace) -> list[Move]:
    """The batch of moves that registers every submitted job."""
    moves: list[Move] = []
    for entry in sorted((workspace.root / ".httk-workflow" / "state" / "submitted" / PLACEMENT).iterdir()):
        key = entry.name.split(".p", 1)[0]
        marker = probe_marker(workspace, PLACEMENT, key)
        assert marker is not None and marker.kind is Kind.SUBMITTED
        job = load_job(workspace, PLACEMENT, key)
        registered = first_activation(job.document, job.digest, reason="registered")
        moves.append((marker, registered, Trigger.REGISTER))
    assert len(moves) == JOBS
    # The writer's directory and segment and the ready placement exist before the batch, which so
    # mutates nothing but its appends and renames (an orphan frame like this one is harmless).
    workspace.journal().append({"warm": True})
    (workspace.root / ".httk-workflow" / "state" / "ready" / PLACEMENT).mkdir(parents=True)
    return moves


def kinds(workspace: Workspace, moves: list[Move]) -> list[Kind | None]:
    current = [probe_marker(workspace, PLACEMENT, marker.job_key) for marker, _, _ in moves]
    return [None if marker is None else marker.kind for marker in current]


def plan_at(offset: int, fault: Fault) -> Plan:
    """A plan for mutation ``offset`` of a batch that starts with the next mutation (1: its first append)."""
    installed = Plan(_fsops.mutation_count() + offset, fault)
    _faults.install(installed)
    return installed


@pytest.mark.parametrize("offset", range(1, JOBS + 1))
def test_an_fsync_fault_at_any_append_of_a_batch_fails_its_shared_fsync_before_any_rename(
    workspace: Workspace, offset: int
) -> None:
    moves = registrations(workspace)
    installed = plan_at(offset, Fault.FSYNC_EIO)
    with pytest.raises(JournalError, match="cannot synchronize journal frames") as caught:
        move_markers(workspace, moves)
    assert installed.fired and isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == errno.EIO
    assert kinds(workspace, moves) == [Kind.SUBMITTED] * JOBS  # no marker names an unsynchronized frame
    results = move_markers(workspace, moves)  # fired once: the batch commits on the next try
    assert all(result.won for result in results) and kinds(workspace, moves) == [Kind.READY] * JOBS


@pytest.mark.parametrize("rename", range(1, JOBS + 1))
def test_an_fsync_fault_at_any_rename_of_a_batch_fails_its_shared_directory_sync(
    workspace: Workspace, rename: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    moves = registrations(workspace)
    installed = plan_at(JOBS + rename, Fault.FSYNC_EIO)  # the appends come first, then the renames
    synced: list[list[str]] = []
    fsync_dirs = _fsops.fsync_dirs

    def recording(
        paths: list[str], renames: dict[int, str] | None = None, owed: _fsops.OwedSyncs | None = None
    ) -> None:
        synced.append(list(paths))
        fsync_dirs(paths, renames, owed)

    monkeypatch.setattr(_fsops, "fsync_dirs", recording)
    results = move_markers(workspace, moves)
    # The renames happened; their directories are synchronized once more, as a lone rename's would be.
    assert installed.fired and len(synced) == 2 and synced[0] == synced[1]
    assert all(result.won for result in results) and kinds(workspace, moves) == [Kind.READY] * JOBS


def failing_rename(monkeypatch: pytest.MonkeyPatch, source: Path) -> None:
    """Every rename of ``source`` fails with EIO, as on storage that has lost that directory entry (the
    seam's planned faults fire once, and a verified rename retries them away)."""
    rename = _fsops._rename_noreplace

    def failing(src: Path | str, dst: Path | str) -> None:
        if Path(src) == source:
            raise OSError(errno.EIO, "Input/output error (injected, persistent)", str(src))
        rename(src, dst)

    monkeypatch.setattr(_fsops, "_rename_noreplace", failing)


def test_a_failed_rename_of_a_batch_is_that_move_s_alone(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    moves = registrations(workspace)
    failing_rename(monkeypatch, moves[1][0].path(workspace))
    failed: list[tuple[int, int | None]] = []
    results = move_markers(
        workspace, moves, failed=lambda index, exc: failed.append((index, getattr(exc, "errno", None)))
    )
    assert failed == [(1, errno.EIO)]
    assert [result.won for result in results] == [True, False, True]
    assert kinds(workspace, moves) == [Kind.READY, Kind.SUBMITTED, Kind.READY]


def test_without_a_listener_a_failed_rename_of_a_batch_is_raised(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    moves = registrations(workspace)
    failing_rename(monkeypatch, moves[0][0].path(workspace))
    with pytest.raises(OSError) as caught:
        move_markers(workspace, moves)
    assert caught.value.errno == errno.EIO and kinds(workspace, moves)[0] is Kind.SUBMITTED
