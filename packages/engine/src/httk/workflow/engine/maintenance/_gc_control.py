"""Collection outside the state tree: journal segments, dead managers' directories, and scratch.

**Journal segments** (``journal_days``), collected without losing a frame anything still needs.

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
  the writer's first frame). A live manager whose writer cannot be named at all, or a chain that cannot
  be read for another reason than a segment already gone, make the whole category wait for another run
  rather than guess (a workspace enabling detached transfers, whose sealed bundles may reference
  segments, is not collected at all: this version does not implement them and attaches it read-only);
* it is still that old when it is looked at again right before the unlink.

A writer directory left without a segment is removed with its last segment; an empty one found as such
only once it is older than one lease (a writer creates its directory just before its first segment).

Collecting is safe against a marker moving during the run: frames are immutable and a move only ever
points a marker at a newer frame, which its writer appended just now.

Cost: one listing of ``journal/`` and of each writer directory with one ``lstat`` per segment; when a
segment is a candidate, one frame read per generation of every non-terminal job.

**Managers.** Which managers are alive for collection purposes, and collecting the directories of dead ones.

A manager is *live* while its heartbeat is readable and no older than the lease it records — the same
evidence a recovering manager uses before it touches another manager's claim. A heartbeat that cannot
be read is no evidence of death by itself (a manager between ``mkdir`` and its first beat has none):
then the manifest's modification time, or the directory's, is its latest sign of life, judged against
the workspace lease. Each reading is fresh, never a snapshot taken earlier in the run, so a manager
that started while the collection was under way is seen as the live manager it is.

A manager directory (``journal_days``) goes once its manager is not live, its latest sign of life is
older than the limit (and than one lease), and none of its writer's journal segments was retained. Its
files are unlinked with ``manager.json`` last, then the directory is removed, so an interrupted removal
leaves either a manifest that still names the writer or an empty directory, never a writer nobody can
name. A directory whose writer cannot be named at all is kept unless it is empty.

Cost: one listing of ``managers/`` and two small reads per manager directory.

**Scratch.** Always-safe scratch: stale staging entries and requests that are only evidence any more.

* ``.httk-workflow/tmp/`` and ``.httk-workflow/requests/tmp/``: every publication renames its staging
  entry away within one operation, so an entry still there more than 24 hours after it was last
  modified is the remains of an interrupted one (a file, or a tree removed bottom-up).
* ``requests/claimed/<manager-id>/``: a request more than 30 days old whose manager is not live (read
  at that moment, :func:`._gc_managers.manager_life`; without a manager directory the claimed
  directory's own modification time is the latest sign of life, as when re-claiming).
* ``requests/retired/``: a request and its ``.retirement`` record more than 30 days old. The record is
  the age evidence and is removed last, so an interrupted removal leaves a record that still ages
  (a lone request ages by its own time).
* ``quarantine/`` stays outside collection (spec/01) except for one name: the staging file
  ``.<entry>.quarantine.tmp.<pid>.<hex>`` of an audit record, which ``_fsops.write_file_atomic`` renames
  away within one operation. One still there was never published — no entry, no record — so it is an
  unpublished staging entry like those in ``tmp/``, counted with them and collected after 24 hours. A
  quarantined entry and its ``.quarantine`` record never begin with a dot and are never touched. The
  same holds for ``.<request>.retirement.tmp.<pid>.<hex>`` in ``requests/retired/``.

Cost: one listing of each of these directories and one ``lstat`` per entry.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from httk.workflow.engine.core._frames import fits_link, previous_link
from httk.workflow.engine.core._segments import parse_segment_name
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.protocol import (
    InvalidDocumentError,
    InvalidNameError,
    JournalDamageError,
    JournalError,
    MarkerName,
    RecordRef,
    validate_uuid,
)
from httk.workflow.protocol._jsonio import read_json_object

from ._gc_tree import DAY_SECONDS, Sweep, TreeFindings, segment_key

MAX_RECORD_BYTES = 256 * 1024
MANIFEST = "manager.json"
HEARTBEAT = "heartbeat.json"


@dataclass(frozen=True, slots=True)
class ManagerLife:
    """One manager as a collector sees it."""

    manager_id: str
    writer_ids: frozenset[str]
    live: bool
    last_sign: float | None  # epoch seconds of its latest sign of life; None when nothing is left


def manager_life(sweep: Sweep, manager_id: str) -> ManagerLife:
    """Read ``managers/<manager_id>/`` now (see the module docstring for what counts as live)."""
    directory = sweep.workspace.managers_dir / manager_id
    manifest = _read(directory / MANIFEST)
    heartbeat = _read(directory / HEARTBEAT)
    writers = frozenset(
        value
        for document in (manifest, heartbeat)
        if document is not None and isinstance(value := document.get("writer_id"), str)
    )
    beat = _heartbeat_time(heartbeat)
    if beat is not None:
        lease = _lease(heartbeat, sweep.workspace.policy.lease_seconds)
        return ManagerLife(manager_id, writers, sweep.age(beat) <= lease, beat)
    sign = _mtime(directory / MANIFEST) or _mtime(directory)
    live = sign is not None and sweep.age(sign) <= sweep.floor_seconds
    return ManagerLife(manager_id, writers, live, sign)


def manager_ids(sweep: Sweep) -> list[str]:
    """Every directory name below ``managers/`` (symlinks and files are not managers)."""
    try:
        with os.scandir(sweep.workspace.managers_dir) as listing:
            return sorted(entry.name for entry in listing if entry.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []


def live_writers(sweep: Sweep) -> tuple[set[str], list[str]]:
    """Writers of live managers, and the live managers whose writer cannot be named (no protection)."""
    writers: set[str] = set()
    unnamed: list[str] = []
    for manager_id in manager_ids(sweep):
        sweep.visit()
        life = manager_life(sweep, manager_id)
        if life.live:
            writers |= life.writer_ids
            if not life.writer_ids:
                unnamed.append(manager_id)
    return writers, unnamed


def sweep_manager_dirs(sweep: Sweep, limit: float, retained_writers: set[str]) -> None:
    """Collect the directory of every dead manager past ``limit`` seconds whose writer kept nothing."""
    threshold = max(limit, sweep.floor_seconds)
    for manager_id in manager_ids(sweep):
        sweep.visit()
        life = manager_life(sweep, manager_id)
        if life.live or life.last_sign is None or sweep.age(life.last_sign) < threshold:
            continue
        if life.writer_ids & retained_writers:
            continue
        directory = sweep.workspace.managers_dir / manager_id
        if not life.writer_ids and _has_entries(directory):
            continue  # its writer cannot be named, so whether it kept segments cannot be told
        if sweep.remove_dir_ordered("manager_directory", directory, last=MANIFEST):
            sweep.remove_dir(None, sweep.workspace.requests_dir / "claimed" / manager_id)


def _read(path: Path) -> dict[str, object] | None:
    try:
        return read_json_object(path, document=path.name, max_bytes=MAX_RECORD_BYTES)
    except InvalidDocumentError:
        return None


def _heartbeat_time(heartbeat: dict[str, object] | None) -> float | None:
    if heartbeat is None:
        return None
    try:
        return datetime.fromisoformat(str(heartbeat["updated_at"]).replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError):
        return None


def _lease(heartbeat: dict[str, object] | None, default: float) -> float:
    value = None if heartbeat is None else heartbeat.get("lease_seconds")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def _mtime(path: Path) -> float | None:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None


def _has_entries(directory: Path) -> bool:
    try:
        with os.scandir(directory) as listing:
            return any(True for _ in listing)
    except OSError:
        return True


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


TMP_SECONDS = DAY_SECONDS
REQUEST_SECONDS = 30 * DAY_SECONDS
RETIREMENT_SUFFIX = ".retirement"
QUARANTINE_STAGING = re.compile(r"\.[^/]+\.quarantine\.tmp\.[0-9]+\.[0-9a-f]{8}\Z")
"""``write_file_atomic``'s temporary name (``engine/core/_fsops.py``) for a ``<entry>.quarantine`` record."""
RETIREMENT_STAGING = re.compile(r"\.[^/]+\.retirement\.tmp\.[0-9]+\.[0-9a-f]{8}\Z")
"""The same for a retired request's ``<request>.retirement`` record."""


def sweep_scratch(sweep: Sweep) -> None:
    """Collect the tmp entries, stale claimed requests and old retired requests."""
    workspace = sweep.workspace
    for directory in (workspace.tmp_dir, workspace.requests_dir / "tmp"):
        _sweep_tmp(sweep, directory)
    _sweep_claimed(sweep, workspace.requests_dir / "claimed")
    _sweep_retired(sweep, workspace.requests_dir / "retired")
    _sweep_record_staging(sweep, workspace.requests_dir / "retired", RETIREMENT_STAGING)
    _sweep_record_staging(sweep, workspace.quarantine_dir, QUARANTINE_STAGING)


def _entries(sweep: Sweep, directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return sorted(listing, key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        sweep.note_error(directory, exc)
        return []


def _entry_mtime(entry: os.DirEntry[str]) -> float | None:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return None


def _sweep_tmp(sweep: Sweep, directory: Path) -> None:
    for entry in _entries(sweep, directory):
        sweep.visit()
        mtime = _entry_mtime(entry)
        if mtime is not None and sweep.age(mtime) > TMP_SECONDS:
            sweep.remove_entry("tmp_entries", entry.path)


def _sweep_record_staging(sweep: Sweep, directory: Path, staging: re.Pattern[str]) -> None:
    for entry in _entries(sweep, directory):
        if not staging.match(entry.name) or not entry.is_file(follow_symlinks=False):
            continue  # an entry, its record, or anything else: not scratch of ours
        sweep.visit()
        mtime = _entry_mtime(entry)
        if mtime is not None and sweep.age(mtime) > TMP_SECONDS:
            sweep.remove_files("tmp_entries", [entry.path])


def _sweep_claimed(sweep: Sweep, claimed: Path) -> None:
    for holder in _entries(sweep, claimed):
        if not holder.is_dir(follow_symlinks=False):
            continue
        # List first, then ask whether the manager lives: a request claimed after this reading is
        # not in the listing, and one claimed before it belongs to a manager judged afterwards.
        requests = [
            entry for entry in _entries(sweep, Path(holder.path)) if entry.is_file(follow_symlinks=False)
        ]
        if not requests or _holder_live(sweep, holder):
            continue
        for entry in requests:
            sweep.visit()
            mtime = _entry_mtime(entry)
            if mtime is not None and sweep.age(mtime) > REQUEST_SECONDS:
                sweep.remove_files("claimed_requests", [entry.path])


def _holder_live(sweep: Sweep, holder: os.DirEntry[str]) -> bool:
    if (sweep.workspace.managers_dir / holder.name).is_dir():
        return manager_life(sweep, holder.name).live
    mtime = _entry_mtime(holder)
    return mtime is None or sweep.age(mtime) <= sweep.floor_seconds


def _sweep_retired(sweep: Sweep, retired: Path) -> None:
    by_request: dict[str, dict[str, os.DirEntry[str]]] = {}
    for entry in _entries(sweep, retired):
        if not entry.is_file(follow_symlinks=False) or entry.name.startswith("."):
            continue  # a dot name is a record being written (write_file_atomic's temporary)
        request = entry.name.removesuffix(RETIREMENT_SUFFIX)
        by_request.setdefault(request, {})[entry.name] = entry
    for request, files in by_request.items():
        sweep.visit()
        evidence = files.get(request + RETIREMENT_SUFFIX) or files[request]
        mtime = _entry_mtime(evidence)
        if mtime is None or sweep.age(mtime) <= REQUEST_SECONDS:
            continue
        # The request first, its record last: the record is what ages the pair.
        names = sorted(files, key=lambda name: name.endswith(RETIREMENT_SUFFIX))
        sweep.remove_files("retired_requests", [retired / name for name in names])
