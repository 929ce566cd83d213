"""The record a manager publishes in each workspace it serves: its manifest, written once, and the
heartbeat it replaces at every opportunity.

``managers/<manager-id>/manager.json`` is written once at start (exclusively: a manager id is never
reused) and says what this manager serves — pools, capabilities, executors, placement prefixes, runner
modules and search paths — so that diagnosis reads deployment policy from the manager that holds it.
``heartbeat.json`` beside it is replaced atomically at every heartbeat opportunity; its ``sequence``
grows by one each time, so a reader can tell a live heartbeat from a stale copy without trusting clocks,
and its ``updated_at`` is the lease evidence other managers compare with their own clock
(:mod:`httk.workflow.engine.core._liveness` reads it). The manifest also records the manager's process
identity (pid, start ticks, boot id, pid namespace), so that once this process is gone a manager on the
same host knows it is dead at once, whatever its last heartbeat says (DECISIONS D17).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._liveness import hostname, identity_of
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol._jsonio import dump_compact, dump_pretty

log = logging.getLogger("httk.workflow.manager")

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
    batch: Mapping[str, str] | None = None  # the batch job it runs in (``_slurm.current_job``)


class ManagerRecord:
    """Creates and maintains one manager's directory in one workspace."""

    def __init__(self, workspace: Workspace, identity: ManagerIdentity, writer_id: str) -> None:
        self.workspace = workspace
        self.identity = identity
        self.writer_id = writer_id
        self.directory = workspace.managers_dir / identity.manager_id
        self.sequence = 0
        self.host = hostname()
        self.pid = os.getpid()

    def create(self) -> None:
        """Publish the manifest and the first heartbeat."""
        durable = self.workspace.durable
        _fsops.make_dirs(self.workspace.managers_dir, durable=durable)
        # A launcher may have made the directory for the manager's output; the manifest below is still
        # created exclusively, so a manager id is never used twice.
        _fsops.make_dir(self.directory, durable=durable, exist_ok=True)
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
        if self.identity.batch is not None:
            manifest["batch"] = dict(self.identity.batch)
        # So that manager stop signals this process, never a recycled pid, and a manager on this host
        # knows this one dead once it is gone, whatever its last heartbeat says (D17).
        own = identity_of(self.pid)
        manifest["process"] = {key: own[key] for key in ("start_ticks", "boot_id", "pid_namespace")}
        path = self.directory / "manager.json"
        try:
            _fsops.create_file(path, dump_pretty(manifest), durable=durable)
        except FileExistsError:
            raise
        except OSError:
            # The id is fresh and the name exclusive: what is there is this attempt's partial manifest.
            _fsops.unlink(path, durable=False, missing_ok=True)
            raise
        try:
            self.beat()
        except OSError as exc:  # evidence, not state: the loop beats again at its first opportunity
            log.error("cannot publish the first heartbeat of manager %s: %s", self.identity.manager_id, exc)

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
