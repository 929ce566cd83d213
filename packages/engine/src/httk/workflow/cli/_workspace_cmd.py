"""``httk workflow workspace``: create a workspace, show and change its policy and settings.

Policy is the closed set of engine tunables in format.json (``spec/01`` "Workspace policy"); settings are
the open map of application values runners read (``spec/02`` "Application settings"). Both are changed by
a read-modify-write of format.json that keeps every other member, so the last writer wins and no reader
ever sees a torn document.

Both spellings of DECISIONS D6 work: ``policy set WS KEY VALUE`` and ``policy set --key KEY --value VALUE
--workspace WS`` (or with WS last). A VALUE is JSON; a word that is not JSON, such as ``keep``, is taken as
a string.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._options import DurableOpt, JsonOpt, WorkspaceArg, WorkspaceOpt, bind, json_or_text
from ._render import json_text, note, print_json, print_table

if TYPE_CHECKING:
    from httk.workflow.engine import Workspace
    from httk.workflow.protocol._policy import Policy

app = typer.Typer(
    name="workspace",
    help="Create a workspace, and show or change its policy and application settings.",
    no_args_is_help=True,
)
policy_app = typer.Typer(
    name="policy",
    help="The engine tunables every manager and CLI attaching the workspace agrees on.",
    no_args_is_help=True,
)
settings_app = typer.Typer(
    name="settings",
    help="Application settings: a flat map of dotted names to small JSON values runners read.",
    no_args_is_help=True,
)
app.add_typer(policy_app)
app.add_typer(settings_app)

PathArg = Annotated[
    str | None,
    typer.Argument(
        metavar="PATH",
        show_default=False,
        help="The directory to make a workspace (created if absent, adopted if it exists).",
    ),
]
NameOpt = Annotated[
    str | None, typer.Option("--name", metavar="NAME", help="A name recorded in format.json.")
]
PolicyKeyArg = Annotated[
    str | None,
    typer.Argument(metavar="KEY", show_default=False, help="A policy member; retention.X names one limit."),
]
SettingNameArg = Annotated[
    str | None,
    typer.Argument(metavar="NAME", show_default=False, help="A dotted setting name such as vasp.command."),
]
ValueArg = Annotated[
    str | None,
    typer.Argument(metavar="VALUE", show_default=False, help="JSON; a word that is not JSON is a string."),
]
KeyOpt = Annotated[
    str | None, typer.Option("--key", metavar="KEY", show_default=False, help="KEY or NAME, as an option.")
]
ValueOpt = Annotated[
    str | None, typer.Option("--value", metavar="VALUE", show_default=False, help="VALUE, as an option.")
]


@app.command("init")
def init(
    *,
    path: PathArg = None,
    name: NameOpt = None,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a workspace. --no-durable records that its writes are not synchronized (D14)."""
    (root,) = bind([path], [("PATH", workspace_option)])
    from httk.workflow.engine import init as init_workspace

    workspace = init_workspace(root, name=name, durable=durable is not False)
    if as_json:
        print_json(workspace.document)
        return
    typer.echo(f"initialized workspace {Path(root).absolute()}")
    typer.echo(f"workspace_id {workspace.workspace_id}")


# -- policy -----------------------------------------------------------------------------------------


@policy_app.command("show")
def policy_show(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the effective policy: a member the workspace does not set reads as its default."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)])
    policy = _attach(root, writable=False).policy
    if as_json:
        print_json(_policy_members(policy))
        return
    print_table(("key", "value", "default"), _policy_rows(policy))


@policy_app.command("set")
def policy_set(
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
    )
    policy = _set_policy(root, name, json_or_text(text), durable)
    if as_json:
        print_json(_policy_members(policy))
        return
    typer.echo(f"policy {name} = {_policy_value(policy, name)}")


def _set_policy(root: str, key: str, value: object, durable: bool | None) -> "Policy":
    from httk.workflow.protocol._policy import set_policy_member

    workspace = _attach(root, durable=durable)
    workspace.update_document({"policy": set_policy_member(workspace.document.get("policy"), key, value)})
    return workspace.policy


def _policy_members(policy: "Policy") -> dict[str, Any]:
    from httk.workflow.protocol._policy import RETENTION_KEYS

    return {
        "visibility_deadline_seconds": policy.visibility_deadline_seconds,
        "lease_seconds": policy.lease_seconds,
        "journal_segment_bytes": policy.journal_segment_bytes,
        "retention": {category: policy.retention_days(category) for category in RETENTION_KEYS},
    }


def _flat_members(policy: "Policy") -> dict[str, object]:
    members = _policy_members(policy)
    retention = members.pop("retention")
    return {**members, **{f"retention.{key}": days for key, days in retention.items()}}


def _policy_rows(policy: "Policy") -> list[tuple[str, str, str]]:
    from httk.workflow.protocol._policy import Policy

    defaults = _flat_members(Policy())
    return [(key, _shown(value), _shown(defaults[key])) for key, value in _flat_members(policy).items()]


def _policy_value(policy: "Policy", key: str) -> str:
    members = _flat_members(policy)
    if key in members:
        return _shown(members[key])
    return json_text(_policy_members(policy)[key])  # the whole retention object


def _shown(value: object) -> str:
    return "keep" if value is None else json_text(value)


# -- settings ---------------------------------------------------------------------------------------


@settings_app.command("show")
def settings_show(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the workspace's application settings."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)])
    settings = _attach(root, writable=False).settings
    if as_json:
        print_json(settings)
    elif settings:
        print_table(("name", "value"), [(name, json_text(value)) for name, value in sorted(settings.items())])
    else:
        note("no settings")


@settings_app.command("set")
def settings_set(
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
    )
    from httk.workflow.protocol._policy import validate_setting_name

    parsed = json_or_text(text)
    _change_settings(root, {validate_setting_name(setting): parsed}, (), durable)
    typer.echo(f"setting {setting} = {json_text(parsed)}")


@settings_app.command("unset")
def settings_unset(
    *,
    workspace: WorkspaceArg = None,
    name: SettingNameArg = None,
    workspace_option: WorkspaceOpt = None,
    key_option: KeyOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Remove one application setting (nothing happens when it is not set)."""
    root, setting = bind([workspace, name], [("WORKSPACE", workspace_option), ("NAME", key_option)])
    if _change_settings(root, {}, (setting,), durable):
        typer.echo(f"setting {setting} removed")
    else:
        note(f"setting {setting} was not set")


def _change_settings(
    root: str, changes: dict[str, object], removals: tuple[str, ...], durable: bool | None
) -> bool:
    """Apply ``changes`` and ``removals`` to the settings map; return whether anything was removed."""
    workspace = _attach(root, durable=durable)
    settings = workspace.settings
    removed = [settings.pop(name) for name in removals if name in settings]
    if not changes and not removed:
        return False
    settings.update(changes)
    workspace.update_document({"settings": dict(sorted(settings.items()))})
    return bool(removed)


def _attach(root: str, *, writable: bool = True, durable: bool | None = None) -> "Workspace":
    from httk.workflow.engine import attach

    return attach(root, writable=writable, durable=durable)
