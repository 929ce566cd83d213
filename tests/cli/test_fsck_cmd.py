"""``httk workspace fsck`` on the command line: output, exit status, repair, and that a check writes nothing.

The workspace is built once per module by the real manager (``tests/inspectkit.py``); every test damages
a copy of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Invoke
from tests.engine.maintenance.test_fsck import flip_checksum
from tests.inspectkit import Built, build, copy, set_format_member, snapshot
from tests.runners import WAIT_SECONDS

HTTK = [sys.executable, "-c", "from httk.workflow.cli._app import main; main()"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("fsck-cli")
    return build(base / "ws", base / "scratch")


@pytest.fixture
def built(template: Built, tmp_path: Path) -> Built:
    return copy(template, tmp_path / "ws")


def damage(built: Built, label: str) -> None:
    flip_checksum(built.root, built.marker(label))


def report_of(result: Any, status: int) -> dict[str, Any]:
    assert result.exit_code == status, (result.stdout, result.stderr)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_a_clean_workspace_exits_0_in_every_spelling(built: Built, invoke: Invoke) -> None:
    result = invoke("workspace", "fsck", built.root)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip().splitlines()[0] == "6 markers checked: clean"
    report = report_of(invoke("workflow", "workspace", "fsck", "--workspace", built.root, "--json"), 0)
    assert report["clean"] is True and report["problems"] == [] and report["markers_checked"] == 6
    assert report["markers"]["succeeded"] == 2 and report["repair"] is False
    assert report["leftovers"]["total"] == sum(
        report["leftovers"][name]
        for name in ("removed_jobs", "tmp_entries", "retired_requests", "placement_directories")
    )
    assert "always-safe leftovers (workspace gc removes them): " in result.stdout


def test_damage_is_reported_in_a_table_and_as_one_json_object_with_exit_1(
    built: Built, invoke: Invoke
) -> None:
    damage(built, "paused")
    result = invoke("workspace", "fsck", built.root)
    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["code", "action", "kind", "gen", "job", "or", "entry", "detail"]
    generation = str(built.marker("paused").name.generation)
    assert lines[2].split()[:4] == ["checksum_mismatch", "reported", "paused", generation]
    assert built.key("paused") in lines[2]
    assert "6 markers checked: 1 problem (1 reported)" in result.stdout and "--repair" in result.stdout

    report = report_of(invoke("workspace", "fsck", built.root, "--json"), 1)
    [problem] = report["problems"]
    assert (problem["code"], problem["kind"], problem["job_key"]) == (
        "checksum_mismatch",
        "paused",
        built.key("paused"),
    )
    assert problem["path"].startswith(".httk-workflow/state/paused/proj-a/01/")
    assert report["clean"] is False and report["left"] == 1


def test_repair_exits_0_and_leaves_a_clean_workspace(built: Built, invoke: Invoke) -> None:
    damage(built, "paused")
    report = report_of(invoke("workspace", "fsck", "--repair", "--json", built.root), 0)
    [problem] = report["problems"]
    assert problem["action"] == "repaired" and report["actions"] == {"repaired": 1}
    marker = built.marker("paused")
    assert (
        problem["repaired_marker"] == marker.path(marker_workspace(built)).relative_to(built.root).as_posix()
    )
    text = invoke("workspace", "fsck", built.root)
    assert text.exit_code == 0 and "clean" in text.stdout


def marker_workspace(built: Built) -> Any:
    from httk.workflow.engine.core._workspace import attach

    return attach(built.root, writable=False)


def test_an_unrepairable_marker_is_left_or_quarantined_and_exits_1(built: Built, invoke: Invoke) -> None:
    damage(built, "gpu")  # registered only: no older frame to go back to
    result = invoke("workspace", "fsck", "--repair", built.root)
    assert result.exit_code == 1 and "unrepairable" in result.stdout
    report = report_of(
        invoke("workspace", "fsck", "--repair", "--quarantine-unrepairable", "--json", built.root), 1
    )
    [problem] = report["problems"]
    assert problem["action"] == "quarantined"
    assert (built.root / problem["quarantine_entry"]).is_file()
    assert invoke("workspace", "fsck", built.root).exit_code == 0


def test_quarantine_without_repair_is_a_usage_error(built: Built, invoke: Invoke) -> None:
    result = invoke("workspace", "fsck", "--quarantine-unrepairable", built.root)
    assert result.exit_code == 2 and "--quarantine-unrepairable needs --repair" in result.stderr


def test_a_check_writes_nothing_in_process_or_as_a_real_process(built: Built, invoke: Invoke) -> None:
    damage(built, "paused")
    damage(built, "gpu")
    before = snapshot(built.root)
    assert invoke("workspace", "fsck", built.root).exit_code == 1
    assert invoke("workspace", "fsck", built.root, "--json").exit_code == 1
    done = subprocess.run(
        [*HTTK, "workspace", "fsck", str(built.root), "--json"],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert len(json.loads(done.stdout)["problems"]) == 2
    assert snapshot(built.root) == before


def test_a_workspace_this_version_may_not_change_is_checked_but_not_repaired(
    built: Built, invoke: Invoke
) -> None:
    damage(built, "paused")
    set_format_member(built.root, "extensions", ["relocation-v1"])
    before = snapshot(built.root)
    assert report_of(invoke("workspace", "fsck", built.root, "--json"), 1)["problems"][0]["kind"] == "paused"
    result = invoke("workspace", "fsck", "--repair", built.root)
    assert result.exit_code == 3 and result.stderr.startswith("error: ")
    assert snapshot(built.root) == before
