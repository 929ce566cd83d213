"""``httk workflow workspace policy show|set``: the engine tunables of format.json.

Policy is the closed set of members ``spec/01`` defines ("Workspace policy"); a member the workspace does
not set reads as its default. ``set`` is a read-modify-write of format.json that keeps every other member
(:meth:`httk.workflow.engine.Workspace.set_policy`), so the last writer wins and no reader ever sees a torn
document.

Both spellings of DECISIONS D6 work: ``policy set WS KEY VALUE`` and ``policy set --key KEY --value VALUE
--workspace WS`` (or with WS last). A VALUE is JSON; a word that is not JSON, such as ``keep``, is taken as
a string.
"""

from typing import TYPE_CHECKING, Annotated

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
from ._render import json_text, print_json, print_table

if TYPE_CHECKING:
    from httk.workflow.engine import Policy

app = typer.Typer(
    name="policy",
    help="The engine tunables every manager and CLI attaching the workspace agrees on.",
    no_args_is_help=True,
)

PolicyKeyArg = Annotated[
    str | None,
    typer.Argument(metavar="KEY", show_default=False, help="A policy member; retention.X names one limit."),
]


@app.command("show")
def show(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the effective policy: a member the workspace does not set reads as its default."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach

    policy = attach(root, writable=False).policy
    if as_json:
        print_json(policy.as_dict())
        return
    print_table(("key", "value", "default"), _rows(policy))


@app.command("set")
def set_member(
    *,
    workspace: WorkspaceArg = None,
    key: PolicyKeyArg = None,
    value: ValueArg = None,
    workspace_option: WorkspaceOpt = None,
    key_option: KeyOpt = None,
    value_option: ValueOpt = None,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set one policy member, validated before it is written; null or keep clears a retention limit."""
    root, name, text = bind(
        [workspace, key, value],
        [("WORKSPACE", workspace_option), ("KEY", key_option), ("VALUE", value_option)],
        writes=True,
    )
    from httk.workflow.engine import attach

    policy = attach(root, durable=durable).set_policy(name, json_or_text(text))
    if as_json:
        print_json(policy.as_dict())
        return
    typer.echo(f"policy {name} = {_value(policy, name)}")


def _flat(policy: "Policy") -> dict[str, object]:
    members = policy.as_dict()
    retention = members.pop("retention")
    return {**members, **{f"retention.{key}": days for key, days in retention.items()}}


def _rows(policy: "Policy") -> list[tuple[str, str, str]]:
    defaults = _flat(policy.default())
    return [(key, _shown(value), _shown(defaults[key])) for key, value in _flat(policy).items()]


def _value(policy: "Policy", key: str) -> str:
    members = _flat(policy)
    if key in members:
        return _shown(members[key])
    return json_text(policy.as_dict()[key])  # the whole retention object


def _shown(value: object) -> str:
    return "keep" if value is None else json_text(value)
