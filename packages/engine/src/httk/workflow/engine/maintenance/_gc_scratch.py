"""Always-safe scratch: stale staging entries and requests that are only evidence any more.

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
from pathlib import Path

from ._gc_managers import manager_life
from ._gc_sweep import DAY_SECONDS, Sweep

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


def _mtime(entry: os.DirEntry[str]) -> float | None:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return None


def _sweep_tmp(sweep: Sweep, directory: Path) -> None:
    for entry in _entries(sweep, directory):
        sweep.visit()
        mtime = _mtime(entry)
        if mtime is not None and sweep.age(mtime) > TMP_SECONDS:
            sweep.remove_entry("tmp_entries", entry.path)


def _sweep_record_staging(sweep: Sweep, directory: Path, staging: re.Pattern[str]) -> None:
    for entry in _entries(sweep, directory):
        if not staging.match(entry.name) or not entry.is_file(follow_symlinks=False):
            continue  # an entry, its record, or anything else: not scratch of ours
        sweep.visit()
        mtime = _mtime(entry)
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
            mtime = _mtime(entry)
            if mtime is not None and sweep.age(mtime) > REQUEST_SECONDS:
                sweep.remove_files("claimed_requests", [entry.path])


def _holder_live(sweep: Sweep, holder: os.DirEntry[str]) -> bool:
    if (sweep.workspace.managers_dir / holder.name).is_dir():
        return manager_life(sweep, holder.name).live
    mtime = _mtime(holder)
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
        mtime = _mtime(evidence)
        if mtime is None or sweep.age(mtime) <= REQUEST_SECONDS:
            continue
        # The request first, its record last: the record is what ages the pair.
        names = sorted(files, key=lambda name: name.endswith(RETIREMENT_SUFFIX))
        sweep.remove_files("retired_requests", [retired / name for name in names])
