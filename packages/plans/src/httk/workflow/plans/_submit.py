"""``plan submit``: a checked plan becomes one coordinator job that owns it.

Everything that can refuse happens first, in memory -- the document (:mod:`._document`), every stage's
workflow or runner and inputs (:mod:`._stages`) -- and only then is one job submitted by the ordinary
submission protocol: the coordinator, whose payload holds the plan and each stage's job template::

    <placement>/<workflow_id>--<uuid>/
    ├── job.json                     the coordinator (runner pkg:httk.workflow.plans/runners/coordinator)
    ├── plan.json                    the plan document as submitted (version 1)
    ├── stages/<stage-id>/stage.json the job.json members of the stage's job, without its identity
    ├── stages/<stage-id>/files/...  the payload files of the stage's job (a workflow's file inputs)
    └── plan/                        the coordinator's workdir: progress.log, workflow-state.json

The coordinator spawns each stage's job at ``<placement>/<coordinator key>.stages``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._document import read_plan
from ._stages import CLAIM, COORDINATOR_RUNNER, installed_runner, resolve_stages

PLAN_WORKFLOW = "stage-plan"
"""job.json ``workflow`` of a coordinator: how ``plan list`` tells a plan from its stages."""
PLAN_FILE = "plan.json"
STAGES_DIR = "stages"
TEMPLATE_FILE = "stage.json"
WORKDIR = "plan"
INITIAL_STEP = "schedule"
PLAN_DIRECTORY = "plan_directory"
"""The coordinator's input naming the directory its plan document was submitted from."""
COORDINATOR_PRIORITY = 600
"""Above the default 500, so a manager with work queued wakes the coordinator before more stage work."""
COORDINATOR_RETRY_POLICY = {
    "maximum_attempts_per_activation": 12,
    "retry_on": ["lease_lost", "timeout", "process_failure"],
}
"""No bound on activations or total attempts: a plan of many waves activates its coordinator many times."""


@dataclass(frozen=True)
class SubmittedPlan:
    """What ``plan submit`` made: the coordinator's job key, placement and payload, and the stage count."""

    workflow_id: str
    job_key: str
    placement: str
    payload: Path
    stages: int
    status: str


def default_placement(workflow_id: str) -> str:
    """``plans/<workflow_id>``: where a plan goes when ``--placement`` says nothing."""
    return f"plans/{workflow_id}"


def submit_stage_plan(workspace: Any, plan_path: Path, placement: str | None = None) -> SubmittedPlan:
    """Check the plan at ``plan_path`` whole, then submit its coordinator into ``workspace``.

    Raises
    ------
    PlanError
        When the document or one of its stages is refused (nothing is written).
    """
    from httk.workflow.engine import JobSpec, submit_jobs

    plan = read_plan(plan_path)
    plan.setdefault("version", 1)
    plan.setdefault("amendments", [])
    templates = resolve_stages(workspace, plan, plan_path.parent, plan_path)
    chosen = placement if placement is not None else default_placement(plan["workflow_id"])
    job = coordinator_job(plan["workflow_id"], plan_path)
    files = {PLAN_FILE: _json(plan)}
    for template in templates:
        where = f"{STAGES_DIR}/{template.stage_id}"
        files[f"{where}/{TEMPLATE_FILE}"] = _json(template.document())
        for relative, data in template.files.items():
            files[f"{where}/{relative}"] = data
    [result] = submit_jobs(workspace, [JobSpec(job, chosen, files)])
    return SubmittedPlan(
        plan["workflow_id"],
        result.job_key,
        chosen,
        workspace.payload_path(chosen, result.job_key),
        len(templates),
        str(result.status),
    )


def coordinator_job(workflow_id: str, plan_path: Path | None = None) -> dict[str, Any]:
    """The coordinator's job.json for the plan ``workflow_id`` submitted from ``plan_path``.

    Its inputs keep the absolute directory of the plan document (:data:`PLAN_DIRECTORY`): an amendment
    that rebuilds a stage reads the stage's file inputs relative to it, as submission did.
    """
    return {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": str(uuid.uuid4()),
        "tag": workflow_id,
        "name": f"plan {workflow_id}",
        "workflow": PLAN_WORKFLOW,
        "runner": installed_runner(COORDINATOR_RUNNER),
        "workdir": {"mode": "persistent", "path": WORKDIR},
        "data": {"mode": "none"},
        "initial_step": INITIAL_STEP,
        "priority": COORDINATOR_PRIORITY,
        "claim": dict(CLAIM),
        "retry_policy": dict(COORDINATOR_RETRY_POLICY),
        "resources": {},
        "inputs": {} if plan_path is None else {PLAN_DIRECTORY: str(plan_path.absolute().parent)},
        "parent": None,
    }


def _json(document: Any) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
