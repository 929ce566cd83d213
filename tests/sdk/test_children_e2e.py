"""Fan out and join under the real manager: a parent spawns three labelled children and gathers them.

The same workflow is written with the Python SDK and with the Bash API. ``fan`` spawns ``part-0`` ..
``part-2`` (inputs ``n``), each child's ``work`` writes ``n * n`` into its workdir and succeeds, and
``gather`` — the parent's activation after the join — finds each child by label in ``children`` and sums
what their workdirs hold. The children inherit the parent's payload runner (copied into their payloads).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job
from tests.joinkit import current
from tests.runners import frame_chain

PYTHON_RUNNER = f"""#!{sys.executable}
from httk.workflow.sdk import Attempt, dispatch, step


@step
def fan(a: Attempt) -> None:
    for n in range(3):
        a.spawn("work", label=f"part-{{n}}", inputs={{"n": n}})
    a.wait("gather", message="fanned out")


@step
def work(a: Attempt) -> None:
    (a.workdir / "result.txt").write_text(str(a.inputs["n"] ** 2))
    a.succeed()


@step
def gather(a: Attempt) -> None:
    found = {{}}
    for child in a.children:
        found[child["label"]] = (a.workspace_dir / child["workdir_path"] / "result.txt").read_text()
    a.save_state({{"found": found, "kinds": [child["kind"] for child in a.children]}})
    a.succeed(message=f"total {{sum(int(value) for value in found.values())}}")


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""

BASH_RUNNER = r"""#!/usr/bin/env bash
set -euo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"

fan() {
  local n
  for n in 0 1 2; do
    httk_workflow_spawn "part-$n" work --input "n=$n"
  done
  httk_workflow_wait gather --message "fanned out"
}

work() {
  local n
  httk_workflow_setting n n
  printf '%s' "$((n * n))" >result.txt
  httk_workflow_succeed
}

gather() {
  local labels label path kind total=0 found=''
  httk_workflow_children labels
  for label in $labels; do
    httk_workflow_child path "$label" workdir_path
    httk_workflow_child kind "$label" kind
    total=$((total + $(<"$HTTK_WORKFLOW_WORKSPACE_DIR/$path/result.txt")))
    found+="${found:+,}\"$label\":\"$kind\""
  done
  httk_workflow_state_save "{$found}"
  httk_workflow_succeed --message "total $total"
}

httk_workflow_register_step fan
httk_workflow_register_step work
httk_workflow_register_step gather
httk_workflow_dispatch
"""


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = init(tmp_path / "ws", durable=False)
    yield workspace
    workspace.close()


def run_parent(ws: Workspace, runner: str) -> tuple[dict[str, Any], str]:
    job = minimal_job(
        tag="fan-out", initial_step="fan", runner={"backend": "path", "path": "runner", "arguments": []}
    )
    spec = JobSpec(job, "campaign", {"runner": runner.encode()}, frozenset({"runner"}))
    [result] = submit_jobs(ws, [spec])
    summary = Manager(ws.root, ManagerConfig(workers=3, lease_seconds=600.0)).run()
    assert summary.exit_reason == "idle"
    return job, result.job_key


def check_fan_out(ws: Workspace, key: str) -> list[dict[str, Any]]:
    marker = current(ws, "campaign", key)
    frames = frame_chain(ws, marker)
    assert marker.kind.value == "succeeded", frames[-1]
    final = frames[-1]
    assert final["step"] == "gather" and final["activation_reason"] == "join"
    summary = final["join_summary"]
    assert [o["label"] for o in summary["observations"]] == ["part-0", "part-1", "part-2"]
    assert {o["kind"] for o in summary["observations"]} == {"succeeded"}
    for observation in summary["observations"]:
        child = current(ws, observation["placement"], observation["job_key"])
        assert child.kind.value == "succeeded"
        assert observation["placement"] == f"campaign/{key}.children/0"
        child_job = json.loads((ws.root / observation["payload_path"] / "job.json").read_text())
        assert child_job["parent"]["job_key"] == key and child_job["initial_step"] == "work"
    return frames


def test_a_python_parent_fans_out_and_gathers_by_label(ws: Workspace) -> None:
    _job, key = run_parent(ws, PYTHON_RUNNER)
    frames = check_fan_out(ws, key)
    committing = [f for f in frames if f["kind"] == "committing"][-1]
    assert committing["outcome"]["message"] == "total 5"
    state = json.loads((ws.root / "campaign" / key / ".httk-job" / "state.json").read_text())
    assert state == {"found": {"part-0": "0", "part-1": "1", "part-2": "4"}, "kinds": ["succeeded"] * 3}


def test_a_bash_parent_fans_out_and_gathers_by_label(ws: Workspace) -> None:
    _job, key = run_parent(ws, BASH_RUNNER)
    frames = check_fan_out(ws, key)
    committing = [f for f in frames if f["kind"] == "committing"][-1]
    assert committing["outcome"]["message"] == "total 5"
    state = json.loads((ws.root / "campaign" / key / ".httk-job" / "state.json").read_text())
    assert state == {"part-0": "succeeded", "part-1": "succeeded", "part-2": "succeeded"}
