"""Which managers are alive for collection purposes, and collecting the directories of dead ones.

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
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from httk.workflow.protocol import InvalidDocumentError
from httk.workflow.protocol._jsonio import read_json_object

from ._gc_sweep import Sweep

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
