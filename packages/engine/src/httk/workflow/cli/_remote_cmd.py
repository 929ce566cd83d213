"""``httk workflow remote add|configure|list|show|remove|check``: the machines reached over ssh.

A remote is transport only: ``remote add --template ssh NAME`` names one, ``remote configure --set
KEY=VALUE NAME`` says how to reach it (host, username, port, identity_file, known_hosts, ssh_config) and
how to run httk there (httk_command, prelude), and ``remote check NAME`` connects and reports what it
found. Remotes live in this user's configuration (``remotes/NAME.json`` in ``$HTTK_CONFIG_HOME``).
DESIGN.md, "Remotes over ssh".

This module imports typer and the shared option helpers only; the engine is imported inside the bodies.
"""

from typing import Annotated

import typer

from ._options import JsonOpt, UsageError
from ._render import print_json

app = typer.Typer(name="remote", help="Remote machines reached over ssh.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The remote's name.")]


@app.command("add")
def add(
    name: NameArg,
    *,
    template: Annotated[str, typer.Option("--template", help="The template: ssh.")],
) -> None:
    """Add remote NAME made from a template (then set where it is with 'remote configure')."""
    from httk.workflow.engine import add_remote

    remote = add_remote(name, template)
    typer.echo(f"added remote {remote.name} (template {remote.template}) at {remote.path}")


@app.command("configure")
def configure(
    name: NameArg,
    *,
    assignments: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY=VALUE", help="Set a setting (repeatable)."),
    ] = None,
    unset: Annotated[
        list[str] | None, typer.Option("--unset", metavar="KEY", help="Remove a setting (repeatable).")
    ] = None,
) -> None:
    """Set or unset settings of remote NAME; every one is checked before anything is written.

    Settings: host, username, port, identity_file, known_hosts, ssh_config, httk_command, prelude,
    connect_timeout, check_connectivity (yes: check the connection after saving).
    """
    from httk.workflow.engine import check_remote, configure_remote

    pairs: dict[str, str] = {}
    for assignment in assignments or []:
        key, equals, value = assignment.partition("=")
        if not equals or not key:
            raise UsageError(f"--set {assignment!r}: write KEY=VALUE")
        pairs[key] = value
    if not pairs and not unset:
        raise UsageError("nothing to configure: give --set KEY=VALUE or --unset KEY")
    remote = configure_remote(name, pairs, list(unset or []))
    typer.echo(f"configured remote {remote.name} ({remote.path})")
    if remote.get("check_connectivity") == "yes":
        _print_check(check_remote(remote), json_output=False)


@app.command("list")
def list_(json_output: JsonOpt = False) -> None:
    """The remotes of this user."""
    from httk.workflow.engine import list_remotes

    remotes = list_remotes()
    if json_output:
        print_json([remote.as_dict() for remote in remotes])
        return
    for remote in remotes:
        typer.echo(f"{remote.name}\t{remote.template}\t{remote.destination}")


@app.command("show")
def show(name: NameArg, *, json_output: JsonOpt = False) -> None:
    """One remote: its template and settings (defaults included)."""
    from httk.workflow.engine import find_remote

    document = find_remote(name).as_dict()
    if json_output:
        print_json(document)
        return
    typer.echo(f"name: {document['name']}\ntemplate: {document['template']}\npath: {document['path']}")
    for key, value in document["settings"].items():
        typer.echo(f"{key}: {value}")


@app.command("remove")
def remove(name: NameArg) -> None:
    """Remove remote NAME (its workspaces there are not touched)."""
    from httk.workflow.engine import remove_remote

    path = remove_remote(name)
    typer.echo(f"removed remote {name} ({path})")


@app.command("check")
def check(name: NameArg, *, json_output: JsonOpt = False) -> None:
    """Connect to remote NAME and report what is there: httk, tar and rsync; exit 1 on a problem."""
    from httk.workflow.engine import check_remote, find_remote

    _print_check(check_remote(find_remote(name)), json_output=json_output)


def _print_check(report: dict[str, object], *, json_output: bool) -> None:
    problems = report["problems"]
    assert isinstance(problems, list)
    if json_output:
        print_json(report)
    else:
        typer.echo(f"{report['remote']}: connected to {report['destination']}")
        typer.echo(f"httk there: {report['httk'] or 'not found'}")
        for problem in problems:
            typer.echo(f"problem: {problem}")
        for advisory in report["advisories"]:  # type: ignore[attr-defined]
            typer.echo(f"advisory: {advisory}")
    if problems:
        raise typer.Exit(1)
