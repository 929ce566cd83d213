"""``httk workflow workspace gc``: collect what the retention policy and the always-safe rules allow.

The categories and their gates are :func:`httk.workflow.engine.collect_garbage`'s. The command prints
one row per category (candidates that passed every gate, entries removed, bytes reclaimed), then a total,
and names each gated category the policy keeps. ``--dry-run`` attaches the workspace read-only and
writes nothing at all; ``--json`` prints the report as one object. An entry that could not be removed is
reported on standard error and makes the exit status 1; it is left for the next collection. On a terminal (and
without ``--json``) a transient progress bar on standard error counts the entries visited, phase by phase.

This module imports typer and the shared helpers only; the engine is imported inside the command body.
"""

from typing import TYPE_CHECKING, Annotated

import typer

from ._options import DurableOpt, JsonOpt, WorkspaceArg, WorkspaceOpt, bind
from ._progress import progress_bar, wanted
from ._render import note, print_json, print_table

if TYPE_CHECKING:
    from httk.workflow.engine import GcReport

DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Count what would be removed; remove nothing.")]


def gc(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    dry_run: DryRunOpt = False,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove what policy.retention and the always-safe rules allow; safe on a live workspace."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=True)
    from httk.workflow.engine import attach, collect_garbage

    attached = attach(root, writable=not dry_run, durable=durable)
    try:
        with progress_bar("collecting", enabled=wanted(as_json)) as bar:
            report = collect_garbage(attached, dry_run=dry_run, progress=bar.report)
    finally:
        attached.close()
    if as_json:
        print_json(report.as_dict())
    else:
        _print_report(report)
    for error in report.errors:
        note(f"error: {error}")
    if report.error_count:
        note(f"{report.error_count} entries could not be removed; they are left for the next collection")
        raise typer.Exit(1)


def _print_report(report: "GcReport") -> None:
    rows = [
        (name, str(count.candidates), str(count.removed), str(_bytes(report, name)))
        for name, count in report.categories.items()
    ]
    print_table(("category", "candidates", "removed", "bytes"), rows)
    if report.dry_run:
        total = sum(count.candidate_bytes for count in report.categories.values())
        typer.echo(f"dry run: would remove {report.candidates} entries ({total} bytes)")
    else:
        typer.echo(f"removed {report.removed} entries ({report.bytes_reclaimed} bytes)")
    for name, why in report.skipped.items():
        typer.echo(f"kept {name}: {why}")


def _bytes(report: "GcReport", category: str) -> int:
    count = report.categories[category]
    return count.candidate_bytes if report.dry_run else count.bytes_reclaimed
