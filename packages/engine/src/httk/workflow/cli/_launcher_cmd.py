"""``httk workflow launcher add|list|show|remove``: the named bundles that start managers.

A bundle names a template (``process``, ``slurm``, or one another package provides). It lives in the
workspace given with ``--workspace`` (``.httk-workflow/launchers/NAME.json``) or, with ``--global``, in
the user's configuration directory; the workspace setting ``manager.launch`` selects one by name.
"""

from pathlib import Path
from typing import Annotated

import typer

from ._options import JsonOpt, UsageError, resolve

app = typer.Typer(name="launcher", help="Launchers that start task managers.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The launcher's name.")]
GlobalOpt = Annotated[
    bool,
    typer.Option(
        "--global",
        help="For every workspace of this user (launchers/ in ~/.config/httk or $HTTK_CONFIG_HOME).",
    ),
]
LauncherWorkspaceOpt = Annotated[
    str | None,
    typer.Option("--workspace", metavar="WS", help="The workspace that owns the launcher."),
]


def _directory(workspace: str | None, is_global: bool) -> tuple[Path, str]:
    from httk.workflow.engine import find_root, global_directory, workspace_directory

    if is_global == (workspace is not None):
        raise UsageError("give either --global or --workspace WS")
    if is_global:
        return global_directory(), "global"
    assert workspace is not None
    return workspace_directory(find_root(resolve(workspace, writes=False).path)), "workspace"


def _root(workspace: str | None) -> Path | None:
    from httk.workflow.engine import find_root

    return None if workspace is None else find_root(resolve(workspace, writes=False).path)


@app.command("add")
def add(
    name: NameArg,
    *,
    template: Annotated[str, typer.Option("--template", help="The template: process or slurm.")],
    is_global: GlobalOpt = False,
    workspace: LauncherWorkspaceOpt = None,
) -> None:
    """Add a launcher NAME made from a template."""
    from httk.workflow.engine import add_bundle

    directory, scope = _directory(workspace, is_global)
    bundle = add_bundle(directory, name, template, scope)
    typer.echo(f"added launcher {bundle.name} (template {bundle.template}) at {bundle.path}")


@app.command("list")
def list_launchers(*, workspace: LauncherWorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """The launchers a workspace (or, without --workspace, this user) can use."""
    import json

    from httk.workflow.engine import list_bundles

    bundles = list_bundles(_root(workspace))
    if as_json:
        typer.echo(json.dumps([bundle.as_dict() for bundle in bundles]))
        return
    for bundle in bundles:
        typer.echo(f"{bundle.name}\t{bundle.template}\t{bundle.scope}\t{bundle.path or '-'}")


@app.command("show")
def show(name: NameArg, *, workspace: LauncherWorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """One launcher: its template, where it is defined, and the settings it reads."""
    import json

    from httk.workflow.engine import find_bundle, settings_read

    bundle = find_bundle(name, _root(workspace))
    document = {**bundle.as_dict(), "settings": settings_read(bundle.template)}
    if as_json:
        typer.echo(json.dumps(document))
        return
    for key, value in document.items():
        shown = ", ".join(value) if isinstance(value, list) else value
        typer.echo(f"{key}: {shown if shown is not None else '-'}")


@app.command("remove")
def remove(name: NameArg, *, is_global: GlobalOpt = False, workspace: LauncherWorkspaceOpt = None) -> None:
    """Remove launcher NAME from the workspace or, with --global, from this user's launchers."""
    from httk.workflow.engine import remove_bundle

    directory, _scope = _directory(workspace, is_global)
    path = remove_bundle(name, directory)
    typer.echo(f"removed launcher {name} ({path})")
