"""Garbage collection (``workspace gc``, ``manager run --gc-interval``): what may go, and only that.

What a collection guarantees:

* it is safe on a live workspace. Nothing a heartbeating manager owns is touched: no ``claimed``,
  ``running``, ``committing``, ``cancelling``, ``waiting`` or ``paused`` marker or payload (beyond the
  trash of a quiescent job), no segment of a live manager's writer, no segment on a non-terminal job's
  frame chain, no terminal job's current segment or newest attempt-control directory. Never the runner
  store, a quarantined entry or its record, a workdir, an incomplete outcome directory of a live
  attempt, or a payload that never reached a marker;
* it is interruptible at any instruction: it removes entries bottom-up, renames nothing and rewrites no
  protocol state, so what an interrupted removal leaves is scratch the next collection removes again;
* a category whose ``policy.retention`` limit is absent, ``null`` or ``"keep"`` is kept whole. DECISIONS
  D4 rules between spec/01 (absent means keep) and spec/03 (journal and trash default to one day): a
  workspace whose operator said nothing loses nothing. Only the always-safe categories (spec/01,
  "Retention gates and always-safe collection") run whatever the policy says: empty placement mirrors,
  tmp entries older than 24 h (with the unpublished staging file of a quarantine record, which is no
  quarantine entry), stale claimed and old retired requests, and the marker of a submitted, ready or
  terminal job whose payload was removed (spec/03);
* a collection that removed anything appends one ``httk-workflow-gc`` frame (not a state frame: history
  walks follow ``previous_record_ref`` and never meet it); one that removed nothing, and every dry run,
  writes nothing at all — not even a journal writer directory.

The categories live in ``_gc_tree`` (state tree and payloads, and the sweep that counts and removes) and
``_gc_control`` (journal segments, manager directories, tmp and requests); the transfers' categories are
at the end of this module.

Cost: one exhaustive walk of the state tree, listings of the control directories, and — only when a
segment is a candidate — one frame read per generation of every non-terminal job. O(workspace), which
is why a manager collects at most once per ``--gc-interval``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import Clock, utc_timestamp
from httk.workflow.engine.core._sealed import outgoing_markers
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol import WorkflowError
from httk.workflow.protocol._jsonio import read_json_object

from ._gc_control import sweep_journal, sweep_manager_dirs, sweep_scratch
from ._gc_tree import (
    DAY_SECONDS,
    CategoryCount,
    PayloadGates,
    Sweep,
    TreeFindings,
    segment_key,
    sweep_state,
)

log = logging.getLogger("httk.workflow.manager")

GC_FORMAT = "httk-workflow-gc"
PHASES = (
    "walking the state tree",
    "collecting scratch",
    "collecting the journal",
    "collecting managers",
    "collecting transfers",
)
"""What a collection reports progress as, in its order."""
CENSUS_KEYS = ("total", "removed_jobs", "tmp_entries", "retired_requests", "placement_directories")


@dataclass(frozen=True)
class GcReport:
    """What one collection found and did; ``categories`` has every category, in a fixed order."""

    workspace_id: str
    collected_at: str
    dry_run: bool
    retention: Mapping[str, float | None]
    categories: Mapping[str, CategoryCount]
    skipped: Mapping[str, str] = field(default_factory=dict)  # category -> why it did not run
    errors: tuple[str, ...] = ()
    error_count: int = 0
    frame_ref: str | None = None

    @property
    def candidates(self) -> int:
        return sum(count.candidates for count in self.categories.values())

    @property
    def removed(self) -> int:
        return sum(count.removed for count in self.categories.values())

    @property
    def bytes_reclaimed(self) -> int:
        return sum(count.bytes_reclaimed for count in self.categories.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "collected_at": self.collected_at,
            "dry_run": self.dry_run,
            "retention": dict(self.retention),
            "candidates": self.candidates,
            "removed": self.removed,
            "bytes_reclaimed": self.bytes_reclaimed,
            "categories": {name: count.as_dict() for name, count in self.categories.items()},
            "skipped": dict(self.skipped),
            "errors": list(self.errors),
            "error_count": self.error_count,
            "frame_ref": self.frame_ref,
        }

    def frame(self) -> dict[str, Any]:
        """The summarizing journal frame (``schemas/gc.schema.json``)."""
        return {
            "format": GC_FORMAT,
            "format_version": 1,
            "workspace_id": self.workspace_id,
            "collected_at": self.collected_at,
            "retention": dict(self.retention),
            "removed": self.removed,
            "bytes_reclaimed": self.bytes_reclaimed,
            "categories": {
                name: count.as_dict() for name, count in self.categories.items() if count.candidates
            },
        }


def collect_garbage(
    workspace: Workspace,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    always_safe_only: bool = False,
    heartbeat: Callable[[], None] | None = None,
    protect_writers: Collection[str] = (),
    progress: Callable[[str, int], None] | None = None,
) -> GcReport:
    """Collect what the workspace's retention policy and the always-safe rules allow.

    ``now`` defaults to the workspace clock; ages of files are judged against it. ``dry_run`` counts
    candidates and removes nothing (a read-only attachment suffices). ``always_safe_only`` ignores the
    retention limits. ``heartbeat`` is called every few hundred entries (a manager's lease);
    ``protect_writers`` are journal writers of the calling process, kept whatever their managers say.
    ``progress(what, done)`` is called for every entry visited, with the phase (:data:`PHASES`) and the
    entries visited so far.
    """
    if not dry_run:
        workspace.require_writable()
    moment = workspace.clock.now() if now is None else now
    sweep = Sweep(workspace, dry_run, moment, heartbeat, progress=progress)
    limits = _limits(workspace, always_safe_only)
    skipped = {name: _kept_because(name, always_safe_only) for name in limits if limits[name] is None}
    sweep.phase = PHASES[0]
    findings = sweep_state(sweep, PayloadGates(limits["attempt_control"], limits["transaction_trash"]))
    _protect_sealed(workspace, findings)
    sweep.phase = PHASES[1]
    sweep_scratch(sweep)
    sweep.phase = PHASES[2]
    retained, journal_skipped = sweep_journal(sweep, findings, limits["journal_segment"], protect_writers)
    if journal_skipped is not None:
        skipped["journal_segment"] = journal_skipped
    manager_limit = limits["manager_directory"]
    if manager_limit is not None:
        sweep.phase = PHASES[3]
        sweep_manager_dirs(sweep, manager_limit, retained)
    transfer_limit = limits["retired_bundles"]
    if transfer_limit is not None:
        sweep.phase = PHASES[4]
        sweep_transfers(sweep, transfer_limit)
    report = GcReport(
        workspace_id=workspace.workspace_id,
        collected_at=utc_timestamp(moment),
        dry_run=dry_run,
        retention={} if always_safe_only else dict(workspace.policy.retention),
        categories=dict(sweep.counts),
        skipped=skipped,
        errors=tuple(sweep.errors),
        error_count=sweep.error_count,
    )
    if dry_run or report.removed == 0:
        return report
    ref = workspace.journal().append(report.frame())
    return replace(report, frame_ref=str(ref))


def _protect_sealed(workspace: Workspace, findings: TreeFindings) -> None:
    """A bundle awaiting handover references its journal like a current marker (spec/01, gc table)."""
    for name in outgoing_markers(workspace):
        if name.ref is not None:
            findings.current_segments.add(segment_key(name.ref.writer, name.ref.segment))
            findings.chains.append((Kind.TRANSFERRING, "transfers", str(name)))


_RETENTION_KEY = {
    "attempt_control": "attempt_control_days",
    "transaction_trash": "trash_days",
    "journal_segment": "journal_days",
    "manager_directory": "journal_days",
    "retired_bundles": "trash_days",
    "transfer_receipts": "trash_days",
}


def _kept_because(category: str, always_safe_only: bool) -> str:
    if always_safe_only:
        return "only the always-safe categories were asked for"
    return f"retention.{_RETENTION_KEY[category]} is not set (keep)"


def _limits(workspace: Workspace, always_safe_only: bool) -> dict[str, float | None]:
    """Each gated category's limit in seconds; ``None`` keeps it (D4: absent, null and "keep")."""
    limits: dict[str, float | None] = {}
    for category, key in _RETENTION_KEY.items():
        days = None if always_safe_only else workspace.policy.retention_days(key)
        limits[category] = None if days is None else days * DAY_SECONDS
    return limits


def always_safe_census(
    workspace: Workspace, *, progress: Callable[[str, int], None] | None = None
) -> dict[str, int]:
    """What the always-safe categories would remove now (a dry run; writes nothing).

    ``retired_requests`` counts stale claimed requests too: both are requests that are only evidence.
    """
    counts = collect_garbage(workspace, dry_run=True, always_safe_only=True, progress=progress).categories
    census = {
        "removed_jobs": counts["removed_jobs"].candidates,
        "tmp_entries": counts["tmp_entries"].candidates,
        "retired_requests": counts["retired_requests"].candidates + counts["claimed_requests"].candidates,
        "placement_directories": counts["placement_directories"].candidates,
    }
    return {"total": sum(census.values()), **census}


class PeriodicCollection:
    """``manager run --gc-interval``: at most one collection per interval, at the end of a tick.

    The manager calls :meth:`collect` when :meth:`due`, after a tick's passes, so a collection never runs
    between observing a marker and acting on it. A collection that fails is logged; scheduling goes on.
    """

    def __init__(self, interval: float | None, clock: Clock) -> None:
        self.interval = interval
        self._clock = clock
        self._last = float("-inf")
        self.reports: list[GcReport] = []  # the last few, for tests and statistics
        self.failures = 0

    def due(self) -> bool:
        """Whether an interval is set and has passed since the last collection began."""
        return self.interval is not None and self._clock.monotonic() - self._last >= self.interval

    def collect(
        self, workspace: Workspace, *, heartbeat: Callable[[], None], writer_id: str
    ) -> GcReport | None:
        """Collect now (the caller asked :meth:`due`); ``None`` when the collection failed (logged)."""
        self._last = self._clock.monotonic()
        try:
            report = collect_garbage(workspace, heartbeat=heartbeat, protect_writers=(writer_id,))
        except Exception:  # a collection must never take scheduling down with it
            self.failures += 1
            log.exception("garbage collection failed; scheduling goes on")
            return None
        self.reports = [*self.reports[-3:], report]
        log.info("garbage collection removed %d entries (%d bytes)", report.removed, report.bytes_reclaimed)
        return report


# -- transfers ----------------------------------------------------------------------------------------
# What detached-transfer-v1 leaves below ``.httk-workflow/transfers/`` and gc may take (``trash_days``).
#
# spec/01's gc table gates two categories on ``retention.trash_days``:
#
# * ``retired_bundles``: a source's retired bundle ``retired/<transfer-id>/``, once its ledger entry
#   ``retired/<transfer-id>.json`` says it was imported elsewhere. The ledger stays: it is what refuses a
#   late abort and answers ``transfer show``. An aborted transfer has no retired bundle to collect.
# * ``transfer_receipts``: a source's acknowledgement ``acks/<transfer-id>.json`` once its retirement is
#   complete (the ledger exists: until then the acknowledgement is what a rerun retires the bundle by),
#   and a destination's import record ``imported/<transfer-id>.json`` once it records that its source
#   was told (``delivered_at``). An import record whose acknowledgement never reached its source is the
#   only copy of that acknowledgement, so it is kept however old it is.
#
# Ages are read from the file that decided each entry: the ledger for a retired bundle, the receipt
# itself otherwise (an import record is rewritten when its acknowledgement is delivered). Sealed bundles
# awaiting acknowledgement (``outgoing/``) are never touched here: only import and abort may change them.
DELIVERED_MEMBER = "delivered_at"
"""The import record member saying its acknowledgement reached the source (``ops/_transfer_import``)."""


def sweep_transfers(sweep: Sweep, limit: float) -> None:
    """Collect retired bundles and receipts older than ``limit`` seconds."""
    transfers = sweep.workspace.control / "transfers"
    retired = transfers / "retired"
    for name in _names(sweep, retired):
        bundle = retired / name
        if name.startswith(".") or not bundle.is_dir() or bundle.is_symlink():
            continue
        sweep.visit()
        ledger = retired / f"{name}.json"
        if _older(sweep, ledger, limit) and _outcome(ledger) == "imported":
            sweep.remove_tree("retired_bundles", bundle)
    for name in _receipts(sweep, transfers / "acks"):
        sweep.visit()
        ack = transfers / "acks" / name
        if os.path.lexists(retired / name) and _older(sweep, ack, limit):
            sweep.remove_files("transfer_receipts", [ack])
    for name in _receipts(sweep, transfers / "imported"):
        sweep.visit()
        record = transfers / "imported" / name
        if _older(sweep, record, limit) and _delivered(record):
            sweep.remove_files("transfer_receipts", [record])


def _names(sweep: Sweep, directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        sweep.note_error(directory, exc)
        return []


def _receipts(sweep: Sweep, directory: Path) -> list[str]:
    """The finished receipts in ``directory`` (a dot name is an atomic write's temporary)."""
    return [
        name
        for name in _names(sweep, directory)
        if name.endswith(".json") and not name.startswith(".") and os.path.isfile(directory / name)
    ]


def _older(sweep: Sweep, path: Path, limit: float) -> bool:
    try:
        return sweep.age(os.lstat(path).st_mtime) > limit
    except OSError:
        return False


def _outcome(ledger: Path) -> object:
    document = _document(ledger)
    return None if document is None else document.get("outcome")


def _delivered(record: Path) -> bool:
    document = _document(record)
    return document is not None and isinstance(document.get(DELIVERED_MEMBER), str)


def _document(path: Path) -> dict[str, object] | None:
    """A receipt's JSON object, or ``None`` when it cannot be read as one (then it is kept)."""
    try:
        return read_json_object(path, document="transfer receipt", max_bytes=1 << 20)
    except WorkflowError:
        return None
