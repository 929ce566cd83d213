"""``httk workflow job``: submit prepared payload directories; the group of every command about jobs.

The group is the ``job`` of ``spec/02`` and ``spec/03``; ``httk job …`` is the same group at the top level
(DECISIONS D6). ``submit`` is written here; the others live with what they do (``list``, ``show`` and
``log`` in ``_inspect_cmd``, ``new``, ``why``, ``request``, ``debug`` and ``delete`` in modules of their
own).

``job submit WS PAYLOAD... --placement P`` submits every payload at one placement, each on its own
(``spec/01`` "Submission protocol"): a payload is checked completely before anything of it is written,
and the first invalid one stops the batch with its error while the jobs before it stay submitted.
Resubmitting an identical payload is harmless (``already_submitted``); a different definition under the
same job UUID is refused.

Output is one line per job (job key, placement, status), a summary line for a batch of more than
:data:`BIG_BATCH` payloads (with a progress bar on standard error when that is a terminal, and
without ``--json``: ``cli/_progress.py``), or a JSON array with ``--json``.
"""

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from . import _debug_cmd, _delete_cmd, _inspect_cmd, _new_cmd, _request_cmd, _why_cmd
from ._options import DurableOpt, JsonOpt, WorkspaceArg, WorkspaceOpt, bind_many
from ._progress import progress_bar, wanted
from ._render import print_json, submission_json

if TYPE_CHECKING:
    from httk.workflow.engine import SubmitResult, Submitter

BIG_BATCH = 200
"""Above this many payloads, text output is one summary line and a terminal gets a progress bar."""

app = typer.Typer(name="job", help="Make, submit, inspect and control jobs.", no_args_is_help=True)

PayloadsArg = Annotated[
    list[str] | None,
    typer.Argument(metavar="PAYLOAD", show_default=False, help="One or more payload directories."),
]
PlacementOpt = Annotated[
    str,
    typer.Option(
        "--placement",
        metavar="PLACEMENT",
        show_default=False,
        help="The relative directory to place the jobs in.",
    ),
]
MoveOpt = Annotated[
    bool, typer.Option("--move", help="Rename each payload into place (same filesystem) instead of copying.")
]


@app.command("submit")
def submit(
    *,
    placement: PlacementOpt,
    workspace: WorkspaceArg = None,
    payloads: PayloadsArg = None,
    workspace_option: WorkspaceOpt = None,
    move: MoveOpt = False,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Submit payload directories, each containing a job.json, at one placement."""
    words = [*([workspace] if workspace is not None else []), *(payloads or [])]
    root, paths = bind_many(words, workspace_option, what="PAYLOAD", writes=True)
    from httk.workflow.engine import Submitter, attach
    from httk.workflow.protocol import validate_placement

    validate_placement(placement)
    attached = attach(root, durable=durable)
    big = len(paths) > BIG_BATCH
    results: list[SubmitResult] = []
    try:
        with progress_bar("submitting", total=len(paths), enabled=big and wanted(as_json)) as bar:
            on_result = (lambda _result: bar.advance()) if big or as_json else _print_line
            _submit_all(
                Submitter(attached), paths, placement, move=move, results=results, on_result=on_result
            )
    finally:
        if as_json:
            print_json([submission_json(attached, result) for result in results])
    if big and not as_json:
        typer.echo(_summary(results, placement))


def _submit_all(
    submitter: "Submitter",
    paths: Sequence[str],
    placement: str,
    *,
    move: bool,
    results: "list[SubmitResult]",
    on_result: "Callable[[SubmitResult], None] | None",
) -> None:
    """Submit in order, appending to ``results``; an error names its payload and what was submitted."""
    from pathlib import Path

    from httk.workflow.protocol import WorkflowError

    for path in paths:
        try:
            result = submitter.submit_payload(Path(path), placement, move=move)
        except WorkflowError as exc:
            _annotate(exc, path, len(results), len(paths))
            raise
        results.append(result)
        if on_result is not None:
            on_result(result)


def _annotate(exc: Exception, payload: str, done: int, total: int) -> None:
    if payload not in str(exc):
        exc.add_note(f"payload {payload}")
    if total > 1:
        exc.add_note(f"{done} of {total} payloads were submitted before it and stay submitted")


def _print_line(result: "SubmitResult") -> None:
    typer.echo(f"{result.job_key}\t{result.placement}\t{result.status}")


def _summary(results: "Sequence[SubmitResult]", placement: str) -> str:
    counts = Counter(str(result.status) for result in results)
    detail = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    return f"{len(results)} jobs at {placement}: {detail}"


app.command("new", epilog=_new_cmd.NEW_EPILOG)(_new_cmd.new)
app.command("list")(_inspect_cmd.list_jobs)
app.command("show")(_inspect_cmd.show)
app.command("log")(_inspect_cmd.log)
app.command("why")(_why_cmd.why)
app.command("request")(_request_cmd.request)
app.command("debug", epilog=_debug_cmd.DEBUG_EPILOG)(_debug_cmd.debug)
app.command("delete", epilog=_delete_cmd.DELETE_EPILOG)(_delete_cmd.delete)
