"""``httk workflow vasp``: commands of the VASP workflows, contributed to the ``httk`` command line.

Registered under the entry point group ``httk.workflow.cli`` (name ``vasp``), which the ``httk``
command loads lazily and runs inside its error reporting (one ``error:`` line, the documented exit
status). Heavy imports (the engine, matplotlib) happen inside the command bodies, so ``--help`` stays
fast.

``plot WORKSPACE JOB -o FILE``: the relaxation plot of one job (:mod:`._plot`). JOB is any selector the
engine's ``job show`` takes -- a job key, UUID, unique prefix of either, payload or marker path --
looked up by the engine's bounded lookup (:func:`httk.workflow.engine.select_job`: a probe at the
placement a path names, else one walk of the state tree; nothing is opened for writing). Exit status 0;
1 when the job has no VASP runs to plot yet or matplotlib is missing; 2 for a JOB that names no job or
several; 3 for a WORKSPACE that is not one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from httk.workflow.cli.shared import WorkspaceArg, bind

app = typer.Typer(
    name="vasp",
    help="Packaged VASP workflows: plots of their calculations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def vasp() -> None:
    """Packaged VASP workflows: plots of their calculations."""


def find_payload(workspace: Path, job: str) -> Path:
    """The payload directory of the one job ``job`` names in ``workspace`` (see the module docstring)."""
    from httk.workflow.engine import attach, select_job

    attached = attach(workspace, writable=False)
    try:
        marker = select_job(attached, job)
        return attached.payload_path(marker.placement, marker.job_key)
    finally:
        attached.close()


def _runs(payload: Path) -> list[dict[str, object]]:
    """The job's VASP runs as its state records them (none when the state cannot be read)."""
    from httk.workflow.protocol import InvalidDocumentError
    from httk.workflow.protocol._jsonio import read_json_object

    try:
        state = read_json_object(
            payload / ".httk-job" / "state.json", document="job state", max_bytes=64 << 20
        )
    except InvalidDocumentError:
        return []
    vasp = state.get("vasp")
    runs = vasp.get("runs") if isinstance(vasp, dict) else None
    return [run for run in runs if isinstance(run, dict)] if isinstance(runs, list) else []


@app.command()
def plot(
    workspace: WorkspaceArg = None,
    job: Annotated[
        str | None,
        typer.Argument(
            metavar="JOB", show_default=False, help="A job key, UUID, unique prefix, payload or marker path."
        ),
    ] = None,
    *,
    output: Annotated[Path, typer.Option("--output", "-o", help="The PNG file to write.")],
) -> None:
    """Plot the energy of every ionic step of a VASP job, across its repeats and remedies."""
    root, selector = bind([workspace, job], [("WORKSPACE", None), ("JOB", None)], writes=False)
    payload = find_payload(Path(root), selector)
    runs = _runs(payload)
    if not any(run.get("ionic_steps") for run in runs):
        _refuse(f"{payload}: the job has no VASP ionic steps to plot yet")
    try:
        from ._plot import draw

        drawn = draw(runs, output, title=payload.name)
    except ModuleNotFoundError as exc:
        _refuse(f"plotting needs matplotlib ({exc.name}): pip install 'httk-workflow-vasp[plot]'")
    typer.echo(f"{output}: {drawn} ionic steps of {len(runs)} runs")


def _refuse(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)
