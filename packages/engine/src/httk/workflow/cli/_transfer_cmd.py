"""``httk workflow transfer detach|import|list|show|abort|send``: moving jobs as sealed bundles.

detached-transfer-v1 (DESIGN.md, "Detached transfers"): ``detach`` seals quiescent jobs and leaves a copy
of each bundle in ``--to DIR``; ``import`` validates whole bundles and republishes their markers in
another workspace (or the same one), acknowledging each to its source when the source is reachable;
``list`` and ``show`` read what a workspace records; ``abort`` puts a job whose transfer was not
acknowledged back. ``send`` does all of it between two workspaces, either of which may be on a remote
(``REMOTE:WORKSPACE``), through the plumbing commands ``outbox``, ``inbox`` and ``acknowledge`` run at
each end (DESIGN.md, "Remotes over ssh"). Every command takes WORKSPACE first (or ``--workspace``) and
can be rerun after an interruption: it finishes what the interrupted run began.

This module imports typer and the shared option helpers only; the engine is imported inside the bodies.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._options import DurableOpt, JsonOpt, UsageError, WorkspaceOpt, bind, bind_many, resolve
from ._render import print_json

if TYPE_CHECKING:
    from httk.workflow.engine import End

app = typer.Typer(
    name="transfer",
    help="Move jobs between workspaces as sealed bundles (detached-transfer-v1).",
    no_args_is_help=True,
)

WordsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[WORKSPACE] ITEM...", show_default=False, help="The workspace (or --workspace), then items."
    ),
]
ToOpt = Annotated[Path, typer.Option("--to", help="The directory the bundles are copied to (it must exist).")]
PlacementOpt = Annotated[str, typer.Option("--placement", help="The placement the jobs are imported at.")]
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="GLOB",
        help="Leave what this glob (relative to each payload, e.g. run/WAVECAR) matches at the source; "
        "repeatable. job.json, data/, .httk-job/ and .httk-transfer/ always travel.",
    ),
]


@app.command("detach")
def detach(
    *,
    words: WordsArg = None,
    to: ToOpt,
    exclude: ExcludeOpt = None,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Seal ready, paused, failed, succeeded or cancelled jobs as bundles and copy them to --to DIR."""
    root, selectors = bind_many(words or [], workspace_option, what="JOB", writes=False)
    from httk.workflow.engine import attach, detach_jobs

    workspace = attach(root, durable=durable)
    try:
        results = detach_jobs(workspace, selectors, to, exclude or [])
    finally:
        workspace.close()
    if json_output:
        print_json([result.as_dict() for result in results])
        return
    for result in results:
        again = " (finished an interrupted detach)" if result.resumed else ""
        left = f"; left behind {', '.join(result.left_behind)}" if result.left_behind else ""
        typer.echo(f"detached {result.job_key} ({result.prior_kind}) as {result.bundle}{left}{again}")


StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict-environment",
        help="Refuse, before anything moves, when the destination lacks what the jobs need "
        "(settings, extensions, runners); without it that is printed as advisories.",
    ),
]


@app.command("import")
def import_(
    *,
    words: WordsArg = None,
    placement: PlacementOpt,
    strict_environment: StrictOpt = False,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Validate whole bundles, then republish each job at --placement P, acknowledging it to its source.

    What the bundles need that this workspace lacks (settings their source has, extensions, runners) is
    printed as advisories first; --strict-environment refuses the import then, changing nothing. With
    --json: an object with the advisories and one row per imported bundle.
    """
    root, bundles = bind_many(words or [], workspace_option, what="BUNDLE", writes=True)
    from httk.workflow.engine import attach, import_bundles

    workspace = attach(root, durable=durable)
    advisories: list[str] = []

    def advise(text: str) -> None:
        advisories.append(text)
        typer.echo(f"advisory: {text}", err=True)

    try:
        results = import_bundles(
            workspace,
            [Path(bundle) for bundle in bundles],
            placement,
            strict_environment=strict_environment,
            advise=advise,
        )
    finally:
        workspace.close()
    if json_output:  # the shape of `transfer send --json`: the advisories beside what was imported
        print_json(
            {
                "workspace_id": workspace.workspace_id,
                "advisories": advisories,
                "imported": [result.as_dict() for result in results],
            }
        )
        return
    for result in results:
        ack = {
            "delivered": "acknowledged to its source",
            "unreachable": "its source is not reachable from here, so it was not acknowledged",
        }.get(result.acknowledgement, f"its source {result.acknowledgement}")
        status = result.status.value.replace("_", " ")
        typer.echo(f"{status} {result.job_key} ({result.kind} at {result.placement}); {ack}")


@app.command("list")
def list_(
    workspace: Annotated[str | None, typer.Argument(metavar="[WORKSPACE]", show_default=False)] = None,
    workspace_option: WorkspaceOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """List the transfers a workspace records: detaching, detached, retired, aborted, imported."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach, list_transfers

    ws = attach(root, writable=False)
    rows = list_transfers(ws)
    if json_output:
        print_json(rows)
        return
    for row in rows:
        typer.echo(f"{row['transfer_id']}  {row['state']:<9}  {row['job_key']}  {row['placement']}")


@app.command("show")
def show(
    words: Annotated[
        list[str] | None, typer.Argument(metavar="[WORKSPACE] TRANSFER", show_default=False)
    ] = None,
    workspace_option: WorkspaceOpt = None,
) -> None:
    """Show what a workspace records about one transfer (its manifest, receipts and ledger), as JSON."""
    root, items = bind_many(words or [], workspace_option, what="TRANSFER", writes=False)
    from httk.workflow.engine import attach, show_transfer

    ws = attach(root, writable=False)
    for transfer in items:
        print_json(show_transfer(ws, transfer))


@app.command("abort")
def abort(
    words: Annotated[
        list[str] | None, typer.Argument(metavar="[WORKSPACE] TRANSFER", show_default=False)
    ] = None,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Put a detached job whose transfer was not acknowledged back (TRANSFER: its id, job id or key)."""
    root, items = bind_many(words or [], workspace_option, what="TRANSFER", writes=False)
    from httk.workflow.engine import abort_transfer, attach

    workspace = attach(root, durable=durable)
    try:
        for transfer in items:
            result = abort_transfer(workspace, transfer)
            removed = f"; removed its copy {result.removed_copy}" if result.removed_copy else ""
            where = f"{result.kind} at {result.placement}"
            typer.echo(f"aborted {result.transfer_id}: {result.job_key} is {where} again{removed}")
    finally:
        workspace.close()


# -- between machines ---------------------------------------------------------------------------------
@app.command("send")
def send(
    *,
    words: Annotated[
        list[str] | None,
        typer.Argument(metavar="SOURCE JOB...", show_default=False, help="The source workspace, then jobs."),
    ] = None,
    to: Annotated[
        str, typer.Option("--to", metavar="DESTINATION", help="The workspace the jobs go to (or REMOTE:WS).")
    ],
    placement: Annotated[
        str | None,
        typer.Option("--placement", help="Import at this placement [default: the one each job left]."),
    ] = None,
    exclude: ExcludeOpt = None,
    via: Annotated[
        str,
        typer.Option(
            "--via",
            metavar="auto|tar|rsync",
            help="How the bundles travel: rsync (between here and one remote, both ends having it), "
            "tar over ssh, or auto: rsync when it can be used, tar otherwise.",
        ),
    ] = "auto",
    strict_environment: StrictOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Move jobs to another workspace, here or on a remote (SOURCE or --to may be REMOTE:WORKSPACE).

    Detaches them at the source, copies the bundles over one ssh connection (rsync or tar), imports
    them at the destination and retires the source's originals only once the import is recorded. Run it again
    after an interruption: it finishes what was begun, losing and duplicating nothing.
    """
    if not words or len(words) < 2:
        raise UsageError("give SOURCE and at least one JOB")
    from httk.workflow.engine import send_jobs
    from httk.workflow.protocol import WorkflowError

    source, destination = _end(words[0]), _end(to)
    try:
        report = send_jobs(
            source,
            words[1:],
            destination,
            placement,
            exclude=exclude or [],
            via=via,
            strict_environment=strict_environment,
            advise=lambda text: typer.echo(f"advisory: {text}", err=True),
        )
    except WorkflowError as exc:
        if not str(exc).startswith("nothing was"):  # a refusal before anything moved: rerunning is no help
            exc.add_note("run the same command again to finish the transfer: nothing is lost or duplicated")
        raise
    if json_output:
        print_json(report)
        return
    for row in report["imported"]:
        typer.echo(
            f"{row['status'].replace('_', ' ')} {row['job_key']} ({row['kind']} at {row['placement']})"
        )
    for transfer_id, why in report["refused"].items():
        typer.echo(f"acknowledgement of {transfer_id} refused by the source: {why}", err=True)
    typer.echo(
        f"sent {len(report['sent'])} (via {report['via']}), imported {len(report['imported'])}, "
        f"acknowledged {len(report['acknowledged'])}"
    )


def _end(word: str) -> "End":
    from httk.workflow.engine import End, find_remote, lookup_remote

    name, colon, rest = word.partition(":")
    if colon and "/" not in name and lookup_remote(name) is not None:
        if not rest:
            raise UsageError(f"{word!r} names no workspace: write {name}:PATH or {name}:NAME")
        return End(rest, find_remote(name))
    return End(resolve(word, writes=False).path)


ForOpt = Annotated[str, typer.Option("--for", metavar="WORKSPACE_ID", help="The destination's workspace id.")]


@app.command("outbox", hidden=True)
def outbox(
    *, words: WordsArg = None, for_: ForOpt, exclude: ExcludeOpt = None, workspace_option: WorkspaceOpt = None
) -> None:
    """Plumbing of send, at the source: detach into the outbox for a destination; its bundles, as JSON."""
    root, selectors = bind_many(words or [], workspace_option, what="JOB", writes=False)
    from httk.workflow.engine import attach, fill_outbox

    workspace = attach(root)
    try:
        print_json(fill_outbox(workspace, selectors, for_, exclude or []))
    finally:
        workspace.close()


@app.command("inbox", hidden=True)
def inbox(
    workspace: Annotated[str | None, typer.Argument(metavar="[WORKSPACE]", show_default=False)] = None,
    *,
    source: Annotated[str, typer.Option("--from", metavar="WORKSPACE_ID", help="The source's id.")],
    placement: Annotated[str | None, typer.Option("--placement")] = None,
    transfers: Annotated[list[str] | None, typer.Option("--transfer", metavar="ID")] = None,
    stream: Annotated[bool, typer.Option("--stream", help="Read a tar archive of bundles on stdin.")] = False,
    staged: Annotated[
        bool, typer.Option("--staged", help="Take in the --transfer bundles rsync staged.")
    ] = False,
    staging: Annotated[bool, typer.Option("--staging", help="Print where rsync stages bundles.")] = False,
    workspace_option: WorkspaceOpt = None,
) -> None:
    """Plumbing of send, at the destination: receive, import, and print the import records as JSON."""
    import sys

    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach, inbox_staging, receive_and_import

    attached = attach(root)
    try:
        if staging:
            report = inbox_staging(attached, source)
        else:
            stdin = sys.stdin.buffer if stream else None
            report = receive_and_import(
                attached, stdin, source, placement, list(transfers or []), staged=staged
            )
    finally:
        attached.close()
    print_json(report)


@app.command("delivered", hidden=True)
def delivered(
    workspace: Annotated[str | None, typer.Argument(metavar="[WORKSPACE]", show_default=False)] = None,
    *,
    workspace_option: WorkspaceOpt = None,
) -> None:
    """Plumbing of send, at the destination: the source took these acknowledgements (JSON ids, stdin)."""
    import json
    import sys

    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach, mark_delivered

    transfer_ids = json.loads(sys.stdin.buffer.read())
    attached = attach(root)
    try:
        print_json(mark_delivered(attached, transfer_ids))
    finally:
        attached.close()


@app.command("requirements", hidden=True)
def requirements(*, words: WordsArg = None, workspace_option: WorkspaceOpt = None) -> None:
    """Plumbing of send, at the source: what the jobs need of a destination, as JSON."""
    root, selectors = bind_many(words or [], workspace_option, what="JOB", writes=False)
    from httk.workflow.engine import attach, transfer_requirements

    print_json(transfer_requirements(attach(root, writable=False), selectors))


@app.command("environment", hidden=True)
def environment(
    workspace: Annotated[str | None, typer.Argument(metavar="[WORKSPACE]", show_default=False)] = None,
    *,
    workspace_option: WorkspaceOpt = None,
) -> None:
    """Plumbing of send, at the destination: what it lacks of the requirements (JSON, stdin)."""
    import json
    import sys

    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach, environment_advisories

    needs = json.loads(sys.stdin.buffer.read())
    print_json(environment_advisories(attach(root, writable=False), needs))


@app.command("acknowledge", hidden=True)
def acknowledge(
    workspace: Annotated[str | None, typer.Argument(metavar="[WORKSPACE]", show_default=False)] = None,
    *,
    for_: ForOpt,
    workspace_option: WorkspaceOpt = None,
) -> None:
    """Plumbing of send, at the source: retire the bundles whose import records (JSON, stdin) arrived."""
    import json
    import sys

    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import acknowledge_records, attach

    records = json.loads(sys.stdin.buffer.read())
    attached = attach(root)
    try:
        print_json(acknowledge_records(attached, records, for_))
    finally:
        attached.close()
