"""``httk workflow vasp plot`` through typer's CliRunner, on jobs a real manager ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from httk.workflow.vasp import VASP_RELAX, VASP_STATIC
from httk.workflow.vasp.cli import app
from typer.testing import CliRunner

from tests.vasp.e2e import Job, mock_command, run_manager, submit, workspace

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Job, Job, Job]:
    root = tmp_path_factory.mktemp("cli")
    ws = workspace(root)
    relaxed = submit(
        ws, VASP_RELAX, root / "in", tag="silicon", inputs={"vasp.command": mock_command("zpotrf*1")}
    )
    static = submit(ws, VASP_STATIC, root / "in", tag="silicon-static")
    run_manager(ws)
    waiting = submit(ws, VASP_STATIC, root / "in", tag="later")
    return ws, relaxed, static, waiting


def test_the_plot_of_a_relaxation_across_its_remedy_and_repeats(
    jobs: tuple[Path, Job, Job, Job], tmp_path: Path
) -> None:
    ws, relaxed, _, _ = jobs
    runs = relaxed.state()["runs"]
    steps = sum(len(run["ionic_steps"]) for run in runs)
    for selector in (relaxed.id[:8], relaxed.key, str(relaxed.payload), f"{relaxed.placement}/{relaxed.key}"):
        output = tmp_path / f"{abs(hash(selector))}.png"
        result = CliRunner().invoke(app, ["plot", str(ws), selector, "-o", str(output)])
        assert result.exit_code == 0, result.output
        assert result.output == f"{output}: {steps} ionic steps of {len(runs)} runs\n"
        assert output.read_bytes().startswith(PNG)


def test_jobs_that_cannot_be_named_or_plotted_are_refused(
    jobs: tuple[Path, Job, Job, Job], tmp_path: Path
) -> None:
    ws, _, _, waiting = jobs
    output = tmp_path / "x.png"
    for selector, status, fragment in (
        ("silicon", 2, "names 2 jobs"),
        ("nobody", 2, "no job in"),
        (waiting.key, 1, "no VASP ionic steps to plot yet"),
    ):
        result = CliRunner().invoke(app, ["plot", str(ws), selector, "-o", str(output)])
        assert result.exit_code == status and fragment in result.output, result.output
    result = CliRunner().invoke(app, ["plot", str(tmp_path), "x", "-o", str(output)])
    assert result.exit_code == 2 and "not a workspace" in result.output
    assert not output.exists()


def test_help_lists_the_plot_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and "plot" in result.output
