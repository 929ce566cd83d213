"""The read commands: ``workspace status``, ``workspace managers``, ``job list``, ``job show``, ``job log``.

Every one attaches the workspace read-only (so an unsupported profile or extension can still be
inspected), opens nothing for writing and creates no journal writer (the engine's reading functions:
:func:`~httk.workflow.engine.workspace_status`, :func:`~httk.workflow.engine.show_job`, ...). Every one
accepts ``--json`` and then prints one JSON value on standard output (``job log --follow --json`` prints
one JSON object per line instead, so that it can be read as it grows).

``JOB`` is a selector (:func:`httk.workflow.engine.select_job`): a job UUID, a job key, a unique prefix
of either, a payload path, a marker path, or a placement directory. ``job show`` and ``job log`` need one
job and refuse a selector naming several, listing them.

This module imports typer and the shared option and rendering helpers only; the engine is imported inside
the command bodies so that ``--help`` stays fast.
"""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._options import JsonOpt, UsageError, WorkspaceArg, WorkspaceOpt, bind
from ._render import note, print_json, print_table

if TYPE_CHECKING:
    from httk.workflow.engine import MarkerLocation, Workspace

JobArg = Annotated[
    str | None,
    typer.Argument(
        metavar="JOB",
        show_default=False,
        help="A job UUID, job key, unique prefix of either, payload or marker path, or placement directory.",
    ),
]
ByPlacementOpt = Annotated[
    bool, typer.Option("--by-placement", help="Also count per placement prefix (of --depth components).")
]
DepthOpt = Annotated[
    int | None,
    typer.Option(
        "--depth",
        metavar="DEPTH",
        min=1,
        show_default=False,
        help="Placement components per prefix with --by-placement [default: 1]; implies --by-placement.",
    ),
]
KindOpt = Annotated[
    list[str] | None,
    typer.Option("--kind", metavar="KIND", show_default=False, help="Only this state kind (repeatable)."),
]
PlacementOpt = Annotated[
    str | None,
    typer.Option(
        "--placement", metavar="PLACEMENT", show_default=False, help="Only jobs at or below this placement."
    ),
]
TagContainsOpt = Annotated[
    str | None,
    typer.Option(
        "--tag-contains", metavar="TEXT", show_default=False, help="Only jobs whose tag contains TEXT."
    ),
]
ListLimitOpt = Annotated[
    int | None,
    typer.Option("--limit", metavar="N", min=1, show_default=False, help="At most N jobs (one page)."),
]
AfterOpt = Annotated[
    str | None,
    typer.Option(
        "--after",
        metavar="CURSOR",
        show_default=False,
        help="Continue after this cursor (the next_after of the previous page).",
    ),
]
EventsOpt = Annotated[
    int,
    typer.Option(
        "--events",
        metavar="N",
        min=0,
        help="Show the runner's last N reported events (.httk-job/events.jsonl; 0: none).",
    ),
]
LogLimitOpt = Annotated[
    int | None,
    typer.Option("--limit", metavar="N", min=1, show_default=False, help="Only the newest N transitions."),
]
OutputOpt = Annotated[
    bool,
    typer.Option(
        "--output", help="Print what the job's attempts printed (logs/stdio.log and retained attempts)."
    ),
]
FollowOpt = Annotated[
    bool,
    typer.Option(
        "--follow",
        help="Keep printing new transitions until the job succeeds or is cancelled (Ctrl-C: status 130).",
    ),
]
FollowTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--follow-timeout",
        metavar="SECONDS",
        min=0.0,
        show_default=False,
        help="With --follow, stop after SECONDS even if the job has not finished.",
    ),
]


# -- workspace status / managers --------------------------------------------------------------------
def status(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    by_placement: ByPlacementOpt = False,
    depth: DepthOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Count jobs per state kind (and per placement prefix on request), and the live managers."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import workspace_status

    from . import _inspect_render as render

    grouping = depth if depth is not None else (1 if by_placement else None)
    report = workspace_status(_attach(root), by_placement=grouping)
    if as_json:
        print_json(report.as_dict())
        return
    render.status(report)


def managers(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One line per registered manager: live or stale, and what it serves."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import list_managers

    from . import _inspect_render as render

    views = list_managers(_attach(root))
    if as_json:
        print_json([view.as_dict() for view in views])
    elif views:
        print_table(render.MANAGER_HEADERS, [render.manager_row(view.as_dict()) for view in views])
    else:
        note("no manager has registered in this workspace")


# -- job list / show / log ---------------------------------------------------------------------------
def list_jobs(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    kind: KindOpt = None,
    placement: PlacementOpt = None,
    tag_contains: TagContainsOpt = None,
    limit: ListLimitOpt = None,
    after: AfterOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List jobs in a stable order, a page at a time with --limit and --after."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import job_row
    from httk.workflow.engine import list_jobs as page_of_jobs

    from . import _inspect_render as render

    attached = _attach(root)
    page = page_of_jobs(
        attached, kinds=kind or (), placement=placement, tag_contains=tag_contains, limit=limit, after=after
    )
    rows = [job_row(attached, marker) for marker in page.jobs]
    next_after = None if page.next_after is None else str(page.next_after)
    if as_json:
        anomalies = [{"path": str(a.path), "reason": a.reason.value} for a in page.anomalies]
        print_json({"jobs": rows, "next_after": next_after, "anomalies": anomalies})
        return
    if rows:
        print_table(render.JOB_HEADERS, [render.job_list_row(row) for row in rows])
    else:
        note("no jobs")
    if page.anomalies:
        note(f"{len(page.anomalies)} entries of the state tree are not markers: run workspace fsck")
    if next_after is not None:
        note(f"more: --after {next_after}")


def show(
    *,
    workspace: WorkspaceArg = None,
    job: JobArg = None,
    workspace_option: WorkspaceOpt = None,
    events: EventsOpt = 20,
    as_json: JsonOpt = False,
) -> None:
    """Show one job: its state, step, counters against budgets, owner or failure, paths, runner events."""
    root, selector = bind([workspace, job], [("WORKSPACE", workspace_option), ("JOB", None)], writes=False)
    from httk.workflow.engine import show_job

    from . import _inspect_render as render

    attached = _attach(root)
    report = show_job(attached, _select(attached, selector), events=events)
    if as_json:
        print_json(report)
        return
    render.show(report)


def log(
    *,
    workspace: WorkspaceArg = None,
    job: JobArg = None,
    workspace_option: WorkspaceOpt = None,
    limit: LogLimitOpt = None,
    output: OutputOpt = False,
    follow: FollowOpt = False,
    follow_timeout: FollowTimeoutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The job's transitions, oldest first, walked back from its marker; or what its attempts printed."""
    root, selector = bind([workspace, job], [("WORKSPACE", workspace_option), ("JOB", None)], writes=False)
    if output and follow:
        raise UsageError("--output and --follow cannot be combined")
    if follow_timeout is not None and not follow:
        raise UsageError("--follow-timeout needs --follow")
    from httk.workflow.engine import job_history

    from . import _inspect_render as render

    attached = _attach(root)
    marker = _select(attached, selector)
    if output:
        _print_output(attached, marker, as_json=as_json)
        return
    entries = job_history(attached, marker, limit=limit)
    if not entries and not as_json:
        note(f"job {marker.job_key} is {marker.kind.value} and has no transition yet")
    if follow:
        _follow(attached, marker, entries, timeout=follow_timeout, as_json=as_json)
    elif as_json:
        print_json(entries)
    else:
        for entry in entries:
            typer.echo(render.log_line(entry))


def _follow(
    workspace: "Workspace",
    marker: "MarkerLocation",
    entries: list[dict[str, Any]],
    *,
    timeout: float | None,
    as_json: bool,
) -> None:
    from httk.workflow.engine import follow_history

    from . import _inspect_render as render

    def emit(entry: dict[str, Any]) -> None:
        typer.echo(render.json_line(entry) if as_json else render.log_line(entry))

    try:
        for entry in entries:
            emit(entry)
        for entry in follow_history(workspace, marker, timeout=timeout):
            emit(entry)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _print_output(workspace: "Workspace", marker: "MarkerLocation", *, as_json: bool) -> None:
    from httk.workflow.engine import job_output

    from . import _inspect_render as render

    stdio, attempts = job_output(workspace, marker)
    if as_json:
        print_json(render.output_json(stdio, attempts))
        return
    if stdio is None and not attempts:
        note(f"job {marker.job_key} has no captured output (no logs/stdio.log, no retained attempt)")
        return
    render.stream_output(stdio, attempts)


# -- shared ------------------------------------------------------------------------------------------
def _attach(root: str) -> "Workspace":
    from httk.workflow.engine import attach

    return attach(root, writable=False)


def _select(workspace: "Workspace", selector: str) -> "MarkerLocation":
    from httk.workflow.engine import select_job

    return select_job(workspace, selector)
