"""Reading a job the way a manager must: its immutable job.json and the frame its marker names.

job.json is immutable after submission, so a loaded definition is cached by payload path for the life
of the process; the cache is bounded. The payload must be a real directory owned by this account and
job.json a regular, non-symlink file: a manager never runs a job it does not own.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.protocol import UnsafePathError
from httk.workflow.protocol._digest import job_digest
from httk.workflow.protocol._job_rules import validate_job
from httk.workflow.protocol._jsonio import parse_json_object, read_document_bytes

from ._markers_fs import MarkerLocation
from ._workspace import Workspace

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
    if info.st_uid != os.getuid():
        raise UnsafePathError("payload", "", f"is owned by uid {info.st_uid}, not by this account", payload)
    data = read_document_bytes(payload / JOB_FILE, "job.json")
    document = parse_json_object(data, document="job.json", path=payload / JOB_FILE)
    validate_job(document, path=payload / JOB_FILE)
    return LoadedJob(document, job_digest(data), payload)


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


def read_frame(workspace: Workspace, marker: MarkerLocation) -> dict[str, Any] | None:
    """The state frame the marker names, or ``None`` for a ``g0.init`` submission marker."""
    if marker.name.ref is None:
        return None
    return workspace.reader.read(marker.name.ref)
