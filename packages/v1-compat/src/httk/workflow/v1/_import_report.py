"""What an import did (or, with ``--dry-run``, would do) to each top-level task of a v1 tree.

Every top-level task gets exactly one :class:`ImportEntry`; names the reader could not parse, ignored
entries and status views are carried over from the :class:`Tree`, so the report accounts for every
directory named like a task. :attr:`ImportReport.complete` is what the command's exit status reports:
every task that can be run was imported, and nothing was left unexplained.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from ._reader import Ignored, Problem, View


class ImportAction(StrEnum):
    """What happened to one top-level task."""

    IMPORTED = "imported"
    WOULD_IMPORT = "would_import"
    """--dry-run: it would be imported."""
    ALREADY_IMPORTED = "already_imported"
    COMPLETED = "completed"
    """An earlier import was interrupted after placing its payload; its marker is published now."""
    SKIPPED_LIVE = "skipped_live"
    """A live v1 task manager may own it (see the reason); never touched without --force."""
    SKIPPED_TERMINAL = "skipped_terminal"
    """finished, broken, timeout or stopped, and --include-finished was not given."""
    SKIPPED_LEGACY = "skipped_legacy"
    """singlejob, waiting or subruns: statuses no v1 manager of this era runs."""
    REFUSED = "refused"
    """It cannot become a job as it is (see the reason); nothing of it was written."""

    @property
    def settled(self) -> bool:
        """The task is a job in the workspace (or would be, in a dry run)."""
        return self in (
            ImportAction.IMPORTED,
            ImportAction.WOULD_IMPORT,
            ImportAction.ALREADY_IMPORTED,
            ImportAction.COMPLETED,
        )


_LEFT_BEHIND = frozenset({ImportAction.SKIPPED_LIVE, ImportAction.REFUSED})


@dataclass(frozen=True, slots=True)
class ImportEntry:
    """One top-level task and what the import did with it."""

    relpath: str
    status: str
    action: ImportAction
    reason: str | None = None
    job_id: str | None = None
    job_key: str | None = None
    placement: str | None = None
    subtasks: int = 0
    """How many tasks travel inside it (nested at any depth)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "relpath": self.relpath,
            "status": self.status,
            "action": self.action.value,
            "reason": self.reason,
            "job_id": self.job_id,
            "job_key": self.job_key,
            "placement": self.placement,
            "subtasks": self.subtasks,
        }


@dataclass(frozen=True, slots=True)
class ImportReport:
    """Everything an import decided, in the tree's path order."""

    root: Path
    workspace: Path
    placement: str
    dry_run: bool
    entries: tuple[ImportEntry, ...]
    problems: tuple[Problem, ...] = ()
    ignored: tuple[Ignored, ...] = ()
    views: tuple[View, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, root: Path, workspace: Path, placement: str, dry_run: bool, **parts: Any) -> ImportReport:
        entries: tuple[ImportEntry, ...] = tuple(sorted(parts.pop("entries"), key=lambda e: e.relpath))
        counts = Counter(entry.action.value for entry in entries)
        return cls(root, workspace, placement, dry_run, entries, counts=dict(sorted(counts.items())), **parts)

    @property
    def complete(self) -> bool:
        """Nothing left behind: no task refused or skipped as live, and no name left unparsed."""
        return not self.problems and not any(entry.action in _LEFT_BEHIND for entry in self.entries)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "workspace": str(self.workspace),
            "placement": self.placement,
            "dry_run": self.dry_run,
            "complete": self.complete,
            "counts": self.counts,
            "tasks": [entry.to_json() for entry in self.entries],
            "problems": [{"relpath": p.relpath, "message": p.message} for p in self.problems],
            "ignored": [{"relpath": i.relpath, "reason": i.reason} for i in self.ignored],
            "views": [{"relpath": v.relpath, "target": v.target} for v in self.views],
        }
