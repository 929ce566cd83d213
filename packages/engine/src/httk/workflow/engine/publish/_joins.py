"""Joins: validating the child set a ``wait`` names, and evaluating it against the children's markers.

**Validating a wait** (:func:`parse_join`, :func:`validate_wait`, part of outcome validation). A join
names at least one and at most :data:`MAX_CHILDREN` distinct children of this workspace, each with its
``job_key`` and ``placement_hint`` (the core profile resolves a child only there, so a reference
without one is the publisher's protocol error); ``condition`` is one of :data:`CONDITIONS`;
``at_least`` carries ``count`` from 1 to the number of children and no other condition carries one.
``on_impossible`` is optional; with action ``advance`` its ``next_step`` must be a step name, and any
other action is recorded and means ``dependency_failure`` when success becomes impossible. Each child
must be *registered by this outcome* (its identity and ``placement_hint`` equal the spawn entry's) or
*already exist* at its ``placement_hint`` when the outcome is validated: a join naming a job that cannot
be found is refused at once rather than failed an hour later by the grace. Children of the spawn set
carry their label into the waiting frame's join; other children have none.

**Evaluating** (:func:`evaluate`). Each child is looked up by listing the finite set of state-kind
directories at its ``placement_hint`` — never the index, never a workspace scan — and every directory
is listed at most once per evaluation however many siblings share it (a second listing only for the
placements where a child was missed or seen twice, the trace of a concurrent rename; a child still
seen twice is settled by :func:`probe_marker`'s own rescans). The observation vector is built only once
the condition is decided: one frame read per child, for its failure, data generation and workdir.

Deciding and moving the waiting job is :mod:`._waiting`.

Cost per evaluation: ``len(CORE_KINDS)`` directory listings per distinct placement (twice at most), one
``rsplit`` and one set lookup per listed name (names are parsed only once the join is decided), plus,
once decided, one journal read per child. Nothing here writes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._jobs import JobCache
from httk.workflow.engine.core._states import UNSUCCESSFUL_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, kind_entries, probe_marker
from httk.workflow.protocol import (
    InvalidNameError,
    JobKey,
    MarkerName,
    TransitionError,
    WorkflowError,
    validate_child_label,
    validate_placement,
    validate_step,
    validate_uuid,
)

from ._outcome import MAX_CHILDREN, SpawnedChild

log = logging.getLogger("httk.workflow.manager")

CONDITIONS = ("all_succeeded", "all_terminal", "any_succeeded", "at_least")
NAMED_IN_DETAILS = 20
"""How many children a failure's details list by job key (the message names one)."""


class JoinError(ValueError):
    """A join member is malformed or names children that cannot be joined; the message says which."""


class Verdict(StrEnum):
    SATISFIED = "satisfied"
    IMPOSSIBLE = "impossible"
    PENDING = "pending"


@dataclass(frozen=True, slots=True)
class JoinChild:
    """One child a join names: exact identity, the placement it is looked up at, and its label."""

    workspace_id: str
    job_id: str
    job_key: str
    placement_hint: str
    label: str | None = None

    def as_member(self) -> dict[str, Any]:
        member: dict[str, Any] = {
            "workspace_id": self.workspace_id,
            "job_id": self.job_id,
            "job_key": self.job_key,
            "placement_hint": self.placement_hint,
        }
        if self.label is not None:
            member["label"] = self.label
        return member

    @property
    def name(self) -> str:
        """How a message names the child: its label and job key."""
        return self.job_key if self.label is None else f"{self.label} ({self.job_key})"


@dataclass(frozen=True, slots=True)
class Join:
    """A parsed join: its children in order, the condition, and what to do when it is impossible."""

    children: tuple[JoinChild, ...]
    condition: str
    count: int | None = None
    on_impossible: Mapping[str, Any] | None = None

    def as_member(self) -> dict[str, Any]:
        member: dict[str, Any] = {
            "children": [child.as_member() for child in self.children],
            "condition": self.condition,
        }
        if self.count is not None:
            member["count"] = self.count
        if self.on_impossible is not None:
            member["on_impossible"] = dict(self.on_impossible)
        return member

    @property
    def impossible_step(self) -> str | None:
        """The step ``on_impossible`` advances to; ``None`` means fail with ``dependency_failure``."""
        policy = self.on_impossible
        if policy is not None and policy.get("action") == "advance":
            return str(policy["next_step"])
        return None


# -- parsing and validation ------------------------------------------------------------------------
def parse_join(value: object, *, workspace_id: str) -> Join:
    """The join of an outcome or a waiting frame, structurally checked (see the module header)."""
    if not isinstance(value, dict):
        raise JoinError("join must be an object")
    members = value.get("children")
    if not isinstance(members, list) or not members:
        raise JoinError("join.children must be a nonempty array")
    if len(members) > MAX_CHILDREN:
        raise JoinError(f"join names {len(members)} children, over the limit of {MAX_CHILDREN}")
    children = tuple(_join_child(index, member, workspace_id) for index, member in enumerate(members))
    if len({child.job_id for child in children}) != len(children):
        raise JoinError("join.children names a child more than once")
    condition = value.get("condition")
    if condition not in CONDITIONS:
        raise JoinError(f"join.condition {condition!r} is not one of {', '.join(CONDITIONS)}")
    count = value.get("count")
    if condition == "at_least":
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= len(children):
            raise JoinError(f"join.count must be an integer from 1 to {len(children)} for at_least")
    elif "count" in value:
        raise JoinError(f"join.count applies only to at_least, not to {condition}")
    return Join(children, condition, count, _on_impossible(value))


def _join_child(index: int, member: object, workspace_id: str) -> JoinChild:
    where = f"join.children[{index}]"
    if not isinstance(member, dict):
        raise JoinError(f"{where} must be an object")
    for name in ("workspace_id", "job_id", "job_key", "placement_hint"):
        if not isinstance(member.get(name), str):
            raise JoinError(f"{where}.{name} is required (the core profile resolves a child only there)")
    try:
        validate_uuid(member["workspace_id"], "workspace id")
        validate_uuid(member["job_id"])
        key = JobKey.parse(member["job_key"])
        validate_placement(member["placement_hint"])
        label = member.get("label")
        if label is not None:
            validate_child_label(label)
    except InvalidNameError as exc:
        raise JoinError(f"{where}: {exc}") from None
    if member["workspace_id"] != workspace_id:
        raise JoinError(
            f"{where} is in workspace {member['workspace_id']}: cross-workspace joins need an extension"
        )
    if key.job_id != member["job_id"]:
        raise JoinError(f"{where}.job_key {member['job_key']} does not end in its job_id")
    return JoinChild(
        member["workspace_id"], member["job_id"], member["job_key"], member["placement_hint"], label
    )


def _on_impossible(value: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if "on_impossible" not in value:
        return None
    policy = value["on_impossible"]
    if not isinstance(policy, dict):
        raise JoinError("join.on_impossible must be an object")
    if policy.get("action") == "advance":
        try:
            validate_step(policy.get("next_step"))  # type: ignore[arg-type]  # it checks the type itself
        except InvalidNameError as exc:
            raise JoinError(f"join.on_impossible.next_step: {exc}") from None
    return policy


def validate_wait(
    value: object, spawned: Sequence[SpawnedChild], workspace: Workspace, parent_job_id: str
) -> Join:
    """The join of a ``wait`` outcome, checked against its spawn set and the workspace; labels attached."""
    join = parse_join(value, workspace_id=workspace.workspace_id)
    own = {child.job_id: child for child in spawned}
    labelled: list[JoinChild] = []
    others: list[JoinChild] = []
    for child in join.children:
        if child.job_id == parent_job_id:
            raise JoinError(f"join child {child.job_key} is the waiting job itself")
        entry = own.get(child.job_id)
        if entry is None:
            others.append(replace(child, label=None))
            labelled.append(others[-1])
        elif (entry.job_key, entry.placement) != (child.job_key, child.placement_hint):
            raise JoinError(
                f"join child {child.job_key} at {child.placement_hint} disagrees with its spawn entry "
                f"{entry.job_key} at {entry.placement}"
            )
        else:
            labelled.append(replace(child, label=entry.label))
    for child, sighting in zip(others, locate(workspace, others), strict=True):
        if sighting is None:
            raise JoinError(
                f"join child {child.job_key} is neither spawned by this outcome nor registered at its "
                f"placement_hint {child.placement_hint}"
            )
    return replace(join, children=tuple(labelled))


# -- locating children -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Sighting:
    """A child's marker as one listing saw it; the name is parsed only when a decision needs it."""

    kind: Kind
    placement: str
    name: str

    def location(self) -> MarkerLocation:
        """The parsed marker (:class:`InvalidNameError` for a name that only looked like one)."""
        return MarkerLocation(self.kind, self.placement, MarkerName.parse(self.name))


def _key_of(marker_name: str) -> str | None:
    """The job-key text of a marker basename ``<job-key>.p<prio>.g<gen>.<ref>``, by its shape alone."""
    parts = marker_name.rsplit(".", 3)
    if len(parts) != 4 or parts[1][:1] != "p" or parts[2][:1] != "g":
        return None
    return parts[0]


def _list(workspace: Workspace, wanted: Mapping[str, set[str]]) -> dict[tuple[str, str], list[Sighting]]:
    """Every marker of a wanted job key at each placement: each state-kind directory listed once."""
    found: dict[tuple[str, str], list[Sighting]] = {}
    for placement, keys in wanted.items():
        for kind, entry in kind_entries(workspace, placement):
            key = _key_of(entry.name)
            if key in keys and entry.is_file(follow_symlinks=False):
                found.setdefault((placement, key), []).append(Sighting(kind, placement, entry.name))
    return found


def locate(workspace: Workspace, children: Sequence[JoinChild]) -> list[Sighting | None]:
    """Each child's current marker at its placement_hint, or ``None`` when it cannot be resolved there."""
    result: list[Sighting | None] = [None] * len(children)
    pending = list(range(len(children)))
    doubled: list[int] = []
    for _listing in range(2):
        wanted: dict[str, set[str]] = {}
        for index in pending:
            wanted.setdefault(children[index].placement_hint, set()).add(children[index].job_key)
        found = _list(workspace, wanted)
        retry: list[int] = []
        doubled = []
        for index in pending:
            seen = found.get((children[index].placement_hint, children[index].job_key), [])
            if len(seen) == 1:
                result[index] = seen[0]
            else:
                retry.append(index)
                if seen:
                    doubled.append(index)
        pending = retry
        if not pending:
            break
    for index in doubled:  # two markers in both listings: the probe's own rescans tell a race from damage
        child = children[index]
        try:
            marker = probe_marker(workspace, child.placement_hint, child.job_key)
        except TransitionError as exc:
            log.error("join child %s cannot be resolved: %s (run workspace fsck)", child.job_key, exc)
            continue
        if marker is not None:
            result[index] = Sighting(marker.kind, marker.placement, str(marker.name))
    return result


# -- judging and observing -------------------------------------------------------------------------
def judge(condition: str, count: int | None, kinds: Sequence[Kind]) -> Verdict:
    """Whether a fully resolved observation vector satisfies the condition, makes it impossible, or neither.

    Terminal nonsuccess is failed or cancelled (a failed child counts even though an operator could
    continue it); ``all_terminal`` is never impossible.
    """
    succeeded = sum(kind is Kind.SUCCEEDED for kind in kinds)
    unsuccessful = sum(kind in UNSUCCESSFUL_KINDS for kind in kinds)
    still_open = len(kinds) - succeeded - unsuccessful
    if condition == "all_succeeded":
        satisfied, impossible = succeeded == len(kinds), unsuccessful > 0
    elif condition == "all_terminal":
        satisfied, impossible = still_open == 0, False
    elif condition == "any_succeeded":
        satisfied, impossible = succeeded > 0, still_open == 0
    else:
        needed = count or 1
        satisfied, impossible = succeeded >= needed, succeeded + still_open < needed
    if satisfied:
        return Verdict.SATISFIED
    return Verdict.IMPOSSIBLE if impossible else Verdict.PENDING


def observe(
    workspace: Workspace, child: JoinChild, marker: MarkerLocation, jobs: JobCache | None = None
) -> dict[str, Any]:
    """The observation of one child (schema ``child_observation``), its frame read once."""
    frame: dict[str, Any] | None = None
    if marker.name.ref is not None:
        try:
            frame = workspace.reader.read(marker.name.ref)
        except WorkflowError as exc:
            log.warning(
                "join child %s: its frame cannot be read (%s); observed without it", child.job_key, exc
            )
    payload = f"{marker.placement}/{marker.job_key}"
    failure = frame.get("failure") if frame is not None and marker.kind in UNSUCCESSFUL_KINDS else None
    return {
        "workspace_id": child.workspace_id,
        "label": child.label,
        "job_id": child.job_id,
        "job_key": child.job_key,
        "placement": marker.placement,
        "kind": marker.kind.value,
        "state_generation": marker.name.generation,
        "record_ref": marker.name.ref_text,
        "failure": failure,
        "data_generation": None if frame is None else frame.get("data_generation"),
        "payload_path": payload,
        "workdir_path": _workdir_path(marker, payload, frame, jobs),
    }


def _workdir_path(
    marker: MarkerLocation, payload: str, frame: Mapping[str, Any] | None, jobs: JobCache | None
) -> str | None:
    """The child's workdir relative to the workspace: from its frame, else from its job.json."""
    recorded = None if frame is None else frame.get("workdir")
    if isinstance(recorded, str):
        anchor = f"/{payload}/"
        position = recorded.rfind(anchor)
        if position >= 0:
            return payload + "/" + recorded[position + len(anchor) :]
    if jobs is None:
        return None
    try:
        workdir = jobs.get(marker).document["workdir"]
    except WorkflowError:
        return None
    if workdir["mode"] == "persistent":
        return f"{payload}/{workdir['path']}"
    attempt = None if frame is None else frame.get("attempt_id")
    return f"{payload}/run.{attempt}" if isinstance(attempt, str) else None


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One evaluation: each child's sighting (``None`` unresolved), the verdict, and, once decided, the
    observation vector in the join's order."""

    sightings: list[Sighting | None]
    verdict: Verdict | None  # None while a child is unresolvable: nothing can be decided without it
    observations: list[dict[str, Any]] | None = None

    @property
    def unresolved(self) -> list[int]:
        return [index for index, sighting in enumerate(self.sightings) if sighting is None]


def evaluate(workspace: Workspace, join: Join, jobs: JobCache | None = None) -> Evaluation:
    """Locate every child, judge the condition, and observe every child when it is decided."""
    sightings = locate(workspace, join.children)
    if any(sighting is None for sighting in sightings):
        return Evaluation(sightings, None)
    seen = [sighting for sighting in sightings if sighting is not None]
    verdict = judge(join.condition, join.count, [sighting.kind for sighting in seen])
    if verdict is Verdict.PENDING:
        return Evaluation(sightings, verdict)
    markers: list[MarkerLocation] = []
    for index, sighting in enumerate(seen):
        try:
            markers.append(sighting.location())
        except InvalidNameError:  # shaped like a marker, yet not one: fsck's business, never evidence
            return Evaluation([None if i == index else s for i, s in enumerate(sightings)], None)
    observations = [
        observe(workspace, child, marker, jobs) for child, marker in zip(join.children, markers, strict=True)
    ]
    return Evaluation(sightings, verdict, observations)


def summary(join: Join, evaluation: Evaluation, decided_at: datetime) -> dict[str, Any]:
    """The ``join_summary`` of a decided evaluation."""
    result: dict[str, Any] = {"condition": join.condition}
    if join.count is not None:
        result["count"] = join.count
    result["decision"] = str(evaluation.verdict)
    result["decided_at"] = utc_timestamp(decided_at)
    result["observations"] = evaluation.observations or []
    return result
