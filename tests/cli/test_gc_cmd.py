"""``httk workspace gc`` and ``httk workflow workspace gc``: the report, --dry-run, --json, exit statuses."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.cli.conftest import Invoke, error_lines
from tests.inspectkit import snapshot

DAY = 86400.0


def stale_tmp(root: Path, name: str = "interrupted", days: float = 2.0) -> Path:
    path = root / ".httk-workflow" / "tmp" / name
    path.write_text("scratch")
    moment = time.time() - days * DAY
    os.utime(path, (moment, moment))
    return path


def writers(root: Path) -> list[str]:
    return sorted(path.name for path in (root / ".httk-workflow" / "journal").iterdir())


def test_gc_reports_every_category_and_removes_stale_scratch(invoke: Invoke, workspace: Path) -> None:
    stale = stale_tmp(workspace)
    young = stale_tmp(workspace, "young", 0.5)
    result = invoke("workspace", "gc", workspace)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["category", "candidates", "removed", "bytes"]
    assert "tmp_entries 1 1 7" in [" ".join(line.split()) for line in lines]
    assert "removed 1 entries (7 bytes)" in lines
    assert "kept journal_segment: retention.journal_days is not set (keep)" in lines
    assert not stale.exists() and young.exists()
    assert len(writers(workspace)) == 1  # the gc frame's writer


def test_dry_run_json_prints_one_object_and_writes_nothing(invoke: Invoke, workspace: Path) -> None:
    stale_tmp(workspace)
    before = snapshot(workspace)
    result = invoke("workflow", "workspace", "gc", "--workspace", workspace, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] is True and report["frame_ref"] is None
    assert report["candidates"] == 1 and report["removed"] == 0
    assert report["categories"]["tmp_entries"] == {
        "candidates": 1,
        "removed": 0,
        "bytes_reclaimed": 0,
        "candidate_bytes": 7,
    }
    assert snapshot(workspace) == before


def test_a_collection_with_nothing_to_remove_creates_no_writer(invoke: Invoke, workspace: Path) -> None:
    result = invoke("workspace", "gc", "--json", workspace)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["frame_ref"] is None
    assert writers(workspace) == []


def test_retention_set_through_the_cli_opens_a_gated_category(invoke: Invoke, workspace: Path) -> None:
    assert invoke("workspace", "policy", "set", workspace, "retention.journal_days", "30").exit_code == 0
    result = invoke("workspace", "gc", "--json", workspace)
    report = json.loads(result.stdout)
    assert "journal_segment" not in report["skipped"] and report["retention"] == {"journal_days": 30.0}
    assert report["skipped"]["attempt_control"] == "retention.attempt_control_days is not set (keep)"


def test_gc_of_a_directory_that_is_no_workspace_exits_3(invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("workspace", "gc", tmp_path)
    assert result.exit_code == 3
    assert error_lines(result) == [f"error: {tmp_path}: not a workspace: no .httk-workflow/format.json"]
