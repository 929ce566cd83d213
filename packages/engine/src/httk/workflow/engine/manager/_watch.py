"""The workspaces one manager process serves: explicit paths and watch roots, attached by workspace id.

spec/01, "Managing and combining workspaces", "Dynamic attachment" and "Dynamic detachment".

**Discovery.** An explicit path must be a workspace. Below a watch root every directory holding
``.httk-workflow/format.json`` is one, and discovery does not descend into it (a workspace is a
boundary). Symbolic links are not followed. A workspace inside another workspace, a watch root inside a
workspace and two watch roots one inside the other are refused: their placements would overlap.

**Identity.** A workspace is its ``workspace_id``, proved by the device and inode of its directory.
Several paths to one directory are aliases, attached once. Two different directories declaring the same
id (a copy, a restored backup beside the live one) are refused for mutation, both of them, with one
error naming both — except that a directory this process already serves keeps being served when its
held directory handle proves it is the same one as before, and only the newcomer is refused.

**Rescans.** Every ``rescan_interval`` seconds the roster lists the watch roots again (no filesystem
notifications: periodic rescans are what spec/01 requires, and a lost notification could not hide a
workspace from them). A workspace renamed within the watched paths (same id, same device and inode, a
new path) is re-attached at its new path: its manager at the old path is retired and a fresh one, with a
new manager id, record and journal writer, serves the new one — the record and the writer belong to
one incarnation, and nothing of the old one is reused at a path it never had. Attempts running across
such a raw rename cannot follow it (their paths are gone) and are stopped, to be recovered once their
lease runs out; the portable way to move a busy workspace is ``workspace detach``, move, then attach.

**Unavailable.** A served workspace that is found no more is marked unavailable, logged once: its jobs
are not touched (never failed), its manager is retired, and when the same id is found again, at any
path, it is attached afresh.

**Detach** (:mod:`._detach`): a workspace whose detach request is present is never attached; one served
when its request appears stops scanning and claiming, finishes what it holds (reaping and committing its
attempts, its cancellations and deferred commits), closes its journal writer and acknowledges. The
process keeps serving the others. ``workspace attach`` withdraws the request, and the next rescan
attaches it again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from httk.workflow.engine.core._clock import Clock
from httk.workflow.engine.core._workspace import CONTROL_DIR, attach, read_format_document
from httk.workflow.protocol import WorkflowError, WorkspaceError

from . import _detach
from ._fleet import WorkerPool
from ._manager import Manager
from ._state import ManagerConfig

log = logging.getLogger("httk.workflow.manager")

Identity = tuple[int, int]  # st_dev, st_ino of a workspace directory


def is_workspace(path: Path) -> bool:
    return (path / CONTROL_DIR / "format.json").is_file()


def enclosing_workspace(path: Path) -> Path | None:
    """The workspace strictly above ``path``, if any."""
    for parent in path.parents:
        if is_workspace(parent):
            return parent
    return None


def below_watch_root(root: Path) -> list[Path]:
    """The workspaces below ``root`` (itself included), not descending into one, nor through links."""
    if is_workspace(root):
        return [root]
    found: list[Path] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                children = sorted(
                    Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False)
                )
        except OSError:
            continue  # vanished or unreadable while listed: the next rescan sees it as it is then
        for child in children:
            (found if is_workspace(child) else pending).append(child)
    return sorted(found)


def check_targets(explicit: Sequence[Path], watch_roots: Sequence[Path]) -> None:
    """Refuse what can never be served, before anything is attached: a bad path, an overlap."""
    for path in explicit:
        if not is_workspace(path):
            raise WorkspaceError(f"not a workspace: no {CONTROL_DIR}/format.json", path)
    for root in watch_roots:
        if not root.is_dir():
            raise WorkspaceError("--watch-root is not a directory", root)
        outer = enclosing_workspace(root)
        if outer is not None:
            raise WorkspaceError(
                f"--watch-root lies inside the workspace {outer}: discovery stops at a workspace boundary",
                root,
            )
    for root in watch_roots:
        for other in watch_roots:
            if other != root and other.is_relative_to(root):
                raise WorkspaceError(
                    f"--watch-root overlaps the watch root {root} (give only the outer one)", other
                )
    for path in explicit:
        outer = enclosing_workspace(path)
        if outer is not None:
            raise WorkspaceError(f"a workspace nested inside the workspace {outer} is refused", path)
    found, _ = scan(explicit, ())
    for item in found:
        for twin in found:
            if twin.workspace_id == item.workspace_id and twin.identity != item.identity:
                raise WorkspaceError(
                    f"duplicate workspace id {item.workspace_id}: {twin.path} is a different directory "
                    "(device/inode) declaring the same id; both are refused (a copy of a workspace must "
                    "never be served: remove the copy, or re-initialize it as a new workspace)",
                    item.path,
                )


@dataclass(frozen=True)
class Found:
    """One workspace directory seen by a scan."""

    path: Path
    workspace_id: str
    identity: Identity


@dataclass
class Attachment:
    """One workspace id this process knows: the directory handle it holds and the manager serving it."""

    workspace_id: str
    path: Path
    identity: Identity
    handle: int
    member: Manager | None = None  # None while unavailable or detached
    detached: bool = False


def scan(explicit: Sequence[Path], watch_roots: Sequence[Path]) -> tuple[list[Found], list[str]]:
    """Every workspace there now, and why any directory was passed over (each a log line)."""
    found: list[Found] = []
    problems: list[str] = []
    paths = [*explicit, *(path for root in watch_roots for path in below_watch_root(root))]
    for path in paths:
        try:
            status = os.stat(path)
            workspace_id = str(read_format_document(path)["workspace_id"])
        except (OSError, WorkflowError, KeyError):
            continue  # gone since it was listed, or not readable yet (a copy in progress): seen next time
        outer = enclosing_workspace(path)
        if outer is not None:
            problems.append(f"refusing the workspace {path}: it is nested inside the workspace {outer}")
            continue
        found.append(Found(path, workspace_id, (status.st_dev, status.st_ino)))
    return found, problems


@dataclass
class WatchRoster:
    """The members of a manager process serving explicit workspaces and watch roots (see the module).

    ``make`` builds and starts the manager of one workspace path (its manager id given).
    """

    explicit: Sequence[Path]
    watch_roots: Sequence[Path]
    config: ManagerConfig
    clock: Clock
    make: Callable[[Path, str], Manager]
    rescan_interval: float = _detach.DEFAULT_RESCAN_SECONDS
    attachments: dict[str, Attachment] = field(default_factory=dict)
    pool: WorkerPool | None = None
    pending: dict[str, Found] = field(default_factory=dict)  # found, attached at the next loop turns
    _members: list[Manager] = field(default_factory=list)
    _logged: set[str] = field(default_factory=set)
    _last_scan: float = float("-inf")

    def __post_init__(self) -> None:
        if len(self.explicit) > 1 or self.watch_roots:
            self.pool = WorkerPool(self.config.workers)

    @classmethod
    def adopting(
        cls, manager: Manager, rescan_interval: float = _detach.DEFAULT_RESCAN_SECONDS
    ) -> WatchRoster:
        """The roster of one started manager serving its one explicit workspace (``manager run WS``)."""
        root, clock = manager.workspace.root, manager.state.clock
        roster = cls([root], [], manager.config, clock, member_maker(manager.config, clock), rescan_interval)
        status = os.stat(root)
        handle = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        identity = (status.st_dev, status.st_ino)
        roster.attachments[manager.workspace.workspace_id] = Attachment(
            manager.workspace.workspace_id, root, identity, handle, manager
        )
        roster._members.append(manager)
        roster._last_scan = clock.monotonic()
        return roster

    # -- the Roster protocol --------------------------------------------------------------------
    def members(self) -> Sequence[Manager]:
        return self._members

    def serving(self) -> bool:
        return bool(self.watch_roots) or any(not a.detached for a in self.attachments.values())

    def refresh(self) -> bool:
        changed = self._progress_detaches()
        if self.clock.monotonic() - self._last_scan >= self.rescan_interval:
            self._last_scan = self.clock.monotonic()
            changed |= self.rescan()
        if self.pending:  # one per loop turn: the first workspace is served before the others are opened
            changed |= self._attach(self.pending.pop(next(iter(self.pending))))
        if self.pool is not None:
            self.pool.members = self._members
        return changed

    # -- scanning -------------------------------------------------------------------------------
    def rescan(self) -> bool:
        """Attach, re-root, refuse and mark unavailable what a scan of the targets finds now."""
        found, problems = scan(self.explicit, self.watch_roots)
        for problem in problems:
            self._once(problem, logging.ERROR)
        by_id: dict[str, list[Found]] = {}
        for item in found:
            by_id.setdefault(item.workspace_id, []).append(item)
        changed = False
        for workspace_id, items in by_id.items():
            changed |= self._settle(workspace_id, items)
        for workspace_id, attachment in self.attachments.items():
            if workspace_id not in by_id and attachment.member is not None and not _still_there(attachment):
                self._once(
                    f"workspace {workspace_id} vanished from {attachment.path}: unavailable until the "
                    "same workspace id is found again (its jobs are left as they are)",
                    logging.WARNING,
                    key=f"vanished {workspace_id} {attachment.path}",
                )
                self._retire(attachment)
                changed = True
        for workspace_id in [key for key in self.pending if key not in by_id]:
            del self.pending[workspace_id]
        return changed

    def _settle(self, workspace_id: str, items: list[Found]) -> bool:
        identities = {item.identity for item in items}
        attachment = self.attachments.get(workspace_id)
        if len(identities) > 1:
            held = attachment.identity if attachment is not None and attachment.member is not None else None
            if held in identities:
                newcomers = sorted(str(item.path) for item in items if item.identity != held)
                self._once(
                    f"duplicate workspace id {workspace_id}: {', '.join(newcomers)} is a different "
                    f"directory (device/inode) from the served {attachment.path if attachment else '?'}; "
                    "it is refused for mutation (a copy of a workspace must never be served: remove it, "
                    "or re-initialize it as a new workspace)",
                    logging.ERROR,
                )
                items = [item for item in items if item.identity == held]
            else:
                paths = sorted(str(item.path) for item in items)
                self._once(
                    f"duplicate workspace id {workspace_id}: {' and '.join(paths)} are different "
                    "directories (device/inode); both are refused for mutation (a copy of a workspace "
                    "must never be served: remove the copy, or re-initialize it as a new workspace)",
                    logging.ERROR,
                )
                if attachment is not None and attachment.member is not None:
                    self._retire(attachment)
                    return True
                return False
        chosen = min(items, key=lambda item: str(item.path))  # aliases: one directory, attached once
        if attachment is not None and attachment.member is not None:
            if chosen.path == attachment.path and chosen.identity == attachment.identity:
                if _detach.read_request(chosen.path) is not None and not attachment.member.detaching:
                    self._begin_detach(attachment)
                return False
            log.warning(
                "workspace %s moved from %s to %s: serving it at its new path",
                workspace_id,
                attachment.path,
                chosen.path,
            )
            self._retire(attachment)
        elif attachment is not None and attachment.detached:
            if _detach.read_request(chosen.path) is not None:
                return False
            attachment.detached = False
        self.pending[workspace_id] = chosen
        return False

    def discovered(self) -> list[Path]:
        """The workspaces served or about to be."""
        return [member.workspace.root for member in self._members] + [f.path for f in self.pending.values()]

    def _attach(self, found: Found) -> bool:
        request = _detach.read_request(found.path)
        if request is not None:
            self._once(
                f"workspace {found.workspace_id} at {found.path} is detached: not served until "
                "`httk workflow workspace attach` withdraws the request",
                logging.INFO,
                key=f"detached {found.workspace_id} {request.get('detach_id')}",
            )
            return False
        try:
            handle = os.open(found.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return False  # gone between the scan and now: the next rescan sees where it went
        try:
            member = self.make(found.path, str(uuid.uuid4()))
        except (OSError, WorkflowError) as exc:
            os.close(handle)
            self._once(f"cannot serve the workspace {found.path}: {exc}", logging.ERROR)
            return False
        old = self.attachments.get(found.workspace_id)
        if old is not None:
            os.close(old.handle)
        self.attachments[found.workspace_id] = Attachment(
            found.workspace_id, found.path, found.identity, handle, member
        )
        if self.pool is not None:
            member.pool = self.pool
            member.state.pool_live = self.pool.live
        self._members.append(member)
        self._logged = {key for key in self._logged if found.workspace_id not in key}
        log.info(
            "serving workspace %s at %s as manager %s", found.workspace_id, found.path, member.manager_id
        )
        return True

    def _retire(self, attachment: Attachment, *, detached: bool = False) -> None:
        """Stop serving ``attachment``'s workspace; its attempts, if any, are stopped (see the module)."""
        member = attachment.member
        attachment.member = None
        attachment.detached = detached
        if member is None:
            return
        if member.state.live:
            log.warning(
                "workspace %s left %s with %d running attempts: they are stopped and recovered once "
                "their lease runs out (detach a workspace before moving it)",
                attachment.workspace_id,
                attachment.path,
                len(member.state.live),
            )
            member.request_drain("its workspace moved")
        member.finish()
        member.close()
        self._members.remove(member)
        if self.pool is not None:
            self.pool.forget(member)

    # -- detaching ------------------------------------------------------------------------------
    def _begin_detach(self, attachment: Attachment) -> None:
        assert attachment.member is not None
        _detach.begin_detach(attachment.path, attachment.member)

    def _progress_detaches(self) -> bool:
        changed = False
        for attachment in list(self.attachments.values()):
            member = attachment.member
            if member is None or not _detach.holds_nothing(member):
                continue
            self._retire(attachment, detached=True)
            _detach.finish_detach(attachment.path, member)
            changed = True
        return changed

    def close(self) -> None:
        for attachment in self.attachments.values():
            os.close(attachment.handle)
        self.attachments.clear()

    def _once(self, message: str, level: int, *, key: str | None = None) -> None:
        key = key or message
        if key not in self._logged:
            self._logged.add(key)
            log.log(level, "%s", message)


def _still_there(attachment: Attachment) -> bool:
    """Whether the served directory is still at its path, only its format.json unreadable for a moment
    (a scan that could not read it must not retire a workspace whose attempts run)."""
    try:
        status = os.stat(attachment.path)
    except OSError:
        return False
    return (status.st_dev, status.st_ino) == attachment.identity


def member_maker(config: ManagerConfig, clock: Clock) -> Callable[[Path, str], Manager]:
    """How a roster makes the manager of one workspace: attached writable; its first tick starts it
    (record, journal writer, heartbeat), so a process attaching many workspaces claims in the first one
    before it has started the others."""

    def make(path: Path, manager_id: str) -> Manager:
        manager = Manager(
            attach(path, durable=config.durable, clock=clock),
            dataclasses.replace(config, manager_id=manager_id),
            clock=clock,
        )
        manager.start_at_first_tick = True
        return manager

    return make
