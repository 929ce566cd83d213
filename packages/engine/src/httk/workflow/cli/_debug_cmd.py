"""``httk workflow job debug`` and ``job delete``: one job driven in the foreground; finished jobs removed.

Both spellings of DECISIONS D6 work (``job debug WS PAYLOAD`` and ``job debug --workspace WS PAYLOAD``;
``job delete WS JOB...`` and ``job delete --workspace WS JOB...``).

``job debug`` submits a payload directory from outside the workspace at ``--placement`` (``debug``), or
takes any job selector, and drives that one job with a private task manager that sees nothing else
(``engine/ops/_debug.py``). Its exit status says how the job ended, so 3 means *failed* here; an error of the
command itself is 1 (a workspace that cannot be attached included) or 2 (bad input).

``job delete`` checks every job first and deletes none when one is refused; it asks before deleting when
standard input is a terminal (``--yes`` or ``--force`` skip that), lists what it deleted, and reports a job
that moved while being deleted without stopping the others (``engine/ops/_delete.py``).

This module imports typer and the shared option helpers only; the engine is imported inside the bodies.
"""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ._manager_cmd import ModuleOpt, SearchPathOpt
from ._options import DurableOpt, WorkspaceArg, WorkspaceOpt, bind, bind_many
from ._render import note

if TYPE_CHECKING:
    from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
    from httk.workflow.engine.ops._delete import DeletePlan

DEBUG_EPILOG = (
    "Exit status: 0 the job succeeded; 3 it failed; 4 it stopped without finishing (paused, cancelled, "
    "waiting for its children without --follow-children, interrupted, or left where the private manager "
    "cannot progress it); 1 any error of the command itself, a workspace that cannot be attached included "
    "(3 means failed here); 2 bad input (usage, --step for an existing job, a runner backend other than "
    "path, an invalid name or payload, an unknown --log-level)."
)
DELETE_EPILOG = (
    "Exit status: 0 every job was deleted; 1 a job was refused (then nothing was deleted), the confirmation "
    "was declined, or a job moved while it was being deleted (the others were deleted); 2 bad input; 3 the "
    "workspace cannot be attached or changed."
)
CONFIRM_LISTED = 10
"""How many jobs the confirmation question names before it says how many more."""

TargetArg = Annotated[
    str | None,
    typer.Argument(
        metavar="PAYLOAD|JOB",
        show_default=False,
        help="A payload directory outside the workspace (submitted fresh), or a selector of an existing job.",
    ),
]
PlacementOpt = Annotated[
    str, typer.Option("--placement", metavar="PLACEMENT", help="Where a fresh payload is submitted.")
]
StepOpt = Annotated[
    str | None,
    typer.Option(
        "--step",
        metavar="STEP",
        show_default=False,
        help="The initial step of a fresh payload (an existing job: use job request override_step).",
    ),
]
FollowChildrenOpt = Annotated[
    bool,
    typer.Option(
        "--follow-children", help="Drive the children a waiting job waits for, depth first, then resume it."
    ),
]
LogLevelOpt = Annotated[
    str | None,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        show_default=False,
        help="The private manager's console log: debug, info, warning or error [default: errors only].",
    ),
]
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


def debug(
    *,
    workspace: WorkspaceArg = None,
    target: TargetArg = None,
    workspace_option: WorkspaceOpt = None,
    placement: PlacementOpt = "debug",
    step: StepOpt = None,
    follow_children: FollowChildrenOpt = False,
    log_level: LogLevelOpt = None,
    runner_search_path: SearchPathOpt = None,
    runner_module: ModuleOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Drive one job to a stop in the foreground, with a private task manager that sees only that job."""
    root, word = bind([workspace, target], [("WORKSPACE", workspace_option), ("PAYLOAD|JOB", None)])
    from httk.workflow.engine.ops._debug import DebugError, DebugOptions, debug_job
    from httk.workflow.protocol import PolicyError, WorkflowError, WorkspaceError

    options = DebugOptions(
        placement=placement,
        step=step,
        follow_children=follow_children,
        log_level=log_level,
        runner_search_path=tuple(runner_search_path or ()),
        runner_modules=tuple(runner_module or ("httk.workflow",)),
        durable=durable,
    )
    try:
        result = debug_job(root, word, options, echo=typer.echo)
    except DebugError as exc:
        note(f"error: {exc}")
        raise typer.Exit(2) from None
    except WorkspaceError as exc:
        if isinstance(exc, PolicyError):
            raise
        raise WorkflowError(str(exc)) from exc  # status 1: here 3 means the job failed
    raise typer.Exit(result.exit_status)


def delete(
    *,
    words: JobsArg = None,
    workspace_option: WorkspaceOpt = None,
    yes: YesOpt = False,
    force: ForceOpt = False,
    durable: DurableOpt = None,
) -> None:
    """Delete succeeded, failed, cancelled, submitted or ready jobs: each payload with its marker."""
    root, selectors = bind_many(words or [], workspace_option, what="JOB")
    from httk.workflow.engine.core._workspace import attach

    workspace = attach(root, durable=durable)
    try:
        failed = _delete_selected(workspace, selectors, yes=yes, force=force)
    finally:
        workspace.close()
    if failed:
        raise typer.Exit(1)


def _delete_selected(workspace: "Workspace", selectors: list[str], *, yes: bool, force: bool) -> int:
    """Plan every selected job, confirm, delete; how many could not be deleted."""
    from httk.workflow.engine.ops._delete import DeleteError, delete_jobs, linger_seconds, plan_delete

    from ._request_cmd import login_name

    markers = _selected(workspace, selectors)
    plans: list[DeletePlan] = []
    refusals: list[DeleteError] = []
    for marker in markers:
        try:
            plans.append(plan_delete(workspace, marker, force=force))
        except DeleteError as exc:
            refusals.append(exc)
    if refusals:
        for refusal in refusals[:-1]:
            note(f"refused: {refusal}")
        refusals[-1].add_note(f"{len(refusals)} of {len(markers)} jobs refused; nothing was deleted")
        raise refusals[-1]
    if not (yes or force) and _interactive():
        _confirm(plans)
    if any(plan.marker.kind.value in ("submitted", "ready") for plan in plans):
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


def _selected(workspace: "Workspace", selectors: list[str]) -> "list[MarkerLocation]":
    """Every job the selectors name, each once, in the order first named."""
    from httk.workflow.engine.ops._select import select_jobs

    found: dict[tuple[str, str], MarkerLocation] = {}
    for selector in selectors:
        for marker in select_jobs(workspace, selector).markers:
            found.setdefault((marker.placement, marker.job_key), marker)
    return list(found.values())


def _interactive() -> bool:
    return sys.stdin.isatty()


def _confirm(plans: "list[DeletePlan]") -> None:
    shown = [f"  {p.marker.job_key} ({p.marker.kind.value} at {p.marker.placement})" for p in plans]
    more = len(plans) - CONFIRM_LISTED
    typer.echo("\n".join(shown[:CONFIRM_LISTED] + ([f"  and {more} more"] if more > 0 else [])), err=True)
    if not typer.confirm(f"Delete these {len(plans)} job(s), payload and marker?", default=False, err=True):
        note("nothing was deleted")
        raise typer.Exit(1)
