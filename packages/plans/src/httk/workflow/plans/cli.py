"""``httk workflow plan``: submit a stage plan, watch it, retry a stage, close it.

Registered under the entry point group ``httk.workflow.cli`` (name ``plan``), loaded lazily by ``httk``
and run inside its error reporting (one ``error:`` line, the documented exit status: 2 for a plan
document or stage refused, a PLAN that names no plan or a command the plan cannot take now; 3 for a
WORKSPACE that is not one). Heavy imports happen inside the command bodies, so ``--help`` stays fast.

=================================================  ===========================================
``plan submit WORKSPACE PLAN.json [--placement P]``  check the plan whole, submit its coordinator
``plan status WORKSPACE PLAN [--json]``              every stage in spec/04's nine states
``plan list WORKSPACE [--placement P] [--json]``     every plan of the workspace
``plan log WORKSPACE PLAN [--follow]``               the plan's progress.log (``tail -f`` with --follow)
``plan retry WORKSPACE PLAN STAGE``                  run a failed stage again, as a new job
``plan close WORKSPACE PLAN``                        end a paused plan: succeed, or fail naming why
``plan amend WORKSPACE PLAN --type T --stage ID``    an audited amendment (spec/04), applied by the
                                                     coordinator at its next activation
=================================================  ===========================================

PLAN is any selector of the coordinator job (key, UUID, unique prefix, payload path).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from httk.workflow.cli.shared import WorkspaceArg, WorkspaceOpt, bind

app = typer.Typer(
    name="plan",
    help="Stage plans: a declared DAG of stages run by one coordinator job.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

PlanArg = Annotated[
    str | None,
    typer.Argument(
        metavar="PLAN", show_default=False, help="The plan's coordinator: key, UUID, prefix or path."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
PlacementOpt = Annotated[
    str | None,
    typer.Option("--placement", metavar="P", show_default=False, help="Where the coordinator goes."),
]
OperatorOpt = Annotated[
    str | None, typer.Option("--operator", metavar="O", show_default=False, help="Who asks [default: login].")
]
ReasonOpt = Annotated[str, typer.Option("--reason", metavar="R", help="Why, for the record.")]


@app.callback()
def plan() -> None:
    """Stage plans: a declared DAG of stages run by one coordinator job."""


@app.command()
def submit(
    workspace: WorkspaceArg = None,
    document: Annotated[
        str | None, typer.Argument(metavar="PLAN.json", show_default=False, help="The plan document.")
    ] = None,
    *,
    workspace_option: WorkspaceOpt = None,
    placement: PlacementOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a plan document whole and submit the coordinator job that runs it."""
    root, path = bind(
        [workspace, document], [("WORKSPACE", workspace_option), ("PLAN.json", None)], writes=True
    )
    from pathlib import Path

    from httk.workflow.engine import attach

    from ._submit import submit_stage_plan

    attached = attach(root)
    try:
        submitted = submit_stage_plan(attached, Path(path), placement)
    finally:
        attached.close()
    if as_json:
        typer.echo(json.dumps({**submitted.__dict__, "payload": str(submitted.payload)}, indent=2))
        return
    typer.echo(
        f"submitted plan {submitted.workflow_id} ({submitted.stages} stages): "
        f"coordinator {submitted.job_key} at {submitted.placement}"
    )


@app.command()
def status(
    workspace: WorkspaceArg = None,
    selector: PlanArg = None,
    *,
    workspace_option: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every stage of a plan in spec/04's nine states, with its job, times, retries and last error."""
    root, chosen = bind(
        [workspace, selector], [("WORKSPACE", workspace_option), ("PLAN", None)], writes=False
    )
    from httk.workflow.engine import attach

    from ._status import plan_status

    attached = attach(root, writable=False)
    try:
        report = plan_status(attached, chosen)
    finally:
        attached.close()
    if as_json:
        typer.echo(json.dumps(report.as_json(), indent=2))
        return
    counts = ", ".join(f"{count} {name}" for name, count in sorted(report.counts().items()))
    typer.echo(f"plan {report.workflow_id} version {report.version}: coordinator {report.coordinator_kind}")
    if report.message:
        typer.echo(f"  {report.message}")
    typer.echo(f"  {counts}")
    if report.unamended:
        typer.echo(
            f"  warning: the plan document's stages {', '.join(report.unamended)} differ from what its "
            "amendments made of the plan as submitted (changed without an amendment)"
        )
    rows = [
        [row.id, row.status, row.job or "-", row.started_at or "-", row.completed_at or "-", str(row.retries),
         row.last_error or "-"]
        for row in report.stages
    ]  # fmt: skip
    _table(["stage", "status", "job", "started", "completed", "retries", "last error"], rows)


@app.command("list")
def list_command(
    workspace: WorkspaceArg = None,
    *,
    workspace_option: WorkspaceOpt = None,
    placement: Annotated[
        str | None, typer.Option("--placement", metavar="P", show_default=False, help="Only plans below P.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every plan of the workspace: its id, version, stage count, coordinator and its state."""
    [root] = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach

    from ._status import list_plans

    attached = attach(root, writable=False)
    try:
        plans = list_plans(attached, placement)
    finally:
        attached.close()
    if as_json:
        typer.echo(json.dumps(plans, indent=2))
        return
    rows = [
        [str(p["workflow_id"]), str(p["version"]), str(p["stages"]), p["kind"], p["coordinator"]]
        for p in plans
    ]
    _table(["plan", "version", "stages", "coordinator state", "coordinator"], rows)


@app.command()
def log(
    workspace: WorkspaceArg = None,
    selector: PlanArg = None,
    *,
    workspace_option: WorkspaceOpt = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing lines as they are appended.")
    ] = False,
) -> None:
    """The plan's progress.log: one line per stage status change and per plan event."""
    root, chosen = bind(
        [workspace, selector], [("WORKSPACE", workspace_option), ("PLAN", None)], writes=False
    )
    from httk.workflow.engine import attach

    from ._control import log_path, read_lines

    attached = attach(root, writable=False)
    try:
        path = log_path(attached, chosen)
    finally:
        attached.close()
    try:
        for line in read_lines(path, follow=follow):
            typer.echo(line)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


@app.command()
def retry(
    workspace: WorkspaceArg = None,
    selector: PlanArg = None,
    stage: Annotated[
        str | None, typer.Argument(metavar="STAGE", show_default=False, help="A failed stage.")
    ] = None,
    *,
    workspace_option: WorkspaceOpt = None,
    operator: OperatorOpt = None,
    reason: ReasonOpt = "",
) -> None:
    """Run a failed stage again as a new job (its failed job stays, as history)."""
    root, chosen, name = bind(
        [workspace, selector, stage],
        [("WORKSPACE", workspace_option), ("PLAN", None), ("STAGE", None)],
        writes=True,
    )
    from httk.workflow.engine import attach

    from ._control import retry_stage

    attached = attach(root)
    try:
        typer.echo(retry_stage(attached, chosen, name, operator=operator or _login(), reason=reason))
    finally:
        attached.close()


@app.command()
def close(
    workspace: WorkspaceArg = None,
    selector: PlanArg = None,
    *,
    workspace_option: WorkspaceOpt = None,
    operator: OperatorOpt = None,
    reason: ReasonOpt = "",
) -> None:
    """End a paused plan: its coordinator succeeds when every stage completed, else fails naming why."""
    root, chosen = bind([workspace, selector], [("WORKSPACE", workspace_option), ("PLAN", None)], writes=True)
    from httk.workflow.engine import attach

    from ._control import close_plan

    attached = attach(root)
    try:
        typer.echo(close_plan(attached, chosen, operator=operator or _login(), reason=reason))
    finally:
        attached.close()


@app.command()
def amend(
    workspace: WorkspaceArg = None,
    selector: PlanArg = None,
    *,
    workspace_option: WorkspaceOpt = None,
    kind: Annotated[
        str,
        typer.Option(
            "--type",
            metavar="TYPE",
            help="parameter_change, criteria_change, stage_insert, stage_skip or stage_rerun.",
        ),
    ],
    stage: Annotated[str, typer.Option("--stage", metavar="ID", help="The stage it is about.")],
    values: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="KEY=VALUE", show_default=False, help="A parameter or criterion (JSON or text)."
        ),
    ] = None,
    stage_file: Annotated[
        str | None,
        typer.Option("--stage-file", metavar="NEW.json", show_default=False, help="The stage to insert."),
    ] = None,
    before: Annotated[
        list[str] | None,
        typer.Option("--before", metavar="ID", show_default=False, help="A stage that then needs it."),
    ] = None,
    reason: Annotated[str, typer.Option("--reason", metavar="R", help="Why, for the audit trail.")],
    operator: OperatorOpt = None,
    wait: Annotated[
        float, typer.Option("--wait", metavar="S", help="Seconds to wait for the coordinator to wake.")
    ] = 10.0,
) -> None:
    """Amend a plan (spec/04): checked now, applied by its coordinator with the invalidation cascade."""
    root, chosen = bind([workspace, selector], [("WORKSPACE", workspace_option), ("PLAN", None)], writes=True)
    from pathlib import Path

    from httk.workflow.engine import attach

    from ._amend import amend_plan, parse_set

    parsed = parse_set(values or [])
    attached = attach(root)
    try:
        message = amend_plan(
            attached,
            chosen,
            kind,
            stage,
            values=parsed,
            stage_file=None if stage_file is None else Path(stage_file),
            before=before or [],
            operator=operator or _login(),
            reason=reason,
            wait=wait,
        )
    finally:
        attached.close()
    typer.echo(message)


def _login() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in [header, *rows]:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
