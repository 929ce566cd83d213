"""What ``job why`` answers and what a job's past says, as data: findings, the diagnosis, the history.

**The diagnosis**: findings, the attempt history line, and the diagnosis of one job.

A :class:`Diagnosis` renders two ways and says the same in both: :meth:`Diagnosis.lines` for people and
:meth:`Diagnosis.as_dict` for ``--json`` (one object). Nothing here reads the workspace.

**The past**: the attempt-history line, flapping, and a job's operator requests.

:func:`attempt_history` folds the journal into ``N attempts across M activations at step 'X'; K after
unclean exits``. N and M are the state frame's counters — the numbers the budgets measure — and K is
read from the frame chain (``job log``'s backward walk): every move out of ``running`` straight to
``ready`` or ``failed`` is an attempt that ended without a committed outcome (an exit without one, or a
takeover after its manager vanished). A job under an unlimited retry budget (no per-activation and no
total limit) whose current activation has used :data:`FLAPPING_ATTEMPTS` attempts is *flapping*: it is
retried forever without progressing.

:class:`RequestIndex` reads ``requests/ready/``, ``requests/claimed/*/`` and ``requests/retired/`` once
per invocation and answers per job: the requests still pending, and the most recent retirement with its
recorded reason. A file that is not a readable request is skipped: quarantining it is the managers' job.

Cost: the history reads at most :data:`HISTORY_FRAMES` frames per job; the index reads every pending
and retired request file once per command, however many jobs it diagnoses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._frames import Counters
from httk.workflow.engine.core._liveness import ManagerView
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.publish._runners import Reach
from httk.workflow.engine.requests._documents import MAX_REQUEST_BYTES, REQUEST_SUFFIX
from httk.workflow.protocol import InvalidDocumentError
from httk.workflow.protocol._events import RunnerEvents
from httk.workflow.protocol._jsonio import read_json_object

from ._events import event_lines
from ._history import job_history

OK = "ok"
BLOCKED = "blocked"
WARNING = "warning"
INFO = "info"
INDETERMINATE = "indeterminate"
"""Finding statuses. ``blocked`` is a precondition that keeps the job where it is; ``indeterminate`` is
one that cannot be judged from here (another host's filesystem, a module installed elsewhere)."""

_SHOUTED = {BLOCKED: "BLOCKED", WARNING: "WARNING"}


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of a diagnosis: what it is about, whether it holds the job back, and why."""

    topic: str
    status: str
    text: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"topic": self.topic, "status": self.status, "text": self.text}
        if self.details:
            found["details"] = dict(self.details)
        return found


def runner_finding(reach: Reach) -> Finding:
    """The ``runner`` finding of a job: ``ok``, ``blocked`` (it cannot run) or ``indeterminate``."""
    status = INDETERMINATE if reach.reachable is None else OK if reach.reachable else BLOCKED
    return Finding("runner", status, reach.text, {} if reach.code is None else {"code": reach.code})


@dataclass(frozen=True, slots=True)
class AttemptHistory:
    """The journal folded into one line: attempts, activations, the current step, unclean exits.

    ``complete`` is false when the walk back stopped at a damaged frame or at its length limit, or passed
    generations a repair lost; then ``unclean`` counts only what was read.
    """

    attempts: int
    activations: int
    step: str | None
    unclean: int
    complete: bool
    flapping: bool

    def line(self) -> str:
        text = (
            f"{self.attempts} {_plural(self.attempts, 'attempt')} across {self.activations} "
            f"{_plural(self.activations, 'activation')} at step '{self.step}'; "
            f"{self.unclean}{'' if self.complete else '+'} after unclean exits"
        )
        return text + ("" if self.complete else " (the journal walk back is incomplete)")

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "activations": self.activations,
            "step": self.step,
            "unclean_exits": self.unclean,
            "complete": self.complete,
            "flapping": self.flapping,
            "line": self.line(),
        }


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


@dataclass(frozen=True)
class Diagnosis:
    """Why one job is where it is: the one-line answer, the findings behind it, and what to do next.

    ``blocked`` means nothing present will move the job on its own: an operator (or a manager that is
    not running) must act.
    """

    job_id: str
    job_key: str
    kind: str
    placement: str
    generation: int
    answer: str
    blocked: bool
    findings: tuple[Finding, ...] = ()
    history: AttemptHistory | None = None
    next_steps: tuple[str, ...] = ()
    events: RunnerEvents | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "job_key": self.job_key,
            "kind": self.kind,
            "placement": self.placement,
            "generation": self.generation,
            "answer": self.answer,
            "blocked": self.blocked,
            "findings": [finding.as_dict() for finding in self.findings],
            "history": None if self.history is None else self.history.as_dict(),
            "events": None if self.events is None else self.events.as_dict(),
            "next_steps": list(self.next_steps),
        }

    def lines(self) -> list[str]:
        lines = [
            f"{self.job_key}: {self.kind} at {self.placement} (generation {self.generation})",
            f"answer: {self.answer}",
        ]
        width = max((len(finding.topic) for finding in self.findings), default=0)
        for finding in self.findings:
            status = _SHOUTED.get(finding.status, finding.status)
            lines.append(f"  {status:<13} {finding.topic:<{width}}  {finding.text}")
        if self.history is not None:
            lines.append(f"history: {self.history.line()}")
            if self.history.flapping:
                lines.append("history: FLAPPING under an unlimited retry budget, not progressing")
        if self.events is not None:
            more = f"older: httk job show --events N {self.job_key}"
            heading, *shown = event_lines(self.events.as_dict(), more=more)
            lines += [f"events: {heading}", *shown]
        lines.extend(f"next: {step}" for step in self.next_steps)
        return lines


@dataclass(frozen=True)
class Case:
    """Everything one diagnosis reads, read once: the marker, its frame, job.json and the managers.

    ``frame`` is empty for a ``g0.init`` submission or an unreadable frame (``frame_problem`` says
    which); ``job`` is ``None`` when job.json cannot be read or is invalid (``job_problem`` says why).
    """

    workspace: Workspace
    marker: MarkerLocation
    frame: Mapping[str, Any]
    frame_problem: Mapping[str, str] | None
    job: Mapping[str, Any] | None
    job_problem: str | None
    managers: Sequence[ManagerView]
    now: datetime

    @property
    def payload(self) -> Path:
        return self.workspace.payload_path(self.marker.placement, self.marker.job_key)

    @property
    def live(self) -> list[ManagerView]:
        return [view for view in self.managers if view.live]


@dataclass
class Answer:
    """What one state's diagnosis found, before the history and the requests are added."""

    text: str
    blocked: bool
    findings: list[Finding] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)


FLAPPING_ATTEMPTS = 10
"""Attempts of one activation under an unlimited budget past which a job is called flapping."""
HISTORY_FRAMES = 10_000
"""At most this many frames are read back to count unclean exits."""
RETIREMENT_SUFFIX = ".retirement"


def attempt_history(
    workspace: Workspace, marker: MarkerLocation, frame: Mapping[str, Any], job: Mapping[str, Any] | None
) -> AttemptHistory:
    counters = Counters.of(frame)
    entries = job_history(workspace, marker, limit=HISTORY_FRAMES)
    unclean = sum(
        1 for entry in entries if entry.get("from") == "running" and entry.get("kind") in ("ready", "failed")
    )
    # Generations a repair jumped over may have held unclean exits nobody can count any more.
    complete = not any("problem" in entry or "lost_generations" in entry for entry in entries) and (
        not entries or entries[0].get("generation") == 1
    )
    return AttemptHistory(
        attempts=counters.total_attempts,
        activations=counters.activation_ordinal,
        step=frame.get("step"),
        unclean=unclean,
        complete=complete,
        flapping=is_flapping(job, counters),
    )


def is_flapping(job: Mapping[str, Any] | None, counters: Counters) -> bool:
    policy = (job or {}).get("retry_policy") or {}
    unlimited = all(
        policy.get(limit) is None for limit in ("maximum_attempts_per_activation", "maximum_total_attempts")
    )
    return job is not None and unlimited and counters.attempt_ordinal >= FLAPPING_ATTEMPTS


# -- operator requests -----------------------------------------------------------------------------
@dataclass
class RequestIndex:
    """Pending requests and the latest retirement, by job id."""

    pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    retired: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, workspace: Workspace) -> RequestIndex:
        index = cls()
        requests = workspace.requests_dir
        for _name, document in _documents(requests / "ready"):
            index._add_pending(document, "waiting in requests/ready for a manager")
        for manager in _names(requests / "claimed"):
            for _name, document in _documents(requests / "claimed" / manager):
                index._add_pending(document, f"claimed by manager {manager}, not yet applied")
        for name, document in _documents(requests / "retired"):
            index._add_retired(requests / "retired" / (name + RETIREMENT_SUFFIX), document)
        return index

    def _add_pending(self, document: Mapping[str, Any], where: str) -> None:
        job_id = document.get("job_id")
        if isinstance(job_id, str):
            self.pending.setdefault(job_id, []).append({**_summary(document), "where": where})

    def _add_retired(self, record_path: Path, document: Mapping[str, Any]) -> None:
        job_id = document.get("job_id")
        if not isinstance(job_id, str):
            return
        try:
            record = read_json_object(record_path, document="retirement", max_bytes=MAX_REQUEST_BYTES)
        except InvalidDocumentError:
            record = {}
        entry = {**_summary(document), "reason": record.get("reason"), "retired_at": record.get("retired_at")}
        latest = self.retired.get(job_id)
        if latest is None or str(entry["retired_at"] or "") > str(latest["retired_at"] or ""):
            self.retired[job_id] = entry

    def findings(self, job_id: str) -> list[Finding]:
        """One ``request`` line per pending request, and the latest ``retired request``."""
        found = [
            Finding("request", INFO, f"{_named(entry)} is pending: {entry['where']}", entry)
            for entry in sorted(self.pending.get(job_id, ()), key=lambda e: str(e.get("created_at")))
        ]
        retired = self.retired.get(job_id)
        if retired is not None:
            reason = retired.get("reason") or "no reason recorded"
            text = f"the latest retired request, {_named(retired)}, can never apply: {reason}"
            found.append(Finding("retired request", WARNING, text, retired))
        return found


def _summary(document: Mapping[str, Any]) -> dict[str, Any]:
    members = ("request_id", "action", "operator", "created_at", "expected_generation")
    summary = {member: document.get(member) for member in members}
    summary["operator_reason"] = document.get("reason")
    return summary


def _named(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('action')} request {entry.get('request_id')} by {entry.get('operator')}"


def _names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _documents(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(file name, document)`` of every readable ``*.json`` request in ``directory``."""
    found: list[tuple[str, dict[str, Any]]] = []
    for name in _names(directory):
        if not name.endswith(REQUEST_SUFFIX):
            continue
        try:
            found.append(
                (name, read_json_object(directory / name, document="request", max_bytes=MAX_REQUEST_BYTES))
            )
        except InvalidDocumentError:
            continue
    return found
