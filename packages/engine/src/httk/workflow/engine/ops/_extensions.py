"""Workspace extensions: which ones this version knows and implements, and enabling one later.

format.json's ``extensions`` names what a workspace uses beyond the core profile (``spec/01``
"Conformance profiles"). ``workspace init --extension`` records them at creation; :func:`enable_extension`
adds one to an existing workspace, for the extensions this version implements only: a manager must
refuse to mutate a workspace naming one it does not support, so enabling a reserved or unknown one would
lock every manager out. There is no disabling: a job may already depend on what an extension provides
(``data/`` and its transactions).

A manager reads format.json once, when it attaches, and a live one would go on serving without the new
extension (refusing every transaction as a protocol error), so enabling is refused while any manager of
the workspace is live (heartbeat within its lease). A manager that starts in the instant between that
check and the write may still have read the old document: the managers are listed again after the write
and any live one is returned, for the caller to tell the operator to restart it.

Cost: one listing of ``managers/`` and one heartbeat read per manager directory, twice; one format.json
read-modify-write.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from httk.workflow.engine.core._liveness import ManagerView, list_managers
from httk.workflow.engine.core._workspace import (
    SUPPORTED_EXTENSIONS,
    Workspace,
    extension_refusal,
    read_format_document,
)
from httk.workflow.protocol import WorkspaceError

DESCRIPTIONS = {
    "transactional-data-v1": "replayable contributions to data/ (transactions)",
    "detached-transfer-v1": "sealed standalone transfer bundles",
    "relocation-v1": "moving payloads between placements in one workspace",
    "multiworkspace-v1": "cross-workspace children, joins and coordinated transfer",
}
"""What each extension of ``spec/01`` adds, in its table's words."""


@dataclass(frozen=True, slots=True)
class ExtensionView:
    """One extension: enabled in this workspace or not, implemented by this version or not."""

    name: str
    enabled: bool
    implemented: bool
    description: str

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "enabled": self.enabled,
            "implemented": self.implemented,
            "description": self.description,
        }


def list_extensions(workspace: Workspace) -> list[ExtensionView]:
    """Every extension ``spec/01`` defines, then any other the workspace enables, by name."""
    enabled = set(workspace.extensions)
    names = sorted(set(DESCRIPTIONS) | enabled)
    return [
        ExtensionView(
            name,
            name in enabled,
            name in SUPPORTED_EXTENSIONS,
            DESCRIPTIONS.get(name, "unknown to this version"),
        )
        for name in names
    ]


def enable_extension(workspace: Workspace, name: str) -> tuple[bool, list[ManagerView]]:
    """Add ``name`` to the workspace's extensions; whether it changed, and managers live after the write.

    Raises
    ------
    WorkspaceError
        The extension is not one this version implements, or a manager of the workspace is live (nothing
        is written in either case), or the workspace may not be changed by this version.
    """
    workspace.require_writable()
    refusal = extension_refusal(name)
    if refusal is not None:
        raise WorkspaceError(f"cannot enable extension {name!r}: {refusal}", workspace.root)
    if name in workspace.extensions:
        return False, []
    live = _live(workspace)
    if live:
        stop = shlex.join(["httk", "workflow", "manager", "stop", str(workspace.root), "--all"])
        raise WorkspaceError(
            f"cannot enable extension {name!r} while {_managers(live)} live: a manager reads format.json "
            f"only when it attaches; stop them first ({stop}), then enable it",
            workspace.root,
        )
    current = read_format_document(workspace.root).get("extensions") or []
    workspace.update_document({"extensions": sorted({*current, name})})
    return True, _live(workspace)


def _live(workspace: Workspace) -> list[ManagerView]:
    return [view for view in list_managers(workspace) if view.live]


def _managers(views: list[ManagerView]) -> str:
    ids = ", ".join(view.manager_id for view in views)
    return f"manager {ids} is" if len(views) == 1 else f"managers {ids} are"
