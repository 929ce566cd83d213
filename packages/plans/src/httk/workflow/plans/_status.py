"""``plan status`` and ``plan list``: a plan's stages in spec/04's nine states, read, never written.

A plan is found by any selector of its coordinator job (``job show``'s: key, UUID, unique prefix,
payload path). Its stages come from the payload's ``plan.json``; which job each stage has had comes from
the coordinator's book (its job state); each current stage job's state is read where it is *now* -- its
marker, probed at the placement the book names, and its frame chain for the times -- so the view is
fresher than the coordinator's last activation: a stage whose job started since shows ``running`` at
once. Reading opens nothing for writing.

Cost: per stage with a job, one bounded probe of its placement and one walk of its frame chain.
``plan list`` reads the job.json of every job in the placement it is given (all of the workspace by
default), which is the one place the cost grows with the number of jobs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.protocol import InvalidNameError, WorkflowError

from ._amend_rules import replay, unamended
from ._book import Book
from ._coordinator import PLAN_FILE, Plan, load_document
from ._progress import iso_of
from ._stages import COORDINATOR_RUNNER
from ._statuses import status_of
from ._submit import PLAN_WORKFLOW

STATE_FILE = Path(".httk-job") / "state.json"


class NotAPlanError(InvalidNameError):
    """The job a selector names is not a plan's coordinator."""

    def __init__(self, selector: str, rule: str) -> None:
        super().__init__("plan", selector, rule)


@dataclass(frozen=True)
class StageRow:
    """One stage as ``plan status`` shows it."""

    id: str
    name: str
    status: str
    depends_on: list[str]
    job: str | None
    kind: str | None
    started_at: str | None
    completed_at: str | None
    retries: int
    last_error: str | None

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PlanStatus:
    """A plan's coordinator and its stages."""

    workflow_id: str
    version: int
    coordinator: str
    coordinator_kind: str
    message: str | None
    stages: list[StageRow]
    unamended: list[str]
    """Stages whose definition differs from what the plan as submitted and its amendments make of it."""

    def as_json(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "version": self.version,
            "coordinator": self.coordinator,
            "coordinator_kind": self.coordinator_kind,
            "message": self.message,
            "unamended": self.unamended,
            "counts": self.counts(),
            "stages": [row.as_json() for row in self.stages],
        }

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.stages:
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts


def plan_payload(workspace: Any, selector: str) -> tuple[Any, Path]:
    """The coordinator's marker and payload for ``selector``; :class:`NotAPlanError` if it is no plan."""
    from httk.workflow.engine import select_job

    marker = select_job(workspace, selector)
    payload = workspace.payload_path(marker.placement, marker.job_key)
    if not is_coordinator(payload):
        raise NotAPlanError(
            selector, f"job {marker.job_key} at {marker.placement} is not a plan's coordinator"
        )
    return marker, payload


def is_coordinator(payload: Path) -> bool:
    """Whether the payload's job.json runs the plans coordinator."""
    try:
        job = json.loads((payload / "job.json").read_bytes())
    except (OSError, ValueError):
        return False
    runner = job.get("runner") if isinstance(job, dict) else None
    return (
        job.get("workflow") == PLAN_WORKFLOW
        and isinstance(runner, dict)
        and runner.get("path") == COORDINATOR_RUNNER
    )


def read_book(payload: Path) -> Book:
    try:
        document = json.loads((payload / STATE_FILE).read_bytes())
    except (OSError, ValueError):
        document = {}
    return Book(document if isinstance(document, dict) else {})


def plan_status(workspace: Any, selector: str) -> PlanStatus:
    """Every stage of the plan ``selector`` names, in its current state."""
    marker, payload = plan_payload(workspace, selector)
    plan = Plan(load_document(payload))
    submitted = json.loads((payload / PLAN_FILE).read_bytes())
    drift = unamended(plan.document["stages"], replay(submitted["stages"], plan.amendments))
    book = read_book(payload)
    frame = workspace.reader.read(marker.name.ref_text) if marker.name.ref is not None else {}
    rows = [_row(workspace, plan, book, stage) for stage in plan.stages]
    pause = frame.get("pause") if isinstance(frame.get("pause"), Mapping) else None
    failure = frame.get("failure") if isinstance(frame.get("failure"), Mapping) else None
    message = (pause or failure or {}).get("reason" if pause else "message")
    return PlanStatus(
        plan.workflow_id,
        int(plan.document.get("version", 1)),
        f"{marker.placement}/{marker.job_key}",
        marker.kind.value,
        message,
        rows,
        drift,
    )


def _row(workspace: Any, plan: Plan, book: Book, stage: str) -> StageRow:
    entry = book.stages.get(stage, {})
    job = book.current(stage)
    retries = int(entry.get("retries", 0))
    history = None if job is None else _history(workspace, job)
    if stage in plan.skipped or job is None or history is None:
        # skipped, no job, or one the coordinator's running attempt spawned
        if stage in plan.skipped or book.invalidated(stage):
            status = "skipped" if stage in plan.skipped else "invalidated"
        elif book.unavailable(stage):
            status = "failed"
        else:
            done = job is not None or all(
                need in plan.skipped or _completed(workspace, book, need) for need in plan.needs(stage)
            )
            status = "ready" if done else "pending"
        return StageRow(
            stage, plan.name(stage), status, plan.needs(stage),
            None, None, None, None, retries, book.unavailable(stage) or _previous_error(entry),
        )  # fmt: skip
    entries, frame = history
    kind = str(frame.get("kind"))
    checked = plan.checked(stage)
    started = completed = None
    for item in entries:
        status = status_of(str(item.get("kind")), item.get("step"), checked=checked)
        if started is None and status in ("running", "post_processing"):
            started = iso_of(item.get("created_at"))
        if status == "completed":
            completed = iso_of(item.get("created_at"))
    failure = frame.get("failure") or frame.get("last_failure")
    error = failure.get("message") if isinstance(failure, Mapping) else None
    now = status_of(kind, frame.get("step"), checked=checked)
    if now == "completed":
        error = None  # an earlier job's failure is history (its own row in job log), not this stage's error
    return StageRow(
        stage,
        plan.name(stage),
        now,
        plan.needs(stage),
        job["job_key"],
        kind,
        started,
        completed,
        retries,
        error if now == "completed" else error or _previous_error(entry),
    )


def _previous_error(entry: Mapping[str, Any]) -> str | None:
    for job in reversed(entry.get("history") or []):
        failure = job.get("failure") or {}
        if isinstance(failure.get("message"), str):
            return str(failure["message"])
    return None


def _completed(workspace: Any, book: Book, stage: str) -> bool:
    marker = _marker(workspace, book.current(stage))
    return marker is not None and marker.kind.value == "succeeded"


def _marker(workspace: Any, job: Mapping[str, Any] | None) -> Any:
    """The job's marker where it is now, or ``None`` when it has none (or no job is given)."""
    from httk.workflow.engine import select_job

    if job is None:
        return None
    try:
        return select_job(workspace, f"{job['placement']}/{job['job_key']}")
    except WorkflowError:
        return None


def _history(workspace: Any, job: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The job's history entries (oldest first) and its current frame; ``None`` when it has no marker."""
    from httk.workflow.engine import job_history

    marker = _marker(workspace, job)
    if marker is None:
        return None
    frame = workspace.reader.read(marker.name.ref_text) if marker.name.ref is not None else {}
    return job_history(workspace, marker), frame


def list_plans(workspace: Any, placement: str | None = None) -> list[dict[str, Any]]:
    """Every plan coordinator below ``placement`` (the whole workspace by default), with its kind."""
    from httk.workflow.engine import list_jobs

    found = []
    for marker in list_jobs(workspace, placement=placement).jobs:
        if marker.placement.endswith(".stages") or ".children" in marker.placement:
            continue
        payload = workspace.payload_path(marker.placement, marker.job_key)
        if is_coordinator(payload):
            try:
                plan = load_document(payload)
            except (OSError, ValueError):
                continue
            found.append(
                {
                    "workflow_id": plan.get("workflow_id"),
                    "version": plan.get("version", 1),
                    "stages": len(plan.get("stages", [])),
                    "coordinator": f"{marker.placement}/{marker.job_key}",
                    "kind": marker.kind.value,
                }
            )
    return found
