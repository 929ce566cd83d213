"""A manager's public record in a workspace: its manifest and its heartbeat.

``managers/<manager-id>/manager.json`` is written once at start (exclusively: a manager id is never
reused) and says what this manager serves — pools, capabilities, executors, placement prefixes, runner
modules and search paths — so that diagnosis reads deployment policy from the manager that holds it.
``heartbeat.json`` beside it is replaced atomically at every heartbeat opportunity; its ``sequence``
grows by one each time, so a reader can tell a live heartbeat from a stale copy without trusting clocks,
and its ``updated_at`` is the lease evidence other managers compare with their own clock.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol._jsonio import dump_compact, dump_pretty

SOFTWARE_VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class ManagerIdentity:
    """What a manager advertises; recorded in its manifest."""

    manager_id: str
    pools: tuple[str, ...]
    capabilities: tuple[str, ...]
    executors: tuple[str, ...] = ("path",)
    placement_prefixes: tuple[str, ...] = ()
    runner_modules: tuple[str, ...] = ("httk.workflow",)
    runner_search_paths: tuple[str, ...] = ()
    resources: Mapping[str, int] | None = None  # None: it schedules no resources (the manifest omits them)
    only_jobs: tuple[str, ...] | None = None  # job keys: a manager that serves nothing else (job debug)
    workers: int = 1
    lease_seconds: float = 900.0
    label: str | None = None


class ManagerRecord:
    """Creates and maintains one manager's directory in one workspace."""

    def __init__(self, workspace: Workspace, identity: ManagerIdentity, writer_id: str) -> None:
        self.workspace = workspace
        self.identity = identity
        self.writer_id = writer_id
        self.directory = workspace.managers_dir / identity.manager_id
        self.sequence = 0
        self.host = socket.gethostname()
        self.pid = os.getpid()

    def create(self) -> None:
        """Publish the manifest and the first heartbeat."""
        durable = self.workspace.durable
        _fsops.make_dirs(self.workspace.managers_dir, durable=durable)
        _fsops.make_dir(self.directory, durable=durable)
        manifest: dict[str, Any] = {
            "format": "httk-workflow-manager",
            "format_version": 1,
            "workspace_id": self.workspace.workspace_id,
            "manager_id": self.identity.manager_id,
            "writer_id": self.writer_id,
            "manager_label": self.identity.label,
            "host": self.host,
            "pid": self.pid,
            "started_at": utc_timestamp(self.workspace.clock.now()),
            "lease_seconds": self.identity.lease_seconds,
            "pools": list(self.identity.pools),
            "capabilities": list(self.identity.capabilities),
            "executors": list(self.identity.executors),
            "placement_prefixes": list(self.identity.placement_prefixes),
            "runner_modules": list(self.identity.runner_modules),
            "runner_search_paths": list(self.identity.runner_search_paths),
            "workers": self.identity.workers,
            "software_version": SOFTWARE_VERSION,
        }
        if self.identity.resources is not None:
            manifest["resources"] = dict(self.identity.resources)
        if self.identity.only_jobs is not None:
            manifest["only_jobs"] = list(self.identity.only_jobs)
        _fsops.create_file(self.directory / "manager.json", dump_pretty(manifest), durable=durable)
        self.beat()

    def beat(self) -> None:
        """Replace heartbeat.json atomically (never torn for a reader)."""
        self.sequence += 1
        heartbeat = {
            "format": "httk-workflow-heartbeat",
            "format_version": 1,
            "workspace_id": self.workspace.workspace_id,
            "manager_id": self.identity.manager_id,
            "writer_id": self.writer_id,
            "host": self.host,
            "pid": self.pid,
            "updated_at": utc_timestamp(self.workspace.clock.now()),
            "lease_seconds": self.identity.lease_seconds,
            "sequence": self.sequence,
        }
        # A heartbeat is evidence, not committed state: losing the newest one to a power cut only makes
        # this manager look older, which is the safe direction. It is never synchronized.
        _fsops.write_file_atomic(self.directory / "heartbeat.json", dump_compact(heartbeat), durable=False)
