"""What a placement directory of a workspace holds, listed once: payloads and markers by kind.

The engine's public face has no call that lists the markers of a placement, and probing one job at a
time lists every state kind's directory again per job (O(jobs) per job). So this lists each kind's
directory at the placement once and parses the marker names (the protocol's public
:class:`MarkerName`); a placement of 10,000 jobs costs one listing of the placement and one per kind.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine import Workspace
from httk.workflow.protocol import InvalidNameError, JobKey, MarkerName

STATE_KINDS = (
    "submitted",
    "ready",
    "claimed",
    "running",
    "committing",
    "cancelling",
    "relocating",
    "transferring",
    "waiting",
    "paused",
    "succeeded",
    "failed",
    "cancelled",
)
"""Every state kind of the protocol (spec/01 "State machine"): a placement's markers are below these."""


@dataclass
class Placement:
    """One placement directory: its payload directories and the kind of each marked job."""

    path: Path
    payloads: set[str]
    kinds: dict[str, str]
    """Job key -> the state kind of its marker (the last one listed, should a job have two)."""


def list_placement(workspace: Workspace, name: str) -> Placement:
    """List the placement ``name`` of ``workspace`` (nothing when it does not exist)."""
    path = workspace.root / name
    payloads: set[str] = set()
    try:
        with os.scandir(path) as listing:
            for item in listing:
                if item.is_dir(follow_symlinks=False):
                    payloads.add(item.name)
    except FileNotFoundError:
        pass
    kinds: dict[str, str] = {}
    for kind in STATE_KINDS:
        try:
            with os.scandir(workspace.marker_dir(kind, name)) as listing:
                for item in listing:
                    try:
                        kinds[str(MarkerName.parse(item.name).key)] = kind
                    except InvalidNameError:
                        continue
        except FileNotFoundError:
            continue
    return Placement(path, payloads, kinds)


class Placements:
    """A cache of :func:`list_placement` for one command's run."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._listed: dict[str, Placement] = {}

    def get(self, name: str) -> Placement:
        found = self._listed.get(name)
        if found is None:
            found = list_placement(self.workspace, name)
            self._listed[name] = found
        return found


@dataclass(frozen=True, slots=True)
class ImportedJob:
    """A payload an import of a given v1 tree placed: its key, job.json bytes and v1 inputs."""

    key: JobKey
    data: bytes
    document: dict[str, Any]

    @property
    def relpath(self) -> str:
        return str(self.document["inputs"].get("v1.relpath", self.key))

    @property
    def status(self) -> str:
        return str(self.document["inputs"].get("v1.status", "?"))


def imported_from(payload: Path, root: Path) -> ImportedJob | None:
    """The job at ``payload`` when an import of the tree ``root`` made it (its ``v1.root``), else None."""
    try:
        key = JobKey.parse(payload.name)
        data = (payload / "job.json").read_bytes()
        document = json.loads(data)
    except (InvalidNameError, OSError, ValueError):
        return None
    inputs = document.get("inputs") if isinstance(document, dict) else None
    if not isinstance(inputs, dict) or inputs.get("v1.root") != str(root):
        return None
    return ImportedJob(key, data, document)
