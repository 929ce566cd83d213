from __future__ import annotations

import pytest
from httk.workflow.engine.core import _states
from httk.workflow.engine.core._states import (
    CORE_KINDS,
    TERMINAL_KINDS,
    TRANSITIONS,
    Kind,
    Trigger,
    check_transition,
)
from httk.workflow.protocol import TransitionError

K = Kind

# The specification's table "Every transition of the core profile, exhaustively", as (from, to) pairs.
SPEC_ROWS = {
    (K.SUBMITTED, K.READY),
    (K.SUBMITTED, K.FAILED),
    (K.READY, K.CLAIMED),
    (K.CLAIMED, K.RUNNING),
    (K.CLAIMED, K.READY),
    (K.CLAIMED, K.FAILED),
    (K.RUNNING, K.COMMITTING),
    (K.RUNNING, K.READY),
    (K.RUNNING, K.FAILED),
    (K.RUNNING, K.CANCELLING),
    (K.COMMITTING, K.READY),
    (K.COMMITTING, K.WAITING),
    (K.COMMITTING, K.SUCCEEDED),
    (K.COMMITTING, K.FAILED),
    (K.COMMITTING, K.PAUSED),
    (K.WAITING, K.READY),
    (K.WAITING, K.FAILED),
    (K.FAILED, K.READY),
    (K.PAUSED, K.READY),
    (K.CANCELLING, K.CANCELLED),
    *(
        (k, K.CANCELLED)
        for k in (K.SUBMITTED, K.READY, K.CLAIMED, K.RUNNING, K.COMMITTING, K.WAITING, K.PAUSED)
    ),
    *((k, K.PAUSED) for k in (K.SUBMITTED, K.READY, K.WAITING)),
    *((k, k) for k in (K.SUBMITTED, K.READY, K.WAITING, K.PAUSED, K.FAILED)),
}
# Moves the specification describes outside that table: recovery's takeover of an abandoned attempt
# ("a recoverer appends a new claimed frame and renames the exact old claimed or running marker") and
# fsck repair, which re-points a marker at the next generation without changing its kind.
RECOVERY_ROWS = {(K.CLAIMED, K.CLAIMED), (K.RUNNING, K.CLAIMED)}
REPAIR_ROWS = {(k, k) for k in CORE_KINDS}
# Issue 15: workspace fsck --rebuild-lost gives a job whose whole history was lost one rebuilt frame.
REBUILD_ROWS = {
    (K.SUBMITTED, K.READY, Trigger.FSCK_REBUILD),
    *((k, K.READY, Trigger.FSCK_REBUILD) for k in (K.READY, K.CLAIMED, K.RUNNING, K.COMMITTING)),
    (K.CANCELLING, K.CANCELLED, Trigger.FSCK_REBUILD),
    *((k, k, Trigger.FSCK_REBUILD) for k in (K.PAUSED, K.FAILED, K.CANCELLED, K.SUCCEEDED)),
}
# DECISIONS D7: a join persists the instant it first found a child unresolvable (and clears it) in the
# waiting frame, a waiting -> waiting move of its own trigger; its pair is also the table's set_priority.
JOIN_ROWS = {(K.WAITING, K.WAITING, Trigger.JOIN_OBSERVATION)}


def test_table_is_exactly_the_specification() -> None:
    pairs = {(source, destination) for source, destination, _ in TRANSITIONS}
    assert pairs == SPEC_ROWS | RECOVERY_ROWS | REPAIR_ROWS | {(s, d) for s, d, _ in REBUILD_ROWS}
    assert {row for row in TRANSITIONS if row[2] is Trigger.FSCK_REBUILD} == REBUILD_ROWS
    assert {(s, d) for s, d, _ in JOIN_ROWS} <= SPEC_ROWS


def test_a_join_observation_moves_a_waiting_marker_and_nothing_else() -> None:
    rows = {row for row in TRANSITIONS if row[2] is Trigger.JOIN_OBSERVATION}
    assert rows == JOIN_ROWS
    with pytest.raises(TransitionError):
        check_transition(K.READY, K.READY, Trigger.JOIN_OBSERVATION)


def test_nothing_leaves_a_permanent_kind_except_by_fsck_which_keeps_it() -> None:
    for source, destination, trigger in TRANSITIONS:
        if source in (K.SUCCEEDED, K.CANCELLED):
            assert destination == source and trigger in (Trigger.FSCK_REPAIR, Trigger.FSCK_REBUILD)


def test_failed_is_terminal_but_revivable() -> None:
    assert K.FAILED in TERMINAL_KINDS
    check_transition(K.FAILED, K.READY, Trigger.OPERATOR_CONTINUE)


@pytest.mark.parametrize(
    ("source", "destination", "trigger"),
    [
        (K.SUCCEEDED, K.READY, Trigger.OPERATOR_CONTINUE),
        (K.READY, K.RUNNING, Trigger.LAUNCH),
        (K.RUNNING, K.PAUSED, Trigger.PAUSE),
        (K.CLAIMED, K.CLAIMED, Trigger.SET_PRIORITY),
        (K.SUBMITTED, K.READY, Trigger.CLAIM),
        (K.CANCELLING, K.READY, Trigger.RETRY),
    ],
)
def test_illegal_moves_are_refused(source: Kind, destination: Kind, trigger: Trigger) -> None:
    with pytest.raises(TransitionError, match="illegal transition"):
        check_transition(source, destination, trigger)


# Every fact about kinds, as the specification and DECISIONS state it. Most are derived from the table,
# so a row added or removed there shows up here as a changed fact.
FACTS = {
    "TERMINAL_KINDS": {K.SUCCEEDED, K.FAILED, K.CANCELLED},
    "NONTERMINAL_KINDS": {
        K.SUBMITTED,
        K.READY,
        K.CLAIMED,
        K.RUNNING,
        K.COMMITTING,
        K.CANCELLING,
        K.WAITING,
        K.PAUSED,
    },
    "ACTIVE_KINDS": {K.SUBMITTED, K.READY, K.CLAIMED, K.RUNNING, K.COMMITTING, K.CANCELLING, K.WAITING},
    "AT_REST_KINDS": {K.PAUSED, K.SUCCEEDED, K.FAILED, K.CANCELLED},
    "PERMANENT_KINDS": {K.SUCCEEDED, K.CANCELLED},
    "QUEUED_KINDS": {K.SUBMITTED, K.READY},
    "OWNED_KINDS": {K.CLAIMED, K.RUNNING, K.COMMITTING, K.CANCELLING},
    "FENCED_KINDS": {K.COMMITTING, K.CANCELLING},
    "IN_PROGRESS_KINDS": {K.CLAIMED, K.RUNNING, K.COMMITTING, K.CANCELLING, K.WAITING, K.PAUSED},
    "QUIESCENT_KINDS": {K.READY, K.WAITING, K.PAUSED, K.SUCCEEDED, K.FAILED, K.CANCELLED},
    "DISPOSABLE_KINDS": {K.SUBMITTED, K.READY, K.SUCCEEDED, K.FAILED, K.CANCELLED},
    "UNSUCCESSFUL_KINDS": {K.FAILED, K.CANCELLED},
    "RETIRES_ATTEMPT_CONTROL": {K.READY, K.WAITING, K.PAUSED, K.SUCCEEDED},  # D5
}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_every_fact_about_kinds_is_the_specification_s(name: str) -> None:
    assert getattr(_states, name) == FACTS[name]


def test_the_core_kinds_are_every_kind_but_the_reserved_extensions_in_the_table_s_order() -> None:
    assert tuple(k for k in Kind if k not in (K.RELOCATING, K.TRANSFERRING)) == CORE_KINDS
    assert {k for row in TRANSITIONS for k in row[:2]} == set(CORE_KINDS)


def test_every_trigger_is_a_manager_s_an_operator_s_or_fsck_s() -> None:
    fsck = {Trigger.FSCK_REPAIR, Trigger.FSCK_REBUILD}
    assert _states.MANAGER_TRIGGERS | _states.OPERATOR_TRIGGERS | fsck == set(Trigger)
    assert _states.MANAGER_TRIGGERS.isdisjoint(_states.OPERATOR_TRIGGERS)
