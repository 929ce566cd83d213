"""``plan amend``: check an amendment against the plan, queue its document, and wake the coordinator.

Everything that can refuse happens first, in memory, against the plan as it is now: the type, the
stage (unknown, or skipped), each ``--set`` key (a parameter or input the stage has -- for a workflow
stage, one its workflow declares -- or a success criterion), the amended plan checked whole as
``plan submit`` checks one (so a ``stage_insert`` naming an unknown dependency, or making a cycle through
``--before``, is refused naming it), and the stage's new job resolved from its new definition. Only
then is one document written into the plan's ``plan/amendments/``: created exclusively under a
temporary name, then linked to ``<n>.<type>.json``, which fails rather than replaces when another
amendment took ``n`` (:func:`._control.enqueue`). It carries the stage's new job template, so the
coordinator (a runner, which imports no engine) applies it without resolving anything.

Waking the coordinator uses ordinary operator requests: a ``paused`` one is asked to ``override_step``
to ``schedule``; a ``waiting`` one is asked to ``pause``, and once a manager has paused it, the same --
its new activation then applies the amendment first. ``override_step`` rather than ``continue``: spec/01's
``continue`` retries the current activation and spends one of its attempts, so a dozen amendments to a
plan that stays paused would use up ``maximum_attempts_per_activation``; ``override_step`` starts a new
activation, and the coordinator's activations are unbounded (its state, not the join, says what
runs). A coordinator between activations reads the queue when it next starts one. The command waits
at most ``wait`` seconds for these steps and says what is left.
"""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._amend_rules import (
    SET_MEMBER,
    TYPES,
    AmendmentRefusedError,
    changed_stages,
    set_changes,
    skip_refusal,
    skipped,
)
from ._amendments import AMENDMENTS_DIR
from ._control import PlanControlError, enqueue, request_action
from ._coordinator import load_document
from ._document import PlanError, check_plan
from ._progress import now_iso
from ._stages import resolve_stages
from ._status import plan_payload, read_book
from ._submit import PLAN_DIRECTORY, WORKDIR

AMENDMENT_FORMAT = "httk-workflow-plan-amendment"
OPEN_KINDS = frozenset({"submitted", "ready", "claimed", "running", "committing", "waiting", "paused"})
CRITERIA = ("description", "check")
"""The members of a stage's ``success_criteria`` (the schema's closed object)."""
POLL_SECONDS = 0.1


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items as a mapping; a value that parses as JSON is that JSON, else the text itself.

    Examples
    --------
    >>> parse_set(["tolerance=1e-6", "label=fast", "kpoints=[4, 4, 4]"])
    {'tolerance': 1e-06, 'label': 'fast', 'kpoints': [4, 4, 4]}
    """
    values: dict[str, Any] = {}
    for item in items:
        key, equals, text = item.partition("=")
        if not equals or not key:
            raise PlanControlError(f"--set {item!r} is not KEY=VALUE")
        try:
            values[key] = json.loads(text)
        except ValueError:
            values[key] = text
    return values


def amend_plan(
    workspace: Any,
    selector: str,
    kind: str,
    stage: str,
    *,
    values: Mapping[str, Any],
    stage_file: Path | None,
    before: Sequence[str],
    operator: str,
    reason: str,
    wait: float = 10.0,
) -> str:
    """Queue one amendment of the plan ``selector`` names and wake its coordinator; say what happened.

    Raises
    ------
    PlanControlError
        When the amendment is refused (nothing is written); :class:`PlanError` for a refused stage file.
    """
    marker, payload = plan_payload(workspace, selector)
    if marker.kind.value not in OPEN_KINDS:
        raise PlanControlError(f"the plan's coordinator is {marker.kind.value}: a closed plan is not amended")
    document = load_document(payload)
    _check_options(kind, values, stage_file, before)
    request: dict[str, Any] = {
        "format": AMENDMENT_FORMAT,
        "type": kind,
        "stage_id": stage,
        "reason": reason,
        "operator": operator,
        "created_at": now_iso(),
    }
    try:
        amended = _amended_stage(
            document, payload, request, values=values, stage_file=stage_file, before=before
        )
    except AmendmentRefusedError as refusal:
        raise PlanControlError(str(refusal)) from None
    if amended is not None:
        [template] = resolve_stages(workspace, {"stages": [amended]}, _base(stage_file, payload))
        request["template"] = {
            "job": template.document(),
            "files": {path: base64.b64encode(data).decode() for path, data in template.files.items()},
        }
    directory = payload / WORKDIR / AMENDMENTS_DIR
    name = enqueue(directory, kind, request, durable=workspace.durable)
    woke = _wake(
        workspace,
        marker,
        payload,
        int(name.split(".", 1)[0]),
        operator=operator,
        reason=reason,
        wait=wait,
    )
    return f"queued amendment {name}; {woke}"


def _check_options(
    kind: str, values: Mapping[str, Any], stage_file: Path | None, before: Sequence[str]
) -> None:
    if kind not in TYPES:
        raise PlanControlError(f"unknown amendment type {kind!r} (one of {', '.join(TYPES)})")
    if kind in SET_MEMBER and not values:
        raise PlanControlError(f"a {kind} names what it changes with --set KEY=VALUE")
    if kind not in SET_MEMBER and values:
        raise PlanControlError(f"a {kind} takes no --set (only {' and '.join(SET_MEMBER)} do)")
    if (kind == "stage_insert") != (stage_file is not None):
        raise PlanControlError("--stage-file NEW.json is given with a stage_insert, and only with it")
    if before and kind != "stage_insert":
        raise PlanControlError("--before is given only with a stage_insert")


def _amended_stage(
    document: Mapping[str, Any],
    payload: Path,
    request: dict[str, Any],
    *,
    values: Mapping[str, Any],
    stage_file: Path | None,
    before: Sequence[str],
) -> dict[str, Any] | None:
    """Check the amendment against the plan; the stage's new definition when it gets one."""
    kind, stage = request["type"], request["stage_id"]
    stages = {item["id"]: item for item in document["stages"]}
    if kind == "stage_insert":
        assert stage_file is not None
        new = _read_stage(stage_file, stage)
        if stage in stages:
            raise AmendmentRefusedError(f"the plan already has a stage {stage!r}")
        request.update(stage=new, before=list(before))
        changes: dict[str, Any] = {"stage": {"old": None, "new": new}}
        changes["depends_on"] = {
            name: {"old": None, "new": [*stages[name].get("depends_on", []), stage]}
            for name in before
            if name in stages
        }
        _check_whole(document, {"type": kind, "stage_id": stage, "changes": changes}, stage_file, before)
        return new
    if stage not in stages:
        raise AmendmentRefusedError(
            f"the plan has no stage {stage!r} (its stages: {', '.join(sorted(stages))})"
        )
    if stage in skipped(document.get("amendments", [])):
        raise AmendmentRefusedError(f"stage {stage!r} is skipped; a skipped stage is not amended")
    if kind == "stage_skip":
        skip_refusal(document["stages"], stage, document.get("amendments", []))
    if kind == "stage_rerun" and not read_book(payload).completed(stage):
        raise AmendmentRefusedError(
            f"stage {stage!r} has not completed; only a completed stage is rerun (plan retry runs a "
            "failed one again)"
        )
    if kind not in SET_MEMBER:
        return None
    member = SET_MEMBER[kind]
    known = CRITERIA if kind == "criteria_change" else _known_inputs(stages[stage])
    changes = {member: set_changes(stages[stage], member, values, known)}
    request["set"] = dict(values)
    amended = _check_whole(document, {"type": kind, "stage_id": stage, "changes": changes}, None, ())
    return next(item for item in amended if item["id"] == stage)


def _check_whole(
    document: Mapping[str, Any],
    entry: Mapping[str, Any],
    stage_file: Path | None,
    before: Sequence[str],
) -> list[dict[str, Any]]:
    """The plan's stages after ``entry``, checked whole as ``plan submit`` checks a plan."""
    known = {item["id"] for item in document["stages"]}
    for name in before:
        if name not in known:
            raise AmendmentRefusedError(
                f"--before {name!r}: the plan has no stage {name!r} (its stages: {', '.join(sorted(known))})"
            )
    stages = changed_stages(document["stages"], entry)
    candidate = {key: copy.deepcopy(value) for key, value in document.items() if key != "amendments"}
    candidate["stages"] = stages
    try:
        check_plan(candidate, stage_file)
    except PlanError as exc:
        raise AmendmentRefusedError(
            f"the amended plan is refused: {exc.member or 'plan'}: {exc.rule}"
        ) from None
    return stages


def _known_inputs(stage: Mapping[str, Any]) -> list[str]:
    """The keys a parameter_change may set: the stage's inputs and parameters, and its workflow's inputs."""
    keys = [*stage.get("inputs", {}), *stage.get("parameters", {})]
    if "workflow" in stage:
        from httk.workflow.engine import find_workflow

        keys += [declared.name for declared in find_workflow(stage["workflow"]).inputs]
    return keys


def _read_stage(path: Path, stage: str) -> dict[str, Any]:
    try:
        new = json.loads(path.read_bytes())
    except OSError as exc:
        raise PlanError("", f"cannot be read: {exc.strerror or exc}", path) from None
    except ValueError as exc:
        raise PlanError("", f"is not UTF-8 JSON: {exc}", path) from None
    if not isinstance(new, dict):
        raise PlanError("", "is not a stage object", path)
    if new.get("id", stage) != stage:
        raise PlanError("id", f"the stage file's id {new['id']!r} is not --stage {stage!r}", path)
    return {"id": stage, **new}


def _base(stage_file: Path | None, payload: Path) -> Path:
    """Where a stage's file inputs are read: beside the stage file, else where the plan document was."""
    if stage_file is not None:
        return stage_file.parent
    with open(payload / "job.json", "rb") as stream:
        directory = (json.load(stream).get("inputs") or {}).get(PLAN_DIRECTORY)
    if not isinstance(directory, str):
        raise PlanControlError(
            "the plan's coordinator does not say where its plan document was (submitted by an older "
            "httk-workflow): its stages are not rebuilt"
        )
    return Path(directory)


def _wake(
    workspace: Any, marker: Any, payload: Path, number: int, *, operator: str, reason: str, wait: float
) -> str:
    """Wake the coordinator (see the module docstring) within ``wait`` seconds; what happened."""
    from httk.workflow.engine import select_job

    asked_pause = False
    deadline = time.monotonic() + wait
    why = reason or f"apply amendment {number}"
    while True:
        current = select_job(workspace, f"{marker.placement}/{marker.job_key}")
        kind = current.kind.value
        if read_book(payload).amended >= number:
            return "the coordinator applied it"
        if kind == "paused":
            request_action(workspace, current, "override_step", operator, why, step="schedule")
            return "the coordinator was paused and is asked to continue"
        if kind == "waiting" and not asked_pause:
            request_action(workspace, current, "pause", operator, why)
            asked_pause = True
        if kind not in OPEN_KINDS or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    if asked_pause:
        return (
            "the coordinator was waiting and is asked to pause; once paused, another amendment (or `httk "
            "workflow job request JOB override_step --step schedule`) wakes it to apply this "
            f"(it is {kind} now)"
        )
    return f"the coordinator ({kind}) applies it when it next starts an activation"
