"""State frames: one immutable type, every frame family built here, and how a chain links.

A state frame is the journal record one marker move appends (``spec/01``, "State frames"). Every frame a
move writes is built by a function of this module and handed, as a :class:`Frame`, to
:func:`~._transition.move_marker`, which adds the common members (:data:`FRAME_COMMON_MEMBERS`) and
serializes the record once; a frame read back (:func:`~._jobs.read_frame`) is the same type. So what a
family carries forward, the attempt counters and the failure objects are written in one place, and the
engine reads frames through typed properties.

The families, by the move that writes them: a job's first activation; a claim and its launch; an
attempt's end without a committed outcome (another attempt, or failed); the committing fence and a
commit's destination (a new activation, waiting, succeeded, paused); a released claim; a join's
observation or failure; a cancellation (fence, direct, verified); and a move that keeps the kind
(a priority change, a repair). Each carries the activation's members forward (:func:`carried`); a new
activation drops what belonged to the old one (:func:`new_activation_base`).

Every builder is deterministic up to fresh identifiers: the same inputs give the same members, except
that a new activation gets a new ``activation_id`` and a claim new attempt and claim ids.

Pure: nothing here reads or writes a file.
"""

from __future__ import annotations

import uuid
from collections.abc import ItemsView, Iterator, KeysView, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from ._clock import utc_timestamp
from ._states import Kind
from ._workspace import MarkerLocation, Workspace

FRAME_FORMAT = "httk-workflow-state"
FRAME_COMMON_MEMBERS = frozenset(
    {
        "format",
        "format_version",
        "workspace_id",
        "job_id",
        "job_key",
        "placement",
        "state_generation",
        "kind",
        "previous_record_ref",
        "created_at",
        "priority",
        "reason",
    }
)
"""The members every state frame has, which :func:`record_of` writes (``reason`` from the frame)."""

REQUEST_MEMBERS = frozenset({"operator", "operator_key", "operator_reason", "request_id", "revival_hazard"})
"""What a move an operator's request caused records about the request (never carried further)."""


class Frame(Mapping[str, Any]):
    """One state frame, immutable: the kind it names, its members, and typed views of those the engine reads.

    A frame a move is about to write holds its family's members; ``priority`` is then the marker's new
    priority, ``None`` keeping the current one. A frame read back holds every member of its journal
    record. As a :class:`~collections.abc.Mapping` it is the document itself, for code that shows frames.
    """

    __slots__ = ("_members", "kind", "priority")

    kind: Kind
    priority: int | None
    _members: dict[str, Any]

    def __init__(self, kind: Kind, members: Mapping[str, Any], priority: int | None = None) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "_members", dict(members))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a frame is immutable: cannot set {name}")

    def __getitem__(self, key: str) -> Any:
        return self._members[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._members.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def keys(self) -> KeysView[str]:
        return self._members.keys()

    def items(self) -> ItemsView[str, Any]:
        return self._members.items()

    def __repr__(self) -> str:
        return f"Frame({self.kind.value!r}, {self._members!r})"

    def with_members(self, **changes: Any) -> Frame:
        """The same frame with ``changes`` set."""
        return Frame(self.kind, {**self._members, **changes}, self.priority)

    def with_defaults(self, **defaults: Any) -> Frame:
        """The same frame with each of ``defaults`` set where it has no such member yet."""
        return Frame(self.kind, {**defaults, **self._members}, self.priority)

    @property
    def reason(self) -> str | None:
        return _text(self._members.get("reason"))

    @property
    def step(self) -> str | None:
        return _text(self._members.get("step"))

    @property
    def activation_id(self) -> str | None:
        return _text(self._members.get("activation_id"))

    @property
    def data_generation(self) -> int | None:
        value = self._members.get("data_generation")
        return value if _is_generation(value) else None

    @property
    def counters(self) -> Counters:
        return Counters.of(self._members)

    @property
    def attempt_id(self) -> str | None:
        return _text(self._members.get("attempt_id"))

    @property
    def manager_id(self) -> str | None:
        return _text(self._members.get("manager_id"))

    @property
    def lease_seconds(self) -> float | None:
        value = self._members.get("lease_seconds")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def process(self) -> dict[str, Any]:
        """The attempt's recorded process identity; ``{}`` when none was recorded."""
        value = self._members.get("process")
        return value if isinstance(value, dict) else {}

    @property
    def failure(self) -> dict[str, Any] | None:
        value = self._members.get("failure")
        return value if isinstance(value, dict) else None

    @property
    def outcome(self) -> dict[str, Any] | None:
        value = self._members.get("outcome")
        return value if isinstance(value, dict) else None

    @property
    def join_summary(self) -> dict[str, Any] | None:
        value = self._members.get("join_summary")
        return value if isinstance(value, dict) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def record_of(workspace: Workspace, marker: MarkerLocation, frame: Frame) -> dict[str, Any]:
    """The journal record of moving ``marker`` to ``frame``: the common members, then the frame's own."""
    name = marker.name
    record: dict[str, Any] = {
        "format": FRAME_FORMAT,
        "format_version": 1,
        "workspace_id": workspace.workspace_id,
        "job_id": name.key.job_id,
        "job_key": str(name.key),
        "placement": marker.placement,
        "state_generation": name.generation + 1,
        "kind": frame.kind.value,
        "previous_record_ref": None if name.ref is None else str(name.ref),
        "created_at": utc_timestamp(workspace.clock.now()),
        **frame._members,
    }
    if frame.priority is not None:
        record["priority"] = frame.priority
    elif "priority" not in record:
        record["priority"] = name.priority
    return record


def _plain(frame: Mapping[str, Any]) -> Mapping[str, Any]:
    """The members of a frame as the dict it holds (a builder reads them through the mapping protocol
    otherwise, one Python call per member); any other mapping as it is."""
    return frame._members if type(frame) is Frame else frame


# -- what frames carry ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Counters:
    """The attempt counters of a frame (a ready frame holds the counts *before* its next attempt)."""

    activation_ordinal: int
    attempt_ordinal: int
    total_attempts: int

    @classmethod
    def of(cls, frame: Mapping[str, Any]) -> Counters:
        members = _plain(frame)
        return cls(
            int(members.get("activation_ordinal", 1)),
            int(members.get("attempt_ordinal", 0)),
            int(members.get("total_attempts", 0)),
        )

    def as_members(self) -> dict[str, int]:
        return {
            "activation_ordinal": self.activation_ordinal,
            "attempt_ordinal": self.attempt_ordinal,
            "total_attempts": self.total_attempts,
        }

    def claimed(self) -> Counters:
        """The counters of the attempt a claim starts."""
        return Counters(self.activation_ordinal, self.attempt_ordinal + 1, self.total_attempts + 1)

    def released(self) -> Counters:
        """Undo a claim whose attempt never launched."""
        return Counters(
            self.activation_ordinal, max(self.attempt_ordinal - 1, 0), max(self.total_attempts - 1, 0)
        )

    def advanced(self) -> Counters:
        """A new activation: its first attempt has not run yet."""
        return Counters(self.activation_ordinal + 1, 0, self.total_attempts)


CARRY = (
    "step",
    "activation_id",
    "activation_reason",
    "data_generation",
    "runner_steps",
    "resources",
    "job_digest",
    "join_summary",
)
# Invariant: join_summary belongs to the activation a join started, so every frame of that activation
# carries it (the revival guard of spec/01 reads the parent's current frame) and no later activation
# does: whatever starts a new activation drops it (:func:`new_activation_base`).
ACTIVATION_ONLY = ("join_summary",)


def carried(frame: Mapping[str, Any]) -> dict[str, Any]:
    """The members every frame of an activation carries forward from the previous one."""
    members = _plain(frame)
    return {key: members[key] for key in CARRY if key in members}


def with_counters(frame: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`carried` and the frame's counters: what every frame of the same attempt repeats."""
    return {**carried(frame), **Counters.of(frame).as_members()}


def new_activation_base(frame: Mapping[str, Any]) -> dict[str, Any]:
    """What a new activation keeps of the previous one's frame: :func:`carried` less the activation's own."""
    return {key: value for key, value in carried(frame).items() if key not in ACTIVATION_ONLY}


def attempt_evidence(frame: Mapping[str, Any]) -> dict[str, Any]:
    """The attempt that ended and its workdir, kept in a terminal frame (a join reads them from there)."""
    return {key: frame[key] for key in ("attempt_id", "workdir") if key in frame}


def kept_members(frame: Mapping[str, Any] | None) -> dict[str, Any]:
    """The members a move that keeps the job's state (set_priority, the cancel fence) copies forward.

    Everything the frame records about the state itself — a waiting job's join and first unresolved
    instant, a failure, a pause reason, an attempt's identity and lease — but not the members every frame
    writes afresh, nor what an earlier request recorded about itself.
    """
    if frame is None:
        return {}
    return {key: value for key, value in frame.items() if key not in FRAME_COMMON_MEMBERS | REQUEST_MEMBERS}


def next_data_generation(current: int, changed: bool) -> int:
    """The data generation after a committed transaction: one more exactly when it changed data."""
    return current + 1 if changed else current


# -- failures ---------------------------------------------------------------------------------------
def failure_of(code: str, message: str, **details: Any) -> dict[str, Any]:
    """A failure object: ``code``, ``message`` and, when given, ``details``."""
    return {"code": code, "message": message, **({"details": details} if details else {})}


def protocol_failure(message: str, **details: Any) -> dict[str, Any]:
    return failure_of("protocol_error", message, **details)


# -- the families -----------------------------------------------------------------------------------
def first_activation(document: Mapping[str, Any], digest: str, **members: Any) -> Frame:
    """A job's first activation, before its first attempt (``ready``), from its job.json."""
    return Frame(
        Kind.READY,
        {
            "step": document["initial_step"],
            "activation_id": str(uuid.uuid4()),
            "activation_reason": "initial",
            "attempt_reason": "initial",
            "previous_attempt_id": None,
            "unclean_restart": False,
            **Counters(1, 0, 0).as_members(),
            "data_generation": 0 if document["data"]["mode"] == "transactional" else None,
            "resources": dict(document.get("resources") or {}),
            "job_digest": digest,
            **members,
        },
    )


def invalid_submission(failure: Mapping[str, Any]) -> Frame:
    """A submitted job registration refused (``failed``, ``protocol_error``)."""
    return Frame(Kind.FAILED, {"failure": dict(failure), "reason": "invalid_submission"})


def claim(
    ready: Mapping[str, Any],
    *,
    manager_id: str,
    writer_id: str,
    lease_seconds: float,
    lease_started_at: str,
    pool: str,
    capabilities: list[str],
) -> Frame:
    """The claimed frame of a new attempt of the ready job (fresh attempt and claim ids)."""
    members: dict[str, Any] = {
        **carried(ready),
        **Counters.of(ready).claimed().as_members(),
        "attempt_id": str(uuid.uuid4()),
        "claim_id": str(uuid.uuid4()),
        "manager_id": manager_id,
        "writer_id": writer_id,
        "lease_seconds": lease_seconds,
        "lease_started_at": lease_started_at,
        "pool": pool,
        "capabilities": capabilities,
        "attempt_reason": ready.get("attempt_reason", "initial"),
        "previous_attempt_id": ready.get("previous_attempt_id"),
        "unclean_restart": bool(ready.get("unclean_restart", False)),
        "reason": "claimed",
    }
    if "takeover" in ready:
        members["takeover"] = ready["takeover"]  # the evidence belongs in the new attempt's frames
    return Frame(Kind.CLAIMED, members)


def launched(
    claimed: Mapping[str, Any], process: Mapping[str, Any], workdir: str, confinement: Mapping[str, Any]
) -> Frame:
    """The running frame: the claim, the process identity behind the launch gate, and what confines it."""
    members = {"process": dict(process), "workdir": workdir, "confinement": dict(confinement)}
    return Frame(Kind.RUNNING, {**_plain(claimed), **members, "reason": "launched"})


def preparation_failed(claimed: Mapping[str, Any], manager_id: str, failure: Mapping[str, Any]) -> Frame:
    """A claimed attempt that could not be prepared or started (``failed``)."""
    return Frame(
        Kind.FAILED,
        {
            **with_counters(claimed),
            "attempt_id": claimed["attempt_id"],
            "manager_id": manager_id,
            "failure": dict(failure),
            "reason": "prepare_failure",
        },
    )


def committing(
    running: Mapping[str, Any],
    *,
    manager_id: str,
    writer_id: str,
    outcome: Mapping[str, Any] | None,
    defect: str | None,
    spawned: list[dict[str, Any]],
) -> Frame:
    """The fence of an attempt's end: the validated outcome (``None`` with the ``defect`` that made it
    unusable) and its spawn set, from which any manager finishes the commit."""
    members: dict[str, Any] = {
        **with_counters(running),
        "attempt_id": running["attempt_id"],
        "manager_id": manager_id,
        "writer_id": writer_id,
        "outcome": None if outcome is None else dict(outcome),
        "reason": "outcome" if defect is None else "unusable_outcome",
    }
    if "workdir" in running:
        members["workdir"] = running["workdir"]  # kept in a terminal frame, where a join reads it
    if defect is not None:
        members["failure"] = protocol_failure(f"the published outcome is unusable: {defect}")
    elif outcome is not None and "runner_steps" in outcome:
        members["runner_steps"] = outcome["runner_steps"]  # copied into the frame it writes (spec)
    if spawned:
        members["spawned"] = spawned
    return Frame(Kind.COMMITTING, members)


def failed(frame: Mapping[str, Any], failure: Mapping[str, Any], reason: str, **members: Any) -> Frame:
    """The job failed with ``failure``; the attempt that ended and its workdir stay as evidence."""
    return Frame(
        Kind.FAILED,
        {
            **with_counters(frame),
            **attempt_evidence(frame),
            "failure": dict(failure),
            "reason": reason,
            **members,
        },
    )


def another_attempt(frame: Mapping[str, Any], attempt_reason: str, *, unclean: bool, **members: Any) -> Frame:
    """The same activation queued for another attempt (``ready``); ``members`` say why."""
    return Frame(
        Kind.READY,
        {
            **with_counters(frame),
            "attempt_reason": attempt_reason,
            "previous_attempt_id": frame.get("attempt_id"),
            "unclean_restart": unclean,
            "reason": "retry",
            **members,
        },
    )


def next_activation(previous: Mapping[str, Any], step: str, activation_reason: str, **members: Any) -> Frame:
    """A new activation at ``step`` (``ready``, before its first attempt); ``members`` name its cause."""
    return Frame(
        Kind.READY,
        {
            **new_activation_base(previous),
            **Counters.of(previous).advanced().as_members(),
            "step": step,
            "activation_id": str(uuid.uuid4()),
            "activation_reason": activation_reason,
            "attempt_reason": activation_reason,
            "previous_attempt_id": None,
            "unclean_restart": False,
            **members,
        },
    )


def waiting(previous: Mapping[str, Any], join: Mapping[str, Any], next_step: str) -> Frame:
    """A committed wait: the join (labels attached) and the step its decision starts."""
    return Frame(
        Kind.WAITING,
        {
            **with_counters(previous),
            "join": dict(join),
            "next_step": next_step,
            "first_unresolved_at": None,
            "reason": "wait",
        },
    )


def observed(waiting: Mapping[str, Any], first_unresolved_at: str | None, **members: Any) -> Frame:
    """The same join, with the instant a child was first found unresolvable recorded or cleared (D7)."""
    kept = {key: value for key, value in waiting.items() if key not in FRAME_COMMON_MEMBERS}
    return Frame(Kind.WAITING, {**kept, "first_unresolved_at": first_unresolved_at, **members})


def join_failed(
    waiting: Mapping[str, Any],
    failure: Mapping[str, Any],
    reason: str,
    *,
    manager_id: str,
    decided: Mapping[str, Any] | None = None,
) -> Frame:
    """A waiting job failed by its join; a decided join's summary stays as the decision's evidence."""
    members: dict[str, Any] = {**with_counters(waiting), "failure": dict(failure)}
    if decided is not None:
        members["join_summary"] = dict(decided)
    return Frame(Kind.FAILED, {**members, "manager_id": manager_id, "reason": reason})


def released(claimed: Mapping[str, Any], manager_id: str, evidence: Mapping[str, Any]) -> Frame:
    """A stale claim undone (``ready``, its counters back): its attempt never launched. ``evidence`` is
    what the releaser knew of the claiming manager (its heartbeat's age, whether it is known dead)."""
    return Frame(
        Kind.READY,
        {
            **carried(claimed),
            **Counters.of(claimed).released().as_members(),
            "attempt_reason": claimed.get("attempt_reason", "initial"),
            "previous_attempt_id": claimed.get("previous_attempt_id"),
            "unclean_restart": bool(claimed.get("unclean_restart")),
            "released_claim": {
                "manager_id": claimed.get("manager_id"),
                "attempt_id": claimed.get("attempt_id"),
                **evidence,
            },
            "manager_id": manager_id,
            "reason": "released_stale_claim",
        },
    )


def cancelled_directly(
    source: Kind, frame: Mapping[str, Any] | None, manager_id: str | None = None, **members: Any
) -> Frame:
    """A cancel of a job no live attempt holds (``cancelled``, ``no_live_attempt``). From ``claimed`` it
    records that no process was launched: the gate opens only after the running rename this one prevents.
    ``members`` say who asked."""
    base = {} if frame is None else with_counters(frame)
    cancellation: dict[str, Any] = {"verified": "no_live_attempt"}
    if source is Kind.CLAIMED and frame is not None:
        cancellation = {
            "verified": "no_launched_process",
            "attempt_id": frame.get("attempt_id"),
            "previous_manager_id": frame.get("manager_id"),
        }
        base["attempt_id"] = frame.get("attempt_id")
    owner = {} if manager_id is None else {"manager_id": manager_id}
    return Frame(Kind.CANCELLED, {**base, **members, **owner, "cancellation": cancellation})


def kept(
    kind: Kind, frame: Mapping[str, Any] | None, *, priority: int | None = None, **members: Any
) -> Frame:
    """A move that keeps the job's state (:func:`kept_members`), in ``kind``, with ``members`` added."""
    return Frame(kind, {**kept_members(frame), **members}, priority)


def activation_members(frame: Mapping[str, Any] | None) -> dict[str, Any]:
    """The activation members and counters a frame carries; nothing for a job never registered."""
    if frame is None or "activation_id" not in frame:
        return {}
    return with_counters(frame)


def operator_paused(frame: Mapping[str, Any] | None, pause: Mapping[str, Any], **members: Any) -> Frame:
    """A job an operator paused, its activation kept for when it continues."""
    return Frame(Kind.PAUSED, {**activation_members(frame), "pause": dict(pause), **members})


REBUILD_REASON = "fsck_rebuild"
# -- chain links -------------------------------------------------------------------------------------
REPAIR_REASON = "fsck_repair"


def previous_link(frame: Mapping[str, Any]) -> tuple[object, range]:
    """A state frame's ``previous_record_ref`` and the generations the frame it names may carry.

    One below the frame's own (none below generation 1), except behind an ``fsck_repair`` frame whose
    repair record names exactly that predecessor as the frame it recovered: a repair adopts the newest
    readable frame strictly older than the damaged marker, whose generation is one below the repair's, so
    the predecessor is at least two below and the generations between were lost to the damage.
    """
    previous, generation = frame.get("previous_record_ref"), frame.get("state_generation")
    if not _is_generation(generation):
        return previous, range(0)
    if repaired_from(frame, previous):
        return previous, range(1, generation - 1)
    return previous, range(max(generation - 1, 1), generation)


def repaired_from(frame: Mapping[str, Any], previous: object) -> bool:
    """Whether ``frame`` is an ``fsck_repair`` frame whose record names ``previous`` as what it recovered."""
    record = frame.get("fsck_repair")
    return (
        frame.get("reason") == REPAIR_REASON
        and isinstance(record, Mapping)
        and isinstance(previous, str)
        and record.get("recovered_record_ref") == previous
    )


def _is_generation(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def fits_link(frame: Mapping[str, Any], expected: range) -> bool:
    """Whether ``frame`` carries one of the generations :func:`previous_link` allows it."""
    generation = frame.get("state_generation")
    return _is_generation(generation) and generation in expected
