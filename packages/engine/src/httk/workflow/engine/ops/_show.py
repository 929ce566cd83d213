"""One job, read: job show and job log --output. Read-only.

**Show and output** (``job show``, ``job log --output``): one job read the way a manager reads it.

A job is its authoritative marker, the journal frame that marker names and the immutable job.json.
:func:`show_job` reports all three side by side and keeps going when one of them cannot be read: a
damaged frame becomes ``frame_problem`` (with the reader's problem code), a broken job.json becomes
``job_problem``, and whatever else is readable is still shown. Unlike a manager, inspection does not
refuse a job.json owned by another account: reading it is not running it. Each workflow declaration is
reported by name with the document job.json declares beside the one the job observed
(``.httk-job/declarations/<name>.json``), never merged (``spec/01``); an observed document that cannot be
read is absent, with ``observed_problem`` saying why. :func:`job_output` finds the
attempt-control directories a payload still holds and what they captured. The frame chain (``job log``) is
walked by :mod:`._history`.

It ends with the last events the job's runner reported (``_events``: the generic record any runner
may keep in ``.httk-job/``, ``docs/runner-events.md``).

Cost: ``show`` one probe, one frame, one job.json, at most one heartbeat and manifest, one listing of
the observed declarations and one read per declaration, and the events' two windows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._liveness import manager_gone, read_heartbeat, read_manifest
from httk.workflow.engine.core._states import OWNED_KINDS
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker
from httk.workflow.protocol import (
    InvalidDocumentError,
    InvalidNameError,
    JobKey,
    TransitionError,
    validate_declaration_name,
    validate_placement,
)
from httk.workflow.protocol._digest import job_digest
from httk.workflow.protocol._events import DEFAULT_LIMIT
from httk.workflow.protocol._job_rules import validate_job
from httk.workflow.protocol._jsonio import parse_json_object, read_document_bytes, read_json_object

from ._events import job_events
from ._history import read_entry
from ._inspect import marker_identity

ATTEMPT_PREFIX = ".httk-attempt."
OBSERVED_DECLARATIONS = (".httk-job", "declarations")
MAX_DECLARATION_BYTES = 262144  # job.json's allowance for all its declarations

FRAME_SUMMARY = (
    "step",
    "activation_id",
    "activation_ordinal",
    "attempt_ordinal",
    "total_attempts",
    "attempt_id",
    "attempt_reason",
    "created_at",
    "reason",
    "data_generation",
    "runner_steps",
    "job_digest",
)
BUDGETS = (
    ("maximum_attempts_per_activation", "attempt_ordinal"),
    ("maximum_total_attempts", "total_attempts"),
    ("maximum_activations", "activation_ordinal"),
)
DETAILS = (
    "failure",
    "last_failure",
    "pause",
    "retry",
    "takeover",
    "join",
    "first_unresolved_at",
    "operator",
    "operator_key",
    "operator_reason",
    "request_id",
    "cancellation",
    "confinement",
)


# -- job show -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FrameRead:
    """The frame a marker names: the record, or the problem that kept it from being read."""

    frame: dict[str, Any] | None
    problem: dict[str, str] | None


def read_marker_frame(workspace: Workspace, marker: MarkerLocation) -> FrameRead:
    """The marker's frame (``None`` for a ``g0.init`` submission), checked against the marker's name."""
    if marker.name.ref is None:
        return FrameRead(None, None)
    generation = marker.name.generation
    expected = range(generation, generation + 1)
    entry = read_entry(workspace, marker.name.ref_text, marker.job_id, expected)
    if "problem" in entry:
        return FrameRead(None, entry["problem"])
    frame = entry["frame"]
    if frame.get("kind") != marker.kind.value:
        problem = {"code": "identity_mismatch", "detail": f"the frame says kind {frame.get('kind')!r}"}
        return FrameRead(frame, problem)
    return FrameRead(frame, None)


def show_job(
    workspace: Workspace, marker: MarkerLocation, *, events: int | None = DEFAULT_LIMIT
) -> dict[str, Any]:
    """Everything ``job show`` reports about one job, as one JSON-ready object.

    ``events`` is how many of the runner's last reported events to include (all with ``None``).
    """
    read = read_marker_frame(workspace, marker)
    frame = read.frame or {}
    payload = workspace.payload_path(marker.placement, marker.job_key)
    job, job_problem, digest = read_job(payload)
    report: dict[str, Any] = {
        **marker_identity(marker),
        "record_ref": marker.name.ref_text,
        "marker": marker.path(workspace).relative_to(workspace.root).as_posix(),
        "payload_path": str(payload),
        "payload_exists": payload.is_dir(),
        "frame_problem": read.problem,
        "job_problem": job_problem,
        "state": {member: frame[member] for member in FRAME_SUMMARY if member in frame},
        "job": _job_summary(job, digest),
    }
    report["initial_step"] = None if job is None else job.get("initial_step")
    report["budgets"] = _budgets(job, frame, marker)
    report["workdir_path"] = _workdir(payload, job, frame)
    report["data_path"] = str(payload / "data") if _data_mode(job) == "transactional" else None
    report["declarations"] = declarations(payload, job)
    left_behind = _left_behind(payload)
    if left_behind is not None:
        report["left_behind"] = left_behind
    for member in DETAILS:
        if member in frame:
            report[member] = frame[member]
    if marker.kind in OWNED_KINDS:
        report["owner"] = _owner(workspace, frame)
    if isinstance(frame.get("join"), Mapping):
        report["join_children"] = _join_children(workspace, frame["join"])
    report["events"] = job_events(workspace, marker, events).as_dict()
    return report


def _left_behind(payload: Path) -> dict[str, Any] | None:
    """What the transfer that brought the job here left at its source (``transfer send --exclude``) and
    this payload lacks, from the manifest the import keeps as provenance; ``None`` when nothing is."""
    try:
        manifest = read_json_object(
            payload / ".httk-transfer" / "manifest.json", document="transfer manifest", max_bytes=64 << 20
        )
    except (InvalidDocumentError, OSError):
        return None
    member = manifest.get("left_behind")
    paths = member.get("paths") if isinstance(member, Mapping) else None
    missing = [str(path) for path in paths or () if not os.path.lexists(payload / str(path))]
    if not missing:
        return None
    source = manifest.get("source")
    return {
        "transfer_id": manifest.get("transfer_id"),
        "source_workspace_id": source.get("workspace_id") if isinstance(source, Mapping) else None,
        "paths": missing,
    }


def _join_children(workspace: Workspace, join: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each child a join names, with the kind its marker has now (a bounded probe at its placement hint)."""
    children = join.get("children")
    found: list[dict[str, Any]] = []
    for child in children if isinstance(children, list) else []:
        if not isinstance(child, Mapping):
            continue
        key, placement = child.get("job_key"), child.get("placement_hint")
        kind: str | None = None
        if isinstance(key, str) and isinstance(placement, str):
            try:
                marker = probe_marker(workspace, validate_placement(placement), str(JobKey.parse(key)))
                kind = None if marker is None else marker.kind.value
            except (InvalidNameError, TransitionError):
                kind = None
        found.append({"job_key": key, "placement": placement, "label": child.get("label"), "kind": kind})
    return found


def declarations(payload: Path, job: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Each declaration by name: job.json's (``declared``) beside the job's own (``observed``), unmerged."""
    declared = (job or {}).get("declarations")
    declared = declared if isinstance(declared, Mapping) else {}
    observed: dict[str, Any] = {}
    problems: dict[str, str] = {}
    folder = payload.joinpath(*OBSERVED_DECLARATIONS)
    try:
        entries = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        entries = []
    for entry in entries:
        if entry.startswith(".") or not entry.endswith(".json"):
            continue  # a writer's temporary name, or nothing the protocol names
        name = entry.removesuffix(".json")
        try:
            validate_declaration_name(name)
            observed[name] = read_json_object(
                folder / entry, document="observed declaration", max_bytes=MAX_DECLARATION_BYTES
            )
        except (InvalidNameError, InvalidDocumentError) as exc:
            problems[name] = str(exc)
    return [
        {
            "name": name,
            "declared": declared.get(name),
            "observed": observed.get(name),
            "observed_problem": problems.get(name),
        }
        for name in sorted({*declared, *observed, *problems})
    ]


def read_job(payload: Path) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """job.json, a problem message, and its digest; a document that parses is kept even if invalid."""
    path = payload / "job.json"
    try:
        data = read_document_bytes(path, "job.json")
        document = parse_json_object(data, document="job.json", path=path)
    except InvalidDocumentError as exc:
        return None, str(exc), None
    try:
        validate_job(document, path=path)
    except InvalidDocumentError as exc:
        return document, str(exc), job_digest(data)
    return document, None, job_digest(data)


def _job_summary(job: Mapping[str, Any] | None, digest: str | None) -> dict[str, Any] | None:
    if job is None:
        return None
    summary = {
        member: job[member]
        for member in (
            "name",
            "workflow",
            "initial_step",
            "runner",
            "claim",
            "workdir",
            "data",
            "retry_policy",
            "resources",
            "parent",
        )
        if member in job
    }
    summary["digest"] = digest
    return summary


def _budgets(
    job: Mapping[str, Any] | None, frame: Mapping[str, Any], marker: MarkerLocation
) -> dict[str, dict[str, Any]]:
    policy = (job or {}).get("retry_policy") or {}
    used_default = {"activation_ordinal": 1 if marker.name.generation else 0}
    return {
        limit: {"limit": policy.get(limit), "used": int(frame.get(counter, used_default.get(counter, 0)))}
        for limit, counter in BUDGETS
    }


def _data_mode(job: Mapping[str, Any] | None) -> str | None:
    data = (job or {}).get("data")
    return data.get("mode") if isinstance(data, Mapping) else None


def _workdir(payload: Path, job: Mapping[str, Any] | None, frame: Mapping[str, Any]) -> str | None:
    if isinstance(frame.get("workdir"), str):
        return str(frame["workdir"])
    workdir = (job or {}).get("workdir")
    if not isinstance(workdir, Mapping):
        return None
    if workdir.get("mode") == "isolated":
        attempt = frame.get("attempt_id")
        return str(payload / f"run.{attempt}") if attempt else None
    return str(payload / str(workdir.get("path", "")))


def _owner(workspace: Workspace, frame: Mapping[str, Any]) -> dict[str, Any]:
    manager_id = frame.get("manager_id")
    owner: dict[str, Any] = {
        "manager_id": manager_id,
        "lease_seconds": frame.get("lease_seconds"),
        "lease_started_at": frame.get("lease_started_at"),
        "process": frame.get("process"),
        "heartbeat_age_seconds": None,
        "manager_live": False,
        "manager_process_gone": False,
    }
    if isinstance(manager_id, str) and "/" not in manager_id and manager_id not in ("", ".", ".."):
        heartbeat = read_heartbeat(workspace, manager_id)
        age = heartbeat.age(workspace.clock.now())
        lease = float(frame.get("lease_seconds") or heartbeat.lease_seconds)
        manifest = read_manifest(workspace, manager_id)
        gone = manifest is not None and manager_gone(manifest)  # dead now, whatever its heartbeat (D17)
        owner["heartbeat_age_seconds"] = None if age is None else round(age, 3)
        owner["manager_process_gone"] = gone
        owner["manager_live"] = age is not None and age <= lease and not gone
    return owner


# -- job log --output -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RetainedAttempt:
    """An attempt-control directory still in the payload, with what it captured."""

    attempt_id: str
    directory: Path
    step: str | None
    attempt_ordinal: int | None
    total_attempts: int | None
    stdout: Path | None
    stderr: Path | None


def job_output(workspace: Workspace, marker: MarkerLocation) -> tuple[Path | None, list[RetainedAttempt]]:
    """The payload's ``logs/stdio.log`` (when present) and every retained attempt's captured streams.

    Retained attempts come in attempt order (``total_attempts`` from their context.json, then name).
    """
    payload = workspace.payload_path(marker.placement, marker.job_key)
    stdio = payload / "logs" / "stdio.log"
    log = stdio if stdio.is_file() and not stdio.is_symlink() else None
    attempts: list[RetainedAttempt] = []
    try:
        names = [name for name in os.listdir(payload) if name.startswith(ATTEMPT_PREFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return log, attempts
    for name in names:
        directory = payload / name
        if directory.is_symlink() or not directory.is_dir():
            continue
        context: dict[str, Any] = {}
        with suppress(InvalidDocumentError):
            context = read_json_object(directory / "context.json", document="context.json")
        attempts.append(
            RetainedAttempt(
                attempt_id=name[len(ATTEMPT_PREFIX) :],
                directory=directory,
                step=_text(context.get("step")),
                attempt_ordinal=_number(context.get("attempt_ordinal")),
                total_attempts=_number(context.get("total_attempts")),
                stdout=_regular(directory / "stdout.log"),
                stderr=_regular(directory / "stderr.log"),
            )
        )
    attempts.sort(key=lambda a: (a.total_attempts is None, a.total_attempts or 0, a.attempt_id))
    return log, attempts


def _regular(path: Path) -> Path | None:
    return path if path.is_file() and not path.is_symlink() else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
