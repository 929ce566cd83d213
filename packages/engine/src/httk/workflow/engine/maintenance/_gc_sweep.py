"""What every garbage-collection category shares: its counts, how old is old, and how an entry is removed.

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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._workspace import Workspace

DAY_SECONDS = 86400.0
HEARTBEAT_EVERY = 512
"""Entries visited between two heartbeat opportunities (a manager collecting must keep its lease)."""
MAX_ERRORS = 20
"""Errors kept in a report; the rest are only counted."""

ALWAYS_SAFE = ("removed_jobs", "placement_directories", "tmp_entries", "claimed_requests", "retired_requests")
"""The categories collected whatever ``policy.retention`` says (spec/01, "Retention gates")."""
GATED = ("attempt_control", "transaction_trash", "journal_segment", "manager_directory")
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
    for directory, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                continue
    return total
