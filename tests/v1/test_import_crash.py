"""An import stopped after every one of its mutations, in both seams (this package's and the engine's),
converges when it is run again: the same jobs, markers, payloads and views as an uninterrupted import,
nothing left in the workspace's tmp/, and (copying) the tree untouched or (moving) every task moved."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from httk.workflow.engine import init

from tests.v1.v1trees import make_task

V1_SEAM = ("HTTK_WORKFLOW_V1_CRASH_AFTER", "HTTK_WORKFLOW_V1_MUTATION_TRACE")
ENGINE_SEAM = ("HTTK_WORKFLOW_CRASH_AFTER", "HTTK_WORKFLOW_MUTATION_TRACE")
CRASH_EXIT = 86


def build(base: Path) -> tuple[Path, Path]:
    """A tree of two runnable tasks in two directories (one with a subtask) and a finished one."""
    root = base / "Runs"
    parent = make_task(root / "a", "ht.task.any.p.collect.0.unclaimed.3.waitsubtasks")
    make_task(parent / "ht.run.current", "ht.task.any.s.start.0.none.3.waitstart", files={"data": "x\n"})
    make_task(root / "b" / "c", "ht.task.any.q.start.0.unclaimed.2.waitstart", files={"input": "1\n"})
    make_task(root, "ht.task.any.done.x.0.unclaimed.3.finished")
    workspace = init(base / "ws", name="crash", durable=False).root
    return root, workspace


def importing(workspace: Path, root: Path, move: bool) -> str:
    """An import of ``root``; copying, each task is a batch of its own, so that the interruption points
    of a large import's several batches are enumerated too."""
    return (
        "from httk.workflow.v1 import ImportOptions, _importer\n"
        "_importer._COPY_BATCH_BYTES = 1\n"
        f"_importer.import_tree({str(workspace)!r}, {str(root)!r}, ImportOptions(move={move!r}))\n"
    )


def run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )


def state(workspace: Path, root: Path) -> dict[str, object]:
    """What a finished import must leave: markers, payload files, views, tmp/, and the tree."""
    control = workspace / ".httk-workflow"
    markers = sorted(
        str(p.relative_to(control / "state")).rsplit(".p", 1)[0]
        for p in (control / "state").rglob("*")
        if p.is_file()
    )
    payloads = sorted(
        str(p.relative_to(workspace)) for p in workspace.rglob("*") if ".httk-workflow" not in p.parts
    )
    tree = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    # the engine's own scratch (a marker staged before its rename) is for `workspace gc`; ours must go
    staging = sorted(
        name for name in os.listdir(control / "tmp") if name.startswith(("v1-import.", "v1-move."))
    )
    return {"markers": markers, "payloads": payloads, "staging": staging, "tree": tree}


def trace_of(base: Path, move: bool, seam: tuple[str, str]) -> int:
    root, workspace = build(base)
    trace = base / "trace"
    result = run(importing(workspace, root, move), {seam[1]: str(trace)})
    assert result.returncode == 0, result.stderr
    return len(trace.read_text().splitlines())


@pytest.mark.parametrize("move", [False, True], ids=["copy", "move"])
@pytest.mark.parametrize("seam", [V1_SEAM, ENGINE_SEAM], ids=["v1-seam", "engine-seam"])
def test_an_import_interrupted_anywhere_converges_when_run_again(
    tmp_path: Path, move: bool, seam: tuple[str, str]
) -> None:
    reference_root, reference_ws = build(tmp_path / "reference")
    assert run(importing(reference_ws, reference_root, move), {}).returncode == 0
    expected = state(reference_ws, reference_root)
    assert len(expected["markers"]) == 2  # type: ignore[arg-type]
    count = trace_of(tmp_path / "counted", move, seam)
    assert count > 3
    for after in range(1, count + 1):
        base = tmp_path / f"crash-{after}"
        root, workspace = build(base)
        crashed = run(importing(workspace, root, move), {seam[0]: str(after)})
        assert crashed.returncode == CRASH_EXIT, (after, crashed.stderr)
        rerun = run(importing(workspace, root, move), {})
        assert rerun.returncode == 0, (after, rerun.stderr)
        assert state(workspace, root) == expected, after
        shutil.rmtree(base)
