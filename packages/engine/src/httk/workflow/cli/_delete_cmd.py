"""``httk workflow job delete``: remove succeeded, failed, cancelled, submitted or ready jobs.

Both spellings of DECISIONS D6 work (``job delete WS JOB...`` and ``job delete --workspace WS JOB...``).
The engine checks every selected job first and deletes none when one is refused
(:func:`httk.workflow.engine.plan_deletion`), then deletes them without racing a manager
(:func:`httk.workflow.engine.delete_jobs`). This command asks before deleting when standard input is a
terminal (``--yes`` or ``--force`` skip that), lists what it deleted, and reports a job that moved while
being deleted without stopping the others.

This module imports typer and the shared option helpers only; the engine is imported inside the bodies.
"""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ._options import DurableOpt, WorkspaceOpt, bind_many, login_name
from ._render import note

if TYPE_CHECKING:
    from httk.workflow.engine import DeletePlan, Workspace

DELETE_EPILOG = (
    "Exit status: 0 every job was deleted; 1 a job was refused (then nothing was deleted), the confirmation "
    "was declined, or a job moved while it was being deleted (the others were deleted); 2 bad input; 3 the "
    "workspace cannot be attached or changed."
)
CONFIRM_LISTED = 10
"""How many jobs the confirmation question names before it says how many more."""

JobsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[WORKSPACE] JOB...",
        show_default=False,
        help="The workspace (or --workspace), then job selectors; a placement names every job below it.",
    ),
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation on a terminal.")]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force", help="Skip the confirmation and delete a child a non-terminal join parent depends on."
    ),
]


def delete(
    *,
    words: JobsArg = None,
    workspace_option: WorkspaceOpt = None,
    yes: YesOpt = False,
    force: ForceOpt = False,
    durable: DurableOpt = None,
) -> None:
    """Delete succeeded, failed, cancelled, submitted or ready jobs: each payload with its marker."""
    root, selectors = bind_many(words or [], workspace_option, what="JOB", writes=True)
    from httk.workflow.engine import attach

    workspace = attach(root, durable=durable)
    try:
        failed = _delete_selected(workspace, selectors, yes=yes, force=force)
    finally:
        workspace.close()
    if failed:
        raise typer.Exit(1)


def _delete_selected(workspace: "Workspace", selectors: list[str], *, yes: bool, force: bool) -> int:
    """Plan every selected job, confirm, delete; how many could not be deleted."""
    from httk.workflow.engine import DeleteRefusedError, delete_jobs, linger_seconds, plan_deletion

    try:
        plans = plan_deletion(workspace, selectors, force=force)
    except DeleteRefusedError as exc:
        for refusal in exc.refusals[:-1]:
            note(f"refused: {refusal}")
        raise
    if not (yes or force) and _interactive():
        _confirm(plans)
    if any(plan.fenced for plan in plans):
        note(
            f"note: queued jobs are cancelled first and their markers removed {linger_seconds(workspace):g} "
            "s later, so that a manager that listed them as ready finds them cancelled"
        )
    failed = 0
    for result in delete_jobs(workspace, plans, operator=login_name()):
        marker = result.plan.marker
        if result.error is None:
            typer.echo(f"deleted {marker.job_key} ({marker.kind.value} at {marker.placement})")
        else:
            note(f"error: {result.error}")
            failed += 1
    return failed


def _interactive() -> bool:
    return sys.stdin.isatty()


def _confirm(plans: "list[DeletePlan]") -> None:
    shown = [f"  {p.marker.job_key} ({p.marker.kind.value} at {p.marker.placement})" for p in plans]
    more = len(plans) - CONFIRM_LISTED
    typer.echo("\n".join(shown[:CONFIRM_LISTED] + ([f"  and {more} more"] if more > 0 else [])), err=True)
    if not typer.confirm(f"Delete these {len(plans)} job(s), payload and marker?", default=False, err=True):
        note("nothing was deleted")
        raise typer.Exit(1)
