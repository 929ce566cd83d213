"""``httk workflow workspace list|show|forget|delete|default``: the per-user registry of workspace names.

``workspace init`` registers a workspace's name (its basename, or ``--name``); these commands read and
change the registry (:class:`httk.workflow.engine.Registry`) and say which workspace a command run here
would use (``show``). Which workspace an omitted or named WORKSPACE means is decided in one place for
every command: :func:`._options.resolve`.
"""

import os
from pathlib import Path
from typing import Annotated

import typer

from ._options import JsonOpt, UsageError, WorkspaceArg, WorkspaceOpt, bind, resolve
from ._render import note, print_json, print_table

NameArg = Annotated[str, typer.Argument(metavar="NAME", show_default=False, help="A registered name.")]
UserOpt = Annotated[
    bool, typer.Option("--user", help="Record the registry default for this user, not for this project.")
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Really destroy the workspace directory and everything in it.")
]


def register_new(root: Path, name: str | None, workspace_id: str) -> str | None:
    """Register a new workspace under ``name`` or its basename; a name taken elsewhere is a warning.

    Returns the name registered, None when it was not.
    """
    from httk.workflow.engine import Registry

    chosen = name if name is not None else Path(os.path.abspath(root)).name
    problem = Registry.name_problem(chosen)
    if problem is not None:
        note(f"warning: not registered: {problem} (give a valid name with: workspace init --name NAME)")
        return None
    registration = Registry.for_user().register(chosen, root, workspace_id)
    if registration.outcome == "taken":
        note(
            f"warning: not registered: the name {chosen!r} is already registered for "
            f"{registration.entry.path} (choose another with --name, or: workspace forget {chosen})"
        )
        return None
    return chosen


def list_workspaces(*, as_json: JsonOpt = False) -> None:
    """This user's registered workspace names and directories."""
    from httk.workflow.engine import Registry

    registry = Registry.for_user()
    default = registry.user_default()
    entries = registry.entries()
    if as_json:
        rows = [{**entry.as_dict(), "present": entry.present} for entry in entries]
        print_json({"registry": str(registry.home), "user_default": default, "workspaces": rows})
        return
    print_table(
        ("name", "path", "present", "default"),
        [
            (entry.name, str(entry.path), _yes(entry.present), "user" if entry.name == default else "")
            for entry in entries
        ],
    )


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def show(
    *, workspace: WorkspaceArg = None, workspace_option: WorkspaceOpt = None, as_json: JsonOpt = False
) -> None:
    """Which workspace a command run here uses, and which rule chose it."""
    if workspace is not None and workspace_option is not None:
        bind([workspace], [("WORKSPACE", workspace_option)], writes=False)  # refuses two different ones
    given = workspace if workspace is not None else workspace_option
    located = resolve(given, writes=False, rule="argument" if workspace is not None else "option").located
    from httk.workflow.engine import Registry, find_root

    find_root(located.root)  # a path that is no workspace says so
    names = Registry.for_user().names_of(located.root)
    report = {**located.as_dict(), "names": names}
    if as_json:
        print_json(report)
        return
    typer.echo(f"workspace {located.root}")
    typer.echo(f"names     {' '.join(names) if names else '(not registered)'}")
    typer.echo(f"chosen by {located.reason}")


def forget(name: NameArg) -> None:
    """Deregister NAME; the workspace directory is left as it is."""
    from httk.workflow.engine import Registry

    Registry.for_user().forget(name)
    typer.echo(f"forgot {name}")


def delete(name: NameArg, *, force: ForceOpt = False) -> None:
    """Destroy the workspace registered as NAME and deregister it (refused while a manager is live)."""
    if not force:
        raise UsageError(f"deleting workspace {name!r} destroys it and every job in it: pass --force")
    from httk.workflow.engine import Registry, destroy_workspace

    destroyed = destroy_workspace(Registry.for_user(), name)
    if not destroyed.removed:
        typer.echo(f"forgot {name}: its directory {destroyed.root} was already gone")
        return
    typer.echo(f"deleted workspace {name} ({destroyed.root})")
    if destroyed.leftover is not None:
        note(f"warning: could not remove all of {destroyed.leftover}; remove it by hand")


def default(name: NameArg, *, user: UserOpt = False) -> None:
    """Record NAME as this project directory's default workspace (or, with --user, this user's)."""
    from httk.workflow.engine import Registry

    registry = Registry.for_user()
    if user:
        registry.set_user_default(name)
        typer.echo(f"the registry default workspace is {name}")
        return
    project = Path(os.getcwd())
    registry.set_project_default(project, name)
    typer.echo(f"the default workspace of {project} and below is {name}")
