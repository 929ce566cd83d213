"""``httk workflow workflows list``: the packaged workflows installed here, and their inputs.

A package registers a workflow under the entry point group ``httk.workflow.workflows``
(:class:`httk.workflow.sdk.packaged.PackagedWorkflow`); this lists every one with its inputs -- name,
whether it is required, its default, what it means -- so that ``job new --workflow NAME --input
KEY=VALUE`` can be written without reading a package's source. An entry point that cannot be used (it
does not load, names something else, or two distributions claim its name) is listed with its problem on
standard error and makes the exit status 1; the others are listed as usual.
"""

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import typer

from ._options import JsonOpt
from ._render import json_text, note, print_json, print_table

if TYPE_CHECKING:
    from httk.workflow.engine import WorkflowEntry

app = typer.Typer(
    name="workflows",
    help="The packaged workflows 'job new --workflow' can make jobs of.",
    no_args_is_help=True,
)


@app.command("list")
def list_workflows(*, as_json: JsonOpt = False) -> None:
    """Every packaged workflow with its inputs: name, required, default and meaning."""
    from httk.workflow.engine import packaged_workflows

    entries = packaged_workflows()
    usable = [entry for entry in entries if entry.workflow is not None]
    if as_json:
        print_json([_as_json(entry) for entry in entries])
    else:
        _print(usable)
    for entry in entries:
        if entry.problem is not None:
            note(f"error: {entry.describe()} {entry.problem}")
    if len(usable) < len(entries):
        raise typer.Exit(1)


def _as_json(entry: "WorkflowEntry") -> dict[str, Any]:
    if entry.workflow is None:
        described: dict[str, Any] = {"name": entry.name, "problem": entry.problem}
    else:
        described = entry.workflow.describe()
    described["entry_point"] = entry.value
    described["distribution"] = entry.distribution
    return described


def _print(entries: Sequence["WorkflowEntry"]) -> None:
    if not entries:
        note("no packaged workflow is installed (a package registers one under httk.workflow.workflows)")
    for index, entry in enumerate(entries):
        assert entry.workflow is not None
        described = entry.workflow.describe()
        if index:
            typer.echo("")
        typer.echo(f"{described['name']}: {described['summary']}")
        needs = ", ".join(described["extensions"]) or "none"
        typer.echo(
            f"  starts at step {described['initial_step']}; data {described['data_mode']}; "
            f"workspace extensions {needs}"
        )
        print_table(
            ("input", "required", "default", "type", "meaning"), [_row(i) for i in described["inputs"]]
        )


def _row(declared: Mapping[str, Any]) -> list[str]:
    default = declared["default"]
    shown = "-" if default is None else default if isinstance(default, str) else json_text(default)
    return [
        declared["name"],
        "yes" if declared["required"] else "no",
        shown,
        declared.get("value_type") or declared["kind"],
        declared["meaning"],
    ]
