"""``httk workflow workspace``: create a workspace; its status, managers, policy, settings and extensions;
fsck and gc; detach and attach.

The group is the ``workspace`` of ``spec/02`` and ``spec/03``; ``httk workspace …`` is the same group at the
top level (DECISIONS D6). Its commands live with what they do: the read commands in ``_inspect_cmd``,
``fsck``, ``gc`` and ``detach``/``attach`` in their own modules, and ``policy``, ``settings``,
``extension`` and ``trust`` are groups of their own.
"""

import os
from pathlib import Path
from typing import Annotated

import typer

from . import (
    _detach_cmd,
    _extension_cmd,
    _fsck_cmd,
    _gc_cmd,
    _inspect_cmd,
    _policy_cmd,
    _registry_cmd,
    _settings_cmd,
    _trust_cmd,
)
from ._options import DurableOpt, JsonOpt, UsageError, WorkspaceOpt
from ._remote_run import remote_word
from ._render import print_json

app = typer.Typer(
    name="workspace",
    help="Create a workspace, and show or change its policy and application settings.",
    no_args_is_help=True,
)

PathArg = Annotated[
    str | None,
    typer.Argument(
        metavar="PATH",
        show_default=False,
        help="The directory to make a workspace (created if absent, adopted if it exists).",
    ),
]
NameOpt = Annotated[
    str | None,
    typer.Option(
        "--name",
        metavar="NAME",
        help="The name to register and record in format.json [default: the directory's basename].",
    ),
]
ExtensionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--extension",
        metavar="NAME",
        show_default=False,
        help="Enable a protocol extension such as transactional-data-v1 (repeatable).",
    ),
]


@app.command("init")
def init(
    *,
    path: PathArg = None,
    name: NameOpt = None,
    extension: ExtensionOpt = None,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a workspace and register its name (--name, else the basename) in this user's registry.

    --no-durable records that its writes are not synchronized (D14). A name already registered for
    another directory is a warning: the workspace is created, not registered.
    """
    root = _init_path(path, workspace_option)
    remote_word(root)
    from httk.workflow.engine import Registry
    from httk.workflow.engine import init as init_workspace

    problem = None if name is None else Registry.name_problem(name)
    if problem is not None:
        raise UsageError(f"--name: {problem}")
    extensions = tuple(dict.fromkeys(extension or ()))
    workspace = init_workspace(root, name=name, durable=durable is not False, extensions=extensions)
    registered = _registry_cmd.register_new(Path(root), name, workspace.workspace_id)
    if as_json:
        print_json(workspace.document)
        return
    typer.echo(f"initialized workspace {Path(root).absolute()}")
    typer.echo(f"workspace_id {workspace.workspace_id}")
    if registered is not None:
        typer.echo(f"registered as {registered}")
    if workspace.extensions:
        typer.echo(f"extensions {' '.join(workspace.extensions)}")


def _init_path(path: str | None, option: str | None) -> str:
    if path is None and option is None:
        raise UsageError("missing PATH: the directory to make a workspace")
    if path is not None and option is not None and os.path.abspath(path) != os.path.abspath(option):
        raise UsageError(f"the PATH argument {path!r} and --workspace {option!r} differ")
    return path if path is not None else str(option)


app.command("list")(_registry_cmd.list_workspaces)
app.command("show")(_registry_cmd.show)
app.command("forget")(_registry_cmd.forget)
app.command("delete")(_registry_cmd.delete)
app.command("default")(_registry_cmd.default)
app.command("status")(_inspect_cmd.status)
app.command("managers")(_inspect_cmd.managers)
app.command("fsck")(_fsck_cmd.fsck)
app.command("gc")(_gc_cmd.gc)
app.command("detach")(_detach_cmd.detach)
app.command("attach")(_detach_cmd.reattach)
app.add_typer(_policy_cmd.app)
app.add_typer(_settings_cmd.app)
app.add_typer(_extension_cmd.app)
app.add_typer(_trust_cmd.app)
