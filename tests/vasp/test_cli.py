"""``httk workflow vasp plot`` through the real ``httk`` command line, on jobs a real manager ran."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from httk.workflow.vasp import VASP_RELAX, VASP_STATIC

from tests.vasp.e2e import HTTK, Job, environment, mock_command, run_manager, submit, workspace

PNG = b"\x89PNG\r\n\x1a\n"


def plot(*words: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HTTK, "workflow", "vasp", "plot", *map(str, words)],
        capture_output=True,
        text=True,
        env=environment(),
        check=False,
    )


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
    marker = next((ws / ".httk-workflow" / "state" / "succeeded").rglob(f"{relaxed.key}.p*"))
    for selector in (
        relaxed.id[:8],
        relaxed.key,
        relaxed.payload,
        f"{relaxed.placement}/{relaxed.key}",
        marker,
    ):
        output = tmp_path / f"{abs(hash(str(selector)))}.png"
        done = plot(ws, selector, "-o", output)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{output}: {steps} ionic steps of {len(runs)} runs\n"
        assert output.read_bytes().startswith(PNG)


def test_jobs_that_cannot_be_named_or_plotted_are_refused(
    jobs: tuple[Path, Job, Job, Job], tmp_path: Path
) -> None:
    ws, _, _, waiting = jobs
    output = tmp_path / "x.png"
    for selector, status, fragment in (
        ("silicon", 2, "matches 2 jobs"),
        ("nobody", 2, "matches no job in the workspace"),
        (waiting.key, 1, "no VASP ionic steps to plot yet"),
    ):
        done = plot(ws, selector, "-o", output)
        assert done.returncode == status, (selector, done.stderr)
        assert done.stderr.startswith("error: ") and fragment in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
    done = plot(tmp_path, "x", "-o", output)
    assert done.returncode == 3 and done.stderr.startswith("error: ")
    assert not output.exists()


def test_help_lists_the_plot_command() -> None:
    done = subprocess.run([HTTK, "workflow", "vasp", "--help"], capture_output=True, text=True, check=True)
    assert "plot" in done.stdout
