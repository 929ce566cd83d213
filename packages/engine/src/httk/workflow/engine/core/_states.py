"""The state machine as data: every state kind, every legal marker move, and every fact about kinds.

Each row of :data:`TRANSITIONS` is one verified rename of the same marker. :func:`check_transition` is
consulted by the one function that moves markers, so an illegal transition cannot be written at all.

Every other module asks this one what a kind is: terminal, active, owned, queued, fenced... Where a fact
follows from the table it is derived from it (:func:`sources`, :func:`destinations`), so the table and
the facts cannot disagree; ``tests/engine/core/test_states.py`` pins each set to the specification.
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
    FSCK_REBUILD = "fsck_rebuild"
    TRANSFER_DETACH = "transfer_detach"
    TRANSFER_IMPORT = "transfer_import"
    TRANSFER_ABORT = "transfer_abort"


K = Kind
T = Trigger

REBUILDS = {
    K.SUBMITTED: K.READY,
    K.READY: K.READY,
    K.CLAIMED: K.READY,
    K.RUNNING: K.READY,
    K.COMMITTING: K.READY,
    K.CANCELLING: K.CANCELLED,
    K.PAUSED: K.PAUSED,
    K.FAILED: K.FAILED,
    K.CANCELLED: K.CANCELLED,
    K.SUCCEEDED: K.SUCCEEDED,
}
"""Where ``workspace fsck --rebuild-lost`` moves a marker whose job has no readable frame at all: a job
not yet started is registered afresh, one an attempt held is queued for a new attempt of its initial
step, a cancellation in progress ends, and a job at rest keeps its kind. Waiting is not here: the join it
waits for was only in the lost history."""

TERMINAL_KINDS = frozenset({K.SUCCEEDED, K.FAILED, K.CANCELLED})
"""Terminal for scheduling: no manager moves these markers on its own, and a cancel no longer applies."""

CORE_KINDS = tuple(kind for kind in Kind if kind not in (K.RELOCATING, K.TRANSFERRING))
"""The kinds of the core profile, in the state table's order (the listing order of ``job list``)."""

NONTERMINAL_KINDS = frozenset(kind for kind in CORE_KINDS if kind not in TERMINAL_KINDS)

# Invariant: this table is exactly the specification's "Every transition of the core profile" table,
# plus the two rows recovery needs (takeover of claimed/running to a new claim), fsck repair, which
# keeps the kind, fsck's rebuild of a job whose whole history was lost (REBUILDS), and waiting -> waiting
# by join_observation: DECISIONS D7 persists the instant a join
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
        *((kind, K.CANCELLED, T.CANCEL) for kind in NONTERMINAL_KINDS if kind != K.CANCELLING),
        *((kind, K.PAUSED, T.PAUSE) for kind in (K.SUBMITTED, K.READY, K.WAITING)),
        *((kind, kind, T.SET_PRIORITY) for kind in (K.SUBMITTED, K.READY, K.WAITING, K.PAUSED, K.FAILED)),
        (K.CLAIMED, K.CLAIMED, T.TAKEOVER),
        (K.RUNNING, K.CLAIMED, T.TAKEOVER),
        *((kind, kind, T.FSCK_REPAIR) for kind in CORE_KINDS),
        *((source, destination, T.FSCK_REBUILD) for source, destination in REBUILDS.items()),
    }
)


TRANSFERABLE_KINDS = frozenset({K.READY, K.PAUSED, K.FAILED, K.SUCCEEDED, K.CANCELLED})
"""The kinds a job may be detached in (detached-transfer-v1): the quiescent kinds of spec/01 but
waiting, whose join resolves its children by their placement in this workspace."""

TRANSFER_TRIGGERS = frozenset({T.TRANSFER_DETACH, T.TRANSFER_IMPORT, T.TRANSFER_ABORT})

TRANSFER_TRANSITIONS: frozenset[tuple[Kind, Kind, Trigger]] = frozenset(
    {
        *((kind, K.TRANSFERRING, T.TRANSFER_DETACH) for kind in TRANSFERABLE_KINDS),
        *((K.TRANSFERRING, kind, T.TRANSFER_IMPORT) for kind in TRANSFERABLE_KINDS),
        *((K.TRANSFERRING, kind, T.TRANSFER_ABORT) for kind in TRANSFERABLE_KINDS),
    }
)
"""The extension's rows (spec/01, "Relocating and transferring jobs"): a job enters transferring from
the kind it rests in and leaves it, imported or aborted, into that same kind. Kept apart from
:data:`TRANSITIONS`, the core table, so no fact about the core kinds changes; only an operator's
``transfer`` command moves these markers, never a manager pass."""


def check_transition(source: Kind, destination: Kind, trigger: Trigger) -> None:
    """Refuse any marker move that is not a row of :data:`TRANSITIONS` or :data:`TRANSFER_TRANSITIONS`."""
    row = (source, destination, trigger)
    if row not in TRANSITIONS and row not in TRANSFER_TRANSITIONS:
        raise TransitionError(
            f"illegal transition {source.value} -> {destination.value} by {trigger.value}: "
            "not a row of the core state machine"
        )


def sources(*triggers: Trigger) -> frozenset[Kind]:
    """The kinds a marker can leave by one of ``triggers``."""
    return frozenset(source for source, _, trigger in TRANSITIONS if trigger in triggers)


def destinations(source: Kind, *triggers: Trigger) -> frozenset[Kind]:
    """The kinds a marker of ``source`` can reach by one of ``triggers``."""
    return frozenset(dest for src, dest, trigger in TRANSITIONS if src is source and trigger in triggers)


OPERATOR_TRIGGERS = frozenset(
    {T.OPERATOR_CONTINUE, T.CANCEL, T.CANCEL_FENCE, T.PAUSE, T.SET_PRIORITY, *TRANSFER_TRIGGERS}
)
"""The moves only an operator causes (a request, ``job delete``'s cancel fence, a transfer command)."""

MANAGER_TRIGGERS = frozenset(Trigger) - OPERATOR_TRIGGERS - {T.FSCK_REPAIR, T.FSCK_REBUILD}
"""The moves a manager makes on its own."""

ACTIVE_KINDS = sources(*MANAGER_TRIGGERS)
"""The kinds a manager moves on its own, so its passes stream them (``manager._manager.PASSES`` orders
them); no pass ever opens another kind."""

AT_REST_KINDS = frozenset(CORE_KINDS) - ACTIVE_KINDS
"""Where a job stays until an operator acts: paused or terminal (``job debug`` stops there)."""

PERMANENT_KINDS = frozenset(CORE_KINDS) - sources(*MANAGER_TRIGGERS, *OPERATOR_TRIGGERS)
"""Nothing in the core profile moves these markers again (fsck keeps the kind; a transfer command of
detached-transfer-v1 takes them out of this workspace and back, not into another kind)."""

QUEUED_KINDS = sources(T.REGISTER, T.CLAIM)
"""A job no attempt has started on yet: what ``job delete`` fences before it removes anything."""


def _attempt_kinds() -> frozenset[Kind]:
    """From the claim along the attempt's own moves (launch, the outcome fence, the cancel fence)."""
    found, frontier = {K.CLAIMED}, [K.CLAIMED]
    while frontier:
        for kind in destinations(frontier.pop(), T.LAUNCH, T.OUTCOME, T.CANCEL_FENCE):
            if kind not in found:
                found.add(kind)
                frontier.append(kind)
    return frozenset(found)


OWNED_KINDS = _attempt_kinds()
"""An attempt's kinds, from its claim to its commit or cancellation: the frame names the manager that
owns the job's next transition, and nothing else touches the job while that manager heartbeats."""

FENCED_KINDS = destinations(K.RUNNING, T.OUTCOME, T.CANCEL_FENCE)
"""An attempt fenced: no outcome of it can commit any more, and finishing it needs the job's definition."""

IN_PROGRESS_KINDS = NONTERMINAL_KINDS - QUEUED_KINDS
"""Work is under way (an attempt, a join, a pause): the job's payload must be there."""

QUIESCENT_KINDS = frozenset(CORE_KINDS) - OWNED_KINDS - sources(T.REGISTER)
"""A registered job with no attempt in flight: no replay consults a transaction's trash again (spec/01,
"Relocation"), and no attempt adds a control directory."""

DISPOSABLE_KINDS = QUEUED_KINDS | TERMINAL_KINDS
"""No attempt, join or pause holds the job: its payload may go (``job delete``; collection removes the
marker of such a job whose payload is gone)."""

UNSUCCESSFUL_KINDS = TERMINAL_KINDS - {K.SUCCEEDED}
"""A job that ended without succeeding."""

RETIRES_ATTEMPT_CONTROL = destinations(K.COMMITTING, T.COMMIT) - {K.FAILED}
"""Commit destinations after which the manager removes the attempt's control directory (DECISIONS D5);
a failed attempt keeps it as evidence, and so does a cancelled one (never a commit destination)."""
