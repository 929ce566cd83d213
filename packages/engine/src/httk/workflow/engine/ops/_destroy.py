"""``workspace delete NAME --force``: destroy a registered workspace and deregister its name.

Destroying is refused while any manager of the workspace is live (heartbeat within its lease, the same
test ``manager list`` applies), and unless the directory still is the workspace that was registered:
it must hold ``.httk-workflow/format.json`` and, when the entry recorded one, the same workspace_id.
A name whose directory has since been replaced or emptied is never a licence to remove what is there now.

The directory is first renamed to a hidden sibling (``.NAME.deleted.RANDOM``), so it stops being a
workspace at one instant and no manager or command can attach a half-removed one; the name is then
deregistered and the renamed tree removed. A crash during the removal leaves only that hidden sibling,
which :class:`Destroyed` names so the operator can remove it.

Cost: one listing of ``managers/`` and a heartbeat read per manager; then the whole tree is removed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._liveness import list_managers
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.ops._locate import is_workspace_dir
from httk.workflow.engine.ops._registry import Registry
from httk.workflow.protocol import RegistryError, WorkspaceError


@dataclass(frozen=True, slots=True)
class Destroyed:
    """What ``workspace delete`` did: the directory removed (None when it was already gone)."""

    name: str
    root: Path
    removed: bool
    leftover: Path | None = None


def destroy_workspace(registry: Registry, name: str) -> Destroyed:
    """Remove the workspace registered as ``name`` and its entry; refused while a manager is live."""
    entry = registry.require(name)
    root = entry.path
    if not os.path.lexists(root):
        registry.forget(name)
        return Destroyed(name, root, removed=False)
    if not is_workspace_dir(root):
        raise RegistryError(
            f"refusing to delete {root}: it is not a workspace (no .httk-workflow/); "
            f"deregister the name with: workspace forget {name}"
        )
    workspace = attach(root, writable=False)
    if entry.workspace_id is not None and workspace.workspace_id != entry.workspace_id:
        raise RegistryError(
            f"refusing to delete {root}: it holds workspace {workspace.workspace_id}, not "
            f"{entry.workspace_id} that was registered as {name!r}; deregister the name with: "
            f"workspace forget {name}"
        )
    live = [view.manager_id for view in list_managers(workspace) if view.live]
    if live:
        raise WorkspaceError(
            f"refusing to delete workspace {name!r} while manager{'s' if len(live) > 1 else ''} "
            f"{', '.join(live)} {'are' if len(live) > 1 else 'is'} live; stop them first "
            f"(httk workflow manager stop {name} --all)",
            root,
        )
    doomed = root.with_name(f".{root.name}.deleted.{os.urandom(4).hex()}")
    _fsops.rename(root, doomed, durable=True)
    registry.forget(name)
    _fsops.remove_tree(doomed)
    if os.path.lexists(doomed):  # what could not be removed is left, and named
        return Destroyed(name, root, removed=True, leftover=doomed)
    return Destroyed(name, root, removed=True)
