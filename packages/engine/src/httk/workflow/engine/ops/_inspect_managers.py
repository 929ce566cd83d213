"""``workspace managers``: every registered manager, live or stale, with what it serves. Read-only.

A manager is *live* when its heartbeat is readable and younger than the lease it records — the same
evidence (and the same clock comparison) a recovering manager uses before it touches another manager's
claim. Anything else is *stale*: an old heartbeat, an unreadable one, or a directory without a manifest.
One more piece of evidence is cheap and only ever makes a manager look *less* alive: when the manifest
names this host and its process id no longer exists, the manager has *exited* (a manager that stopped
cleanly a moment ago still has a fresh heartbeat). A reused process id can only hide that, never invent
it. The manifest is what the manager said it serves; a manager that is not live serves nothing.

Cost: one listing of ``managers/`` and two small reads per manager directory.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager._record import HeartbeatView, read_heartbeat
from httk.workflow.protocol import InvalidDocumentError
from httk.workflow.protocol._jsonio import read_json_object

MAX_MANIFEST_BYTES = 256 * 1024

MANIFEST_LISTS = (
    "pools",
    "capabilities",
    "executors",
    "runner_modules",
    "runner_search_paths",
    "placement_prefixes",
)


@dataclass(frozen=True, slots=True)
class ManagerView:
    """One manager directory as read now."""

    manager_id: str
    manifest: dict[str, Any] | None
    heartbeat: HeartbeatView
    age_seconds: float | None
    manifest_problem: str | None = None
    exited: bool = False

    @property
    def lease_seconds(self) -> float:
        return self.heartbeat.lease_seconds

    @property
    def live(self) -> bool:
        fresh = self.age_seconds is not None and self.age_seconds <= self.lease_seconds
        return fresh and not self.exited

    @property
    def state(self) -> str:
        """``live``, ``exited`` (its process is gone from this host) or ``stale``."""
        if self.live:
            return "live"
        return "exited" if self.exited else "stale"

    def member(self, name: str) -> Any:
        return None if self.manifest is None else self.manifest.get(name)

    def as_dict(self) -> dict[str, Any]:
        manifest = self.manifest or {}
        report: dict[str, Any] = {
            "manager_id": self.manager_id,
            "state": self.state,
            "heartbeat_age_seconds": None if self.age_seconds is None else round(self.age_seconds, 3),
            "lease_seconds": self.lease_seconds,
            "heartbeat_readable": self.heartbeat.readable,
            "label": manifest.get("manager_label"),
            "host": manifest.get("host", self.heartbeat.host),
            "pid": manifest.get("pid"),
            "started_at": manifest.get("started_at"),
            "workers": manifest.get("workers"),
            "resources": manifest.get("resources", {}),
            "software_version": manifest.get("software_version"),
        }
        for name in MANIFEST_LISTS:
            report[name] = list(manifest.get(name) or [])
        report["manifest_problem"] = self.manifest_problem
        return report


def list_managers(workspace: Workspace, *, now: datetime | None = None) -> list[ManagerView]:
    """Every directory below ``managers/``: live ones first, then by start time and id."""
    moment = workspace.clock.now() if now is None else now
    try:
        names = os.listdir(workspace.managers_dir)
    except FileNotFoundError:
        return []
    views: list[ManagerView] = []
    for name in names:
        directory = workspace.managers_dir / name
        if not directory.is_dir() or directory.is_symlink():
            continue
        manifest: dict[str, Any] | None = None
        problem: str | None = None
        try:
            manifest = read_json_object(
                directory / "manager.json", document="manager.json", max_bytes=MAX_MANIFEST_BYTES
            )
        except InvalidDocumentError as exc:
            problem = "no manager.json" if isinstance(exc.__cause__, FileNotFoundError) else exc.rule
        heartbeat = read_heartbeat(workspace, name)
        exited = manifest is not None and _gone_from_this_host(manifest)
        views.append(ManagerView(name, manifest, heartbeat, heartbeat.age(moment), problem, exited))
    views.sort(key=lambda view: (not view.live, str(view.member("started_at") or ""), view.manager_id))
    return views


def _gone_from_this_host(manifest: dict[str, Any]) -> bool:
    """True only when the manifest names this host and no process has its id (signal 0 sends nothing)."""
    pid = manifest.get("pid")
    if manifest.get("host") != socket.gethostname() or not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
