"""What ``job why`` answers, as data: findings, the attempt history line, and the diagnosis of one job.

A :class:`Diagnosis` renders two ways and says the same in both: :meth:`Diagnosis.lines` for people and
:meth:`Diagnosis.as_dict` for ``--json`` (one object). Nothing here reads the workspace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from httk.workflow.engine.core._liveness import ManagerView
    from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
    from httk.workflow.engine.publish._runners import Reach

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
