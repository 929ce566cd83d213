"""The waiting pass: deciding a waiting job's join and moving its marker (DECISIONS D7 included).

:func:`on_waiting` evaluates the join of one waiting job (:func:`._joins.evaluate`) and moves it:

===========================  ===================================================================
every child resolved,        waiting → ready (``join``) for a new activation at ``next_step``
condition satisfied          whose frame carries ``join_summary``; the attempt context gets it
                             as ``join`` and its observations as ``children``
success impossible           the same at ``on_impossible.next_step`` (decision ``impossible``),
                             or waiting → failed ``dependency_failure`` naming a child
otherwise                    nothing (pending)
a child unresolvable         the first instant is persisted by waiting → waiting
                             (``join_observation``, DECISIONS D7), so a restarted manager keeps
                             the deadline; after ``join_grace_seconds`` waiting → failed
                             ``dependency_failure`` naming the missing child; a child that
                             resolves again clears the instant the same way
a join that cannot be read   waiting → failed ``protocol_error``
===========================  ===================================================================

Budgets: the new activation was checked with ``check_advance`` when the wait was committed, and the
counters do not move while a job waits, so the join needs no second check. Every manager may evaluate
every waiting job: the marker rename decides which decision is committed, and a lost race leaves only
an orphan frame. Time is the manager's clock, so tests drive the grace without sleeping.

Cost: one evaluation per call; the waiting frame is read and its join parsed once per record reference
(:data:`PARSED_CACHE_SIZE` of them are kept: a frame never changes); one journal append and one rename
when something is decided or the unresolved set starts or stops, nothing otherwise.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from httk.workflow.engine.core._clock import parse_time, utc_timestamp
from httk.workflow.engine.core._frames import (
    Frame,
    failure_of,
    join_failed,
    next_activation,
    observed,
    protocol_failure,
)
from httk.workflow.engine.core._states import UNSUCCESSFUL_KINDS, Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.engine.publish._joins import (
    NAMED_IN_DETAILS,
    Evaluation,
    Join,
    JoinError,
    Verdict,
    evaluate,
    parse_join,
    summary,
)
from httk.workflow.protocol import InvalidNameError, validate_step

from ._state import ManagerState

log = logging.getLogger("httk.workflow.manager")


@dataclass(frozen=True, slots=True)
class _Waiting:
    """The waiting job one call of :func:`on_waiting` decides: its marker and current frame."""

    state: ManagerState
    marker: MarkerLocation
    frame: Mapping[str, Any]


_PARSED: OrderedDict[str, tuple[Frame, Join, str]] = OrderedDict()
PARSED_CACHE_SIZE = 64
"""Waiting frames whose join was parsed, by record reference. A frame never changes, so the cache is
never stale; it only spares a large join the journal read and the parse on every pass."""


def on_waiting(state: ManagerState, marker: MarkerLocation) -> bool | None:
    """Evaluate one waiting job's join and move it when something is decided; whether it moved."""
    ref = marker.name.ref_text
    parsed = _PARSED.get(ref)
    if parsed is None:
        frame = state.frame_or_none(marker)
        if frame is None:
            return None  # a damaged journal is fsck's business, logged once by frame_or_none
        try:
            join = parse_join(frame.get("join"), workspace_id=state.workspace.workspace_id)
            next_step = validate_step(frame.get("next_step"))
        except (JoinError, InvalidNameError) as exc:
            failure = protocol_failure(f"the waiting job's join cannot be read: {exc}")
            return _fail(_Waiting(state, marker, frame), failure, Trigger.PROTOCOL_ERROR, "invalid_join")
        parsed = _PARSED[ref] = (frame, join, next_step)
        if len(_PARSED) > PARSED_CACHE_SIZE:
            _PARSED.popitem(last=False)
    frame, join, next_step = parsed
    waiting = _Waiting(state, marker, frame)
    evaluation = evaluate(state.workspace, join, state.jobs)
    now = state.clock.now()
    if evaluation.verdict is None:
        return _unresolved(waiting, join, evaluation, now)
    if evaluation.verdict is Verdict.PENDING:
        if frame.get("first_unresolved_at") is not None:
            return _observe_again(waiting, None, [], "join_resolved")
        return False
    decided = summary(join, evaluation, now)
    if evaluation.verdict is Verdict.SATISFIED:
        return _next_activation(waiting, next_step, decided, "join")
    step = join.impossible_step
    if step is not None:
        return _next_activation(waiting, step, decided, "on_impossible")
    failure = impossible_failure(join, evaluation)
    return _fail(waiting, failure, Trigger.DEPENDENCY_FAILURE, "dependency_failure", decided)


def impossible_failure(join: Join, evaluation: Evaluation) -> dict[str, Any]:
    """The ``dependency_failure`` of a join whose success became impossible, naming a child."""
    kinds = [Kind(observation["kind"]) for observation in evaluation.observations or []]
    losers = [child for child, kind in zip(join.children, kinds, strict=True) if kind in UNSUCCESSFUL_KINDS]
    first = losers[0] if losers else join.children[0]
    ended = kinds[join.children.index(first)].value
    if join.condition == "all_succeeded":
        message = f"join child {first.name} ended {ended}, so all_succeeded can no longer hold"
    elif join.condition == "any_succeeded":
        message = f"none of the {len(kinds)} join children succeeded (child {first.name} ended {ended})"
    else:
        succeeded = sum(kind is Kind.SUCCEEDED for kind in kinds)
        open_ = len(kinds) - succeeded - len(losers)
        message = (
            f"at_least {join.count} can no longer hold: {succeeded} succeeded and {open_} may still succeed "
            f"(join child {first.name} ended {ended})"
        )
    details: dict[str, Any] = {
        "condition": join.condition,
        "unsuccessful": [child.job_key for child in losers[:NAMED_IN_DETAILS]],
        "unsuccessful_count": len(losers),
    }
    if join.on_impossible is not None:
        details["on_impossible_action"] = join.on_impossible.get("action")
    return failure_of("dependency_failure", message, **details)


def _unresolved(waiting: _Waiting, join: Join, evaluation: Evaluation, now: datetime) -> bool:
    """A child cannot be resolved: record when that began (D7), or fail once the grace has passed."""
    missing = [join.children[index] for index in evaluation.unresolved]
    keys = [child.job_key for child in missing[:NAMED_IN_DETAILS]]
    recorded = waiting.frame.get("first_unresolved_at")
    first = parse_time(recorded)
    if first is None:
        log.warning(
            "%s: join child %s cannot be resolved at %s",
            waiting.marker.job_key,
            missing[0].name,
            missing[0].placement_hint,
        )
        return _observe_again(waiting, utc_timestamp(now), keys, "join_unresolved")
    grace = waiting.state.config.join_grace_seconds
    if (now - first).total_seconds() < grace:
        return False
    failure = failure_of(
        "dependency_failure",
        f"join child {missing[0].name} stayed unresolvable at its placement_hint "
        f"{missing[0].placement_hint} for the join grace of {grace:g} s",
        unresolvable=keys,
        unresolvable_count=len(missing),
        first_unresolved_at=recorded,
        join_grace_seconds=grace,
    )
    return _fail(waiting, failure, Trigger.DEPENDENCY_FAILURE, "dependency_failure")


def _observe_again(
    waiting: _Waiting, first_unresolved_at: str | None, unresolved: list[str], reason: str
) -> bool:
    """waiting → waiting (D7): the same join, with the first-unresolved instant recorded or cleared."""
    frame = observed(
        waiting.frame,
        first_unresolved_at,
        unresolved=unresolved,
        manager_id=waiting.state.manager_id,
        reason=reason,
    )
    return waiting.state.move(waiting.marker, frame, Trigger.JOIN_OBSERVATION).won


def _next_activation(waiting: _Waiting, step: str, decided: dict[str, Any], reason: str) -> bool:
    """waiting → ready: a new activation at ``step`` that carries the decided join."""
    # Invariant: these counters passed check_advance when the wait was committed, and nothing changes
    # them while the job waits (tests/engine/publish/test_outcome_children.py:
    # test_a_wait_beyond_the_activation_budget_fails_but_keeps_its_children).
    frame = next_activation(
        waiting.frame,
        step,
        reason,
        join_summary=decided,
        manager_id=waiting.state.manager_id,
        reason="join_satisfied" if reason == "join" else "join_impossible",
    )
    won = waiting.state.move(waiting.marker, frame, Trigger.JOIN).won
    if won:
        log.info("%s: join %s, next step %s", waiting.marker.job_key, decided["decision"], step)
    return won


def _fail(
    waiting: _Waiting,
    failure: dict[str, Any],
    trigger: Trigger,
    reason: str,
    decided: dict[str, Any] | None = None,
) -> bool:
    frame = join_failed(waiting.frame, failure, reason, manager_id=waiting.state.manager_id, decided=decided)
    won = waiting.state.move(waiting.marker, frame, trigger).won
    if won:
        log.warning("%s failed: %s", waiting.marker.job_key, failure["message"])
    return won
