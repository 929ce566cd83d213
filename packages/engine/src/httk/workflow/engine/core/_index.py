"""The process-local job-id → marker index, and the lookup ladder that makes it safe.

The three rules of the specification:

1. A hit is confirmed before it is used: the cached marker path must exist now; a marker another actor
   moved is detected here, never reported as current state.
2. A miss is never an answer: absence is reported only after the ladder has been walked to its end —
   the placement hint's finite set of state directories, the confirmed cache, then one complete scan.
3. It is process-local: a dict in memory, per attached workspace, built lazily by the first complete
   scan and updated by every marker this process moves (``note``). There is no on-disk index file.

The complete scan is for interactive resolution (show, why, log) and for references without a
placement; a scheduling pass never enters it (joins and requests carry a placement and probe it).
Cost: O(1) per confirmed hit; one walk of every kind for the first full scan.
"""

from __future__ import annotations

import os

from ._markers_fs import MarkerLocation, probe_marker
from ._scan import walk_markers
from ._states import CORE_KINDS
from ._workspace import Workspace


class MarkerIndex:
    """Where this process last saw each job's marker."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        # Invariant: an entry is a location this process observed or produced; it is a hint until the
        # marker file is confirmed to exist at that exact path.
        self._by_job: dict[str, MarkerLocation] = {}
        self._scanned = False
        self.full_scans = 0

    def note(self, location: MarkerLocation) -> None:
        """Record a marker this process just moved or observed."""
        self._by_job[location.job_id] = location

    def forget(self, job_id: str) -> None:
        self._by_job.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._by_job)

    def cached(self, job_id: str) -> MarkerLocation | None:
        """Rule 1: the cached location only when the marker is still there."""
        location = self._by_job.get(job_id)
        if location is None:
            return None
        if os.path.isfile(location.path(self.workspace)):
            return location
        del self._by_job[job_id]
        return None

    def locate(
        self, job_id: str, *, job_key: str | None = None, placement: str | None = None
    ) -> MarkerLocation | None:
        """Walk the ladder: placement hint, confirmed cache, one complete scan. ``None`` means absent."""
        if placement is not None and job_key is not None:
            found = probe_marker(self.workspace, placement, job_key)
            if found is not None:
                self.note(found)
                return found
        hit = self.cached(job_id)
        if hit is not None:
            return hit
        self.scan()
        return self.cached(job_id)

    def scan(self) -> None:
        """Rule 2's last rung: one complete walk of every state kind, refreshing every entry."""
        self.full_scans += 1
        for kind in CORE_KINDS:
            for item in walk_markers(self.workspace, kind):
                if isinstance(item, MarkerLocation):
                    self._by_job[item.job_id] = item
        self._scanned = True
