"""Plans under the real manager: a cheap Bash stage runner, plan documents, and what a run left.

The stage runner (published as ``stage`` into the workspace runner store) has one step, ``main``, whose
behaviour comes from the stage's inputs: ``fail`` (a message: fail with ``test.failed``; with
``fail_unless``, an absolute path, only while that path does not exist), ``wait_for``
(an absolute path to wait for, bounded, before finishing) and ``write`` (text written to ``run/out.txt``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace, probe_marker
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.plans import SubmittedPlan, plan_status, submit_stage_plan

from tests.runners import frame_chain, run_bounded

STAGE_RUNNER = r"""#!/usr/bin/env bash
set -euo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"

main() {
  local failing unless waiting text i
  httk_workflow_setting failing fail ''
  httk_workflow_setting unless fail_unless ''
  httk_workflow_setting waiting wait_for ''
  httk_workflow_setting text write 'done'
  if [[ -n $waiting ]]; then
    for ((i = 0; i < 3000; i++)); do
      [[ -e $waiting ]] && break
      sleep 0.02
    done
  fi
  printf '%s\n' "$text" >out.txt
  if [[ -n $failing && ( -z $unless || ! -e $unless ) ]]; then
    httk_workflow_fail test.failed "$failing"
  else
    httk_workflow_succeed
  fi
}

httk_workflow_register_step main
httk_workflow_dispatch
"""


def stage(name: str, *needs: str, **inputs: Any) -> dict[str, Any]:
    """A stage of the stage runner that depends on ``needs``."""
    document: dict[str, Any] = {"id": name, "runner": "stage", "depends_on": list(needs)}
    if inputs:
        document["inputs"] = inputs
    return document


def plan(workflow_id: str, stages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "format": "httk-workflow-stage-plan",
        "format_version": 1,
        "workflow_id": workflow_id,
        "stages": list(stages),
    }


def write_plan(directory: Path, document: Mapping[str, Any], name: str = "plan.json") -> Path:
    path = directory / name
    path.write_text(json.dumps(document, indent=2))
    return path


def submit(ws: Workspace, directory: Path, document: Mapping[str, Any]) -> SubmittedPlan:
    return submit_stage_plan(ws, write_plan(directory, document))


def run_manager(ws: Workspace, workers: int = 2) -> RunSummary:
    """Run one in-process manager until nothing is left for it to do."""
    summary = run_bounded(Manager(ws.root, ManagerConfig(workers=workers, lease_seconds=600.0)))
    assert summary.exit_reason == "idle", summary
    return summary


def statuses(ws: Workspace, submitted: SubmittedPlan) -> dict[str, str]:
    return {row.id: row.status for row in plan_status(ws, submitted.job_key).stages}


def coordinator_frames(ws: Workspace, submitted: SubmittedPlan) -> list[dict[str, Any]]:
    marker = probe_marker(ws, submitted.placement, submitted.job_key)
    assert marker is not None
    return frame_chain(ws, marker)


def stage_frames(ws: Workspace, submitted: SubmittedPlan) -> dict[str, list[dict[str, Any]]]:
    """The frames of each stage's current job, oldest first, from the journal (stages with a job)."""
    found = {}
    for row in plan_status(ws, submitted.job_key).stages:
        if row.job is None:
            continue
        marker = probe_marker(ws, f"{submitted.placement}/{submitted.job_key}.stages", row.job)
        assert marker is not None, row
        found[row.id] = frame_chain(ws, marker)
    return found


def first(frames: Sequence[Mapping[str, Any]], kind: str) -> str:
    """The ``created_at`` of the first frame of ``kind``."""
    return next(str(frame["created_at"]) for frame in frames if frame["kind"] == kind)


def progress_log(submitted: SubmittedPlan) -> list[str]:
    return (submitted.payload / "plan" / "progress.log").read_text().splitlines()
