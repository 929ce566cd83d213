"""Children and joins as a step publishes them: child job.json bundles, spawn.json and a wait's join.

Every byte here follows docs/outcome-documents.md ("Children and joins"), which the Bash API follows too:

- a child's job.json is one line of compact JSON with the members in the contract's order, its
  defaults taken from the parent's own job.json (runner, workdir, data, claim, retry_policy and
  priority) and its ``parent`` naming this workspace, job, placement, activation and spawn entry;
- a payload runner (``source`` ``payload``) is copied from the parent's payload into the child's bundle
  at the same path, with its mode, because a payload runner is resolved inside the job's own payload;
- the default placement of the ``n``-th child (from 0) spawned by one attempt is
  ``<parent placement>/<parent job key>.children/<n // 1000>``: beside the parent's payload, never in it,
  unique to the parent, and at most 1000 siblings per directory and attempt, so a join lists few large
  directories rather than many tiny ones;
- the tag defaults to the label, so a child's payload directory reads ``<label>--<uuid>``.

Checks run before anything is written: the label (tag syntax, unique in the attempt), the step, the
placement, and the whole child job.json against the protocol's own submission rules, so a runner never
publishes a bundle the manager would refuse (which would fail the parent with ``protocol_error``).

The protocol package is imported only here, on the first spawn or wait: a step that spawns nothing
never pays for it (see ``_checks``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ._errors import OutcomeError
from ._files import plain_json

SPAWN_FORMAT = "httk-workflow-spawn"
JOB_FORMAT = "httk-workflow-job"
CHILDREN_SUFFIX = ".children"
SHARD_SIZE = 1000
BUNDLE_PREFIX = "children/jobs/"
SPAWN_PATH = "children/spawn.json"
CONDITIONS = ("all_succeeded", "all_terminal", "any_succeeded", "at_least")
INHERITED = ("runner", "workdir", "data", "priority", "claim", "retry_policy")
"""Members a child takes from the parent's job.json unless the spawn gives them."""
_ARGUMENT_OF = {"initial_step": "step"}


class ChildRef(NamedTuple):
    """A child spawned by this attempt: what a join names it by, and where it is registered.

    A named tuple (the SDK does not import :mod:`dataclasses`, to keep runner start-up cheap).

    Examples
    --------
    >>> child = a.spawn("relax", label="strain-1", inputs={"strain": 0.01})
    >>> child.job_key.startswith("strain-1--")
    True
    """

    label: str
    step: str
    workspace_id: str
    job_id: str
    job_key: str
    placement: str
    spawn_id: str

    def join_reference(self) -> dict[str, str]:
        """The join child member naming this child (D13: workspace, job id, job key, placement hint).

        Examples
        --------
        >>> sorted(child.join_reference())
        ['job_id', 'job_key', 'placement_hint', 'workspace_id']
        """
        return {
            "workspace_id": self.workspace_id,
            "job_id": self.job_id,
            "job_key": self.job_key,
            "placement_hint": self.placement,
        }

    def spawn_entry(self) -> dict[str, str]:
        """This child's entry of spawn.json (D13 order).

        Examples
        --------
        >>> child.spawn_entry()["label"]
        'strain-1'
        """
        return {
            "workspace_id": self.workspace_id,
            "job_id": self.job_id,
            "job_key": self.job_key,
            "label": self.label,
            "placement": self.placement,
            "spawn_id": self.spawn_id,
        }


_FIELD_DOCS = {
    "label": "The child's label in this attempt's spawn set.",
    "step": "The child's initial step.",
    "workspace_id": "The workspace the child is registered in (the parent's).",
    "job_id": "The child's job UUID.",
    "job_key": "The child's job key ``<tag>--<uuid>``, its payload directory name.",
    "placement": "Where the child's payload is registered.",
    "spawn_id": "The spawn.json entry that registers the child (its job.json ``parent.spawn_id``).",
}
for _field, _text in _FIELD_DOCS.items():
    getattr(
        ChildRef, _field
    ).__doc__ = f"{_text}\n\nExamples\n--------\n>>> child.{_field}  # doctest: +SKIP\n"


class ParentView(NamedTuple):
    """What a spawn needs to know of the spawning attempt (from its context and job.json)."""

    workspace_id: str
    job_id: str
    job_key: str
    placement: str
    activation_id: str
    job: Mapping[str, Any]
    job_dir: Path


def _rule(validator: Any, value: object) -> str | None:
    from httk.workflow.protocol import InvalidNameError

    try:
        validator(value)
    except InvalidNameError as exc:
        return exc.rule
    return None


def default_placement(parent: ParentView, index: int) -> str:
    """Where the ``index``-th child (from 0) of this attempt goes when the spawn names no placement."""
    return f"{parent.placement}/{parent.job_key}{CHILDREN_SUFFIX}/{index // SHARD_SIZE}"


def check_label(label: object, taken: Sequence[str]) -> str:
    """A child label: tag syntax, unique among this attempt's children."""
    from httk.workflow.protocol import validate_child_label

    problem = _rule(validate_child_label, label)
    if problem is not None:
        raise OutcomeError(f"is not a child label ({label!r}): {problem}", argument="label")
    if label in taken:
        raise OutcomeError(
            f"{label!r} is already the label of another child of this attempt", argument="label"
        )
    return str(label)


def check_placement(placement: object, parent: ParentView) -> str:
    """A child placement: a valid placement outside the parent's own payload."""
    from httk.workflow.protocol import placement_prefix_matches, validate_placement

    problem = _rule(validate_placement, placement)
    if problem is not None:
        raise OutcomeError(f"is not a placement ({placement!r}): {problem}", argument="placement")
    assert isinstance(placement, str)
    if placement_prefix_matches(placement, f"{parent.placement}/{parent.job_key}"):
        raise OutcomeError(f"{placement!r} lies inside the parent's own payload", argument="placement")
    return placement


def child_document(
    parent: ParentView,
    *,
    job_id: str,
    spawn_id: str,
    tag: str,
    step: str,
    overrides: Mapping[str, Any],
) -> dict[str, Any]:
    """The child's job.json in the contract's member order, checked by the protocol's submission rules.

    ``overrides`` holds the spawn's own members (``name``, ``runner``, ``workdir``, ``data``, ``claim``,
    ``priority``, ``retry_policy``, ``resources``, ``inputs``); absent ones are inherited or left out.
    """
    job = parent.job

    def chosen(member: str) -> Any:
        return overrides[member] if overrides.get(member) is not None else job.get(member)

    document: dict[str, Any] = {"format": JOB_FORMAT, "format_version": 1, "id": job_id, "tag": tag}
    if overrides.get("name") is not None:
        document["name"] = overrides["name"]
    for member in ("runner", "workdir", "data"):
        document[member] = chosen(member)
    document["initial_step"] = step
    document["priority"] = chosen("priority")
    document["claim"] = chosen("claim")
    if chosen("retry_policy") is not None:
        document["retry_policy"] = chosen("retry_policy")
    for member in ("resources", "inputs"):
        if overrides.get(member) is not None:
            document[member] = overrides[member]
    document["parent"] = {
        "workspace_id": parent.workspace_id,
        "job_id": parent.job_id,
        "job_key": parent.job_key,
        "placement": parent.placement,
        "activation_id": parent.activation_id,
        "spawn_id": spawn_id,
    }
    document = plain_json(document)
    _validate(document)
    return document


def _validate(document: dict[str, Any]) -> None:
    from httk.workflow.protocol import InvalidDocumentError
    from httk.workflow.protocol._job_rules import validate_job

    try:
        validate_job(document)
    except InvalidDocumentError as exc:
        top = (exc.member or "").split(".", 1)[0].split("[", 1)[0]
        argument = _ARGUMENT_OF.get(top, top or "spawn")
        raise OutcomeError(f"makes an invalid child job.json: {exc}", argument=argument) from None


def payload_runner(document: Mapping[str, Any], parent: ParentView) -> tuple[str, bytes, int] | None:
    """The payload runner file to copy into the child's bundle: (relative path, bytes, mode), or None."""
    runner = document["runner"]
    if runner.get("source", "payload") != "payload":
        return None
    relative = runner["path"]
    source = parent.job_dir / relative
    try:
        info = os.lstat(source)
        if not stat.S_ISREG(info.st_mode):
            raise OutcomeError(
                f"the payload runner {relative!r} is not a regular file in the parent's payload",
                argument="runner",
            )
        with open(source, "rb") as stream:
            return relative, stream.read(), stat.S_IMODE(info.st_mode)
    except OSError as exc:
        raise OutcomeError(
            f"the payload runner {relative!r} cannot be copied from the parent's payload: "
            f"{exc.strerror or exc}",
            argument="runner",
        ) from exc


def check_files(files: Mapping[str, bytes] | None, document: Mapping[str, Any]) -> dict[str, bytes]:
    """A spawn's extra payload files, checked: relative POSIX paths outside the protocol's own names.

    A file the payload runner is copied to is refused as well: the bundle would name it twice.
    """
    if files is None:
        return {}
    if not isinstance(files, Mapping):
        raise OutcomeError(f"must map payload paths to bytes, not {type(files).__name__}", argument="files")
    runner = document["runner"]
    taken = runner["path"] if runner.get("source", "payload") == "payload" else None
    checked: dict[str, bytes] = {}
    for relative, data in files.items():
        parts = relative.split("/") if isinstance(relative, str) else []
        if (
            not parts
            or relative.startswith("/")
            or any(part in ("", ".", "..") for part in parts)
            or relative == "job.json"
            or parts[0] == ".httk-job"
            or parts[0].startswith(".httk-attempt.")
            or relative == taken
        ):
            raise OutcomeError(f"{relative!r} is not a payload file a spawn may write", argument="files")
        if not isinstance(data, bytes):
            raise OutcomeError(
                f"{relative!r}: content must be bytes, not {type(data).__name__}", argument="files"
            )
        checked[relative] = data
    return checked


def random_uuid() -> str:
    """A random (version 4) UUID in lowercase canonical form, without importing :mod:`uuid`."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def new_ids() -> tuple[str, str]:
    """A fresh child UUID and spawn id (both lowercase canonical UUIDs)."""
    return random_uuid(), random_uuid()


def spawn_document(children: Sequence[ChildRef]) -> dict[str, Any]:
    """spawn.json (D13)."""
    return {
        "format": SPAWN_FORMAT,
        "format_version": 1,
        "children": [child.spawn_entry() for child in children],
    }


def join_reference(child: object) -> dict[str, str]:
    """A join child from a :class:`ChildRef`, or from a mapping naming an existing child.

    A mapping needs ``workspace_id``, ``job_id``, ``job_key`` and ``placement_hint`` (or ``placement``,
    as in an observation of ``Attempt.children``).
    """
    if isinstance(child, ChildRef):
        return child.join_reference()
    if not isinstance(child, Mapping):
        raise OutcomeError(
            f"must hold ChildRef objects or mappings, not {type(child).__name__}", argument="children"
        )
    hint = child.get("placement_hint", child.get("placement"))
    reference: dict[str, Any] = {
        "workspace_id": child.get("workspace_id"),
        "job_id": child.get("job_id"),
        "job_key": child.get("job_key"),
        "placement_hint": hint,
    }
    for member, value in reference.items():
        if not isinstance(value, str) or not value:
            raise OutcomeError(f"names a child without a {member}: {dict(child)!r}", argument="children")
    return reference


def join_members(
    step: str,
    references: Sequence[Mapping[str, str]],
    condition: object,
    count: object,
    on_impossible: object,
) -> dict[str, Any]:
    """The ``next_step`` and ``join`` members of a wait outcome, checked."""
    from ._checks import step_problem

    if not references:
        raise OutcomeError("must name at least one child (spawn one first)", argument="children")
    if len({reference["job_id"] for reference in references}) != len(references):
        raise OutcomeError("names a child more than once", argument="children")
    if condition not in CONDITIONS:
        raise OutcomeError(f"must be one of {', '.join(CONDITIONS)}, not {condition!r}", argument="condition")
    join: dict[str, Any] = {"children": [dict(reference) for reference in references], "condition": condition}
    if condition == "at_least":
        if type(count) is not int or not 1 <= count <= len(references):
            raise OutcomeError(
                f"must be an integer from 1 to {len(references)} for at_least, not {count!r}",
                argument="count",
            )
        join["count"] = count
    elif count is not None:
        raise OutcomeError(f"applies only to at_least, not to {condition}", argument="count")
    if on_impossible is not None:
        problem = step_problem(on_impossible)
        if problem is not None:
            raise OutcomeError(
                f"is not a valid step name ({on_impossible!r}): {problem}", argument="on_impossible"
            )
        join["on_impossible"] = {"action": "advance", "next_step": on_impossible}
    return {"next_step": step, "join": join}
