"""``httk workflow workspace extension list|enable``: the protocol extensions a workspace uses.

``list`` shows every extension ``spec/01`` defines (and any other the workspace names): whether this
workspace enables it and whether this version implements it. ``enable NAME`` adds one this version
implements to format.json (:func:`httk.workflow.engine.enable_extension`); it is refused while a manager of
the workspace is live, because a manager reads format.json only when it attaches. Enabling an enabled
extension changes nothing. There is no ``disable``: jobs may already depend on what an extension provides.
A new workspace takes its extensions at ``workspace init --extension NAME``.
"""

from typing import Annotated

import typer

from ._options import DurableOpt, JsonOpt, WorkspaceArg, WorkspaceOpt, bind
from ._render import note, print_json, print_table

app = typer.Typer(
    name="extension",
    help="The protocol extensions a workspace enables (transactional-data-v1, ...).",
    no_args_is_help=True,
)

ExtensionArg = Annotated[
    str | None,
    typer.Argument(
        metavar="NAME", show_default=False, help="An extension name such as transactional-data-v1."
    ),
]


@app.command("list")
def list_extensions(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every extension: enabled here or not, implemented by this version or not."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach
    from httk.workflow.engine import list_extensions as extensions_of

    views = extensions_of(attach(root, writable=False))
    if as_json:
        print_json([view.as_dict() for view in views])
        return
    print_table(
        ("extension", "enabled", "implemented", "what it adds"),
        [(view.name, _yes(view.enabled), _yes(view.implemented), view.description) for view in views],
    )


@app.command("enable")
def enable(
    *,
    workspace: WorkspaceArg = None,
    name: ExtensionArg = None,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Enable an extension this version implements (refused while a manager is live)."""
    root, extension = bind([workspace, name], [("WORKSPACE", workspace_option), ("NAME", None)], writes=True)
    from httk.workflow.engine import attach, enable_extension

    changed, live = enable_extension(attach(root, durable=durable), extension)
    if not changed:
        note(f"extension {extension} was already enabled")
        return
    typer.echo(f"extension {extension} enabled")
    for view in live:
        note(
            f"warning: manager {view.manager_id} started while the extension was being enabled and may "
            "have read the old format.json: stop it and start it again"
        )


def _yes(value: bool) -> str:
    return "yes" if value else "no"
