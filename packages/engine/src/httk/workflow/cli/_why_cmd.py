"""``job why`` and ``precheck``: the two diagnoses, both read-only.

``httk workflow job why [WORKSPACE] JOB...`` (or ``httk job why --workspace WS JOB...``) explains, for
each job a selector names, why it is where it is and what would move it
(:func:`httk.workflow.engine.diagnose`). A selector naming a placement directory names every job below
it. With ``--json`` one job prints its diagnosis object and several print ``{"diagnoses": [...]}``. The
exit status is 0 whatever the diagnosis says.

``httk workflow precheck [WORKSPACE]`` checks every pending job before managers start
(:func:`httk.workflow.engine.precheck`): exit status 1 when a job cannot run (a broken runner or
job.json, or no live manager can claim it), 0 otherwise; an indeterminate finding does not fail.

Both attach the workspace read-only and write nothing to it: no journal writer, no heartbeat. The
engine is imported inside the command bodies so that ``--help`` stays fast.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._options import JsonOpt, WorkspaceArg, WorkspaceOpt, bind, bind_many
from ._render import print_json

if TYPE_CHECKING:
    from httk.workflow.engine import MarkerLocation

WordsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[WORKSPACE] JOB...",
        show_default=False,
        help="The workspace (or --workspace), then job selectors: a UUID, job key, unique prefix, "
        "payload or marker path, or placement directory.",
    ),
]
SearchPathOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--runner-search-path",
        metavar="DIR",
        show_default=False,
        help="A root for installed runner references (repeatable); without one they are indeterminate.",
    ),
]


def why(*, words: WordsArg = None, workspace_option: WorkspaceOpt = None, as_json: JsonOpt = False) -> None:
    """Why is this job not running? Every precondition, its owner, its join, or its failure."""
    root, selectors = bind_many(words or [], workspace_option, what="JOB", writes=False)
    from httk.workflow.engine import WhyContext, attach, diagnose, select_jobs

    workspace = attach(root, writable=False)
    markers: dict[str, MarkerLocation] = {}
    for selector in selectors:
        for marker in select_jobs(workspace, selector).markers:
            markers.setdefault(marker.job_id, marker)
    context = WhyContext.read(workspace)
    diagnoses = [diagnose(workspace, marker, context) for marker in markers.values()]
    if as_json:
        documents = [diagnosis.as_dict() for diagnosis in diagnoses]
        print_json(documents[0] if len(documents) == 1 else {"diagnoses": documents})
        return
    for index, diagnosis in enumerate(diagnoses):
        if index:
            typer.echo("")
        for line in diagnosis.lines():
            typer.echo(line)


def precheck(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    runner_search_path: SearchPathOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check pending jobs before starting managers: runners, claimability, environment (1: one cannot run)."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach
    from httk.workflow.engine import precheck as check_workspace

    report = check_workspace(attach(root, writable=False), runner_search_path=runner_search_path or ())
    if as_json:
        print_json(report.as_dict())
    else:
        for line in report.lines():
            typer.echo(line)
    if report.failing:
        raise typer.Exit(1)
