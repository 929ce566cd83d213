"""``httk workflow workspace settings show|set|unset``: the application settings runners read.

Settings are the open map of dotted names to small JSON values of format.json (``spec/02`` "Application
settings"); a scalar setting reaches every attempt as ``HTTK_<NAME>``. A change is a read-modify-write of
format.json that keeps every other member (:meth:`httk.workflow.engine.Workspace.change_settings`).

Both spellings of DECISIONS D6 work: ``settings set WS NAME VALUE`` and ``settings set --key NAME --value
VALUE --workspace WS``. A VALUE is JSON; a word that is not JSON is taken as a string.
"""

from typing import Annotated

import typer

from ._options import (
    DurableOpt,
    JsonOpt,
    KeyOpt,
    ValueArg,
    ValueOpt,
    WorkspaceArg,
    WorkspaceOpt,
    bind,
    json_or_text,
)
from ._render import json_text, note, print_json, print_table

app = typer.Typer(
    name="settings",
    help="Application settings: a flat map of dotted names to small JSON values runners read.",
    no_args_is_help=True,
)

SettingNameArg = Annotated[
    str | None,
    typer.Argument(metavar="NAME", show_default=False, help="A dotted setting name such as vasp.command."),
]


@app.command("show")
def show(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the workspace's application settings."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach

    settings = attach(root, writable=False).settings
    if as_json:
        print_json(settings)
    elif settings:
        print_table(("name", "value"), [(name, json_text(value)) for name, value in sorted(settings.items())])
    else:
        note("no settings")


@app.command("set")
def set_setting(
    *,
    workspace: WorkspaceArg = None,
    name: SettingNameArg = None,
    value: ValueArg = None,
    workspace_option: WorkspaceOpt = None,
    key_option: KeyOpt = None,
    value_option: ValueOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Set one application setting."""
    root, setting, text = bind(
        [workspace, name, value],
        [("WORKSPACE", workspace_option), ("NAME", key_option), ("VALUE", value_option)],
        writes=True,
    )
    from httk.workflow.engine import attach

    parsed = json_or_text(text)
    attach(root, durable=durable).change_settings({setting: parsed})
    typer.echo(f"setting {setting} = {json_text(parsed)}")


@app.command("unset")
def unset(
    *,
    workspace: WorkspaceArg = None,
    name: SettingNameArg = None,
    workspace_option: WorkspaceOpt = None,
    key_option: KeyOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Remove one application setting (nothing happens when it is not set)."""
    root, setting = bind(
        [workspace, name], [("WORKSPACE", workspace_option), ("NAME", key_option)], writes=True
    )
    from httk.workflow.engine import attach

    if attach(root, durable=durable).change_settings({}, (setting,)):
        typer.echo(f"setting {setting} removed")
    else:
        note(f"setting {setting} was not set")
