"""``httk workflow transfer detach|import|list|show|abort``: moving jobs as sealed bundles.

detached-transfer-v1 (DESIGN.md, "Detached transfers"): ``detach`` seals quiescent jobs and leaves a copy
of each bundle in ``--to DIR``; ``import`` validates whole bundles and republishes their markers in
another workspace (or the same one), acknowledging each to its source when the source is reachable;
``list`` and ``show`` read what a workspace records; ``abort`` puts a job whose transfer was not
acknowledged back. Every command takes WORKSPACE first (or ``--workspace``) and can be rerun after an
interruption: it finishes what the interrupted run began.

This module imports typer and the shared option helpers only; the engine is imported inside the bodies.
"""

from pathlib import Path
from typing import Annotated

import typer

from ._options import DurableOpt, JsonOpt, WorkspaceOpt, bind, bind_many
from ._render import print_json

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


@app.command("detach")
def detach(
    *,
    words: WordsArg = None,
    to: ToOpt,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Seal ready, paused, failed, succeeded or cancelled jobs as bundles and copy them to --to DIR."""
    root, selectors = bind_many(words or [], workspace_option, what="JOB", writes=False)
    from httk.workflow.engine import attach, detach_jobs

    workspace = attach(root, durable=durable)
    try:
        results = detach_jobs(workspace, selectors, to)
    finally:
        workspace.close()
    if json_output:
        print_json([result.as_dict() for result in results])
        return
    for result in results:
        again = " (finished an interrupted detach)" if result.resumed else ""
        typer.echo(f"detached {result.job_key} ({result.prior_kind}) as {result.bundle}{again}")


@app.command("import")
def import_(
    *,
    words: WordsArg = None,
    placement: PlacementOpt,
    workspace_option: WorkspaceOpt = None,
    durable: DurableOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Validate whole bundles, then republish each job at --placement P, acknowledging it to its source."""
    root, bundles = bind_many(words or [], workspace_option, what="BUNDLE", writes=True)
    from httk.workflow.engine import attach, import_bundles

    workspace = attach(root, durable=durable)
    try:
        results = import_bundles(workspace, [Path(bundle) for bundle in bundles], placement)
    finally:
        workspace.close()
    if json_output:
        print_json([result.as_dict() for result in results])
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
