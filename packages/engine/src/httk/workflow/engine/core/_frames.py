"""State frames: the members every frame has, what each frame carries forward, and how a chain links.

A state frame is the journal record one marker move appends (``spec/01``, "State frames"). Its common
members (:data:`FRAME_COMMON_MEMBERS`) are written by :func:`state_frame` for every move; the members of
an activation (its step, identity, data generation, resources, job digest, join summary) are carried from
frame to frame by :func:`carried`; the attempt counters are :class:`Counters`. A chain is followed
backwards through ``previous_record_ref``, one generation at a time except behind an ``fsck_repair``
frame (:func:`previous_link`).

Pure: nothing here reads or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping
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
"""The members every state frame has, which :func:`state_frame` and :func:`move_marker` write themselves."""


def state_frame(
    workspace: Workspace,
    marker: MarkerLocation,
    destination: Kind,
    members: Mapping[str, Any],
) -> dict[str, Any]:
    """The state frame of a move of ``marker`` to ``destination``: the common members, then ``members``."""
    frame: dict[str, Any] = {
        "format": FRAME_FORMAT,
        "format_version": 1,
        "workspace_id": workspace.workspace_id,
        "job_id": marker.job_id,
        "job_key": marker.job_key,
        "placement": marker.placement,
        "state_generation": marker.name.generation + 1,
        "kind": destination.value,
        "previous_record_ref": None if marker.name.ref is None else str(marker.name.ref),
        "created_at": utc_timestamp(workspace.clock.now()),
    }
    frame.update(members)
    return frame


@dataclass(frozen=True, slots=True)
class Counters:
    activation_ordinal: int
    attempt_ordinal: int
    total_attempts: int

    @classmethod
    def of(cls, frame: Mapping[str, Any]) -> Counters:
        return cls(
            int(frame.get("activation_ordinal", 1)),
            int(frame.get("attempt_ordinal", 0)),
            int(frame.get("total_attempts", 0)),
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
    return {key: frame[key] for key in CARRY if key in frame}


def new_activation_base(frame: Mapping[str, Any]) -> dict[str, Any]:
    """What a new activation keeps of the previous one's frame: :func:`carried` less the activation's own."""
    return {key: value for key, value in carried(frame).items() if key not in ACTIVATION_ONLY}


def attempt_evidence(frame: Mapping[str, Any]) -> dict[str, Any]:
    """The attempt that ended and its workdir, kept in a terminal frame (a join reads them from there)."""
    return {key: frame[key] for key in ("attempt_id", "workdir") if key in frame}


def protocol_failure(message: str, **details: Any) -> dict[str, Any]:
    failure: dict[str, Any] = {"code": "protocol_error", "message": message}
    if details:
        failure["details"] = details
    return failure


def next_data_generation(current: int, changed: bool) -> int:
    """The data generation after a committed transaction: one more exactly when it changed data.

    Examples
    --------
    >>> next_data_generation(3, True), next_data_generation(3, False)
    (4, 3)
    """
    return current + 1 if changed else current


REPAIR_REASON = "fsck_repair"


# -- job log ------------------------------------------------------------------------------------------
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
