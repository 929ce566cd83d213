"""``httk workflow job new``: make one job and submit it, with no hand-written job.json.

Two front ends of one builder (:func:`httk.workflow.engine.plan_job`):

- ``--workflow NAME`` makes a job of a packaged workflow (``workflows list`` shows them and their
  inputs). ``--input KEY=VALUE`` gives one input: a file input's VALUE is a path, read relative to the
  current directory and copied into the payload's ``files/``; a value input's VALUE is text converted to
  the input's declared type.
- ``--runner PATH`` makes a job of an author's own runner file (or a directory entered at its ``run``):
  copied into the payload's ``files/``, or with ``--shared`` published into the workspace runner store and
  pinned by its digest. ``--input KEY=VALUE`` puts VALUE into job.json's ``inputs`` as JSON when it parses
  as JSON, else as text (the rule of ``settings set``). ``--step``, ``--workdir`` and ``--data`` set
  what a packaged workflow declares for itself.

Every refusal -- an unknown, missing, unreadable or invalid input (named), a workspace without an
extension the workflow needs (with the command that enables it), an invalid tag or placement -- happens
before anything is written, with exit status 2. The job key and the payload path are printed
tab-separated (``--json``: one object). ``--print`` prints the job.json it would submit and writes
nothing; what it would place beside it goes to standard error.
"""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._options import DurableOpt, JsonOpt, UsageError, WorkspaceArg, WorkspaceOpt, bind, json_or_text
from ._render import note, print_json, submission_json

if TYPE_CHECKING:
    from httk.workflow.engine import JobPlan, Workspace

NEW_EPILOG = (
    "Defaults: placement NAME/XX (NAME the workflow's, or the runner file's without its suffix; XX the "
    "first two hex digits of the job UUID); the workflow's priority, else 500. With --runner: step "
    "main, workdir persistent (run/), data none, pool default, the SDK's default retry policy."
)

WorkflowOpt = Annotated[
    str | None,
    typer.Option(
        "--workflow", metavar="NAME", show_default=False, help="A packaged workflow (see 'workflows list')."
    ),
]
RunnerOpt = Annotated[
    str | None,
    typer.Option(
        "--runner",
        metavar="PATH",
        show_default=False,
        help="Your own runner: a file, or a directory with a 'run' file.",
    ),
]
InputOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        metavar="KEY=VALUE",
        show_default=False,
        help="One input (repeatable); a file input's VALUE is a path ('workflows list' shows the inputs).",
    ),
]
TagOpt = Annotated[
    str | None,
    typer.Option("--tag", metavar="TAG", show_default=False, help="The job's tag (job key prefix)."),
]
PlacementOpt = Annotated[
    str | None,
    typer.Option(
        "--placement",
        metavar="PLACEMENT",
        show_default=False,
        help="The relative directory to place the job in [default: see below].",
    ),
]
PriorityOpt = Annotated[
    int | None,
    typer.Option(
        "--priority",
        metavar="N",
        min=0,
        max=999,
        show_default=False,
        help="0 (first) to 999 [default: the workflow's; 500 for --runner].",
    ),
]
StepOpt = Annotated[
    str | None,
    typer.Option(
        "--step", metavar="STEP", show_default=False, help="--runner: the initial step [default: main]."
    ),
]
SharedOpt = Annotated[
    bool,
    typer.Option(
        "--shared", help="--runner: publish it into the runner store and pin it, instead of copying it."
    ),
]
WorkdirOpt = Annotated[
    str | None,
    typer.Option(
        "--workdir",
        metavar="persistent|isolated",
        show_default=False,
        help="--runner: one run/ for every attempt, or a fresh run.<attempt>/ each [default: persistent].",
    ),
]
DataOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        metavar="none|transactional",
        show_default=False,
        help="--runner: transactional data/ (needs transactional-data-v1) [default: none].",
    ),
]
PrintOpt = Annotated[
    bool, typer.Option("--print", help="Print the job.json it would submit, and write nothing.")
]


def new(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    workflow: WorkflowOpt = None,
    runner: RunnerOpt = None,
    inputs: InputOpt = None,
    tag: TagOpt = None,
    placement: PlacementOpt = None,
    priority: PriorityOpt = None,
    step: StepOpt = None,
    shared: SharedOpt = False,
    workdir: WorkdirOpt = None,
    data: DataOpt = None,
    show: PrintOpt = False,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make one job of a packaged workflow or of your own runner, and submit it."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=not show)
    runner_options = {"step": step, "workdir": workdir, "data": data}
    if (workflow is None) == (runner is None):
        raise UsageError("give exactly one of --workflow NAME and --runner PATH")
    misplaced = [f"--{name}" for name, value in runner_options.items() if value is not None]
    misplaced += ["--shared"] if shared else []
    if workflow is not None and misplaced:
        raise UsageError(f"{', '.join(misplaced)}: only with --runner (a packaged workflow declares its own)")
    pairs = _inputs(inputs or [])
    from httk.workflow.engine import attach, find_workflow, plan_job, plan_runner_job

    attached = attach(root, writable=not show, durable=durable)
    if workflow is not None:
        plan = plan_job(
            attached, find_workflow(workflow), pairs, placement=placement, tag=tag, priority=priority
        )
    else:
        assert runner is not None
        from pathlib import Path

        plan = plan_runner_job(
            attached,
            Path(runner),
            inputs={key: json_or_text(value) for key, value in pairs.items()},
            placement=placement,
            tag=tag,
            priority=priority,
            shared=shared,
            step=step,
            workdir=workdir,
            data=data,
        )
    if show:
        typer.echo(plan.job_text())
        note(_would(attached, plan))
        return
    _submit(attached, plan, as_json=as_json)


def _inputs(words: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` words as a mapping; refused: a word without ``=``, an empty KEY, a KEY given twice."""
    pairs: dict[str, str] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key:
            raise UsageError(f"--input {word!r}: give it as KEY=VALUE")
        if key in pairs:
            raise UsageError(f"--input {key!r} is given twice")
        pairs[key] = value
    return pairs


def _would(workspace: "Workspace", plan: "JobPlan") -> str:
    files = ", ".join(f"{path} ({len(data)} bytes)" for path, data in sorted(plan.files.items()))
    text = f"would place the job at {plan.payload(workspace)}" + (f" with {files}" if files else "")
    if plan.shared_runner is not None:
        runner = plan.shared_runner
        text += f"; would publish the runner {runner.name!r} (sha256 {runner.sha256}) into the store"
    return text


def _submit(workspace: "Workspace", plan: "JobPlan", *, as_json: bool) -> None:
    from httk.workflow.engine import submit_plan

    result = submit_plan(workspace, plan)
    payload = plan.payload(workspace)
    if not as_json:
        typer.echo(f"{result.job_key}\t{payload}")
        return
    shown: dict[str, Any] = submission_json(workspace, result)
    shown["payload"] = str(payload)
    shown["workflow"] = plan.job.get("workflow")
    shown["runner"] = plan.job["runner"]
    print_json(shown)
