"""``httk workspace fsck``: check that every state marker resolves to its journal frame; repair on request.

Without ``--repair`` the workspace is attached read-only and nothing is written, not even a journal
writer directory, so the check also works on a workspace this version may not change. ``--repair``
re-points each damaged marker at the last good frame of its job, ``--rebuild-lost`` (only with
``--repair``) rebuilds one frame from job.json for a job that has no readable frame at all (a
``--no-durable`` workspace that lost journal segments), and ``--quarantine-unrepairable`` (only with
``--repair``) moves a marker that cannot be restored into ``.httk-workflow/quarantine/``
(:func:`httk.workflow.engine.fsck`).

Exit status: 0 when the workspace is clean or everything found was repaired, 1 when something is left
for an operator (a problem only reported, a live manager's marker, an unrepairable or quarantined
marker, a missing payload). The count of always-safe leftovers is informational and never changes it.

This module imports typer and the shared option and rendering helpers only; the engine is imported inside
the command body so that ``--help`` stays fast.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._options import JsonOpt, UsageError, WorkspaceArg, WorkspaceOpt, bind
from ._progress import progress_bar, wanted
from ._render import print_json, print_table

if TYPE_CHECKING:
    from httk.workflow.engine import FsckReport

RepairOpt = Annotated[
    bool, typer.Option("--repair", help="Re-point damaged markers at the last good frame of their job.")
]
QuarantineOpt = Annotated[
    bool,
    typer.Option(
        "--quarantine-unrepairable",
        help="With --repair, move markers that cannot be restored into .httk-workflow/quarantine/.",
    ),
]
RebuildOpt = Annotated[
    bool,
    typer.Option(
        "--rebuild-lost",
        help="With --repair, give a job with no readable frame at all (history lost in a power cut of a "
        "--no-durable workspace) one frame rebuilt from job.json; waiting jobs stay unrepairable.",
    ),
]
HEADERS = ("code", "action", "kind", "gen", "job or entry", "detail")
LEFTOVERS = ("removed_jobs", "tmp_entries", "retired_requests", "placement_directories")


def fsck(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    repair: RepairOpt = False,
    quarantine_unrepairable: QuarantineOpt = False,
    rebuild_lost: RebuildOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Check that every marker resolves to its journal frame (exit 1 when something is left to do)."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=repair)
    for given, option in (
        (quarantine_unrepairable, "--quarantine-unrepairable"),
        (rebuild_lost, "--rebuild-lost"),
    ):
        if given and not repair:
            raise UsageError(f"{option} needs --repair")
    from httk.workflow.engine import attach
    from httk.workflow.engine import fsck as check_workspace

    attached = attach(root, writable=repair)
    try:
        with progress_bar("checking markers", enabled=wanted(as_json)) as bar:
            report = check_workspace(
                attached,
                repair=repair,
                quarantine_unrepairable=quarantine_unrepairable,
                rebuild_lost=rebuild_lost,
                progress=bar.report,
            )
    finally:
        attached.close()
    if as_json:
        print_json(report.as_dict())
    else:
        _render(report)
    if not report.clean:
        raise typer.Exit(1)


def _render(report: "FsckReport") -> None:
    if report.problems:
        print_table(HEADERS, [_row(problem.as_dict()) for problem in report.problems])
    checked = sum(report.markers.values())
    if not report.problems:
        typer.echo(f"{checked} markers checked: clean")
    else:
        actions = ", ".join(f"{count} {action}" for action, count in sorted(report.counts().items()))
        found = len(report.problems)
        typer.echo(f"{checked} markers checked: {found} problem{'' if found == 1 else 's'} ({actions})")
        if not report.repair:
            typer.echo("run 'workspace fsck --repair' to re-point damaged markers at their last good frame")
    if report.leftovers is not None:
        typer.echo(_leftovers(report.leftovers))


def _row(problem: Mapping[str, Any]) -> list[str]:
    generation = problem["generation"]
    detail = problem["detail"] if problem["note"] is None else f"{problem['detail']}; {problem['note']}"
    return [
        problem["code"],
        problem["action"],
        problem["kind"] or "-",
        "-" if generation is None else str(generation),
        problem["job_key"] or problem["path"],
        detail,
    ]


def _leftovers(counts: Mapping[str, int]) -> str:
    parts = ", ".join(f"{name} {counts.get(name, 0)}" for name in LEFTOVERS)
    return f"always-safe leftovers (workspace gc removes them): {counts.get('total', 0)} ({parts})"
