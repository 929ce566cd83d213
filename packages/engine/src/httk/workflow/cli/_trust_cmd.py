"""``httk workflow workspace trust add|remove|list|require``: which operator keys a workspace trusts.

The list and the ``required`` switch are format.json's ``request_signatures`` (DECISIONS D20,
:mod:`httk.workflow.engine.ops._trust`). Without ``required`` a signed request is verified and its key
recorded whether or not the key is trusted; with it, a manager quarantines every unsigned request and
every request signed by a key not trusted here. A key is ``ed25519:<base64>`` as ``httk workflow config
show`` prints it. This is attribution plus an allow-list, not filesystem security: anyone who can write
the workspace can still rename its markers.
"""

from typing import Annotated

import typer

from ._options import DurableOpt, JsonOpt, WorkspaceArg, WorkspaceOpt, bind
from ._render import note, print_json, print_table

app = typer.Typer(
    name="trust",
    help="The operator keys this workspace trusts to sign requests, and whether it requires them.",
    no_args_is_help=True,
)

KeyArg = Annotated[
    str | None,
    typer.Argument(metavar="KEY", show_default=False, help="An operator key, ed25519:<base64>."),
]
OffOpt = Annotated[bool, typer.Option("--off", help="Stop requiring signed, trusted requests.")]


@app.command("add")
def add(
    *,
    workspace: WorkspaceArg = None,
    key: KeyArg = None,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Trust KEY to sign this workspace's requests."""
    _change_key(workspace, key, workspace_option, durable, trust=True)


@app.command("remove")
def remove(
    *,
    workspace: WorkspaceArg = None,
    key: KeyArg = None,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Stop trusting KEY (refused for the last key while signatures are required)."""
    _change_key(workspace, key, workspace_option, durable, trust=False)


def _change_key(
    workspace: str | None, key: str | None, option: str | None, durable: bool | None, *, trust: bool
) -> None:
    root, operator_key = bind([workspace, key], [("WORKSPACE", option), ("KEY", None)], writes=True)
    from httk.workflow.engine import attach, distrust_key, fingerprint, trust_key

    change = trust_key if trust else distrust_key
    if not change(attach(root, durable=durable), operator_key):
        note(f"{operator_key} was {'already' if trust else 'not'} trusted")
    elif trust:
        typer.echo(f"trusted {operator_key} ({fingerprint(operator_key)})")
    else:
        typer.echo(f"no longer trusted: {operator_key}")


@app.command("require")
def require(
    *,
    workspace: WorkspaceArg = None,
    off: OffOpt = False,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Require every request to be signed by a trusted key (--off: accept unsigned ones again)."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=True)
    from httk.workflow.engine import attach, require_signatures

    changed = require_signatures(attach(root, durable=durable), not off)
    state = "no longer required" if off else "required"
    if changed:
        typer.echo(f"signed, trusted requests are {state}")
    else:
        note(f"signed, trusted requests were already {state}")


@app.command("list")
def list_keys(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The trusted keys and whether signatures are required."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach, fingerprint, trust_list

    trust = trust_list(attach(root, writable=False))
    if as_json:
        print_json(trust.as_member())
        return
    typer.echo(f"signed, trusted requests required: {'yes' if trust.required else 'no'}")
    if trust.trusted_keys:
        print_table(("operator_key", "fingerprint"), [(key, fingerprint(key)) for key in trust.trusted_keys])
    else:
        typer.echo("no key is trusted")
