"""The reference's own fixture script (fixtures/make-v1-tree.sh, validated against v1's task manager):
the tree it builds is the one the tests' builder makes, and it imports and runs to the end as v1 ran it."""

from __future__ import annotations

import bz2
import subprocess
from pathlib import Path

from httk.workflow.v1._reader import read_tree
from httk.workflow.v1.cli import app
from typer.testing import CliRunner

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import LIVE_OWNER, fixture_tree

SCRIPT = Path(__file__).with_name("fixtures") / "make-v1-tree.sh"


def scripted_tree(root: Path) -> Path:
    subprocess.run(["bash", str(SCRIPT), str(root)], check=True, capture_output=True)
    return root


def listing(root: Path) -> list[str]:
    """Every path below ROOT (a directory with a slash) but the .keep files the builder leaves in empty
    directories; the builder's step script is its own, with the same steps."""
    return sorted(f"{p.relative_to(root)}{'/' * p.is_dir()}" for p in root.rglob("*") if p.name != ".keep")


def task_dir(v1ws: V1Workspace, task: str) -> Path:
    """The task directory of the top-level task ``task``: ``task/<its v1 name>`` in its job's payload."""
    (found,) = [p for p in (v1ws.path / "v1").glob(f"{task}--*") if not p.name.endswith(".children")]
    (directory,) = (found / "task").glob("ht.task.*")
    return directory


def test_the_script_builds_the_tree_the_tests_builder_makes(tmp_path: Path) -> None:
    by_script = scripted_tree(tmp_path / "script")
    fixture_tree(tmp_path / "builder")
    assert listing(by_script) == listing(tmp_path / "builder")
    tasks = {t.relpath: t.name.status.value for t in read_tree(by_script).walk()}
    assert tasks == {t.relpath: t.name.status.value for t in read_tree(tmp_path / "builder").walk()}


def test_the_scripts_tree_is_imported_and_runs_to_the_end_as_v1_ran_it(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    root = scripted_tree(tmp_path / "Runs")
    imported = CliRunner().invoke(app, ["import", str(v1ws.path), str(root)])
    assert imported.exit_code == 1, imported.output  # the live task is left behind, and says so
    assert f"ht.task.any.live.relax.0.{LIVE_OWNER}.3.running" in imported.output
    v1ws.run()
    kinds = {job["job_key"].split("--")[0]: job["kind"] for job in v1ws.list_jobs()}
    assert kinds == dict.fromkeys(
        ["twostep", "between", "parent", "sub1", "spawner", "s1", "s2", "txn"], "succeeded"
    )
    for task in ("twostep", "between", "parent", "spawner", "txn"):
        (archive,) = task_dir(v1ws, task).glob("ht.run.2*")  # v1's archive of a finished task, with its log
        assert (archive / "ht.nextstep").read_text() == "ht_finished\n"
        bz2.decompress((archive / "ht.taskmgr.stdout.bz2").read_bytes())
    (archive,) = task_dir(v1ws, "parent").glob("ht.run.2*")
    subtasks = sorted(p.name for p in archive.glob("ht.task.*"))
    assert subtasks == [
        "ht.task.any.sub1.second.0.unclaimed.2.finished",  # v1 renamed it unclaimed too
        "ht.task.any.sub2.start.0.unclaimed.2.finished",
    ]
    assert (task_dir(v1ws, "txn") / "fixture.trace").read_text().count(
        "ran step=step3"
    ) == 1  # the replayed decision, once
    assert (root / f"ht.task.any.live.relax.0.{LIVE_OWNER}.3.running").is_dir()  # never touched
