"""Verified marker transitions: the only way a job's state changes.

A transition appends the new state frame to this process's journal (synchronized when durable), derives
the new marker name from the frame's reference, and renames the exact old marker to that unique name.
The rename's return status is not trusted as the result: after any error the actor re-probes until it
sees its own destination (it won), the source (retry the same rename), or another current marker of the
job (another actor won). If all three stay absent past the workspace's visibility deadline the workspace
is unavailable or corrupt and mutation stops with :class:`WorkspaceUnavailableError`.

Cost: one journal append and one rename in the common case; directory probes only after an error.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.protocol import TransitionError, WorkspaceUnavailableError

from . import _fsops
from ._clock import Clock, backoff_schedule
from ._frames import Frame, record_of
from ._states import Trigger, check_transition
from ._workspace import MarkerLocation, Workspace, probe_marker


@dataclass(frozen=True, slots=True)
class TransitionResult:
    """What a verified transition established: whether this actor won, and the marker now current."""

    won: bool
    current: MarkerLocation | None


def verified_rename(
    src: Path | str,
    dst: Path | str,
    *,
    durable: bool,
    deadline_seconds: float,
    clock: Clock,
    locate_current: Callable[[], Path | None],
    sync_parents: bool = True,
) -> bool:
    """Rename ``src`` to the unique ``dst`` and return whether this actor's rename is the one that won.

    ``locate_current`` returns the job's current marker path (or ``None``); it is consulted only after
    the rename failed or was ambiguous. With ``sync_parents=False`` a durable rename leaves the two
    parent directories to the caller, who synchronizes a batch of them at once (:func:`move_markers`);
    a placement directory created on the way is synchronized here all the same.
    """
    first_error: OSError
    synced = durable and sync_parents
    try:
        _fsops.rename(src, dst, durable=synced)
        return True
    except FileNotFoundError:
        # Usually the destination's placement directory does not exist yet: it is created only then,
        # which spares every other transition a stat of it.
        try:
            _fsops.make_dirs(os.path.dirname(dst), durable=durable)
            _fsops.rename(src, dst, durable=synced)
            return True
        except OSError as exc:
            first_error = exc
    except OSError as exc:
        first_error = exc
    for pause in [0.0, *backoff_schedule(deadline_seconds)]:
        if pause:
            clock.sleep(pause)
        if _fsops.lexists(dst):
            if not os.path.isfile(dst) or os.path.islink(dst):
                raise TransitionError(f"{dst} exists but is not a regular marker file: corruption")
            if synced:
                _fsops.sync_parents(src, dst)  # the rename that reported failure may not have synced them
            return True  # our unique name exists: a rename we were told failed did happen
        if _fsops.lexists(src):
            try:
                _fsops.make_dirs(os.path.dirname(dst), durable=durable)
                _fsops.rename(src, dst, durable=synced)
                return True
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.EEXIST, errno.ESTALE):
                    raise
            continue
        current = locate_current()
        if current is not None and os.fspath(current) != os.fspath(dst):
            return False
    raise WorkspaceUnavailableError(
        f"marker rename {src} -> {dst} unresolved after {deadline_seconds} s: source, destination and any "
        f"other current marker are all absent (first error: {first_error})"
    )


Move = tuple[MarkerLocation, Frame, Trigger]
"""One transition of a batch: the marker, the new state frame (as :func:`move_marker` takes it), why."""


def move_marker(
    workspace: Workspace, marker: MarkerLocation, frame: Frame, trigger: Trigger
) -> TransitionResult:
    """Move ``marker`` to ``frame.kind`` by one legal, journaled, verified rename.

    ``frame`` is the new state frame without its common members, which are added here (:func:`record_of`)
    before the record is serialized, once, into this process's journal. The marker keeps its priority
    unless ``frame.priority`` is given. A lost race returns ``won=False`` with the marker that is current
    instead; the appended frame then stays in the journal as a harmless orphan.
    """
    return move_markers(workspace, [(marker, frame, trigger)])[0]


def move_markers(
    workspace: Workspace,
    moves: Sequence[Move],
    *,
    failed: Callable[[int, Exception], None] | None = None,
    owed: _fsops.OwedSyncs | None = None,
    owe_to: _fsops.OwedSyncs | None = None,
) -> list[TransitionResult]:
    """Move several jobs' markers as :func:`move_marker` does each, with one group commit.

    Every frame is appended first and, when durable, the segment is synchronized once for all of them;
    then each marker is renamed (verified, one by one, in order), and the parent directories of all the
    renames are synchronized together before this returns. Each rename so still follows its own frame's
    synchronization, and nothing that depends on a move happens before the move is durable: the ordering
    rules of spec/01 "Durability" hold for every transition of the batch, as if it had been moved alone.
    A crash between the shared fsync and a rename leaves that job's earlier marker current and its frame
    an orphan, exactly as a crash before a lone rename does. The jobs must be distinct.

    An error appending or synchronizing the frames, or synchronizing the directories, concerns every
    move of the batch and is raised. An error of one rename is raised too, unless ``failed`` is given:
    then ``failed(index, error)`` is told, that move's result is lost (``won=False``, no current marker
    known) and the other renames go on, their frames being as durable as ever.

    ``owed`` (durable only) holds the directory synchronizations of what the caller made for these moves
    (an attempt's control directory, context.json and process.json, made before its running move): they
    are made together with the renames' own, before this returns, and so before anything that depends
    on the moves happens (a runner is released only after its running move returned). With ``owe_to``
    the renames' own directory synchronizations are not made here but added to that later batch, for a
    caller whose next batch depends on these moves only having won, not on their being durable yet (a
    claim: no runner of it is released before its launch batch made them).
    """
    journal = workspace.journal()
    planned: list[tuple[MarkerLocation, MarkerLocation]] = []
    for marker, frame, trigger in moves:
        check_transition(marker.kind, frame.kind, trigger)
        record = record_of(workspace, marker, frame)
        ref = journal.append(record, sync=False)
        planned.append(
            (
                marker,
                MarkerLocation(frame.kind, marker.placement, marker.name.successor(ref, record["priority"])),
            )
        )
    journal.sync()
    results: list[TransitionResult] = []
    renames: dict[int, str] = {}  # the mutation number of each rename this actor won -> its directory
    for index, (marker, target) in enumerate(planned):
        try:
            result = _rename(workspace, marker, target)
        except Exception as exc:
            if failed is None:
                raise
            failed(index, exc)
            result = TransitionResult(False, None)
        results.append(result)
        if result.won and workspace.durable:
            renames[_fsops.mutation_count()] = os.path.dirname(target.path_text(workspace))
    if workspace.durable:
        parents = sorted(
            {
                os.path.dirname(path)
                for marker, target in planned
                for path in (marker.path_text(workspace), target.path_text(workspace))
            }
        )
        if owe_to is not None:
            owe_to.owe_renames(parents, renames)
            return results
        try:
            _fsops.fsync_dirs(parents, renames, owed)
        except OSError:
            # As a lone rename whose fsync failed is verified and synchronized again (verified_rename):
            # the renames happened, so their directories are synchronized once more; a second failure
            # is the caller's storage error.
            _fsops.fsync_dirs(sorted({*parents, *(owed.directories if owed is not None else ())}))
    return results


def _rename(workspace: Workspace, marker: MarkerLocation, target: MarkerLocation) -> TransitionResult:
    def locate() -> Path | None:
        found = probe_marker(workspace, marker.placement, marker.job_key)
        return None if found is None else found.path(workspace)

    won = verified_rename(
        marker.path_text(workspace),
        target.path_text(workspace),
        durable=workspace.durable,
        deadline_seconds=workspace.policy.visibility_deadline_seconds,
        clock=workspace.clock,
        locate_current=locate,
        sync_parents=False,
    )
    current = target if won else probe_marker(workspace, marker.placement, marker.job_key)
    if current is not None:
        workspace.note_marker(current)
    return TransitionResult(won, current)
