"""Finding and loading a job: the process-local marker index, and job.json read the way a manager must.

The index maps job ids to the marker this process last saw, under the three rules of the specification:

1. A hit is confirmed before it is used: the cached marker path must exist now; a marker another actor
   moved is detected here, never reported as current state.
2. A miss is never an answer: absence is reported only after the ladder has been walked to its end —
   the placement hint's finite set of state directories, the confirmed cache, then one complete scan.
3. It is process-local: a dict in memory, per attached workspace, built lazily by the first complete
   scan (:func:`index_of`) and updated by every marker this process moves (``note``). There is no
   on-disk index file.

The complete scan is for interactive resolution (show, why, log) and for references without a
placement; a scheduling pass never enters it (joins and requests carry a placement and probe it).

job.json is immutable after submission, so a loaded definition is cached by payload path for the life
of the process; the cache is bounded. The payload must be a real directory and job.json a regular,
non-symlink file, both owned by this account, and a manager claims a job only when its marker is too
(:func:`check_owned_marker`): a manager never runs a job it does not own. Another account's entry is a
:class:`ForeignOwnerError`, which a manager leaves for that account's managers instead of failing it.

Cost: O(1) per confirmed hit; one walk of every kind for the first full scan; one read and validation
per job.json the cache does not hold.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.protocol import ForeignOwnerError, UnsafePathError, WorkflowError
from httk.workflow.protocol._digest import job_digest
from httk.workflow.protocol._job_rules import validate_job
from httk.workflow.protocol._jsonio import parse_json_object, read_document_bytes

from . import _fsops
from ._frames import Frame
from ._scan import walk_markers
from ._states import CORE_KINDS
from ._workspace import MarkerLocation, Workspace, probe_marker

JOB_FILE = "job.json"


@dataclass(frozen=True, slots=True)
class LoadedJob:
    document: dict[str, Any]
    digest: str
    payload_dir: Path

    @property
    def job_id(self) -> str:
        return str(self.document["id"])


def load_job(workspace: Workspace, placement: str, job_key: str) -> LoadedJob:
    """Read and validate one job.json; raises InvalidDocumentError / UnsafePathError on any defect."""
    payload = workspace.payload_path(placement, job_key)
    try:
        info = os.lstat(payload)
    except FileNotFoundError:
        raise UnsafePathError("payload", "", "the payload directory is missing", payload) from None
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError("payload", "", "is not a directory (symlinks are refused)", payload)
    _check_owner(info, "payload", payload)
    data = read_document_bytes(payload / JOB_FILE, "job.json", owner=os.getuid())
    document = parse_json_object(data, document="job.json", path=payload / JOB_FILE)
    validate_job(document, path=payload / JOB_FILE)
    return LoadedJob(document, job_digest(data), payload)


def check_owned_marker(workspace: Workspace, marker: MarkerLocation) -> None:
    """The marker must be a regular, non-symlink file owned by this account (checked before a claim)."""
    path = marker.path(workspace)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return  # moved by another actor since it was listed: the claim's rename finds that out
    if not stat.S_ISREG(info.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise UnsafePathError("marker", "", f"is {what}", path)
    _check_owner(info, "marker", path)


def _check_owner(info: os.stat_result, what: str, path: Path) -> None:
    if info.st_uid != os.getuid():
        raise ForeignOwnerError(what, "", f"is owned by uid {info.st_uid}, not by this account", path)


class JobCache:
    """Bounded cache of validated job definitions (they never change once submitted)."""

    def __init__(self, workspace: Workspace, maxsize: int = 4096) -> None:
        self.workspace = workspace
        self.maxsize = maxsize
        self._entries: OrderedDict[tuple[str, str], LoadedJob] = OrderedDict()

    def get(self, marker: MarkerLocation) -> LoadedJob:
        key = (marker.placement, marker.job_key)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        loaded = load_job(self.workspace, marker.placement, marker.job_key)
        self._entries[key] = loaded
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return loaded


def read_frame(workspace: Workspace, marker: MarkerLocation) -> Frame | None:
    """The state frame the marker names, or ``None`` for a ``g0.init`` submission marker."""
    if marker.name.ref is None:
        return None
    return Frame(marker.kind, workspace.read_record(marker.name.ref))


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
        if _fsops.is_file(location.path(self.workspace)):
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


def index_of(workspace: Workspace) -> MarkerIndex:
    """This process's marker index for ``workspace``, made on first use and kept current by every move."""
    index = workspace.marker_index
    if not isinstance(index, MarkerIndex):
        index = workspace.marker_index = MarkerIndex(workspace)
    return index


def check_identity(marker: MarkerLocation, job: LoadedJob) -> None:
    """job.json must be the job the marker names; at generation 0 its priority must agree too."""
    document = job.document
    if document["id"] != marker.job_id:
        raise WorkflowError(f"job.json id {document['id']} does not match the marker's {marker.job_id}")
    if document.get("tag") != marker.name.key.tag:
        raise WorkflowError(
            f"job.json tag {document.get('tag')!r} does not match the job key {marker.job_key}"
        )
    if marker.name.generation == 0 and document["priority"] != marker.name.priority:
        raise WorkflowError(
            f"job.json priority {document['priority']} does not match the submitted marker's "
            f"{marker.name.priority}"
        )
