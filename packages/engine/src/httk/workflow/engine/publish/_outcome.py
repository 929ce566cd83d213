"""Published outcomes: reading one, validating it against the current attempt, and its child bundles.

An outcome is the directory ``.httk-attempt.<attempt-id>/outcome.ready/`` a step renamed into place; its
``outcome.json`` is authoritative over the process exit status. Validation is the first step of the
specification's processing order: the job, activation and attempt must be the current ones, the action
must be one of the six with its required members, a failure must be exactly the one failure shape. An
outcome that fails validation is *unusable*: the attempt is still fenced through committing and the job
fails with ``protocol_error`` naming the defect, so a broken runner can never make its failure invisible.
A ``wait``'s join (:mod:`._joins`) and any child bundles are validated beside it, because that needs the
workspace; the committing frame then holds the normalized join (labels attached) in its outcome and the
validated spawn set as ``spawned``. Where the outcome takes the job is the manager's
(:func:`httk.workflow.engine.manager._rules.decide`).

**Child bundles.** A step publishes children inside its outcome (``outcome.ready/children/spawn.json`` and
one bundle per child below ``children/jobs/<job-key>/``). What this module guarantees:

- :func:`read_spawn_set` is part of outcome validation (step 1 of the processing order). It accepts the
  spawn set only when *everything* in it is usable: spawn.json has the D13 shape, every entry is in
  this workspace with a unique UUID, a unique tag-syntax label and spawn id, a valid placement outside
  the parent's own payload; the bundle directories are exactly the entries' job keys; every bundle is a
  tree of regular files and directories whose job.json passes the submission rules, names the entry's
  UUID and tag, and whose ``parent`` is exactly this parent, activation and spawn entry; no different job
  already holds the destination. Any defect raises :class:`UnusableOutcomeError` before anything is
  registered, so the parent fails with ``protocol_error`` and no child of the set exists.
- :func:`register_children` is step 5: each bundle is renamed into ``<placement>/<job-key>`` and gets its
  one ``g0.init`` marker through the submission code (:meth:`Submitter.submit_bundle`), synchronized when
  durable, before the parent's destination frame is written. It is idempotent: a child already placed
  with the identical job digest only gets a missing marker, so a replay after a crash registers exactly
  the missing set. Registration is never rolled back. A bundle that vanished without its child being
  placed, or a different job under the same UUID, is :class:`ChildRegistrationError`.

Children are published only with ``advance``, ``succeed`` (detached children) and ``wait``; a fail,
retry or pause carrying children is unusable, because it would register jobs for a step that did not
finish. The committing frame records the validated set (:class:`SpawnedChild`, with each job digest),
which is what a replay registers; a set is at most :data:`MAX_CHILDREN` children, so every frame that
names them stays far below the journal's frame limit.

Cost: validation reads spawn.json and each child's job.json once and walks each bundle (normally one
or two files); registration is one rename and one marker per child (plus their directory fsyncs when
durable); a replay costs one job.json digest and one marker probe per child already registered.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol import (
    GENERATION_BITS,
    InvalidDocumentError,
    InvalidNameError,
    JobKey,
    SubmissionError,
    UnsafePathError,
    placement_prefix_matches,
    validate_child_label,
    validate_placement,
    validate_priority,
    validate_step,
    validate_uuid,
)
from httk.workflow.protocol._digest import job_digest
from httk.workflow.protocol._job_rules import PARENT_MEMBERS, check_resources, validate_failure, validate_job
from httk.workflow.protocol._jsonio import (
    has_format,
    parse_json_object,
    read_document_bytes,
    read_json_object,
)

from ._submit import JOB_FILE, SubmitResult, Submitter, refuse_unsafe_tree

OUTCOME_DIR = "outcome.ready"
OUTCOME_FILE = "outcome.json"
ACTIONS = frozenset({"advance", "wait", "succeed", "fail", "retry", "pause"})
MAX_OUTCOME_BYTES = 8 << 20
"""A wait may name up to 10,000 children (about 250 bytes each)."""
TRANSACTION_DIR = "transaction"
"""An outcome's transaction is the directory ``outcome.ready/transaction/``, never an outcome.json member."""


class UnusableOutcomeError(Exception):
    """The published outcome cannot be applied; the message names the defect."""


def read_outcome(control_dir: Path) -> dict[str, Any] | None:
    """The published outcome of an attempt, ``None`` when nothing was published.

    Raises :class:`UnusableOutcomeError` when ``outcome.ready`` exists but is no directory, or its
    outcome.json cannot be read.
    """
    ready = control_dir / OUTCOME_DIR
    try:
        mode = os.lstat(ready).st_mode
    except OSError:
        return None
    if not stat.S_ISDIR(mode):  # never a step of a correct publication, which renames a directory
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
        raise UnusableOutcomeError(f"{OUTCOME_DIR} is {what}; an outcome is published as a directory")
    try:
        return read_json_object(ready / OUTCOME_FILE, document="outcome.json", max_bytes=MAX_OUTCOME_BYTES)
    except InvalidDocumentError as exc:
        raise UnusableOutcomeError(str(exc)) from None


def _require_text(outcome: Mapping[str, Any], member: str, parent: str | None = None) -> str:
    holder: Any = outcome if parent is None else outcome.get(parent)
    value = holder.get(member) if isinstance(holder, Mapping) else None
    if not isinstance(value, str) or not value:
        where = member if parent is None else f"{parent}.{member}"
        raise UnusableOutcomeError(f"outcome member {where!r} must be a nonempty string")
    return value


def validate_outcome(
    outcome: Mapping[str, Any], *, job_id: str, activation_id: str, attempt_id: str
) -> tuple[dict[str, Any], list[str]]:
    """Check an outcome against the current attempt; return it (runner_steps dropped if malformed) and notes.

    Raises :class:`UnusableOutcomeError` naming the first defect.
    """
    notes: list[str] = []
    if not has_format(outcome, "httk-workflow-outcome"):
        raise UnusableOutcomeError(
            "outcome.json must have format 'httk-workflow-outcome' and format_version 1"
        )
    for member, expected in (
        ("job_id", job_id),
        ("activation_id", activation_id),
        ("attempt_id", attempt_id),
    ):
        if outcome.get(member) != expected:
            raise UnusableOutcomeError(
                f"outcome {member} {outcome.get(member)!r} is not the current attempt's {expected!r}"
            )
    action = outcome.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise UnusableOutcomeError(f"outcome action {action!r} is not one of {', '.join(sorted(ACTIONS))}")
    if "expected_data_generation" in outcome:
        generation = outcome["expected_data_generation"]
        if type(generation) is not int or not 0 <= generation < 1 << GENERATION_BITS:
            raise UnusableOutcomeError(
                "outcome member 'expected_data_generation' must be an unsigned 64-bit integer"
            )
    if action in ("advance", "wait"):
        try:
            validate_step(_require_text(outcome, "next_step"))
        except InvalidNameError as exc:
            raise UnusableOutcomeError(f"outcome next_step: {exc}") from None
    if action == "wait" and not isinstance(outcome.get("join"), dict):
        raise UnusableOutcomeError("a wait outcome needs a join object (its children and condition)")
    if action == "fail":
        try:
            validate_failure(outcome.get("failure"))
        except InvalidDocumentError as exc:
            raise UnusableOutcomeError(f"the published failure is malformed: {exc}") from None
    if action == "retry":
        _require_text(outcome, "reason", "retry")
    if action == "pause":
        _require_text(outcome, "reason", "pause")
    if "priority" in outcome:
        try:
            validate_priority(outcome["priority"])
        except InvalidNameError as exc:
            raise UnusableOutcomeError(f"outcome priority: {exc}") from None
    if "message" in outcome and not isinstance(outcome["message"], str):
        raise UnusableOutcomeError("outcome member 'message' must be a string")
    if "resources" in outcome:
        try:
            check_resources(outcome["resources"], None)  # job.json's rule: labels, non-negative integers
        except InvalidDocumentError as exc:
            raise UnusableOutcomeError(f"outcome member {exc.member!r}: {exc.rule}") from None
    cleaned = dict(outcome)
    if "runner_steps" in cleaned and not _valid_steps(cleaned["runner_steps"]):
        notes.append("ignored a malformed runner_steps (it must be an array of step names)")
        del cleaned["runner_steps"]
    return cleaned, notes


def _valid_steps(value: object) -> bool:
    if not isinstance(value, list):
        return False
    try:
        for step in value:
            validate_step(step)
    except InvalidNameError:
        return False
    return True


CHILDREN_DIR = "children"
SPAWN_FILE = "spawn.json"
JOBS_DIR = "jobs"
SPAWN_FORMAT = "httk-workflow-spawn"
MAX_CHILDREN = 10_000
"""Children of one spawn set (and of one join): keeps the frames naming them below the 16 MiB limit."""
MAX_SPAWN_BYTES = 8 << 20
SPAWNING_ACTIONS = frozenset({"advance", "succeed", "wait"})
ENTRY_MEMBERS = ("workspace_id", "job_id", "job_key", "label", "placement", "spawn_id")


class ChildRegistrationError(Exception):
    """A validated child could not be registered while its parent committed; the message names it."""


@dataclass(frozen=True, slots=True)
class ParentIdentity:
    """The parent as its children's job.json must name it (D13), less the per-child spawn id."""

    workspace_id: str
    job_id: str
    job_key: str
    placement: str
    activation_id: str

    def reference(self, spawn_id: str) -> dict[str, str]:
        """The ``parent`` member of a child's job.json, in D13 order."""
        return {
            "workspace_id": self.workspace_id,
            "job_id": self.job_id,
            "job_key": self.job_key,
            "placement": self.placement,
            "activation_id": self.activation_id,
            "spawn_id": spawn_id,
        }

    @property
    def payload_placement(self) -> str:
        """The parent's payload as a placement: no child may be placed at or below it."""
        return f"{self.placement}/{self.job_key}"


@dataclass(frozen=True, slots=True)
class SpawnedChild:
    """One validated child of a spawn set, as the committing frame records it for registration."""

    job_id: str
    job_key: str
    label: str
    placement: str
    spawn_id: str
    priority: int
    job_digest: str

    def as_member(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "job_key": self.job_key,
            "label": self.label,
            "placement": self.placement,
            "spawn_id": self.spawn_id,
            "priority": self.priority,
            "job_digest": self.job_digest,
        }

    @classmethod
    def from_member(cls, member: Mapping[str, Any]) -> SpawnedChild:
        """Read back an entry of a committing frame's ``spawned`` (``ValueError`` when malformed)."""
        try:
            child = cls(
                str(member["job_id"]),
                str(member["job_key"]),
                str(member["label"]),
                validate_placement(member["placement"]),
                str(member["spawn_id"]),
                int(member["priority"]),
                str(member["job_digest"]),
            )
            JobKey.parse(child.job_key)
        except (KeyError, TypeError, InvalidNameError) as exc:
            raise ValueError(f"malformed spawned child {member!r}: {exc}") from None
        return child


def children_dir(control_dir: Path) -> Path:
    """Where an attempt's published outcome keeps its child bundles."""
    return control_dir / OUTCOME_DIR / CHILDREN_DIR


# -- validation ------------------------------------------------------------------------------------
def read_spawn_set(
    workspace: Workspace, control_dir: Path, parent: ParentIdentity, action: str
) -> list[SpawnedChild]:
    """The validated spawn set of a published outcome; ``[]`` when it publishes no children.

    Raises :class:`UnusableOutcomeError` naming the first defect (see the module header).
    """
    root = children_dir(control_dir)
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(mode):
        raise UnusableOutcomeError(f"{CHILDREN_DIR}/ must be a directory (not a symlink or a file)")
    if action not in SPAWNING_ACTIONS:
        raise UnusableOutcomeError(
            f"children are published only with advance, succeed or wait, not with {action!r}"
        )
    entries = _spawn_entries(root / SPAWN_FILE)
    seen: dict[str, set[str]] = {"job_id": {parent.job_id}, "label": set(), "spawn_id": set()}
    checked = [_entry(index, entry, parent, seen) for index, entry in enumerate(entries)]
    _check_bundle_names(root / JOBS_DIR, [entry["job_key"] for entry in checked])
    return [_bundle(workspace, root / JOBS_DIR, entry, parent) for entry in checked]


def _spawn_entries(path: Path) -> list[Any]:
    try:
        spawn = read_json_object(path, document="spawn.json", max_bytes=MAX_SPAWN_BYTES)
    except (InvalidDocumentError, UnsafePathError) as exc:
        raise UnusableOutcomeError(f"{CHILDREN_DIR}/{SPAWN_FILE}: {exc}") from None
    if not has_format(spawn, SPAWN_FORMAT):
        raise UnusableOutcomeError(f"spawn.json must have format {SPAWN_FORMAT!r} and format_version 1")
    entries = spawn.get("children")
    if not isinstance(entries, list):
        raise UnusableOutcomeError("spawn.json children must be an array")
    if len(entries) > MAX_CHILDREN:
        raise UnusableOutcomeError(
            f"spawn.json names {len(entries)} children, over the limit of {MAX_CHILDREN} per outcome"
        )
    return entries


def _entry(index: int, entry: object, parent: ParentIdentity, seen: dict[str, set[str]]) -> dict[str, str]:
    where = f"spawn.json children[{index}]"
    if not isinstance(entry, dict):
        raise UnusableOutcomeError(f"{where} must be an object")
    for member in ENTRY_MEMBERS:
        if not isinstance(entry.get(member), str):
            raise UnusableOutcomeError(f"{where}.{member} is required and must be a string")
    try:
        validate_uuid(entry["workspace_id"], "workspace id")
        validate_uuid(entry["job_id"])
        key = JobKey.parse(entry["job_key"])
        validate_child_label(entry["label"])
        validate_placement(entry["placement"])
        validate_uuid(entry["spawn_id"], "spawn id")
    except InvalidNameError as exc:
        raise UnusableOutcomeError(f"{where}: {exc}") from None
    if entry["workspace_id"] != parent.workspace_id:
        raise UnusableOutcomeError(
            f"{where}.workspace_id {entry['workspace_id']} is not this workspace; cross-workspace children "
            "need multiworkspace-v1"
        )
    if key.job_id != entry["job_id"]:
        raise UnusableOutcomeError(f"{where}.job_key {entry['job_key']} does not end in its job_id")
    if placement_prefix_matches(entry["placement"], parent.payload_placement):
        raise UnusableOutcomeError(
            f"{where}.placement {entry['placement']!r} lies inside the parent's payload"
        )
    for member in ("job_id", "label", "spawn_id"):
        if entry[member] in seen[member]:
            what = "is the parent's own" if entry[member] == parent.job_id else "appears twice in the set"
            raise UnusableOutcomeError(f"{where}.{member} {entry[member]!r} {what}")
        seen[member].add(entry[member])
    return {member: entry[member] for member in ENTRY_MEMBERS}


def _check_bundle_names(jobs: Path, keys: list[str]) -> None:
    try:
        if not keys and not os.path.lexists(jobs):
            return
        if not stat.S_ISDIR(os.lstat(jobs).st_mode):
            raise UnusableOutcomeError(f"{CHILDREN_DIR}/{JOBS_DIR}/ must be a directory")
        names = set(os.listdir(jobs))
    except FileNotFoundError:
        names = set()
    missing = [key for key in keys if key not in names]
    if missing:
        raise UnusableOutcomeError(f"spawn.json names {missing[0]} but {JOBS_DIR}/ has no bundle of it")
    extra = sorted(names - set(keys))
    if extra:
        raise UnusableOutcomeError(f"{JOBS_DIR}/{extra[0]} is a bundle that spawn.json does not name")


def _bundle(
    workspace: Workspace, jobs: Path, entry: Mapping[str, str], parent: ParentIdentity
) -> SpawnedChild:
    key = entry["job_key"]
    bundle = jobs / key
    where = f"child {entry['label']} ({key})"
    try:
        if not stat.S_ISDIR(os.lstat(bundle).st_mode):
            raise UnusableOutcomeError(f"{where}: its bundle must be a directory (not a symlink)")
        refuse_unsafe_tree(bundle)
        data = read_document_bytes(bundle / JOB_FILE, "job.json")
        document = validate_job(parse_json_object(data, document="job.json", path=bundle / JOB_FILE))
    except (InvalidDocumentError, UnsafePathError, OSError) as exc:
        raise UnusableOutcomeError(f"{where}: {exc}") from None
    if str(JobKey(document["id"], document.get("tag"))) != key:
        raise UnusableOutcomeError(
            f"{where}: job.json id {document['id']} and tag {document.get('tag')!r} do not make the job key "
            "of its bundle"
        )
    expected = parent.reference(entry["spawn_id"])
    named = document.get("parent")
    actual = {m: named.get(m) for m in PARENT_MEMBERS} if isinstance(named, dict) else named
    if actual != expected:
        raise UnusableOutcomeError(f"{where}: job.json parent must be {expected}, not {named}")
    digest = job_digest(data)
    _check_destination(workspace, entry["placement"], key, digest, where)
    return SpawnedChild(
        entry["job_id"],
        key,
        entry["label"],
        entry["placement"],
        entry["spawn_id"],
        document["priority"],
        digest,
    )


def _check_destination(workspace: Workspace, placement: str, key: str, digest: str, where: str) -> None:
    """A different job already placed under this key makes the set unusable; the identical one is fine."""
    destination = workspace.payload_path(placement, key)
    if not os.path.lexists(destination):
        return
    try:
        placed = job_digest((destination / JOB_FILE).read_bytes())
    except OSError:
        placed = None
    if placed != digest:
        raise UnusableOutcomeError(
            f"{where}: {destination} already holds a different job under this UUID; a UUID names one "
            "immutable definition"
        )


# -- registration ----------------------------------------------------------------------------------
def register_children(
    workspace: Workspace, control_dir: Path, spawned: list[SpawnedChild]
) -> list[SubmitResult]:
    """Register every child of a validated spawn set (idempotent; see the module header)."""
    submitter = Submitter(workspace)
    jobs = children_dir(control_dir) / JOBS_DIR
    results: list[SubmitResult] = []
    for child in spawned:
        where = f"child {child.label} ({child.job_key}) at {child.placement}"
        try:
            key = JobKey.parse(child.job_key)
            results.append(
                submitter.submit_bundle(
                    jobs / child.job_key, key, child.priority, child.job_digest, child.placement
                )
            )
        except SubmissionError as exc:
            raise ChildRegistrationError(f"{where} cannot be registered: {exc}") from None
        except FileNotFoundError:
            raise ChildRegistrationError(
                f"{where} cannot be registered: its bundle vanished and no identical child is placed there"
            ) from None
    return results


def spawned_of(frame: Mapping[str, Any]) -> list[SpawnedChild]:
    """The spawn set a committing frame records (``ValueError`` when the member is malformed)."""
    members = frame.get("spawned") or []
    if not isinstance(members, list):
        raise ValueError("the committing frame's spawned member must be an array")
    return [SpawnedChild.from_member(member) for member in members]
