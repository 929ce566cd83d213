"""The state machine as data: every state kind and every legal marker move of the core profile.

Each row of :data:`TRANSITIONS` is one verified rename of the same marker. :func:`check_transition` is
consulted by the one function that moves markers, so an illegal transition cannot be written at all.
"""

from __future__ import annotations

from enum import StrEnum

from httk.workflow.protocol import (
    TransitionError,
)


class Kind(StrEnum):
    SUBMITTED = "submitted"
    READY = "ready"
    CLAIMED = "claimed"
    RUNNING = "running"
    COMMITTING = "committing"
    CANCELLING = "cancelling"
    RELOCATING = "relocating"
    TRANSFERRING = "transferring"
    WAITING = "waiting"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Trigger(StrEnum):
    REGISTER = "register"
    PROTOCOL_ERROR = "protocol_error"
    CLAIM = "claim"
    LAUNCH = "launch"
    RELEASE = "release"
    PREPARE_FAILURE = "prepare_failure"
    OUTCOME = "outcome"
    RETRY = "retry"
    FAILURE = "failure"
    CANCEL_FENCE = "cancel_fence"
    COMMIT = "commit"
    JOIN = "join"
    JOIN_OBSERVATION = "join_observation"
    DEPENDENCY_FAILURE = "dependency_failure"
    OPERATOR_CONTINUE = "operator_continue"
    CANCEL_VERIFIED = "cancel_verified"
    CANCEL = "cancel"
    PAUSE = "pause"
    SET_PRIORITY = "set_priority"
    TAKEOVER = "takeover"
    FSCK_REPAIR = "fsck_repair"


K = Kind
T = Trigger

TERMINAL_KINDS = frozenset({K.SUCCEEDED, K.FAILED, K.CANCELLED})
"""Terminal for scheduling: no manager moves these markers on its own."""

PERMANENT_KINDS = frozenset({K.SUCCEEDED, K.CANCELLED})
"""Nothing moves these markers again at all."""

ACTIVE_KINDS = (K.COMMITTING, K.CANCELLING, K.CLAIMED, K.RUNNING, K.WAITING, K.SUBMITTED, K.READY)
"""The kinds a manager's passes stream, in the order startup recovery visits them."""

CORE_KINDS = tuple(kind for kind in Kind if kind not in (K.RELOCATING, K.TRANSFERRING))

_NONTERMINAL = [kind for kind in CORE_KINDS if kind not in TERMINAL_KINDS]

# Invariant: this table is exactly the specification's "Every transition of the core profile" table,
# plus the two rows recovery needs (takeover of claimed/running to a new claim), fsck repair, which
# keeps the kind, and waiting -> waiting by join_observation: DECISIONS D7 persists the instant a join
# first found a child unresolvable (and clears it once every child resolves) in the waiting frame, so a
# restarted manager keeps the join grace instead of restarting it. tests/engine/core/test_states.py compares
# it row by row.
TRANSITIONS: frozenset[tuple[Kind, Kind, Trigger]] = frozenset(
    {
        (K.SUBMITTED, K.READY, T.REGISTER),
        (K.SUBMITTED, K.FAILED, T.PROTOCOL_ERROR),
        (K.READY, K.CLAIMED, T.CLAIM),
        (K.CLAIMED, K.RUNNING, T.LAUNCH),
        (K.CLAIMED, K.READY, T.RELEASE),
        (K.CLAIMED, K.FAILED, T.PREPARE_FAILURE),
        (K.RUNNING, K.COMMITTING, T.OUTCOME),
        (K.RUNNING, K.READY, T.RETRY),
        (K.RUNNING, K.FAILED, T.FAILURE),
        (K.RUNNING, K.CANCELLING, T.CANCEL_FENCE),
        (K.COMMITTING, K.READY, T.COMMIT),
        (K.COMMITTING, K.WAITING, T.COMMIT),
        (K.COMMITTING, K.SUCCEEDED, T.COMMIT),
        (K.COMMITTING, K.FAILED, T.COMMIT),
        (K.COMMITTING, K.PAUSED, T.COMMIT),
        (K.WAITING, K.READY, T.JOIN),
        (K.WAITING, K.WAITING, T.JOIN_OBSERVATION),
        (K.WAITING, K.FAILED, T.DEPENDENCY_FAILURE),
        (K.WAITING, K.FAILED, T.PROTOCOL_ERROR),
        (K.FAILED, K.READY, T.OPERATOR_CONTINUE),
        (K.PAUSED, K.READY, T.OPERATOR_CONTINUE),
        (K.CANCELLING, K.CANCELLED, T.CANCEL_VERIFIED),
        *((kind, K.CANCELLED, T.CANCEL) for kind in _NONTERMINAL if kind != K.CANCELLING),
        *((kind, K.PAUSED, T.PAUSE) for kind in (K.SUBMITTED, K.READY, K.WAITING)),
        *((kind, kind, T.SET_PRIORITY) for kind in (K.SUBMITTED, K.READY, K.WAITING, K.PAUSED, K.FAILED)),
        (K.CLAIMED, K.CLAIMED, T.TAKEOVER),
        (K.RUNNING, K.CLAIMED, T.TAKEOVER),
        *((kind, kind, T.FSCK_REPAIR) for kind in CORE_KINDS),
    }
)


def check_transition(source: Kind, destination: Kind, trigger: Trigger) -> None:
    """Refuse any marker move that is not a row of :data:`TRANSITIONS`."""
    if (source, destination, trigger) not in TRANSITIONS:
        raise TransitionError(
            f"illegal transition {source.value} -> {destination.value} by {trigger.value}: "
            "not a row of the core state machine"
        )


OWNED_KINDS = frozenset({Kind.CLAIMED, Kind.RUNNING, Kind.COMMITTING, Kind.CANCELLING})
"""Kinds whose frame names the manager that owns the job's next transition."""
