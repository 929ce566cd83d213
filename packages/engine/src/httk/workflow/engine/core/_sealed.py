"""Sealed markers: a detached job's one marker, renamed out of the state tree into its bundle and back.

detached-transfer-v1 (``spec/01``, "Moving jobs between workspaces") seals a job by renaming the same
marker inode from ``state/transferring/<placement>/`` into ``<bundle>/.httk-transfer/``; no state tree
names the job then, so nothing can schedule it. Import (or an abort) appends the frame of the kind the
job returns to and renames that inode into ``state/<kind>/<placement>/`` of the workspace it now belongs
to: one verified rename, like every other marker move, checked against the transfer rows of the state
table (:data:`~._states.TRANSFER_TRANSITIONS`).

The frame's ``previous_record_ref`` is the sealed marker's own reference, which after an import names a
frame in the *source* workspace's journal: the chain goes on in the bundle's carried history.

Cost: sealing is one rename; unsealing one journal append and one rename, probes only after an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from httk.workflow.protocol import MarkerName

from . import _fsops
from ._frames import Frame, record_of
from ._states import Kind, Trigger, check_transition
from ._transition import TransitionResult, verified_rename
from ._workspace import MarkerLocation, Workspace, probe_marker

SEALED_DIR = ".httk-transfer"
"""The directory of a payload holding its transfer metadata and, while detached, its marker."""
SEALED_HISTORY = "history.json"
"""The carried frame history in ``.httk-transfer/``, kept after import so ``job log`` reads across."""
OUTGOING = "transfers/outgoing"
"""Below the control directory: a source's sealed bundles, ``<transfer-id>/`` (``<transfer-id>/<job-key>/``
in the layout before the flat one)."""


def sealed_markers(bundle: Path) -> list[MarkerName]:
    """The marker names sealed in ``bundle``'s ``.httk-transfer/`` (one, in a bundle that is whole)."""
    try:
        entries = _fsops.scandir(bundle / SEALED_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[MarkerName] = []
    with entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False) and not entry.name.endswith(".json"):
                try:
                    found.append(MarkerName.parse(entry.name))
                except ValueError:
                    continue
    return found


def seal_marker(workspace: Workspace, marker: MarkerLocation, bundle: Path) -> Path:
    """Rename the ``transferring`` ``marker`` into ``bundle/.httk-transfer/``; the sealed path.

    Only a transfer command moves a transferring marker, so a failed rename is retried only when the
    marker is still where it was (a crash is handled by the rerun, which finds it sealed).
    """
    if marker.kind is not Kind.TRANSFERRING:
        raise ValueError(f"only a transferring marker is sealed, not a {marker.kind.value} one")
    target = bundle / SEALED_DIR / str(marker.name)
    source = marker.path(workspace)
    try:
        _fsops.rename(source, target, durable=workspace.durable)
    except OSError:
        if not (_fsops.lexists(target) and not _fsops.lexists(source)):
            raise
        if workspace.durable:
            _fsops.sync_parents(source, target)
    return target


def unseal_marker(
    workspace: Workspace, sealed: Path, placement: str, frame: Frame, trigger: Trigger
) -> TransitionResult:
    """Publish the marker sealed at ``sealed`` into ``state/<frame.kind>/<placement>/`` of ``workspace``.

    ``frame`` is the destination frame without its common members (:func:`~._frames.record_of` adds them,
    for the placement the job now has). ``won`` is false when a marker of the job was already current at
    ``placement`` (another import won): the appended frame is then an orphan and nothing else changed.
    """
    name = MarkerName.parse(sealed.name)
    marker = MarkerLocation(Kind.TRANSFERRING, placement, name)
    check_transition(Kind.TRANSFERRING, frame.kind, trigger)
    record = record_of(workspace, marker, frame)
    ref = workspace.journal().append(record)
    target = MarkerLocation(frame.kind, placement, name.successor(ref, record["priority"]))

    def locate() -> Path | None:
        found = probe_marker(workspace, placement, marker.job_key)
        return None if found is None else found.path(workspace)

    won = verified_rename(
        sealed,
        target.path(workspace),
        durable=workspace.durable,
        deadline_seconds=workspace.policy.visibility_deadline_seconds,
        clock=workspace.clock,
        locate_current=locate,
    )
    current = target if won else probe_marker(workspace, placement, marker.job_key)
    if current is not None:
        workspace.note_marker(current)
    return TransitionResult(won, current)


def outgoing_markers(workspace: Workspace) -> Iterator[MarkerName]:
    """The sealed markers of the bundles awaiting acknowledgement in ``transfers/outgoing/``: their
    frames are in this workspace's journal, which collection must keep like a current marker's."""
    root = workspace.control / OUTGOING
    for transfer in _listing(root):
        if os.path.isdir(root / transfer / SEALED_DIR):
            yield from sealed_markers(root / transfer)
            continue
        for key in _listing(root / transfer):
            yield from sealed_markers(root / transfer / key)


def _listing(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


def is_sealed(bundle: Path) -> bool:
    """Whether ``bundle`` holds a sealed marker (it is a detached job, not a placed payload)."""
    return os.path.isdir(bundle / SEALED_DIR) and bool(sealed_markers(bundle))
