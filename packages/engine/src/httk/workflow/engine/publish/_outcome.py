"""Published outcomes: reading one, validating it against the current attempt, and deciding its effect.

An outcome is the directory ``.httk-attempt.<attempt-id>/outcome.ready/`` a step renamed into place; its
``outcome.json`` is authoritative over the process exit status. Validation is the first step of the
specification's processing order: the job, activation and attempt must be the current ones, the action
must be one of the six with its required members, a failure must be exactly the one failure shape. An
outcome that fails validation is *unusable*: the attempt is still fenced through committing and the job
fails with ``protocol_error`` naming the defect, so a broken runner can never make its failure invisible.
A ``wait``'s join and any child bundles are validated beside it (:mod:`._joins`, :mod:`._children`),
because that needs the workspace; the committing frame then holds the normalized join (labels attached)
in its outcome and the validated spawn set as ``spawned``.

:func:`decide` is pure: given the job, the committing frame and the outcome it returns the destination
kind and the members of the destination frame, budgets included. Replay after a crash calls it again
with the same inputs and gets the same answer.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._frames import (
    ACTIVATION_ONLY,
    Counters,
    attempt_evidence,
    carried,
    next_data_generation,
)
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.manager._budgets import check_advance, check_retry, is_retried
from httk.workflow.protocol import InvalidDocumentError, InvalidNameError, validate_priority, validate_step
from httk.workflow.protocol._job_rules import _check_resources, validate_failure
from httk.workflow.protocol._jsonio import read_json_object

OUTCOME_DIR = "outcome.ready"
OUTCOME_FILE = "outcome.json"
ACTIONS = frozenset({"advance", "wait", "succeed", "fail", "retry", "pause"})
MAX_OUTCOME_BYTES = 8 << 20
"""A wait may name up to 10,000 children (about 250 bytes each)."""
TRANSACTION_DIR = "transaction"
"""An outcome's transaction is the directory ``outcome.ready/transaction/``, never an outcome.json member."""


class UnusableOutcomeError(Exception):
    """The published outcome cannot be applied; the message names the defect."""


def read_outcome(control_dir: Path) -> dict[str, Any] | None:
    """The published outcome of an attempt, ``None`` when nothing was published.

    Raises :class:`UnusableOutcomeError` when ``outcome.ready/`` exists but its outcome.json cannot be read.
    """
    ready = control_dir / OUTCOME_DIR
    try:
        if not stat.S_ISDIR(os.lstat(ready).st_mode):
            return None  # a file or a link where the directory belongs is no publication
    except OSError:
        return None
    try:
        return read_json_object(ready / OUTCOME_FILE, document="outcome.json", max_bytes=MAX_OUTCOME_BYTES)
    except InvalidDocumentError as exc:
        raise UnusableOutcomeError(str(exc)) from None


def _require_text(outcome: Mapping[str, Any], member: str, parent: str | None = None) -> str:
    holder: Any = outcome if parent is None else outcome.get(parent)
    value = holder.get(member) if isinstance(holder, Mapping) else None
    if not isinstance(value, str) or not value:
        where = member if parent is None else f"{parent}.{member}"
        raise UnusableOutcomeError(f"outcome member {where!r} must be a nonempty string")
    return value


def validate_outcome(
    outcome: Mapping[str, Any], *, job_id: str, activation_id: str, attempt_id: str
) -> tuple[dict[str, Any], list[str]]:
    """Check an outcome against the current attempt; return it (runner_steps dropped if malformed) and notes.

    Raises :class:`UnusableOutcomeError` naming the first defect.
    """
    notes: list[str] = []
    if outcome.get("format") != "httk-workflow-outcome" or outcome.get("format_version") != 1:
        raise UnusableOutcomeError(
            "outcome.json must have format 'httk-workflow-outcome' and format_version 1"
        )
    for member, expected in (
        ("job_id", job_id),
        ("activation_id", activation_id),
        ("attempt_id", attempt_id),
    ):
        if outcome.get(member) != expected:
            raise UnusableOutcomeError(
                f"outcome {member} {outcome.get(member)!r} is not the current attempt's {expected!r}"
            )
    action = outcome.get("action")
    if action not in ACTIONS:
        raise UnusableOutcomeError(f"outcome action {action!r} is not one of {', '.join(sorted(ACTIONS))}")
    if "expected_data_generation" in outcome:
        generation = outcome["expected_data_generation"]
        if isinstance(generation, bool) or not isinstance(generation, int):
            raise UnusableOutcomeError("outcome member 'expected_data_generation' must be an integer")
    if action in ("advance", "wait"):
        try:
            validate_step(_require_text(outcome, "next_step"))
        except InvalidNameError as exc:
            raise UnusableOutcomeError(f"outcome next_step: {exc}") from None
    if action == "wait" and not isinstance(outcome.get("join"), dict):
        raise UnusableOutcomeError("a wait outcome needs a join object (its children and condition)")
    if action == "fail":
        try:
            validate_failure(outcome.get("failure"))
        except InvalidDocumentError as exc:
            raise UnusableOutcomeError(f"the published failure is malformed: {exc}") from None
    if action == "retry":
        _require_text(outcome, "reason", "retry")
    if action == "pause":
        _require_text(outcome, "reason", "pause")
    if "priority" in outcome:
        try:
            validate_priority(outcome["priority"])
        except InvalidNameError as exc:
            raise UnusableOutcomeError(f"outcome priority: {exc}") from None
    if "message" in outcome and not isinstance(outcome["message"], str):
        raise UnusableOutcomeError("outcome member 'message' must be a string")
    if "resources" in outcome:
        try:
            _check_resources(outcome["resources"], None)  # job.json's rule: labels, non-negative integers
        except InvalidDocumentError as exc:
            raise UnusableOutcomeError(f"outcome member {exc.member!r}: {exc.rule}") from None
    cleaned = dict(outcome)
    if "runner_steps" in cleaned and not _valid_steps(cleaned["runner_steps"]):
        notes.append("ignored a malformed runner_steps (it must be an array of step names)")
        del cleaned["runner_steps"]
    return cleaned, notes


def _valid_steps(value: object) -> bool:
    if not isinstance(value, list):
        return False
    try:
        for step in value:
            validate_step(step)
    except InvalidNameError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Decision:
    """Where a committed outcome (or an attempt's end) takes the job."""

    kind: Kind
    members: dict[str, Any] = field(default_factory=dict)
    priority: int | None = None


def failed(frame: Mapping[str, Any], failure: Mapping[str, Any], reason: str) -> Decision:
    return Decision(
        Kind.FAILED,
        {
            **carried(frame),
            **Counters.of(frame).as_members(),
            **attempt_evidence(frame),
            "failure": dict(failure),
            "reason": reason,
        },
    )


def retry_or_fail(
    job: Mapping[str, Any],
    frame: Mapping[str, Any],
    failure: Mapping[str, Any],
    *,
    declared: bool,
    unclean: bool,
    attempt_reason: str,
    extra: Mapping[str, Any] | None = None,
) -> Decision:
    """Retry the current activation when policy and budgets allow; otherwise fail with the right code."""
    counters = Counters.of(frame)
    extra = dict(extra or {})
    if not is_retried(job, failure, declared=declared):
        return failed(frame, failure, "failure")
    verdict = check_retry(job, counters)
    if verdict.code is not None:
        exhausted = {
            "code": verdict.code,
            "message": verdict.message,
            "details": {"last_failure": dict(failure)},
        }
        return Decision(Kind.FAILED, {**failed(frame, exhausted, "failure").members, **extra})
    return Decision(
        Kind.READY,
        {
            **carried(frame),
            **counters.as_members(),
            "attempt_reason": attempt_reason,
            "previous_attempt_id": frame.get("attempt_id"),
            "unclean_restart": unclean,
            "last_failure": dict(failure),
            "reason": "retry",
            **extra,
        },
    )


def decide(
    job: Mapping[str, Any],
    frame: Mapping[str, Any],
    outcome: Mapping[str, Any],
    *,
    data_changed: bool = False,
) -> Decision:
    """The destination of a committed, valid outcome; ``frame`` is the committing frame.

    ``data_changed`` says whether the outcome's replayed transaction changed ``data/``; a transactional
    job's destination frame then carries the next data generation (:func:`next_data_generation`).
    """
    decision = _decide(job, frame, outcome)
    if frame.get("data_generation") is None:
        return decision
    generation = next_data_generation(frame["data_generation"], data_changed)
    return Decision(decision.kind, {**decision.members, "data_generation": generation}, decision.priority)


def _decide(job: Mapping[str, Any], frame: Mapping[str, Any], outcome: Mapping[str, Any]) -> Decision:
    action = outcome["action"]
    priority = outcome.get("priority")
    counters = Counters.of(frame)
    base = {**carried(frame), **counters.as_members()}
    if "runner_steps" in outcome:
        base["runner_steps"] = outcome["runner_steps"]
    if action == "succeed":
        return Decision(Kind.SUCCEEDED, {**base, **attempt_evidence(frame), "reason": "succeed"}, priority)
    if action == "pause":
        return Decision(Kind.PAUSED, {**base, "pause": dict(outcome["pause"]), "reason": "pause"}, priority)
    if action in ("advance", "wait"):
        # Both start a new activation (the wait's once its join decides), so both are budgeted here.
        verdict = check_advance(job, counters)
        if verdict.code is not None:
            failure = {"code": verdict.code, "message": verdict.message}
            members = {**base, **attempt_evidence(frame), "failure": failure, "reason": "failure"}
            return Decision(Kind.FAILED, members, priority)
        if "resources" in outcome:  # the next activation's requirement, carried across its retries
            base["resources"] = dict(outcome["resources"])
    if action == "wait":
        waiting = {
            **base,
            "join": dict(outcome["join"]),
            "next_step": outcome["next_step"],
            "first_unresolved_at": None,
            "reason": "wait",
        }
        return Decision(Kind.WAITING, waiting, priority)
    if action == "advance":
        return Decision(
            Kind.READY,
            {
                **{key: value for key, value in base.items() if key not in ACTIVATION_ONLY},
                **counters.advanced().as_members(),
                "step": outcome["next_step"],
                "activation_id": str(uuid.uuid4()),
                "activation_reason": "advance",
                "attempt_reason": "advance",
                "previous_attempt_id": None,
                "unclean_restart": False,
                "reason": "advance",
            },
            priority,
        )
    if action == "retry":
        failure = {"code": "requested_retry", "message": outcome["retry"]["reason"]}
        decision = _retry_requested(job, frame, failure)
        return Decision(decision.kind, {**decision.members, **_steps(base)}, priority)
    if action == "fail":
        decision = retry_or_fail(
            job,
            frame,
            outcome["failure"],
            declared=True,
            unclean=False,
            attempt_reason=outcome["failure"]["code"],
        )
        return Decision(decision.kind, {**decision.members, **_steps(base)}, priority)
    raise UnusableOutcomeError(f"outcome action {action!r} cannot be committed by this version")


def _steps(base: Mapping[str, Any]) -> dict[str, Any]:
    return {"runner_steps": base["runner_steps"]} if "runner_steps" in base else {}


def _retry_requested(
    job: Mapping[str, Any], frame: Mapping[str, Any], failure: Mapping[str, Any]
) -> Decision:
    """A step's own ``retry``: always wanted, bounded only by the budgets."""
    counters = Counters.of(frame)
    verdict = check_retry(job, counters)
    if verdict.code is not None:
        return failed(
            frame,
            {"code": verdict.code, "message": verdict.message, "details": {"retry": dict(failure)}},
            "failure",
        )
    return Decision(
        Kind.READY,
        {
            **carried(frame),
            **counters.as_members(),
            "attempt_reason": "requested_retry",
            "previous_attempt_id": frame.get("attempt_id"),
            "unclean_restart": False,
            "retry": {"reason": failure["message"]},
            "reason": "retry",
        },
    )
