"""Each stage of a plan as the job the coordinator will spawn for it: resolved, checked, in memory.

A stage names a packaged workflow (found under the entry point group ``httk.workflow.workflows``, its
inputs resolved and checked by the workflow's own rules, file inputs read relative to the plan document)
or a runner (a name in the workspace runner store, or an installed ``pkg:<module>/<resource>``), pinned
by its digest. Its ``parameters`` are merged into its inputs (a parameter wins). An input taken from a
dependency's output (:mod:`._outputs`) becomes the payload path ``files/...`` the coordinator puts that
file at when it starts the stage, recorded in the template's ``stage_outputs``. Everything that can
refuse a stage does so here, before anything is written, naming the stage and what is wrong.

The result is a :class:`StageTemplate`: the job.json members of the stage's job without the identity
the coordinator gives it when it spawns it (id, tag, parent), and the payload files beside it. A stage
with a ``success_criteria.check`` command becomes a *checked* stage: its job runs the plans package's
stage runner, which spawns the work as its one child and runs the check as its last step
(:mod:`._stage_runner`), so the work's template and files travel inside the stage job's inputs and
payload (``work/``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.protocol import WorkflowError

from ._document import PlanError
from ._outputs import MEMBER, is_reference, references

STAGE_RUNNER = "pkg:httk.workflow.plans/runners/stage"
COORDINATOR_RUNNER = "pkg:httk.workflow.plans/runners/coordinator"
WORK_FILES = "work"
"""Where a checked stage's payload keeps the files of the work it spawns."""
DEFAULT_STEP = "main"
CLAIM = {"pool": "default", "required_capabilities": []}


@dataclass(frozen=True)
class StageTemplate:
    """The job a stage runs, without its identity: job.json members and payload files (path to bytes)."""

    stage_id: str
    job: Mapping[str, Any]
    files: Mapping[str, bytes] = field(default_factory=dict)
    extensions: tuple[str, ...] = ()
    outputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Files taken from dependencies as the stage starts: payload path to reference (:mod:`._outputs`)."""

    def document(self) -> dict[str, Any]:
        """What ``stage.json`` holds: the job.json members, and the references when there are any."""
        return {**self.job, MEMBER: dict(self.outputs)} if self.outputs else dict(self.job)


def installed_runner(path: str) -> dict[str, Any]:
    """The job.json ``runner`` of an installed ``pkg:`` runner, pinned by the digest of its file here."""
    from httk.workflow.sdk.packaged import runner_digest

    return {
        "backend": "path",
        "path": path,
        "source": "installed",
        "sha256": runner_digest(path),
        "arguments": [],
    }


def resolve_stages(
    workspace: Any, plan: Mapping[str, Any], base: Path, path: Path | None = None
) -> list[StageTemplate]:
    """Every stage of ``plan`` as a :class:`StageTemplate`; :class:`PlanError` for the first refused."""
    templates = []
    for number, stage in enumerate(plan["stages"]):
        where = f"stages[{number}]"
        template = _workflow_stage(stage, base, where, path) if "workflow" in stage else None
        if template is None:
            template = _runner_stage(workspace, stage, where, path)
        missing = [name for name in template.extensions if name not in workspace.extensions]
        if missing:
            raise PlanError(
                f"{where}.workflow",
                f"stage {stage['id']!r}: workflow {stage['workflow']!r} needs the workspace extension "
                f"{', '.join(missing)} (httk workflow extension enable)",
                path,
            )
        check = (stage.get("success_criteria") or {}).get("check")
        templates.append(template if check is None else _checked(template, list(check)))
    return templates


def _inputs(stage: Mapping[str, Any]) -> dict[str, Any]:
    return {**stage.get("inputs", {}), **stage.get("parameters", {})}


def _workflow_stage(stage: Mapping[str, Any], base: Path, where: str, path: Path | None) -> StageTemplate:
    from httk.workflow.engine import find_workflow
    from httk.workflow.sdk import SdkError
    from httk.workflow.sdk.packaged import job_document, resolve_inputs

    name = stage["workflow"]
    try:
        workflow = find_workflow(name)
    except WorkflowError as exc:
        raise PlanError(f"{where}.workflow", f"stage {stage['id']!r}: {exc}", path) from None
    taken = references(stage)
    given = {key: value for key, value in _inputs(stage).items() if key not in taken}
    try:
        resolved = resolve_inputs(_taking(workflow, taken), given, base=base)
    except SdkError as exc:
        raise PlanError(f"{where}.inputs", f"stage {stage['id']!r}: {exc}", path) from None
    job = job_document(
        workflow,
        {**resolved, **dict.fromkeys(taken, b"")},
        name=stage.get("name") or f"{name} of stage {stage['id']}",
    )
    destinations = {
        declared.name: f"files/{declared.destination or declared.name}"
        for declared in workflow.inputs
        if declared.kind == "file"
    }
    files = {destinations[key]: resolved[key] for key in destinations if key in resolved}
    outputs = {destinations[key]: dict(reference) for key, reference in taken.items()}
    job["resources"] = {**job["resources"], **stage.get("resources", {})}
    return StageTemplate(stage["id"], _without_identity(job), files, tuple(workflow.extensions), outputs)


def _taking(workflow: Any, taken: Mapping[str, Any]) -> Any:
    """``workflow`` as it checks a stage whose inputs ``taken`` come from dependencies when it starts.

    Each must be a file input; it is not required now (it is given, later), and the workflow's content
    check, which needs every file, does not run: the stage's runner reads the file as any input.
    """
    import dataclasses

    from httk.workflow.sdk.packaged import WorkflowInputError

    if not taken:
        return workflow
    for key in taken:
        if workflow.input(key).kind != "file":
            raise WorkflowInputError(
                key,
                f"is not a file input of workflow {workflow.name!r}; only a file is taken from a stage's "
                "output",
            )
    inputs = tuple(
        dataclasses.replace(declared, required=False) if declared.name in taken else declared
        for declared in workflow.inputs
    )
    return dataclasses.replace(workflow, inputs=inputs, check=None)


def _runner_stage(workspace: Any, stage: Mapping[str, Any], where: str, path: Path | None) -> StageTemplate:
    from httk.workflow.engine import stored_digest
    from httk.workflow.sdk import SdkError

    name = stage["runner"]
    if name.startswith("pkg:"):
        try:
            runner = installed_runner(name)
        except SdkError as exc:
            raise PlanError(f"{where}.runner", f"stage {stage['id']!r}: {exc}", path) from None
    else:
        digest = stored_digest(workspace, name) if "/" not in name and not name.startswith(".") else None
        if digest is None:
            raise PlanError(
                f"{where}.runner",
                f"stage {stage['id']!r}: the workspace runner store has no runner {name!r} "
                "(httk workflow runner publish)",
                path,
            )
        runner = {"backend": "path", "path": name, "source": "workspace", "sha256": digest, "arguments": []}
    taken = references(stage)
    inputs = {key: f"files/{key}" if is_reference(value) else value for key, value in _inputs(stage).items()}
    job = {
        "name": stage.get("name") or f"stage {stage['id']}",
        "runner": runner,
        "workdir": {"mode": "persistent", "path": "run"},
        "data": {"mode": "none"},
        "initial_step": stage.get("step", DEFAULT_STEP),
        "priority": 500,
        "claim": dict(CLAIM),
        "retry_policy": _default_retry_policy(),
        "resources": dict(stage.get("resources", {})),
        "inputs": inputs,
    }
    return StageTemplate(
        stage["id"], job, outputs={f"files/{key}": dict(value) for key, value in taken.items()}
    )


def _checked(work: StageTemplate, check: list[str]) -> StageTemplate:
    """A checked stage: the stage runner spawns ``work`` and runs ``check`` as the stage job's last step."""
    job = {
        "name": f"{work.job.get('name', work.stage_id)} (checked)",
        "runner": installed_runner(STAGE_RUNNER),
        "workdir": {"mode": "persistent", "path": "run"},
        "data": {"mode": "none"},
        "initial_step": "work",
        "priority": work.job.get("priority", 500),
        "claim": dict(CLAIM),
        "retry_policy": _default_retry_policy(),
        "inputs": {
            "check": check,
            "work": dict(work.job),
            "work_files": sorted({*work.files, *work.outputs}),
        },
    }
    files = {f"{WORK_FILES}/{relative}": data for relative, data in work.files.items()}
    outputs = {f"{WORK_FILES}/{relative}": reference for relative, reference in work.outputs.items()}
    return StageTemplate(work.stage_id, job, files, work.extensions, outputs)


def _without_identity(job: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in job.items()
        if key not in ("format", "format_version", "id", "tag", "parent")
    }


def _default_retry_policy() -> dict[str, Any]:
    from httk.workflow.sdk.packaged import DEFAULT_RETRY_POLICY

    return dict(DEFAULT_RETRY_POLICY)
