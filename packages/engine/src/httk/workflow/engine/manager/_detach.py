"""An acknowledged detach of a workspace: the request, each manager's acknowledgement, and quiescence.

spec/01, "Dynamic detachment". The coordinator (``httk workflow workspace detach``) publishes
``.httk-workflow/detach.json`` (schema ``detach-request``) once, with a fresh ``detach_id``; a rerun
finds it and waits on the same id. Every manager serving the workspace notices it at its next rescan,
stops scanning and claiming there, reaps and commits what it holds, closes its journal writer and writes
``managers/<manager-id>/detached.json`` (schema ``detach-acknowledgement``) naming the ``detach_id``.

The workspace is *quiescent* — safe to move out — once every manager with a live heartbeat there has
acknowledged this ``detach_id`` and no marker is claimed, running, committing or cancelling. A manager
whose heartbeat is stale or whose process is provably gone (DECISIONS D17) cannot hold anything a move
would break, so it is not waited for; a marker it left claimed or running still is, because only a
recovery, by some live manager, can settle it. So a detaching manager, which claims nothing more, keeps
its recovery passes over those kinds and acknowledges only once a whole cycle of them found nothing to
recover: what a dead manager left is released, retried or failed by the usual rules, not left to hold
the detach up forever. (With no live manager at all there is nobody to recover it, and the detach says
what it waits for.) While the request is there no manager attaches the
workspace; ``workspace attach`` removes it, and the next rescan of a watch root attaches it again.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._liveness import list_managers
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import CONTROL_DIR, Workspace
from httk.workflow.protocol import InvalidDocumentError, WorkspaceError
from httk.workflow.protocol._jsonio import dump_pretty, read_json_object

from ._fleet import Member

log = logging.getLogger("httk.workflow.manager")

DEFAULT_RESCAN_SECONDS = 10.0
"""How often a manager looks again at what it serves: a detach request, a watch root's workspaces."""

REQUEST = "detach.json"
ACKNOWLEDGEMENT = "detached.json"
HELD_KINDS = (Kind.CLAIMED, Kind.RUNNING, Kind.COMMITTING, Kind.CANCELLING)
"""The kinds a move must not carry away: an attempt or a fenced commit that a manager still acts on."""


def read_request(root: Path) -> dict[str, Any] | None:
    """The detach request of the workspace at ``root``, or ``None`` (an unreadable one counts as made)."""
    path = root / CONTROL_DIR / REQUEST
    if not os.path.lexists(path):
        return None  # the common case, one failed lookup per rescan
    try:
        return read_json_object(path, document=REQUEST)
    except (InvalidDocumentError, OSError):
        return {"detach_id": None}  # torn by hand or unreadable: still a request not to serve it


def refuse_detached(root: Path) -> None:
    """Refuse to serve the workspace at ``root`` while its detach request is there (before a manager
    publishes anything in it)."""
    if read_request(root) is not None:
        raise WorkspaceError(
            "this workspace is detached (.httk-workflow/detach.json): run `httk workflow workspace attach` "
            "before serving it again",
            root,
        )


def request_detach(workspace: Workspace) -> str:
    """Publish the detach request (or find the one there); its ``detach_id``."""
    found = read_request(workspace.root)
    if found is not None and isinstance(found.get("detach_id"), str):
        return str(found["detach_id"])
    detach_id = str(uuid.uuid4())
    document = {
        "format": "httk-workflow-detach-request",
        "format_version": 1,
        "workspace_id": workspace.workspace_id,
        "detach_id": detach_id,
        "requested_at": utc_timestamp(workspace.clock.now()),
    }
    _fsops.write_file_atomic(workspace.control / REQUEST, dump_pretty(document), durable=workspace.durable)
    return detach_id


def withdraw_detach(workspace: Workspace) -> bool:
    """Remove the detach request (``workspace attach``); whether there was one."""
    return _fsops.unlink(workspace.control / REQUEST, durable=workspace.durable, missing_ok=True)


class Detaching(Member, Protocol):
    """What a detach needs of the manager it asks (:class:`~._manager.Manager`): what the loop needs of
    it, and what names it and lets it let go."""

    detaching: bool

    @property
    def record(self) -> object | None: ...

    @property
    def manager_id(self) -> str: ...

    @property
    def workspace(self) -> Workspace: ...

    def close(self) -> None: ...

    def held_settled(self) -> bool: ...


def begin_detach(root: Path, manager: Detaching) -> None:
    """The request is there: ``manager`` stops scanning and claiming, and only finishes what it holds."""
    log.info(
        "workspace %s at %s: detach requested; finishing what this manager holds there",
        manager.workspace.workspace_id,
        root,
    )
    manager.detaching = True


def holds_nothing(manager: Detaching) -> bool:
    """Whether a detaching ``manager`` is done: no attempt, cancellation or commit left in hand, and
    nothing a manager that is not live left held that it could recover now (``held_settled``)."""
    return (
        manager.detaching and not manager.busy() and not manager.state.unfinished and manager.held_settled()
    )


def finish_detach(root: Path, manager: Detaching) -> None:
    """Acknowledge the request (when ``manager`` ever started there) once it let go of the workspace."""
    request = read_request(root)
    if request is not None and manager.record is not None:  # one never started holds nothing
        acknowledge(root, manager, str(request["detach_id"]))
    log.info(
        "workspace %s at %s detached: acknowledged, no longer served", manager.workspace.workspace_id, root
    )


class SoloRoster:
    """One manager serving its workspace alone (``Manager.run`` without a roster of a process): every
    ``interval`` seconds it looks for the detach request, and once one is there the manager finishes what
    it holds, lets go of the workspace, acknowledges, and the roster has nothing left to serve."""

    def __init__(self, manager: Detaching, interval: float) -> None:
        self._manager = manager
        self._members: Sequence[Detaching] = (manager,)
        self._interval = interval
        self._last = manager.state.clock.monotonic()

    def members(self) -> Sequence[Detaching]:
        return self._members

    def serving(self) -> bool:
        return bool(self._members)

    def refresh(self) -> bool:
        manager, root = self._manager, self._manager.workspace.root
        if not self._members:
            return False
        if holds_nothing(manager):
            manager.finish()
            manager.close()
            self._members = ()
            finish_detach(root, manager)
            return True
        now = manager.state.clock.monotonic()
        if manager.detaching or now - self._last < self._interval:
            return False
        self._last = now
        if read_request(root) is None:
            return False
        begin_detach(root, manager)
        return True


def acknowledge(root: Path, manager: Detaching, detach_id: str) -> None:
    """Write ``manager``'s acknowledgement, once it holds nothing in the workspace at ``root``."""
    document = {
        "format": "httk-workflow-detach-acknowledgement",
        "format_version": 1,
        "workspace_id": manager.workspace.workspace_id,
        "manager_id": manager.manager_id,
        "detach_id": detach_id,
        "acknowledged_at": utc_timestamp(manager.state.clock.now()),
    }
    path = root / CONTROL_DIR / "managers" / manager.manager_id / ACKNOWLEDGEMENT
    _fsops.write_file_atomic(path, dump_pretty(document), durable=manager.workspace.durable)


@dataclass(frozen=True)
class Quiescence:
    """What a detach still waits for: live managers not acknowledged, and markers held, by kind."""

    waiting_for: tuple[str, ...]
    acknowledged: tuple[str, ...]
    held: dict[str, int]

    @property
    def quiescent(self) -> bool:
        return not self.waiting_for and not self.held

    def line(self) -> str:
        parts = []
        if self.waiting_for:
            parts.append(
                f"{len(self.waiting_for)} live manager(s) not acknowledged ({', '.join(self.waiting_for)})"
            )
        if self.held:
            parts.append(", ".join(f"{count} {kind}" for kind, count in sorted(self.held.items())))
        return "waiting for " + "; ".join(parts) if parts else "quiescent"


def detach_quiescence(workspace: Workspace, detach_id: str) -> Quiescence:
    """Who and what the detach ``detach_id`` still waits for, as read now."""
    waiting, acknowledged = [], []
    for view in list_managers(workspace):
        if _acknowledged(workspace, view.manager_id, detach_id):
            acknowledged.append(view.manager_id)
        elif view.live:
            waiting.append(view.manager_id)
    held: dict[str, int] = {}
    for kind in HELD_KINDS:
        count = sum(1 for _ in walk_markers(workspace, kind))
        if count:
            held[kind.value] = count
    return Quiescence(tuple(sorted(waiting)), tuple(sorted(acknowledged)), held)


def _acknowledged(workspace: Workspace, manager_id: str, detach_id: str) -> bool:
    try:
        document = read_json_object(
            workspace.managers_dir / manager_id / ACKNOWLEDGEMENT, document=ACKNOWLEDGEMENT
        )
    except (FileNotFoundError, InvalidDocumentError, OSError):
        return False
    return document.get("detach_id") == detach_id
