"""``httk workflow plan`` end to end, as real processes: refusals, submission, status, list and log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from httk.workflow.engine.core._workspace import Workspace

from tests.plans.plankit import plan, run_manager, stage, write_plan

HTTK = [sys.executable, "-m", "httk.workflow.cli"]


def httk(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HTTK, "workflow", *words], capture_output=True, text=True, check=False)


def test_a_cycle_is_refused_with_one_error_line_naming_it_and_nothing_is_submitted(
    ws: Workspace, tmp_path: Path
) -> None:
    path = write_plan(tmp_path, plan("loop", [stage("a", "c"), stage("b", "a"), stage("c", "b")]))
    result = httk("plan", "submit", str(ws.root), str(path))
    assert result.returncode == 2, result
    cycle = "the dependencies have a cycle: a -> c -> b -> a"
    assert result.stderr == f"error: invalid stage plan {path}: member 'stages': {cycle}\n"
    listed = httk("plan", "list", str(ws.root), "--json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])


def test_submit_status_list_and_log(ws: Workspace, tmp_path: Path) -> None:
    path = write_plan(tmp_path, plan("chain", [stage("first"), stage("second", "first")]))
    submitted = httk("plan", "submit", str(ws.root), str(path), "--placement", "studies/chain", "--json")
    assert submitted.returncode == 0, submitted
    key = json.loads(submitted.stdout)["job_key"]
    assert key.startswith("chain--")

    before = json.loads(httk("plan", "status", str(ws.root), key, "--json").stdout)
    assert [(row["id"], row["status"]) for row in before["stages"]] == [
        ("first", "ready"),
        ("second", "pending"),
    ]
    assert before["coordinator_kind"] == "submitted"

    run_manager(ws)

    status = httk("plan", "status", str(ws.root), key)
    assert status.returncode == 0, status
    lines = status.stdout.splitlines()
    assert lines[:3] == ["plan chain version 1: coordinator paused", "  plan complete", "  2 completed"]
    assert lines[3].split() == ["stage", "status", "job", "started", "completed", "retries", "last", "error"]
    assert [line.split()[:2] for line in lines[4:]] == [["first", "completed"], ["second", "completed"]]
    listed = json.loads(httk("plan", "list", str(ws.root), "--json").stdout)
    assert [(p["workflow_id"], p["stages"], p["kind"]) for p in listed] == [("chain", 2, "paused")]
    log = httk("plan", "log", str(ws.root), key)
    assert log.returncode == 0 and log.stdout.splitlines()[-1].endswith("plan chain: plan complete")
    refused = httk("plan", "retry", str(ws.root), key, "first")
    assert refused.returncode == 1
    assert (
        refused.stderr
        == "error: stage 'first' has not failed (its job is succeeded); only a failed stage is retried\n"
    )
    not_a_plan = httk("plan", "status", str(ws.root), listed[0]["coordinator"] + ".stages")
    assert not_a_plan.returncode == 2


def test_amend_refuses_by_name_then_queues_and_wakes_and_status_shows_the_new_version(
    ws: Workspace, tmp_path: Path
) -> None:
    path = write_plan(tmp_path, plan("amended", [stage("first", write="x"), stage("second", "first")]))
    key = json.loads(httk("plan", "submit", str(ws.root), str(path), "--json").stdout)["job_key"]
    run_manager(ws)
    base = ["plan", "amend", str(ws.root), key, "--reason", "sharper", "--operator", "ann", "--wait", "0"]

    unknown = httk(*base, "--type", "parameter_change", "--stage", "third", "--set", "write=y")
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "error: the plan has no stage 'third' (its stages: first, second)\n",
    )
    malformed = httk(*base, "--type", "parameter_change", "--stage", "first", "--set", "write")
    assert (malformed.returncode, malformed.stderr) == (1, "error: --set 'write' is not KEY=VALUE\n")

    queued = httk(*base, "--type", "parameter_change", "--stage", "first", "--set", "write=y")
    assert queued.returncode == 0, queued
    assert queued.stdout == (
        "queued amendment 000001.parameter_change.json; the coordinator was paused and is asked to continue\n"
    )
    run_manager(ws)
    status = httk("plan", "status", str(ws.root), key)
    assert status.stdout.splitlines()[:3] == [
        "plan amended version 2: coordinator paused",
        "  plan complete",
        "  2 completed",
    ]
    log = httk("plan", "log", str(ws.root), key).stdout
    assert "plan amended: amendment amend-1 (parameter_change of stage first) makes version 2" in log
