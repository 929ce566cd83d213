"""``httk workflow v1 …``: the command group of the v1 compatibility package.

The ``httk`` command finds this Typer app through the entry point group ``httk.workflow.cli`` (name
``v1``). Loading it imports typer and this module only: the importer, the reader and the engine are
imported inside the command bodies.

Exit status
-----------
=====  ===========================================================================================
0      done: every task that can run was imported (import), the summary was printed (status)
1      import: some tasks were refused or skipped as live, or some names could not be parsed (the
       report lists each with its path and why); another failure of the engine or the filesystem
2      bad input: options, a v1 tree that cannot be read, a template that cannot be instantiated
3      the workspace cannot be attached or changed
=====  ===========================================================================================
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from httk.workflow.cli.shared import WorkspaceArg, bind

if TYPE_CHECKING:
    from ._import_report import ImportReport
    from ._status import TreeStatus

DEBUG_VARIABLE = "HTTK_WORKFLOW_DEBUG"

app = typer.Typer(
    name="v1",
    help="Import and inspect httk v1 ht.task trees, and run them under httk-workflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _group() -> None:
    """Import and inspect httk v1 ht.task trees, and run them under httk-workflow."""


TreeArg = Annotated[str, typer.Argument(metavar="ROOT", help="The root of the v1 task tree.")]
RootArg = Annotated[
    str | None, typer.Argument(metavar="ROOT", show_default=False, help="The root of the v1 task tree.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
DurableOpt = Annotated[
    bool | None,
    typer.Option(
        "--durable/--no-durable",
        show_default=False,
        help="Synchronize writes to storage, or not, for this command only [default: the workspace's mode].",
    ),
]


@contextmanager
def _reporting() -> Iterator[None]:
    """Our errors as one ``error:`` line on stderr and the documented exit status."""
    from httk.workflow.protocol import InvalidNameError, WorkflowError, WorkspaceError

    from ._errors import ImportRefusedError, TemplateError, TreeError

    try:
        yield
    except Exception as exc:
        if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
            raise
        if isinstance(exc, ImportRefusedError | TemplateError | TreeError | InvalidNameError):
            code = 2
        elif isinstance(exc, WorkspaceError):
            code = 3
        elif isinstance(exc, WorkflowError) or (isinstance(exc, OSError) and exc.errno != errno.EPIPE):
            code = 1
        else:
            raise
        typer.echo("error: " + " ".join(str(exc).splitlines()), err=True)
        raise typer.Exit(code) from None


PlacementOpt = Annotated[str, typer.Option("--placement", metavar="P", help="Placement prefix of the jobs.")]
MoveOpt = Annotated[
    bool, typer.Option("--move", help="Rename the task directories into the workspace (one filesystem).")
]
FinishedOpt = Annotated[
    bool, typer.Option("--include-finished", help="Import finished, broken, timeout and stopped tasks too.")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Import tasks a live v1 task manager may own, too.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Report what would be done; write nothing.")]
AttemptsOpt = Annotated[
    int, typer.Option("--attempts", min=0, help="The v1 attempt limit (taskmanager.sh -a).")
]
IMPORT_EPILOG = "Exit status: 0 all imported; 1 something left behind; 2 bad input; 3 the workspace."


@app.command("import", epilog=IMPORT_EPILOG)
def import_command(
    *,
    workspace: WorkspaceArg = None,
    root: RootArg = None,
    placement: PlacementOpt = "v1",
    move: MoveOpt = False,
    include_finished: FinishedOpt = False,
    force: ForceOpt = False,
    dry_run: DryRunOpt = False,
    attempts: AttemptsOpt = 10,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Turn each top-level runnable task of a v1 tree into a job (see the package README)."""
    with _reporting():
        workspace, tree = bind([workspace, root], [("WORKSPACE", None), ("ROOT", None)], writes=not dry_run)
        from ._import_options import ImportOptions
        from ._importer import import_tree

        options = ImportOptions(
            placement=placement,
            move=move,
            include_finished=include_finished,
            force=force,
            dry_run=dry_run,
            attempts=attempts,
            durable=durable,
        )
        from httk.workflow.cli.shared import progress_bar, wanted

        with progress_bar("importing v1 tasks", enabled=wanted(as_json)) as bar:
            report = import_tree(workspace, tree, options, progress=bar.report)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        _print_import(report)
    if not report.complete:
        raise typer.Exit(1)


_LABELS = {
    "imported": "imported",
    "would_import": "would import",
    "already_imported": "already imported",
    "completed": "completed (interrupted before)",
    "skipped_live": "skipped as live",
    "skipped_terminal": "skipped as terminal",
    "skipped_legacy": "skipped (legacy status)",
    "refused": "refused",
}


def _print_import(report: ImportReport) -> None:
    verb = "dry run of importing" if report.dry_run else "imported"
    counts = ", ".join(f"{count} {_LABELS[action]}" for action, count in report.counts.items()) or "no task"
    typer.echo(f"{verb} {report.root} into {report.workspace} at {report.placement}: {counts}")
    for entry in report.entries:
        if entry.action.value in ("imported", "would_import", "already_imported"):
            continue
        typer.echo(f"  {_LABELS[entry.action.value]}: {entry.relpath}: {entry.reason}")
    for problem in report.problems:
        typer.echo(f"  not a v1 task name: {problem.relpath}: {problem.message}")
    if report.ignored:
        typer.echo(f"  {len(report.ignored)} entries v1 itself ignores (ht.tmp.*), not imported")


StatusWorkspaceOpt = Annotated[
    str | None,
    typer.Option("--workspace", metavar="WS", help="Also show which jobs of WS the tasks became."),
]


@app.command("status")
def status_command(
    *,
    root: TreeArg,
    workspace: StatusWorkspaceOpt = None,
    placement: PlacementOpt = "v1",
    as_json: JsonOpt = False,
) -> None:
    """Summarise a v1 tree: tasks per status and set, running tasks and their owners, quirks."""
    with _reporting():
        from ._status import tree_status

        status = tree_status(root, workspace=workspace, placement=placement)
    if as_json:
        typer.echo(json.dumps(status.to_json(), indent=2))
        return
    for line in _status_lines(status):
        typer.echo(line)


def _status_lines(status: TreeStatus) -> Iterator[str]:
    nested = status.tasks - status.top_level
    yield f"v1 tree {status.root}: {status.tasks} tasks ({status.top_level} top-level, {nested} nested)"
    if status.by_status:
        yield f"  {'status':<14}{'top-level':>10}{'nested':>8}"
    for name, counts in status.by_status.items():
        yield f"  {name:<14}{counts['top_level']:>10}{counts['nested']:>8}"
    if status.by_set:
        yield "  sets: " + ", ".join(f"{name} {count}" for name, count in status.by_set.items())
    for task in status.running:
        state, age = "live" if task.live else "stale", _age(task.age_seconds)
        yield f"  running, {state}: {task.relpath} (owner {task.owner}, modified {age} ago)"
    for beat in status.heartbeats:
        fresh = "fresh" if beat.fresh else "old"
        yield f"  heartbeat alive.{beat.owner}: {_age(beat.age_seconds)} ago ({fresh})"
    for quirk in status.quirks:
        yield f"  note: {quirk.relpath}: {quirk.note}"
    for problem in status.problems:
        yield f"  not a v1 task name: {problem.relpath}: {problem.message}"
    for ignored in status.ignored:
        yield f"  ignored: {ignored.relpath}: {ignored.reason}"
    if status.views:
        yield f"  {len(status.views)} status view(s) (symbolic links named like tasks), not followed"
    if status.workspace is not None:
        yield f"jobs in {status.workspace} at {status.placement}:"
        for job in status.jobs:
            where = f"{job.kind} {job.placement}/{job.job_key}" if job.kind else "not imported"
            yield f"  {job.relpath}: {where}" + (f" ({job.note})" if job.note else "")


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


TemplateArg = Annotated[
    str | None,
    typer.Argument(metavar="TEMPLATE_DIR", show_default=False, help="A v1 task template directory."),
]
StructureOpt = Annotated[
    str, typer.Option("--structure", metavar="POSCAR", help="The structure, written as the task's POSCAR.")
]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="The v1 task id [default: the structure file's name].")
]
SetOpt = Annotated[str, typer.Option("--set", metavar="SET", help="The v1 task set (the job's pool).")]
PriorityOpt = Annotated[int, typer.Option("--priority", min=1, max=5, help="The v1 priority, 1 highest.")]
VarOpt = Annotated[
    list[str] | None,
    typer.Option("--var", metavar="NAME=VALUE", help="A value for $NAME in *.template files (repeatable)."),
]
InstantiateOpt = Annotated[
    bool, typer.Option("--run-instantiate", help="Run the template's ht.instantiate.py (needs legacy httk).")
]
PythonOpt = Annotated[
    str,
    typer.Option("--python", metavar="PY", help="The interpreter with legacy httk for ht.instantiate.py."),
]


@app.command("new")
def new_command(
    *,
    workspace: WorkspaceArg = None,
    template: TemplateArg = None,
    structure: StructureOpt,
    name: NameOpt = None,
    task_set: SetOpt = "any",
    priority: PriorityOpt = 3,
    placement: PlacementOpt = "v1",
    var: VarOpt = None,
    run_instantiate: InstantiateOpt = False,
    python: PythonOpt = "python3",
    attempts: AttemptsOpt = 10,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Instantiate a v1 template directory for a structure as a new job."""
    with _reporting():
        from ._template import new_task

        workspace, directory = bind(
            [workspace, template], [("WORKSPACE", None), ("TEMPLATE_DIR", None)], writes=True
        )
        made = new_task(
            workspace,
            directory,
            structure,
            name=name,
            task_set=task_set,
            priority=priority,
            placement=placement,
            variables=_variables(var or []),
            run_instantiate=run_instantiate,
            python=python,
            attempts=attempts,
            durable=durable,
        )
    if as_json:
        typer.echo(json.dumps({name: getattr(made, name) for name in made.__slots__}, indent=2))
        return
    verb = "created" if made.created else "already there:"
    typer.echo(f"{verb} job {made.job_key} at {made.placement} (view {made.view})")
    if not made.instantiated:
        typer.echo(
            "  POSCAR is the --structure file; ht.instantiate.py did not run (--run-instantiate runs it)"
        )


def _variables(pairs: list[str]) -> dict[str, str]:
    from ._errors import TemplateError

    found: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.isidentifier():
            raise TemplateError(f"--var {pair!r} must be NAME=VALUE with NAME a $placeholder name")
        found[key] = value
    return found
