"""Which workspace a command means: a name or a path it was given, or the rules for none.

A command given a WORKSPACE word takes it as a registered name or as a directory holding
``.httk-workflow/`` (:func:`locate_word`). Given none, :func:`locate_implicit` applies ``spec/03``'s rules
in order and reports which one chose:

1. ``enclosing``: the closest directory at or above the current one that holds ``.httk-workflow/``;
2. ``project``: the default recorded for the current directory or its closest ancestor
   (``workspace default NAME``);
3. ``user``: the registry default (``workspace default --user NAME``);
4. ``per-user``: the per-user default workspace, ``$HTTK_DATA_HOME/default-workspace`` (else
   ``$XDG_DATA_HOME/httk/``, else ``~/.local/share/httk/``), created on first use by a command that
   writes and registered as ``default`` when that name is free.

A recorded default whose name is no longer registered is an error, never a reason to fall through to
the next rule: a command would otherwise act silently on another workspace than the one recorded.

Cost: one ``stat`` per ancestor of the current directory for each of the first two rules, then one
registry read; nothing of the workspace itself is opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.engine.core._user_dirs import data_home
from httk.workflow.engine.ops._registry import Registry, RegistryEntry, same_directory
from httk.workflow.protocol import RegistryError, WorkspaceError

CONTROL_DIR = ".httk-workflow"  # the same name as core._workspace's, without importing the kernel
DEFAULT_NAME = "default"

RULES = {
    "argument": "the WORKSPACE argument",
    "option": "the --workspace option",
    "enclosing": "the closest enclosing workspace",
    "project": "the project's recorded default",
    "user": "the registry default",
    "per-user": "the per-user default workspace",
}
"""Every rule that can choose a workspace, by its key, with the words ``workspace show`` prints."""


@dataclass(frozen=True, slots=True)
class Located:
    """A workspace directory and why it was chosen: ``rule`` is a key of :data:`RULES`."""

    root: Path
    rule: str
    detail: str
    name: str | None = None
    created: bool = False

    @property
    def reason(self) -> str:
        return f"{RULES[self.rule]}: {self.detail}"

    def as_dict(self) -> dict[str, object]:
        return {"workspace": str(self.root), "rule": self.rule, "reason": self.reason, "name": self.name}


def is_workspace_dir(path: Path | str) -> bool:
    return os.path.isdir(os.path.join(path, CONTROL_DIR))


def per_user_default_path(environ: Mapping[str, str] | None = None) -> Path:
    return data_home(environ) / "default-workspace"


def enclosing_workspace(start: Path) -> Path | None:
    """``start`` or its closest ancestor holding ``.httk-workflow/``."""
    directory = Path(os.path.abspath(start))
    while not is_workspace_dir(directory):
        if directory.parent == directory:
            return None
        directory = directory.parent
    return directory


def registered_root(registry: Registry, name: str) -> Path:
    """The directory registered as ``name``, which must still be a workspace."""
    entry = registry.require(name)
    if not is_workspace_dir(entry.path):
        raise RegistryError(
            f"workspace {name!r} is registered for {entry.path}, which is no longer a workspace "
            f"(deregister it with: workspace forget {name})",
            registry.entry_file(name),
        )
    return entry.path


@dataclass(frozen=True, slots=True)
class Readings:
    """What a word could mean as a workspace: a registered name, a workspace directory, both or neither."""

    word: str
    entry: RegistryEntry | None
    directory: Path | None

    @property
    def any(self) -> bool:
        return self.entry is not None or self.directory is not None

    @property
    def conflicting(self) -> bool:
        """Both readings exist and name different directories."""
        if self.entry is None or self.directory is None:
            return False
        return not same_directory(self.entry.path, self.directory)


def workspace_readings(word: str, registry: Registry) -> Readings:
    directory = Path(os.path.abspath(word)) if is_workspace_dir(word) else None
    return Readings(word, registry.lookup(word), directory)


def locate_word(found: Readings, registry: Registry, *, rule: str) -> Located:
    """The workspace a WORKSPACE word names: a workspace directory, a registered name, else its path.

    A path that is no workspace is returned as it is, for attaching it to say why.
    """
    if found.directory is not None:
        name = None if found.entry is None else found.entry.name
        return Located(found.directory, rule, f"the directory {found.word!r}", name)
    if found.entry is not None:
        root = registered_root(registry, found.word)
        return Located(root, rule, f"the registered name {found.word!r}", found.word)
    return Located(Path(os.path.abspath(found.word)), rule, f"the directory {found.word!r}")


def locate_implicit(registry: Registry, cwd: Path, *, create: bool) -> Located | None:
    """The workspace the rules choose for a command run in ``cwd``; None if there is none to use."""
    enclosing = enclosing_workspace(cwd)
    if enclosing is not None:
        return Located(enclosing, "enclosing", f"{enclosing} holds {CONTROL_DIR}/")
    project = registry.project_default(cwd)
    if project is not None:
        root = registered_root(registry, project.name)
        return Located(root, "project", f"{project.name!r}, recorded for {project.project}", project.name)
    name = registry.user_default()
    if name is not None:
        return Located(registered_root(registry, name), "user", f"{name!r}", name)
    return _per_user_default(registry, create=create)


def _per_user_default(registry: Registry, *, create: bool) -> Located | None:
    root = per_user_default_path()
    if is_workspace_dir(root):
        return Located(root, "per-user", str(root))
    if not create:
        return None
    # deferred: resolving a workspace must not pay for the kernel; only creating one does
    from httk.workflow.engine.core._workspace import init

    try:
        workspace = init(root, name=DEFAULT_NAME)
    except (WorkspaceError, FileExistsError):  # another command created it first
        if not is_workspace_dir(root):
            raise
        return Located(root, "per-user", str(root))
    registration = registry.register(DEFAULT_NAME, root, workspace.workspace_id)
    name = DEFAULT_NAME if registration.outcome != "taken" else None
    return Located(root, "per-user", str(root), name, created=True)
