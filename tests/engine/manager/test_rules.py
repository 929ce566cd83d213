"""``decide`` and the budget rules as tables: action, budget verdict and data mode give the destination.

``decide`` is what a recovering manager replays on an abandoned committing frame, so each row pins the
whole answer: the destination kind, the reason, the counters, the failure code and the members that
must (or must not) be carried into the destination frame.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from httk.workflow.engine.core._frames import Counters, Frame
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.manager._rules import check_advance, check_retry, decide, is_retried, retry_or_fail
from httk.workflow.engine.publish._outcome import UnusableOutcomeError

K = Kind
SUMMARY = {"condition": "all_succeeded", "decision": "satisfied", "observations": []}
JOIN = {"children": [], "condition": "all_succeeded"}

BUDGETS: dict[str, dict[str, int]] = {
    "unlimited": {},
    "attempts used": {"maximum_attempts_per_activation": 1},  # the attempt that just ended was the last
    "activations used": {"maximum_activations": 1},
    "total used": {"maximum_total_attempts": 1},
}


def job(budget: str, *, retry_on: list[str] | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = dict(BUDGETS[budget])
    if retry_on is not None:
        policy["retry_on"] = retry_on
    return {"retry_policy": policy}


def committing(data: str) -> Frame:
    """A committing frame of activation 1, attempt 1, that a join started (so it carries a summary)."""
    members: dict[str, Any] = {
        "step": "relax",
        "activation_id": "act-1",
        "activation_reason": "join",
        "data_generation": {"none": None, "unchanged": 3, "changed": 3}[data],
        "resources": {"procs": 2},
        "job_digest": "sha256:job",
        "join_summary": SUMMARY,
        **Counters(1, 1, 1).as_members(),
        "attempt_id": "att-1",
        "workdir": "p/job/run.att-1",
        "manager_id": "m-1",
        "reason": "outcome",
    }
    return Frame(K.COMMITTING, members)


def outcome(action: str) -> dict[str, Any]:
    base: dict[str, Any] = {"action": action}
    extras: dict[str, dict[str, Any]] = {
        "advance": {"next_step": "finish", "resources": {"procs": 4}},
        "wait": {"next_step": "gather", "join": JOIN},
        "fail": {"failure": {"code": "step.broke", "message": "it broke"}},
        "retry": {"retry": {"reason": "again, please"}},
        "pause": {"pause": {"reason": "look first"}},
    }
    return {**base, **extras.get(action, {})}


class Row(NamedTuple):
    """An action under a budget: the kind it goes to, its reason, the failure code (if any), the counters,
    and whether the new frame keeps the activation's join summary and the attempt's evidence."""

    action: str
    budget: str
    kind: Kind
    reason: str
    code: str | None
    counters: tuple[int, int, int]
    keeps_summary: bool
    keeps_evidence: bool


ROWS = [
    Row("succeed", "unlimited", K.SUCCEEDED, "succeed", None, (1, 1, 1), True, True),
    Row("succeed", "activations used", K.SUCCEEDED, "succeed", None, (1, 1, 1), True, True),
    Row("pause", "unlimited", K.PAUSED, "pause", None, (1, 1, 1), True, False),
    Row("advance", "unlimited", K.READY, "advance", None, (2, 0, 1), False, False),
    Row("advance", "attempts used", K.READY, "advance", None, (2, 0, 1), False, False),
    Row("advance", "activations used", K.FAILED, "failure", "budget_exhausted", (1, 1, 1), True, True),
    Row("advance", "total used", K.FAILED, "failure", "budget_exhausted", (1, 1, 1), True, True),
    Row("wait", "unlimited", K.WAITING, "wait", None, (1, 1, 1), True, False),
    Row("wait", "activations used", K.FAILED, "failure", "budget_exhausted", (1, 1, 1), True, True),
    Row("retry", "unlimited", K.READY, "retry", None, (1, 1, 1), True, False),
    Row("retry", "attempts used", K.FAILED, "failure", "retry_exhausted", (1, 1, 1), True, True),
    Row("retry", "total used", K.FAILED, "failure", "budget_exhausted", (1, 1, 1), True, True),
    Row("retry", "activations used", K.READY, "retry", None, (1, 1, 1), True, False),
    Row("fail", "unlimited", K.FAILED, "failure", "step.broke", (1, 1, 1), True, True),
]
DATA = ("none", "unchanged", "changed")


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("row", ROWS, ids=[f"{row.action}-{row.budget}" for row in ROWS])
def test_decide_maps_every_action_and_budget_to_one_destination(row: Row, data: str) -> None:
    frame = committing(data)
    decided = decide(job(row.budget), frame, outcome(row.action), data_changed=data == "changed")

    assert decided.kind is row.kind and decided.reason == row.reason
    assert (decided.failure or {}).get("code") == row.code
    assert decided.counters == Counters(*row.counters)
    assert ("join_summary" in decided) is row.keeps_summary
    assert ("attempt_id" in decided and "workdir" in decided) is row.keeps_evidence
    assert decided.get("data_generation") == {"none": None, "unchanged": 3, "changed": 4}[data]
    assert decided.get("job_digest") == "sha256:job"  # every frame of the job carries its digest
    if row.kind is K.READY and row.action == "advance":
        assert decided.step == "finish" and decided.activation_id not in (None, "act-1")
        assert decided["activation_reason"] == decided["attempt_reason"] == "advance"
        assert decided["resources"] == {"procs": 4}  # the outcome's requirement, for the new activation
    else:
        assert decided.step == "relax" and decided.activation_id == "act-1"
        assert decided["resources"] == {"procs": 2}


def test_decide_carries_the_members_of_each_destination() -> None:
    frame = committing("none")
    waiting = decide(job("unlimited"), frame, outcome("wait"))
    assert (waiting["join"], waiting["next_step"], waiting["first_unresolved_at"]) == (JOIN, "gather", None)
    paused = decide(job("unlimited"), frame, outcome("pause"))
    assert paused["pause"] == {"reason": "look first"}
    retried = decide(job("unlimited"), frame, outcome("retry"))
    assert retried["retry"] == {"reason": "again, please"} and retried["previous_attempt_id"] == "att-1"
    assert retried["attempt_reason"] == "requested_retry" and retried["unclean_restart"] is False
    refused = decide(job("attempts used"), frame, outcome("retry"))
    assert refused.failure is not None
    assert refused.failure["details"] == {"retry": {"code": "requested_retry", "message": "again, please"}}


@pytest.mark.parametrize(
    ("retry_on", "declared_retryable", "budget", "kind", "code"),
    [
        (None, False, "unlimited", K.FAILED, "step.broke"),  # retry_on defaults to lease_lost only
        (["step.broke"], False, "unlimited", K.READY, None),
        (None, True, "unlimited", K.READY, None),  # a runner-declared retryable failure
        (["step.broke"], False, "attempts used", K.FAILED, "retry_exhausted"),
        (["step.broke"], False, "total used", K.FAILED, "budget_exhausted"),
    ],
)
def test_a_failed_outcome_is_retried_by_policy_within_the_budgets(
    retry_on: list[str] | None, declared_retryable: bool, budget: str, kind: Kind, code: str | None
) -> None:
    failure: dict[str, Any] = {"code": "step.broke", "message": "it broke"}
    if declared_retryable:
        failure["retryable"] = True
    decided = decide(
        job(budget, retry_on=retry_on), committing("none"), {"action": "fail", "failure": failure}
    )
    assert decided.kind is kind and (decided.failure or {}).get("code") == code
    if kind is K.READY:
        assert decided["last_failure"] == failure and decided["attempt_reason"] == "step.broke"
    elif code != "step.broke":
        assert decided.failure is not None and decided.failure["details"] == {"last_failure": failure}


def test_an_outcome_priority_is_the_destination_marker_s() -> None:
    for action in ("succeed", "advance", "wait", "retry", "fail", "pause"):
        decided = decide(job("unlimited"), committing("none"), {**outcome(action), "priority": 7})
        assert decided.priority == 7
    assert decide(job("unlimited"), committing("none"), outcome("succeed")).priority is None


def test_decide_is_deterministic_up_to_fresh_identifiers() -> None:
    for action in ("succeed", "advance", "wait", "retry", "fail", "pause"):
        first = decide(job("unlimited"), committing("changed"), outcome(action), data_changed=True)
        again = decide(job("unlimited"), committing("changed"), outcome(action), data_changed=True)
        fresh = {"activation_id"} if action == "advance" else set()
        assert first.kind is again.kind and first.priority == again.priority
        assert {k: v for k, v in first.items() if k not in fresh} == {
            k: v for k, v in again.items() if k not in fresh
        }


def test_an_action_this_version_cannot_commit_is_refused() -> None:
    with pytest.raises(UnusableOutcomeError, match="cannot be committed"):
        decide(job("unlimited"), committing("none"), {"action": "relocate"})


# -- the budget rules ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("limits", "counters", "retry", "advance"),
    [
        ({}, (1, 1, 1), None, None),
        ({"maximum_attempts_per_activation": 2}, (1, 1, 1), None, None),
        ({"maximum_attempts_per_activation": 2}, (1, 2, 2), "retry_exhausted", None),
        ({"maximum_activations": 2}, (1, 1, 1), None, None),
        ({"maximum_activations": 2}, (2, 1, 3), None, "budget_exhausted"),
        ({"maximum_total_attempts": 3}, (2, 1, 2), None, None),
        ({"maximum_total_attempts": 3}, (2, 1, 3), "budget_exhausted", "budget_exhausted"),
        ({"maximum_attempts_per_activation": True}, (1, 5, 5), None, None),  # a boolean is no limit
    ],
)
def test_the_budget_rules(
    limits: dict[str, Any], counters: tuple[int, int, int], retry: str | None, advance: str | None
) -> None:
    document = {"retry_policy": limits}
    assert check_retry(document, Counters(*counters)).code == retry
    assert check_advance(document, Counters(*counters)).code == advance


@pytest.mark.parametrize(
    ("retry_on", "code", "retryable", "declared", "retried"),
    [
        (None, "lease_lost", None, False, True),
        (None, "process_failure", None, False, False),
        (["process_failure"], "process_failure", None, False, True),
        ([], "lease_lost", None, False, False),
        (None, "step.flaky", True, True, True),
        (None, "step.flaky", True, False, False),  # only a runner's own failure can declare itself
        (["step.flaky"], "step.flaky", False, True, True),  # retryable false never vetoes retry_on
    ],
)
def test_which_failures_are_retried(
    retry_on: list[str] | None, code: str, retryable: bool | None, declared: bool, retried: bool
) -> None:
    document = {"retry_policy": {} if retry_on is None else {"retry_on": retry_on}}
    failure: dict[str, Any] = {"code": code, "message": "m"}
    if retryable is not None:
        failure["retryable"] = retryable
    assert is_retried(document, failure, declared=declared) is retried


@pytest.mark.parametrize(("budget", "kind"), [("unlimited", K.READY), ("attempts used", K.FAILED)])
def test_an_attempt_s_end_without_an_outcome_carries_its_evidence_either_way(budget: str, kind: Kind) -> None:
    failure = {"code": "lease_lost", "message": "gone"}
    takeover = {"rule": "process_gone"}
    decided = retry_or_fail(
        job(budget),
        committing("none"),
        failure,
        declared=False,
        unclean=True,
        attempt_reason="lease_lost",
        extra={"takeover": takeover},
    )
    assert decided.kind is kind and decided["takeover"] == takeover
    if kind is K.READY:
        assert decided["unclean_restart"] is True and decided["last_failure"] == failure
    else:
        assert decided.failure is not None and decided.failure["code"] == "retry_exhausted"
