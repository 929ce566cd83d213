"""``httk workflow v1 …`` through typer's CliRunner (exit codes, text, --json) and end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from httk.workflow.v1.cli import app
from typer.testing import CliRunner, Result

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import fixture_tree, make_task


def v1(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(arg) for arg in args])


def test_the_group_is_registered_for_the_httk_command() -> None:
    (found,) = [ep for ep in entry_points(group="httk.workflow.cli") if ep.name == "v1"]
    assert found.value == "httk.workflow.v1.cli:app" and found.load() is app


def test_loading_the_group_imports_no_importer_and_no_engine() -> None:
    code = (
        "import sys, httk.workflow.v1.cli as cli; "
        "print(sorted(m for m in sys.modules if m.startswith('httk.workflow.') and m != cli.__name__))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # the shared WORKSPACE argument (typer and the standard library only), nothing of the engine
    assert json.loads(loaded.replace("'", '"')) == [
        "httk.workflow.cli",
        "httk.workflow.cli._options",
        "httk.workflow.cli._progress",
        "httk.workflow.cli._remote_run",
        "httk.workflow.cli.shared",
        "httk.workflow.v1",
    ]


def test_import_reports_what_it_did_and_exits_1_when_something_is_left_behind(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    fixture_tree(tmp_path / "Runs")
    result = v1("import", v1ws.path, tmp_path / "Runs")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].endswith("at v1: 5 imported, 1 skipped as live, 4 skipped as terminal")
    assert any(line.startswith("  skipped as live: ht.task.any.live.") for line in lines)
    assert "  2 entries v1 itself ignores (ht.tmp.*), not imported" in lines
    again = v1("import", v1ws.path, tmp_path / "Runs", "--json")
    assert again.exit_code == 1
    report = json.loads(again.stdout)
    assert report["counts"] == {"already_imported": 5, "skipped_live": 1, "skipped_terminal": 4}
    assert report["complete"] is False and len(report["tasks"]) == 10


def test_import_of_a_clean_tree_exits_0(tmp_path: Path, v1ws: V1Workspace) -> None:
    make_task(tmp_path / "Runs", "ht.task.any.a.start.0.unclaimed.3.waitstart")
    result = v1("import", v1ws.path, tmp_path / "Runs", "--placement", "old/runs", "--dry-run")
    assert result.exit_code == 0 and "1 would import" in result.stdout
    result = v1("import", v1ws.path, tmp_path / "Runs", "--placement", "old/runs")
    assert result.exit_code == 0 and result.stdout.endswith("at old/runs: 1 imported\n")


def test_bad_input_is_one_error_line_and_a_documented_status(tmp_path: Path, v1ws: V1Workspace) -> None:
    result = v1("import", v1ws.path, tmp_path / "absent")
    message = f"error: cannot read the v1 tree (No such file or directory): {tmp_path / 'absent'}\n"
    assert (result.exit_code, result.stderr) == (2, message)
    (tmp_path / "Runs").mkdir()
    result = v1("import", v1ws.path, tmp_path / "Runs", "--placement", "../up")
    assert result.exit_code == 2 and result.stderr.startswith("error: --placement '../up' is not a placement")
    result = v1("import", tmp_path / "no-workspace", tmp_path / "Runs")
    assert result.exit_code == 3 and result.stderr.startswith("error: ")


def test_the_reference_tree_imported_with_its_finished_tasks_runs_to_the_end(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    fixture_tree(tmp_path / "Runs")
    assert v1("import", v1ws.path, tmp_path / "Runs", "--include-finished").exit_code == 1  # the live one
    v1ws.run()
    kinds = {job["tag"]: job["kind"] for job in v1ws.list_jobs()}
    assert kinds == {
        "bad": "failed",
        "between": "succeeded",
        "done": "succeeded",
        "odd": "failed",
        "parent": "succeeded",
        "s1": "succeeded",
        "s2": "succeeded",
        "slow": "failed",
        "spawner": "succeeded",
        "sub1": "succeeded",
        "twostep": "succeeded",
        "txn": "succeeded",
    }
    assert sorted(v1ws.views()) == [
        "ht.task.any.bad.relax1.0.unclaimed.3.broken",
        "ht.task.any.between.second.0.unclaimed.3.finished",
        "ht.task.any.done.second.0.unclaimed.3.finished",
        "ht.task.any.odd.start.0.unclaimed.3.stopped",
        "ht.task.any.parent.collect.0.unclaimed.3.finished",
        "ht.task.any.slow.start.0.unclaimed.3.timeout",
        "ht.task.any.spawner.collect.0.unclaimed.3.finished",
        "ht.task.any.twostep.second.0.unclaimed.3.finished",
        "ht.task.any.txn.step3.2.unclaimed.3.finished",
    ]
