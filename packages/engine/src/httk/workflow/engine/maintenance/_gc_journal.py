"""Collecting journal segments (``journal_days``) without losing a frame anything still needs.

A segment ``journal/<writer>/<n>.hwj`` is removed only when all of these hold:

* it was last written more than ``journal_days`` ago, and more than one lease ago: a writer that is no
  manager heartbeats nowhere, and its segment is presumed in use while it is being written to;
* no marker seen in the state walk points into it (every marker's *current* segment is kept);
* no frame on the chain of a non-terminal job lies in it. The chain is walked back through
  ``previous_record_ref`` (across the generations an ``fsck_repair`` frame jumps over, as ``job log``
  does); a terminal job keeps only its current segment (spec/03), so its deep history goes with
  ``journal_days`` and ``job log`` reports the gap;
* its writer belongs to no live manager — read *after* the segments were listed, so a manager that
  started meanwhile is already in the manifest that names its writer (a manifest is written before
  the writer's first frame). A live manager whose writer cannot be named at all, a chain that cannot be
  read for another reason than a segment already gone, or a workspace enabling detached transfers
  (whose sealed bundles may reference segments this version cannot read) make the whole category wait
  for another run rather than guess;
* it is still that old when it is looked at again right before the unlink.

A writer directory left without a segment is removed with its last segment; an empty one found as such
only once it is older than one lease (a writer creates its directory just before its first segment).

Collecting is safe against a marker moving during the run: frames are immutable and a move only ever
points a marker at a newer frame, which its writer appended just now.

Cost: one listing of ``journal/`` and of each writer directory with one ``lstat`` per segment; when a
segment is a candidate, one frame read per generation of every non-terminal job.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from httk.workflow.engine.core._frames import fits_link, previous_link
from httk.workflow.engine.core._segments import parse_segment_name
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.protocol import (
    InvalidNameError,
    JournalDamageError,
    JournalError,
    MarkerName,
    RecordRef,
    validate_uuid,
)

from ._gc_managers import live_writers
from ._gc_sweep import Sweep
from ._gc_tree import TreeFindings, segment_key

TRANSFER_EXTENSION = "detached-transfer-v1"


@dataclass(frozen=True, slots=True)
class _Segment:
    writer: str
    number: int
    path: Path
    mtime: float

    @property
    def key(self) -> str:
        return segment_key(self.writer, self.number)


@dataclass
class _Writer:
    directory: Path
    segments: list[_Segment] = field(default_factory=list)
    others: int = 0  # entries that are not segments: never touched, and they keep the directory


class UnreadableChainError(Exception):
    """A non-terminal job's history cannot be followed, so what it protects cannot be known."""


def sweep_journal(
    sweep: Sweep, findings: TreeFindings, limit: float | None, protect_writers: Collection[str] = ()
) -> tuple[set[str], str | None]:
    """Collect old unprotected segments; return the writers still holding segments and why nothing
    was collected (``None`` when the category ran)."""
    writers = _list_writers(sweep)
    retained = {writer for writer, found in writers.items() if found.segments}
    if limit is None:
        return retained, "retention.journal_days is not set (keep)"
    if TRANSFER_EXTENSION in sweep.workspace.extensions:
        return retained, f"the workspace enables {TRANSFER_EXTENSION}, whose bundles may reference segments"
    live, unnamed = live_writers(sweep)
    if unnamed:
        return retained, f"live manager {unnamed[0]} names no journal writer"
    live |= set(protect_writers)
    threshold = max(limit, sweep.floor_seconds)
    candidates = [
        segment
        for writer, found in writers.items()
        if writer not in live
        for segment in found.segments
        if sweep.age(segment.mtime) >= threshold and segment.key not in findings.current_segments
    ]
    if candidates:
        try:
            protected = chain_segments(sweep, findings.chains)
        except UnreadableChainError as exc:
            return retained, str(exc)
        for segment in candidates:
            if segment.key in protected or not _still_old(sweep, segment, threshold):
                continue
            if sweep.remove_files("journal_segment", [segment.path]):
                writers[segment.writer].segments.remove(segment)
    for writer, found in writers.items():
        if writer not in live and not found.segments and not found.others:
            _remove_writer_dir(sweep, found, emptied=writer in retained)
    return {writer for writer, found in writers.items() if found.segments}, None


def _list_writers(sweep: Sweep) -> dict[str, _Writer]:
    journal = sweep.workspace.journal_dir
    writers: dict[str, _Writer] = {}
    try:
        with os.scandir(journal) as listing:
            directories = [entry for entry in listing if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return writers
    for directory in sorted(directories, key=lambda entry: entry.name):
        try:
            writer = validate_uuid(directory.name, "journal writer directory")
        except InvalidNameError:
            continue  # not a writer directory: left alone
        writers[writer] = _list_segments(sweep, writer, Path(directory.path))
    return writers


def _list_segments(sweep: Sweep, writer: str, directory: Path) -> _Writer:
    found = _Writer(directory)
    try:
        with os.scandir(directory) as listing:
            entries = list(listing)
    except OSError as exc:
        sweep.note_error(directory, exc)
        found.others += 1
        return found
    for entry in entries:
        sweep.visit()
        try:
            number = parse_segment_name(entry.name)
            if not entry.is_file(follow_symlinks=False):
                raise InvalidNameError("journal segment", entry.name, "is not a regular file")
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except (InvalidNameError, OSError):
            found.others += 1
            continue
        found.segments.append(_Segment(writer, number, Path(entry.path), mtime))
    found.segments.sort(key=lambda segment: segment.number)
    return found


def _still_old(sweep: Sweep, segment: _Segment, threshold: float) -> bool:
    try:
        return sweep.age(os.lstat(segment.path).st_mtime) >= threshold
    except FileNotFoundError:
        return False
    except OSError as exc:
        sweep.note_error(segment.path, exc)
        return False


def _remove_writer_dir(sweep: Sweep, found: _Writer, *, emptied: bool) -> None:
    if not emptied:
        try:
            if sweep.age(os.lstat(found.directory).st_mtime) <= sweep.floor_seconds:
                return
        except OSError:
            return
    sweep.remove_dir(None, found.directory)


def chain_segments(sweep: Sweep, chains: list[tuple[Kind, str, str]]) -> set[str]:
    """Every segment holding a frame of one of these markers' chains.

    A segment already gone ends that chain (its older history went with it, and nothing can be
    protected behind a gap). Any other failure to read raises :class:`UnreadableChainError`.
    """
    reader = sweep.workspace.reader
    protected: set[str] = set()
    missing: set[str] = set()
    for kind, placement, name in chains:
        marker = MarkerLocation(kind, placement, MarkerName.parse(name))
        ref: RecordRef | None = marker.name.ref
        expected = range(marker.name.generation, marker.name.generation + 1)
        while ref is not None and expected:
            sweep.visit()
            key = segment_key(ref.writer, ref.segment)
            protected.add(key)
            if key in missing:
                break
            try:
                frame = reader.read(ref)
            except JournalDamageError as exc:
                if exc.code == "missing_segment":
                    missing.add(key)
                    break
                raise UnreadableChainError(_unreadable(marker, ref, exc.code)) from exc
            except JournalError as exc:
                raise UnreadableChainError(_unreadable(marker, ref, str(exc))) from exc
            if frame.get("job_id") != marker.job_id or not fits_link(frame, expected):
                raise UnreadableChainError(_unreadable(marker, ref, "identity_mismatch"))
            previous, expected = previous_link(frame)  # a repair's link jumps over lost generations
            ref = _previous(previous, marker)
    return protected


def _previous(previous: object, marker: MarkerLocation) -> RecordRef | None:
    if previous is None:
        return None
    try:
        return RecordRef.parse(str(previous))
    except InvalidNameError as exc:
        raise UnreadableChainError(_unreadable(marker, None, "invalid_record_ref")) from exc


def _unreadable(marker: MarkerLocation, ref: RecordRef | None, why: str) -> str:
    at = "" if ref is None else f" at {ref}"
    return f"the history of job {marker.job_key}{at} cannot be read ({why}); run workspace fsck"
