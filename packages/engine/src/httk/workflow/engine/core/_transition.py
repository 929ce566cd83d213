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
from collections.abc import Callable
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
    src: Path,
    dst: Path,
    *,
    durable: bool,
    deadline_seconds: float,
    clock: Clock,
    locate_current: Callable[[], Path | None],
) -> bool:
    """Rename ``src`` to the unique ``dst`` and return whether this actor's rename is the one that won.

    ``locate_current`` returns the job's current marker path (or ``None``); it is consulted only after
    the rename failed or was ambiguous.
    """
    first_error: OSError
    try:
        _fsops.rename(src, dst, durable=durable)
        return True
    except FileNotFoundError:
        # Usually the destination's placement directory does not exist yet: it is created only then,
        # which spares every other transition a stat of it.
        try:
            _fsops.make_dirs(dst.parent, durable=durable)
            _fsops.rename(src, dst, durable=durable)
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
            if durable:
                _fsops.sync_parents(src, dst)  # the rename that reported failure may not have synced them
            return True  # our unique name exists: a rename we were told failed did happen
        if _fsops.lexists(src):
            try:
                _fsops.make_dirs(dst.parent, durable=durable)
                _fsops.rename(src, dst, durable=durable)
                return True
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.EEXIST, errno.ESTALE):
                    raise
            continue
        current = locate_current()
        if current is not None and current != dst:
            return False
    raise WorkspaceUnavailableError(
        f"marker rename {src} -> {dst} unresolved after {deadline_seconds} s: source, destination and any "
        f"other current marker are all absent (first error: {first_error})"
    )


def move_marker(
    workspace: Workspace, marker: MarkerLocation, frame: Frame, trigger: Trigger
) -> TransitionResult:
    """Move ``marker`` to ``frame.kind`` by one legal, journaled, verified rename.

    ``frame`` is the new state frame without its common members, which are added here (:func:`record_of`)
    before the record is serialized, once, into this process's journal. The marker keeps its priority
    unless ``frame.priority`` is given. A lost race returns ``won=False`` with the marker that is current
    instead; the appended frame then stays in the journal as a harmless orphan.
    """
    destination = frame.kind
    check_transition(marker.kind, destination, trigger)
    record = record_of(workspace, marker, frame)
    ref = workspace.journal().append(record)
    target = MarkerLocation(destination, marker.placement, marker.name.successor(ref, record["priority"]))
    target_path = target.path(workspace)

    def locate() -> Path | None:
        found = probe_marker(workspace, marker.placement, marker.job_key)
        return None if found is None else found.path(workspace)

    won = verified_rename(
        marker.path(workspace),
        target_path,
        durable=workspace.durable,
        deadline_seconds=workspace.policy.visibility_deadline_seconds,
        clock=workspace.clock,
        locate_current=locate,
    )
    current = target if won else probe_marker(workspace, marker.placement, marker.job_key)
    if current is not None:
        workspace.note_marker(current)
    return TransitionResult(won, current)
