"""Collection in the state tree and its payloads, and the sweep every category shares.

**The state tree** and the payloads its markers name: one exhaustive, bottom-up walk.

Every state kind's directory is walked depth first with an explicit stack (placements may be deep), each
directory listed once. On the way it

* records the journal segment each marker's frame lives in, and every non-terminal marker, whose whole
  frame chain the journal category then protects (:class:`TreeFindings`);
* removes the marker of a ``submitted``, ``ready`` or terminal job whose payload was removed (always
  safe, spec/03): exactly the marker name it saw, with ``unlink``, so a manager that claims the job in
  the same instant renames that name away first and this unlink finds nothing (ENOENT, ordinary);
* collects a terminal job's attempt-control directories except its newest (``attempt_control_days``)
  and the transaction trash of a job in a quiescent kind (``trash_days``);
* on the way back up, rmdirs every placement mirror that was left empty. A transition recreating the
  same path underneath turns that rmdir into ENOTEMPTY or makes its own rename retry after ENOENT
  (the verified rename recreates the parents), both ordinary. The kind directory itself stays.

Why a payload is listed before its marker is looked at again: a job's attempt-control directories are
created only after a claim moved its marker out of the observed kind. So when the marker still has the
exact name seen in the walk after the listing, every directory listed belongs to an attempt that ended
before the job reached that quiescent or terminal state, and a claim racing the collection creates a
directory this run never listed.

Never touched here: the payload itself, its workdirs (persistent or isolated), incomplete outcome
directories of a non-terminal job, a marker of any other kind, or a payload that never reached a
marker. A marker moving between two kinds while they are walked may be missed by this run; its frame is
in a segment its writer appended to just now, which the journal category keeps for that reason alone.

Cost: one listing per state directory, one ``lexists`` per marker of a kind whose payload may be
removed, and, only while a payload gate is set, one listing per payload (plus context.json reads and at
most one frame read for a terminal job with several attempt-control directories).

**The sweep**: what every category shares — its counts, how old is old, and how an entry is removed.

A :class:`Sweep` is one collection run. Each category module asks it whether an entry is old enough and
then hands the entry to one of its removal methods, which count the entry as a *candidate* (it passed
every gate), remove it through the mutation seam unless the run is a dry run, and count what was removed
and how many bytes that freed. Removal never renames anything and never raises for an entry that is
already gone: another collector, ``job delete`` or a manager got there first, which is an ordinary
outcome. Any other operating-system error is recorded in :attr:`Sweep.errors` and the collection goes on;
the entry is simply left for the next run.

Cost: a tree's size is measured by one ``lstat`` per file before it is removed (a dry run measures too).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._states import DISPOSABLE_KINDS, QUIESCENT_KINDS, TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, is_marker_name, marker_stem
from httk.workflow.engine.publish._outcome import OUTCOME_DIR, TRANSACTION_DIR
from httk.workflow.engine.publish._submit import walk_tree
from httk.workflow.engine.publish._transaction_manifest import TRASH_DIR
from httk.workflow.protocol import INIT_REF, InvalidDocumentError, MarkerName, WorkflowError, encode_base36
from httk.workflow.protocol._digest import ATTEMPT_DIR_PREFIX
from httk.workflow.protocol._jsonio import read_json_object

DAY_SECONDS = 86400.0
HEARTBEAT_EVERY = 512
"""Entries visited between two heartbeat opportunities (a manager collecting must keep its lease)."""
MAX_ERRORS = 20
"""Errors kept in a report; the rest are only counted."""

ALWAYS_SAFE = ("removed_jobs", "placement_directories", "tmp_entries", "claimed_requests", "retired_requests")
"""The categories collected whatever ``policy.retention`` says (spec/01, "Retention gates")."""
GATED = (
    "attempt_control",
    "transaction_trash",
    "journal_segment",
    "manager_directory",
    "retired_bundles",
    "transfer_receipts",
)
"""The categories a ``policy.retention`` limit must allow; an absent limit keeps them (D4)."""
CATEGORIES = ALWAYS_SAFE + GATED


@dataclass
class CategoryCount:
    """One category of one run: entries that passed every gate, entries removed, and their bytes."""

    candidates: int = 0
    removed: int = 0
    bytes_reclaimed: int = 0
    candidate_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "candidates": self.candidates,
            "removed": self.removed,
            "bytes_reclaimed": self.bytes_reclaimed,
            "candidate_bytes": self.candidate_bytes,
        }


@dataclass
class Sweep:
    """The state of one collection run: the clock reading it judges ages by, and what it counted."""

    workspace: Workspace
    dry_run: bool
    now: datetime
    heartbeat: Callable[[], None] | None = None
    counts: dict[str, CategoryCount] = field(default_factory=lambda: {c: CategoryCount() for c in CATEGORIES})
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    progress: Callable[[str, int], None] | None = None
    phase: str = ""  # what ``progress`` is told is being done
    _visited: int = 0

    @property
    def floor_seconds(self) -> float:
        """The youngest a journal segment or manager remnant may be and still be collected.

        A writer that is no manager (``fsck --repair``, a library caller) heartbeats nowhere, so its
        segment is presumed in use while it was written to within one lease.
        """
        return self.workspace.policy.lease_seconds

    def visit(self) -> None:
        """Count one visited entry; every :data:`HEARTBEAT_EVERY` entries the caller's heartbeat runs."""
        self._visited += 1
        if self.heartbeat is not None and self._visited % HEARTBEAT_EVERY == 0:
            self.heartbeat()
        if self.progress is not None:
            self.progress(self.phase, self._visited)

    def age(self, mtime: float) -> float:
        return self.now.timestamp() - mtime

    def note_error(self, path: Path | str, exc: OSError) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"{path}: {exc.strerror or exc}")

    # -- removal -------------------------------------------------------------------------------------
    def _candidate(self, category: str, size: int) -> CategoryCount:
        count = self.counts[category]
        count.candidates += 1
        count.candidate_bytes += size
        return count

    @staticmethod
    def _removed(count: CategoryCount, size: int) -> None:
        count.removed += 1
        count.bytes_reclaimed += size

    def remove_files(self, category: str, paths: Sequence[Path | str]) -> bool:
        """Unlink files (never directories) in order, counted as one entry; whether all are gone now.

        The entry counts as removed when this run unlinked any of them; one already gone is no error.
        """
        sizes = [_size(path) for path in paths]
        count = self._candidate(category, sum(sizes))
        if self.dry_run:
            return True
        freed = unlinked = 0
        for path, size in zip(paths, sizes, strict=True):
            try:
                if _fsops.unlink(path, durable=self.workspace.durable, missing_ok=True):
                    unlinked += 1
                    freed += size
            except OSError as exc:
                self.note_error(path, exc)
                return False
        if unlinked:
            count.removed += 1
            count.bytes_reclaimed += freed
        return True

    def remove_tree(self, category: str, path: Path | str) -> bool:
        """Remove a whole directory tree bottom-up; whether it is gone now (a dry run: would be)."""
        size = tree_bytes(path)
        count = self._candidate(category, size)
        if self.dry_run:
            return True
        if not os.path.lexists(path):
            return True
        _fsops.remove_tree(path)
        if os.path.lexists(path):
            self.note_error(path, OSError(0, "not every entry could be removed"))
            return False
        self._removed(count, size)
        return True

    def remove_entry(self, category: str, path: Path | str) -> bool:
        """A file, symlink or directory tree, whichever ``path`` is (scratch of unknown shape)."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return True
        except OSError as exc:
            self.note_error(path, exc)
            return False
        if stat.S_ISDIR(info.st_mode):
            return self.remove_tree(category, path)
        return self.remove_files(category, [path])

    def remove_dir_ordered(self, category: str, directory: Path, *, last: str) -> bool:
        """Remove a directory as one entry: every entry but ``last`` first, then ``last``, then itself.

        An interruption leaves ``last`` (the record that says what the directory was) until the end.
        """
        size = tree_bytes(directory)
        count = self._candidate(category, size)
        if self.dry_run:
            return True
        try:
            with os.scandir(directory) as listing:
                names = sorted(entry.name for entry in listing)
        except FileNotFoundError:
            return True
        except OSError as exc:
            self.note_error(directory, exc)
            return False
        for name in [n for n in names if n != last] + [n for n in names if n == last]:
            path = directory / name
            if os.path.isdir(path) and not os.path.islink(path):
                _fsops.remove_tree(path)
            else:
                try:
                    _fsops.unlink(path, durable=self.workspace.durable, missing_ok=True)
                except OSError as exc:
                    self.note_error(path, exc)
                    return False
        if self.remove_dir(None, directory):
            self._removed(count, size)
            return True
        return False

    def remove_dir(self, category: str | None, path: Path | str) -> bool:
        """rmdir one directory; ENOTEMPTY and ENOENT are ordinary. ``category`` None counts nothing."""
        count = None if category is None else self._candidate(category, 0)
        if self.dry_run:
            return True
        try:
            if _fsops.remove_dir(path, durable=self.workspace.durable):
                if count is not None:
                    self._removed(count, 0)
                return True
        except OSError as exc:
            self.note_error(path, exc)
            return False
        # Not removed: either it is gone already (fine) or something was created in it meanwhile.
        return not os.path.lexists(path)


def _size(path: Path | str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def tree_bytes(path: Path | str) -> int:
    """Total size of the files below ``path`` (symlinks counted by their own size, never followed)."""
    total = 0
    try:
        total += os.lstat(path).st_size if not os.path.isdir(path) or os.path.islink(path) else 0
    except OSError:
        return 0
    for directory, _dirs, files in walk_tree(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                continue
    return total


def segment_key(writer: str, number: int) -> str:
    """A segment as the ``w<hex>-s<base36>`` prefix its references start with (``writer`` hyphenated)."""
    return f"w{writer.replace('-', '')}-s{encode_base36(number)}"


def _ref_segment_key(ref_text: str) -> str:
    return ref_text[: ref_text.index("-o")]


@dataclass
class TreeFindings:
    """What the journal category needs from the state walk."""

    # Invariant: the segment_key of every segment a marker seen in the walk points into.
    current_segments: set[str] = field(default_factory=set)
    # Every non-terminal marker with a frame, as (kind, placement, name): its chain's segments are
    # protected. Names are parsed only if a segment turns out to be a candidate.
    chains: list[tuple[Kind, str, str]] = field(default_factory=list)
    markers: int = 0


@dataclass(frozen=True, slots=True)
class PayloadGates:
    """The two payload limits in seconds; ``None`` keeps the category (D4)."""

    attempt_control: float | None
    trash: float | None


@dataclass
class _Directory:
    path: str
    placement: str
    entries: list[os.DirEntry[str]]
    index: int = 0
    remaining: int = 0  # entries that are still there (or would be, in a dry run)


def sweep_state(sweep: Sweep, gates: PayloadGates) -> TreeFindings:
    """Walk every kind's tree once; collect what it holds and return what the journal needs."""
    findings = TreeFindings()
    walker = _StateWalk(sweep, gates, findings)
    for kind in Kind:
        walker.walk(kind)
    return findings


class _StateWalk:
    def __init__(self, sweep: Sweep, gates: PayloadGates, findings: TreeFindings) -> None:
        self.sweep = sweep
        self.workspace = sweep.workspace
        self.gates = gates
        self.findings = findings
        self._root = str(self.workspace.root)

    def walk(self, kind: Kind) -> None:
        top = self._open(str(self.workspace.state_dir(kind)), "")
        if not isinstance(top, _Directory):
            return
        stack = [top]
        while stack:
            current = stack[-1]
            if current.index < len(current.entries):
                entry = current.entries[current.index]
                current.index += 1
                self.sweep.visit()
                child = self._entry(kind, current, entry)
                if child is not None:
                    stack.append(child)
                continue
            stack.pop()
            if not stack:
                return  # the kind directory itself is never pruned
            parent = stack[-1]
            if current.remaining or not self.sweep.remove_dir("placement_directories", current.path):
                parent.remaining += 1

    def _open(self, path: str, placement: str) -> _Directory | bool:
        """A listed directory, or whether the name is gone (True) or unreadable and so kept (False)."""
        try:
            with os.scandir(path) as listing:
                entries = list(listing)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError as exc:
            self.sweep.note_error(path, exc)
            return False
        return _Directory(path, placement, entries)

    def _entry(self, kind: Kind, directory: _Directory, entry: os.DirEntry[str]) -> _Directory | None:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            placement = f"{directory.placement}/{entry.name}" if directory.placement else entry.name
            opened = self._open(entry.path, placement)
            if isinstance(opened, _Directory):
                return opened
            directory.remaining += 0 if opened else 1
            return None
        if not self._marker(kind, directory.placement, entry):
            directory.remaining += 1
        return None

    # -- markers -------------------------------------------------------------------------------------
    def _marker(self, kind: Kind, placement: str, entry: os.DirEntry[str]) -> bool:
        """Account for one entry of a placement directory; whether it is gone (or would be)."""
        name = entry.name
        if not placement or not is_marker_name(name) or not entry.is_file(follow_symlinks=False):
            return False  # not a marker: fsck reports it, collection leaves it
        self.findings.markers += 1
        ref_text = name.rsplit(".", 1)[1]
        if ref_text != INIT_REF:
            self.findings.current_segments.add(_ref_segment_key(ref_text))
            if kind not in TERMINAL_KINDS:
                self.findings.chains.append((kind, placement, name))
        if kind not in DISPOSABLE_KINDS and kind not in QUIESCENT_KINDS:
            return False
        payload = os.path.join(self._root, placement, marker_stem(name))
        if kind in DISPOSABLE_KINDS and not os.path.lexists(payload):
            return self._payload_removed(entry)
        if self.gates.attempt_control is not None or self.gates.trash is not None:
            self._payload_categories(kind, placement, name, payload, entry.path)
        return False

    def _payload_removed(self, entry: os.DirEntry[str]) -> bool:
        # A marker younger than the visibility deadline may be one whose payload rename this client
        # cannot see yet (a network filesystem's negative lookup cache): such a marker waits a run.
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            return True
        except OSError as exc:
            self.sweep.note_error(entry.path, exc)
            return False
        if self.sweep.age(info.st_mtime) <= self.workspace.policy.visibility_deadline_seconds:
            return False
        return self.sweep.remove_files("removed_jobs", [entry.path])

    # -- attempt-control directories and transaction trash --------------------------------------------
    def _payload_categories(
        self, kind: Kind, placement: str, name: str, payload: str, marker_path: str
    ) -> None:
        attempt_days = self.gates.attempt_control if kind in TERMINAL_KINDS else None
        trash_days = self.gates.trash if kind in QUIESCENT_KINDS else None
        if attempt_days is None and trash_days is None:
            return
        attempts = _attempt_dirs(payload)
        if not attempts or not os.path.lexists(marker_path):
            return  # the marker moved after the listing began: the job is not where it was seen
        marker = MarkerLocation(kind, placement, MarkerName.parse(name))  # parsed only when it matters
        if attempt_days is not None and len(attempts) > 1:
            attempts = self._attempt_control(marker, attempts, attempt_days)
        if trash_days is not None:
            for directory in attempts:
                self._trash(directory, trash_days)

    def _attempt_control(self, marker: MarkerLocation, attempts: list[Path], limit: float) -> list[Path]:
        """Collect old non-newest attempt-control dirs of a terminal job; return the ones left."""
        newest = _newest(self.workspace, marker, attempts)
        if newest is None:
            return attempts  # which one decided the job cannot be told: keep them all
        left: list[Path] = []
        for directory in attempts:
            keep = directory == newest or not self._older(directory, limit)
            if keep or not self.sweep.remove_tree("attempt_control", directory):
                left.append(directory)
        return left

    def _trash(self, attempt: Path, limit: float) -> None:
        trash = attempt / OUTCOME_DIR / TRANSACTION_DIR / TRASH_DIR
        try:
            if trash.is_symlink() or not trash.is_dir():
                return
            newest = max([trash.lstat().st_mtime, *(entry.lstat().st_mtime for entry in trash.iterdir())])
        except OSError:
            return  # gone meanwhile, or unreadable: left for the next run
        if self.sweep.age(newest) >= limit:
            self.sweep.remove_tree("transaction_trash", trash)

    def _older(self, path: Path, limit: float) -> bool:
        try:
            return self.sweep.age(os.lstat(path).st_mtime) >= limit
        except OSError:
            return False


def _attempt_dirs(payload: str) -> list[Path]:
    try:
        with os.scandir(payload) as listing:
            return sorted(
                Path(entry.path)
                for entry in listing
                if entry.name.startswith(ATTEMPT_DIR_PREFIX) and entry.is_dir(follow_symlinks=False)
            )
    except (FileNotFoundError, NotADirectoryError):
        return []


def _newest(workspace: Workspace, marker: MarkerLocation, attempts: list[Path]) -> Path | None:
    """The attempt-control directory of the attempt that decided the job, or ``None`` when unsure.

    The terminal frame names that attempt. When its directory is gone (D5 retired it) or the frame is
    unreadable, the directory with the highest ``total_attempts`` in its context.json is the newest,
    provided every directory has one; directory times are no evidence (a removal changes them).
    """
    if marker.name.ref is not None:
        with suppress(WorkflowError):
            attempt_id = workspace.reader.read(marker.name.ref).get("attempt_id")
            if isinstance(attempt_id, str):
                payload = workspace.payload_path(marker.placement, marker.job_key)
                named = payload / f"{ATTEMPT_DIR_PREFIX}{attempt_id}"
                if named in attempts:
                    return named
    ordinals: dict[Path, int] = {}
    for directory in attempts:
        try:
            total = read_json_object(directory / "context.json", document="context.json").get(
                "total_attempts"
            )
        except InvalidDocumentError:
            return None
        if not isinstance(total, int) or isinstance(total, bool):
            return None
        ordinals[directory] = total
    best = max(ordinals.values())
    winners = [directory for directory, total in ordinals.items() if total == best]
    return winners[0] if len(winners) == 1 else None
