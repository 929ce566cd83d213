"""Where markers are: the path of a marker, and finding a job's one marker at its placement.

A job's placement never changes in the core profile, so its current marker is one of a finite set of
directories (one per state kind) at that placement. Probing them is the bounded lookup that joins,
requests and transitions use; nothing here scans a whole workspace.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.protocol import InvalidNameError, MarkerName, TransitionError

from ._states import CORE_KINDS, Kind
from ._workspace import Workspace


@dataclass(frozen=True, slots=True)
class MarkerLocation:
    """One marker: its state kind, its placement and its parsed basename."""

    kind: Kind
    placement: str
    name: MarkerName

    def path(self, workspace: Workspace) -> Path:
        return workspace.marker_dir(self.kind, self.placement) / str(self.name)

    @property
    def job_key(self) -> str:
        return str(self.name.key)

    @property
    def job_id(self) -> str:
        return self.name.job_id


PROBE_SCANS = 3
"""How many times a probe that sees two markers looks again before it calls that corruption."""


def probe_marker(workspace: Workspace, placement: str, job_key: str) -> MarkerLocation | None:
    """The current marker of ``job_key`` at ``placement``, or ``None`` when no state kind holds one.

    The kind directories are listed one after another, so a transition renaming the marker from a kind
    already listed into one not yet listed shows the job twice in one scan. That is a race, not damage:
    the probe scans again, and only two markers that every one of :data:`PROBE_SCANS` scans shows are
    corruption (:class:`TransitionError`).
    """
    found = _settled_scan(workspace, placement, job_key)
    if len(found) <= 1:
        return found[0] if found else None
    paths = ", ".join(str(m.path(workspace)) for m in found)
    raise TransitionError(f"job {job_key} has {len(found)} markers, which is corruption: {paths}")


def duplicate_markers(workspace: Workspace, placement: str, job_key: str) -> list[MarkerLocation]:
    """Every marker of ``job_key`` at ``placement`` when each of :data:`PROBE_SCANS` scans shows more
    than one (the corruption :func:`probe_marker` raises on), else ``[]`` (one marker, none, or a race).
    """
    found = _settled_scan(workspace, placement, job_key)
    return found if len(found) > 1 else []


def _settled_scan(workspace: Workspace, placement: str, job_key: str) -> list[MarkerLocation]:
    """The first scan showing at most one marker, or the last of :data:`PROBE_SCANS` scans showing more."""
    found: list[MarkerLocation] = []
    for _ in range(PROBE_SCANS):
        found = _scan(workspace, placement, job_key)
        if len(found) <= 1:
            break
    return found


def _scan(workspace: Workspace, placement: str, job_key: str) -> list[MarkerLocation]:
    prefix = job_key + "."
    found: list[MarkerLocation] = []
    for kind, entry in kind_entries(workspace, placement):
        if entry.name.startswith(prefix):
            try:
                name = MarkerName.parse(entry.name)
            except InvalidNameError:
                continue
            if str(name.key) == job_key and entry.is_file(follow_symlinks=False):
                found.append(MarkerLocation(kind, placement, name))
    return found


def kind_entries(workspace: Workspace, placement: str) -> Iterator[tuple[Kind, os.DirEntry[str]]]:
    """Every entry of each core state-kind directory at ``placement``, each directory listed once (a
    kind without a directory there has nothing). Names are not parsed: callers filter as they need."""
    for kind in CORE_KINDS:
        try:
            entries = os.scandir(workspace.marker_dir(kind, placement))
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            yield from ((kind, entry) for entry in entries)
