"""Attempt and activation budgets, and which failures are retried.

The counters are durable state-frame members: ``activation_ordinal`` (activations so far, the current one
included), ``attempt_ordinal`` (attempts of the current activation so far) and ``total_attempts`` (attempts
over the whole job). A ready frame holds the counts *before* its next attempt; claiming increments them.
So every move into ``ready`` first checks that the attempt it queues may still run — a request that would
exceed a limit goes to failed instead and is never launched.

Which failures are retried: a failure whose code is listed in ``retry_policy.retry_on``, and (core-v2) a
runner-declared failure marked ``retryable``. ``retryable: false`` never vetoes a ``retry_on`` match.
When ``retry_on`` is absent it defaults to ``["lease_lost"]``: a manager that vanished is never the job's
fault, while retrying a crashing runner forever under an unbounded budget would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from httk.workflow.engine.core._frames import Counters

DEFAULT_RETRY_ON = ("lease_lost",)


@dataclass(frozen=True, slots=True)
class BudgetVerdict:
    """``None`` code means the queued attempt may run; otherwise the failure code and its message."""

    code: str | None
    message: str = ""


def _limit(job: Mapping[str, Any], name: str) -> int | None:
    policy = job.get("retry_policy") or {}
    value = policy.get(name)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def check_retry(job: Mapping[str, Any], counters: Counters) -> BudgetVerdict:
    """May the current activation get another attempt (``counters`` as of the attempt that just ended)?"""
    per_activation = _limit(job, "maximum_attempts_per_activation")
    if per_activation is not None and counters.attempt_ordinal + 1 > per_activation:
        return BudgetVerdict(
            "retry_exhausted",
            f"activation {counters.activation_ordinal} used {counters.attempt_ordinal} of "
            f"maximum_attempts_per_activation {per_activation}",
        )
    return _check_total(job, counters)


def check_advance(job: Mapping[str, Any], counters: Counters) -> BudgetVerdict:
    """May the job start another activation (and its first attempt)?"""
    activations = _limit(job, "maximum_activations")
    if activations is not None and counters.activation_ordinal + 1 > activations:
        return BudgetVerdict(
            "budget_exhausted",
            f"the job used {counters.activation_ordinal} of maximum_activations {activations}",
        )
    return _check_total(job, counters)


def _check_total(job: Mapping[str, Any], counters: Counters) -> BudgetVerdict:
    total = _limit(job, "maximum_total_attempts")
    if total is not None and counters.total_attempts + 1 > total:
        return BudgetVerdict(
            "budget_exhausted", f"the job used {counters.total_attempts} of maximum_total_attempts {total}"
        )
    return BudgetVerdict(None)


def retry_on(job: Mapping[str, Any]) -> frozenset[str]:
    policy = job.get("retry_policy") or {}
    codes = policy.get("retry_on")
    return frozenset(codes) if isinstance(codes, list) else frozenset(DEFAULT_RETRY_ON)


def is_retried(job: Mapping[str, Any], failure: Mapping[str, Any], *, declared: bool) -> bool:
    """Whether a failure asks for another attempt (before budgets are consulted)."""
    if failure.get("code") in retry_on(job):
        return True
    return declared and failure.get("retryable") is True
