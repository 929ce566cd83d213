"""``httk workflow vasp``: commands of the VASP workflows, contributed to the ``httk`` command line.

Registered under the entry point group ``httk.workflow.cli`` (name ``vasp``), which the ``httk``
command loads lazily; until it does, ``python -m typer httk.workflow.vasp.cli run`` reaches the same
app. Heavy imports (matplotlib) happen inside the command bodies, so ``--help`` stays fast.

``plot WORKSPACE JOB -o FILE``: the relaxation plot of one job (:mod:`._plot`). JOB is a payload
directory (a path, or a path relative to the workspace), or a job key, UUID, or a unique prefix of
either, looked up by name in the workspace's state tree (nothing is opened for writing). Exit status 0,
1 when the job has no VASP runs to plot or matplotlib is missing, 2 for a job that cannot be named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="vasp", help="Packaged VASP workflows: plots of their calculations.", no_args_is_help=True
)

_STATE = ".httk-workflow/state"


@app.callback()
def vasp() -> None:
    """Packaged VASP workflows: plots of their calculations."""


class _RefusedError(Exception):
    """A job that cannot be named or plotted, with the exit status to end with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def find_payload(workspace: Path, job: str) -> Path:
    """The payload directory ``job`` names in ``workspace`` (see the module docstring)."""
    for candidate in (Path(job), workspace / job):
        if (candidate / "job.json").is_file():
            return candidate
    if not (workspace / ".httk-workflow" / "format.json").is_file():
        raise _RefusedError(f"{workspace}: not a workspace (no .httk-workflow/format.json)", 2)
    from httk.workflow.protocol import InvalidNameError, MarkerName

    wanted = job.lower()
    found: dict[str, Path] = {}
    for marker in (workspace / _STATE).rglob("*"):
        if not marker.is_file():
            continue
        try:
            key = MarkerName.parse(marker.name).key
        except InvalidNameError:
            continue
        if str(key).lower().startswith(wanted) or key.job_id.startswith(wanted):
            placement = marker.parent.relative_to(workspace / _STATE).parts[1:]
            found[key.job_id] = workspace.joinpath(*placement, str(key))
    if not found:
        raise _RefusedError(
            f"no job in {workspace} is named {job!r} (a payload path, job key, UUID or prefix)", 2
        )
    if len(found) > 1:
        names = ", ".join(sorted(str(path.relative_to(workspace)) for path in found.values()))
        raise _RefusedError(f"{job!r} names {len(found)} jobs: {names}; give more of the key", 2)
    return next(iter(found.values()))


@app.command()
def plot(
    workspace: Annotated[Path, typer.Argument(help="The workspace directory.")],
    job: Annotated[str, typer.Argument(help="A payload path, job key, UUID or unique prefix.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The PNG file to write.")],
) -> None:
    """Plot the energy of every ionic step of a VASP job, across its repeats and remedies."""
    try:
        payload = find_payload(workspace, job)
        try:
            state = json.loads((payload / ".httk-job" / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        runs = (state.get("vasp") or {}).get("runs") or []
        if not any(run.get("ionic_steps") for run in runs):
            raise _RefusedError(f"{payload}: the job has no VASP ionic steps to plot yet", 1)
        try:
            from ._plot import draw

            drawn = draw(runs, output, title=payload.name)
        except ModuleNotFoundError as exc:
            raise _RefusedError(
                f"plotting needs matplotlib ({exc.name}): pip install 'httk-workflow-vasp[plot]'", 1
            ) from exc
    except _RefusedError as refused:
        typer.echo(f"Error: {refused}", err=True)
        raise typer.Exit(refused.status) from None
    typer.echo(f"{output}: {drawn} ionic steps of {len(runs)} runs")
