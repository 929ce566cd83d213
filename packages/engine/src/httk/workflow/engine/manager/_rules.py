"""The manager's pure rules: what it may claim, what fits, what the budgets allow, where an outcome goes.

Everything here is a pure function of documents (job.json, a frame, an outcome, a manifest's
capacities): no I/O, no clock, no manager state. That is what lets the read-side tools (``job why``,
``precheck``, the exit census) apply exactly the manager's own predicates from this one module, and what
lets a recovering manager replay :func:`decide` on a committing frame and get the same answer.

**The claim predicate** (:func:`claim_mismatches`): pool, capabilities, runner backend and, given
capacities, resources. A manager claims only when it is empty.

**Resources.** A manager advertises integer capacities by label (``procs``, ``mem`` in MB,
``matlab_license_slots``). A job's *requirement* is its current state frame's ``resources``: job.json's
for the first activation, an ``advance`` or ``wait`` outcome's from the activation it starts on, carried
across retries. Labels are opaque here except ``procs`` and ``mem``, which a job that omits them receives
as the manager's *fair share* (``capacity // workers``, the whole capacity when that quotient is 0), so
an undeclared job still occupies one worker's share. Two questions, kept apart because one is permanent
and one is not: :func:`unmet` — a declared amount above the capacity (an absent label has capacity 0)
can never be served by this manager, so the job is *not claimable here*, as for a pool it does not
serve; :func:`fits` — the *allocation* (declared amounts plus the fair shares) fits next to what the
attempts this manager runs already reserve, or the job waits for a later pass (it needs no more than the
whole capacity, so it fits once the running attempts are gone). A zero amount needs nothing and fits
everywhere.

**Budgets.** The counters (:class:`~httk.workflow.engine.core._frames.Counters`) are durable frame
members; a ready frame holds the counts *before* its next attempt and claiming increments them. So every
move into ``ready`` first checks that the attempt it queues may still run — a request that would exceed
a limit goes to failed instead and is never launched. A failure is retried when its code is listed in
``retry_policy.retry_on``, or (core-v2) when a runner declared it ``retryable``; ``retryable: false``
never vetoes a ``retry_on`` match. An absent ``retry_on`` means ``["lease_lost"]``: a manager that
vanished is never the job's fault, while retrying a crashing runner forever under an unbounded budget
would be.

**Destinations.** :func:`decide` maps a committed, valid outcome to its destination kind and the
members of the destination frame, budgets included; :func:`retry_or_fail` does the same for a failure
(an attempt's end without an outcome, a lost lease). Both are deterministic up to fresh identifiers:
the same job, frame and outcome always give the same kind, priority and members, except that a new
activation gets a new ``activation_id``.

**Settings** reach an attempt's environment as ``HTTK_<NAME>`` (:func:`settings_environment`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from httk.workflow.engine.core._frames import (
    Counters,
    Frame,
    another_attempt,
    attempt_evidence,
    failed,
    failure_of,
    next_activation,
    next_data_generation,
    waiting,
    with_counters,
)
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.publish._outcome import UnusableOutcomeError
from httk.workflow.protocol._policy import setting_environment_name

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


FAIR_SHARE_LABELS = ("procs", "mem")
UNSATISFIABLE = 1 << 63
"""The amount a malformed requirement entry stands for: larger than any capacity, so never served."""


def requirement_of(value: object) -> dict[str, int]:
    """A frame's ``resources`` as a requirement: nothing for an absent or non-object value.

    Our writers validate every requirement; a frame another writer left with a non-integer or negative
    amount asks for :data:`UNSATISFIABLE` of that label rather than being guessed at.
    """
    if not isinstance(value, Mapping):
        return {}
    return {
        str(label): amount if type(amount) is int and amount >= 0 else UNSATISFIABLE
        for label, amount in value.items()
    }


def unmet(requirement: Mapping[str, int], capacities: Mapping[str, int]) -> tuple[str, ...]:
    """The labels whose declared amount exceeds this manager's capacity, sorted (absent counts as 0)."""
    return tuple(sorted(label for label, amount in requirement.items() if amount > capacities.get(label, 0)))


def fair_share(capacity: int, workers: int) -> int:
    """One worker's share of a capacity: ``capacity // workers``, or all of it when that is 0."""
    return capacity // workers or capacity


def allocation(requirement: Mapping[str, int], capacities: Mapping[str, int], workers: int) -> dict[str, int]:
    """The declared amounts plus the fair share of each of ``procs``/``mem`` the requirement omits."""
    allocated = dict(requirement)
    for label in FAIR_SHARE_LABELS:
        if label not in allocated and label in capacities:
            allocated[label] = fair_share(capacities[label], workers)
    return allocated


def reserved(allocations: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """What the given allocations hold together, by label."""
    total: dict[str, int] = {}
    for allocated in allocations:
        for label, amount in allocated.items():
            total[label] = total.get(label, 0) + amount
    return total


def fits(allocated: Mapping[str, int], capacities: Mapping[str, int], held: Mapping[str, int]) -> bool:
    """Whether ``allocated`` fits in what ``capacities`` leave after the reservations ``held``."""
    return all(
        amount <= capacities.get(label, 0) - held.get(label, 0)
        for label, amount in allocated.items()
        if amount
    )


def describe(amounts: Mapping[str, int]) -> str:
    """``procs=4,mem=16000`` in label order, or ``-`` for none (banner, diagnosis)."""
    return ",".join(f"{label}={amount}" for label, amount in sorted(amounts.items())) or "-"


SERVED_EXECUTORS = ("path",)
"""The runner backends this implementation's managers execute (recorded as ``executors``)."""


def claim_mismatches(
    document: Mapping[str, Any],
    pools: Collection[str],
    capabilities: Collection[str],
    executors: Collection[str] = SERVED_EXECUTORS,
    *,
    requirement: Mapping[str, int] | None = None,
    capacities: Mapping[str, int] | None = None,
) -> tuple[str, ...]:
    """Which of ``pool``, ``capabilities``, ``executor``, ``resources`` a manager serving these lacks.

    The one claim predicate: a manager claims only when it is empty, and ``job why``, ``precheck`` and
    the census name what it returns, so a diagnosis cannot drift from what a manager does. ``resources``
    is checked only given capacities (``None``: the manager schedules none); ``requirement`` is the
    current frame's. The manager applies the two halves where it has their inputs: :func:`claimable`
    the definition's before it reads a frame, :func:`_place` the requirement's (:func:`unmet`)
    after.
    """
    claim = document["claim"]
    lacking: tuple[str, ...] = ()
    if claim["pool"] not in pools:
        lacking += ("pool",)
    if not set(claim.get("required_capabilities", ())) <= set(capabilities):
        lacking += ("capabilities",)
    if document["runner"].get("backend", "path") not in executors:
        lacking += ("executor",)
    if capacities is not None and requirement and unmet(requirement, capacities):
        lacking += ("resources",)
    return lacking


# -- destinations ----------------------------------------------------------------------------------
def retry_or_fail(
    job: Mapping[str, Any],
    frame: Mapping[str, Any],
    failure: Mapping[str, Any],
    *,
    declared: bool,
    unclean: bool,
    attempt_reason: str,
    extra: Mapping[str, Any] | None = None,
) -> Frame:
    """Retry the current activation when policy and budgets allow; otherwise fail with the right code."""
    extra = dict(extra or {})
    if not is_retried(job, failure, declared=declared):
        return failed(frame, failure, "failure")
    verdict = check_retry(job, Counters.of(frame))
    if verdict.code is not None:
        exhausted = failure_of(verdict.code, verdict.message, last_failure=dict(failure))
        return failed(frame, exhausted, "failure", **extra)
    return another_attempt(frame, attempt_reason, unclean=unclean, last_failure=dict(failure), **extra)


def decide(
    job: Mapping[str, Any],
    frame: Mapping[str, Any],
    outcome: Mapping[str, Any],
    *,
    data_changed: bool = False,
) -> Frame:
    """The destination of a committed, valid outcome; ``frame`` is the committing frame.

    Deterministic up to fresh identifiers: replaying a committing frame gives the same kind, priority and
    members, except that a new activation gets a new ``activation_id``. ``data_changed`` says whether the
    outcome's replayed transaction changed ``data/``; a transactional job's destination frame then
    carries the next data generation (:func:`next_data_generation`).
    """
    decision = _decide(job, frame, outcome)
    if frame.get("data_generation") is None:
        return decision
    return decision.with_members(data_generation=next_data_generation(frame["data_generation"], data_changed))


def _decide(job: Mapping[str, Any], frame: Mapping[str, Any], outcome: Mapping[str, Any]) -> Frame:
    action = outcome["action"]
    priority = outcome.get("priority")
    counters = Counters.of(frame)
    # The activation's members with what the outcome replaces in them: the steps the runner declared,
    # and (for the activation an advance or a wait starts) its resource requirement.
    base = {**frame, **({"runner_steps": outcome["runner_steps"]} if "runner_steps" in outcome else {})}
    if action == "succeed":
        decided = Frame(
            Kind.SUCCEEDED, {**with_counters(base), **attempt_evidence(frame), "reason": "succeed"}
        )
    elif action == "pause":
        decided = Frame(
            Kind.PAUSED, {**with_counters(base), "pause": dict(outcome["pause"]), "reason": "pause"}
        )
    elif action in ("advance", "wait"):
        # Both start a new activation (the wait's once its join decides), so both are budgeted here.
        verdict = check_advance(job, counters)
        if verdict.code is not None:
            decided = failed(base, failure_of(verdict.code, verdict.message), "failure")
        else:
            if "resources" in outcome:  # the next activation's requirement, carried across its retries
                base["resources"] = dict(outcome["resources"])
            if action == "wait":
                decided = waiting(base, outcome["join"], outcome["next_step"])
            else:
                decided = next_activation(base, outcome["next_step"], "advance", reason="advance")
    elif action == "retry":
        decided = _retry_requested(job, frame, outcome["retry"]["reason"]).with_members(**_steps(base))
    elif action == "fail":
        decided = retry_or_fail(
            job,
            frame,
            outcome["failure"],
            declared=True,
            unclean=False,
            attempt_reason=outcome["failure"]["code"],
        ).with_members(**_steps(base))
    else:
        raise UnusableOutcomeError(f"outcome action {action!r} cannot be committed by this version")
    return Frame(decided.kind, decided, priority)


def _steps(base: Mapping[str, Any]) -> dict[str, Any]:
    return {"runner_steps": base["runner_steps"]} if "runner_steps" in base else {}


def _retry_requested(job: Mapping[str, Any], frame: Mapping[str, Any], reason: str) -> Frame:
    """A step's own ``retry``: always wanted, bounded only by the budgets."""
    verdict = check_retry(job, Counters.of(frame))
    if verdict.code is not None:
        retry = failure_of("requested_retry", reason)
        return failed(frame, failure_of(verdict.code, verdict.message, retry=retry), "failure")
    return another_attempt(frame, "requested_retry", unclean=False, retry={"reason": reason})


PROTOCOL_NAMESPACE = "HTTK_WORKFLOW_"
"""The protocol's own variables: a setting never exports into it."""


def settings_environment(settings: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """``HTTK_<NAME>`` for each scalar setting the manager's environment does not already override.

    Strings are exported as they are, numbers and booleans in their JSON spelling (``4``, ``0.5``,
    ``true``). Arrays, objects, null and strings holding NUL stay in context.json only. When two names
    map to one variable (``a.b`` and ``a_b``), the one that sorts first wins.
    """
    env: dict[str, str] = {}
    for name in sorted(settings):
        value = settings[name]
        variable = setting_environment_name(name)
        if variable in environ or variable in env or variable.startswith(PROTOCOL_NAMESPACE):
            continue
        text = value if isinstance(value, str) else _scalar_json(value)
        if text is not None and "\0" not in text:
            env[variable] = text
    return env


def _scalar_json(value: object) -> str | None:
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


DEFAULT_JOIN_GRACE_SECONDS = 3600.0
"""How long a join child may stay unresolvable at its placement hint before the join fails."""

DEFAULT_TAKEOVER_GRACE_FACTOR = 2.0
"""Leases an isolated attempt's manager must be silent before another manager takes it over."""

DEFAULT_WINDOW_SECONDS = 1.0
"""How long unclaimed candidates of one ready pass stay usable before the window is refilled."""
