"""``httk workflow job debug``: one job driven in the foreground by a private task manager.

Both spellings of DECISIONS D6 work (``job debug WS PAYLOAD`` and ``job debug --workspace WS PAYLOAD``).

``job debug`` submits a payload directory from outside the workspace at ``--placement`` (``debug``), or
takes any job selector, and drives that one job with a private task manager that sees nothing else
(:func:`httk.workflow.engine.debug_job`). Its exit status says how the job ended, so 3 means *failed* here;
an error of the command itself is 1 (a workspace that cannot be attached included) or 2 (bad input).

This module imports typer and the shared option helpers only; the engine is imported inside the bodies.
"""

from typing import Annotated

import typer

from ._options import DurableOpt, ModuleOpt, SearchPathOpt, WorkspaceArg, WorkspaceOpt, bind
from ._render import note

DEBUG_EPILOG = (
    "Exit status: 0 the job succeeded; 3 it failed; 4 it stopped without finishing (paused, cancelled, "
    "waiting for its children without --follow-children, interrupted, or left where the private manager "
    "cannot progress it); 1 any error of the command itself, a workspace that cannot be attached included "
    "(3 means failed here); 2 bad input (usage, --step for an existing job, a runner backend other than "
    "path, an invalid name or payload, an unknown --log-level)."
)
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
    root, word = bind(
        [workspace, target], [("WORKSPACE", workspace_option), ("PAYLOAD|JOB", None)], writes=True
    )
    from httk.workflow.engine import DebugError, DebugOptions, debug_job
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
