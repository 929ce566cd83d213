"""Packaged workflows: a runner plus its declared inputs and defaults, and the payload built from them.

A package that ships a workflow (the VASP runners, the v1 adapter) describes it with one
:class:`PackagedWorkflow` and registers that object under the entry point group
``httk.workflow.workflows``; the engine's ``job new --workflow NAME`` and ``workflows list`` find it
there, so adding a workflow never touches the engine. :func:`build_payload` turns a description and the
user's inputs into a payload directory -- ``job.json`` and ``files/`` -- ready for ``job submit``.

Every refusal happens before anything is written, and names the input at fault
(:class:`WorkflowInputError`): an unknown input, a missing required one, a file that cannot be read,
a value of the wrong type, or content the workflow's own ``check`` hook refuses (an unparseable
structure, say).

A file input is copied into ``files/<destination>`` and its payload-relative path is what job.json's
``inputs`` holds; a value input is put into ``inputs`` as the JSON value it is. A runner outside the
payload (``installed``, ``workspace``) is pinned by ``runner.sha256``, as the specification requires;
``pkg:<module>/<resource>`` is resolved in this process the way a manager resolves it.

This module is not imported by ``httk.workflow.sdk`` (a step does not pay for dataclasses); import it
as ``from httk.workflow.sdk.packaged import PackagedWorkflow, WorkflowInput, build_payload``.

Examples
--------
>>> from httk.workflow.sdk.packaged import PackagedWorkflow, WorkflowInput, build_payload
>>> relax = PackagedWorkflow(
...     name="demo-relax",
...     summary="Relax a structure.",
...     runner="pkg:httk.workflow.demo/runners/relax",
...     initial_step="relax",
...     inputs=(WorkflowInput("structure", "the POSCAR", required=True, kind="file", destination="POSCAR"),),
... )
>>> build_payload(relax, {"structure": "POSCAR"}, "payload")  # doctest: +SKIP
PosixPath('payload')
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._errors import SdkError

ENTRY_POINT_GROUP = "httk.workflow.workflows"
PKG_PREFIX = "pkg:"
VALUE_TYPES = ("string", "integer", "number", "boolean", "json")
DEFAULT_RETRY_POLICY: Mapping[str, Any] = {
    "maximum_attempts_per_activation": 12,
    "maximum_total_attempts": 60,
    "maximum_activations": 20,
    "retry_on": ["lease_lost", "timeout", "process_failure"],
}


class WorkflowInputError(SdkError, ValueError):
    """An input was refused before anything was written.

    Parameters
    ----------
    name
        The input at fault (``None`` when the refusal is about the inputs as a whole).
    message
        What is wrong with it.

    Examples
    --------
    >>> from httk.workflow.sdk.packaged import WorkflowInputError
    >>> str(WorkflowInputError("structure", "POSCAR line 6: has no species line"))
    "input 'structure': POSCAR line 6: has no species line"
    """

    def __init__(self, name: str | None, message: str) -> None:
        self.name = name
        self.message = message
        super().__init__(message if name is None else f"input {name!r}: {message}")


@dataclass(frozen=True)
class WorkflowInput:
    """One input a packaged workflow declares.

    Parameters
    ----------
    name
        The input's name, as given with ``--input NAME=VALUE`` (a setting name such as
        ``vasp.command`` is allowed: job inputs are the first layer of a setting).
    meaning
        What it is, for ``workflows list``.
    required
        Whether a job cannot be made without it.
    default
        What the runner uses when it is not given (documentation; nothing is written for it).
    kind
        ``file`` (its value is a path; the file is copied into the payload) or ``value`` (put into
        job.json's ``inputs``).
    destination
        For a file: its path below ``files/`` (default the input's name).
    value_type
        For a value given as text: ``string``, ``integer``, ``number``, ``boolean`` or ``json``.

    Examples
    --------
    >>> from httk.workflow.sdk.packaged import WorkflowInput
    >>> density = WorkflowInput("kpoint_density", "k-points per atom", default=1000, value_type="number")
    >>> density.kind
    'value'
    """

    name: str
    meaning: str
    required: bool = False
    default: Any = None
    kind: Literal["file", "value"] = "value"
    destination: str | None = None
    value_type: str = "string"

    def describe(self) -> dict[str, Any]:
        """What ``workflows list --json`` shows of the input."""
        return {
            "name": self.name,
            "required": self.required,
            "default": self.default,
            "kind": self.kind,
            "value_type": None if self.kind == "file" else self.value_type,
            "meaning": self.meaning,
        }


Check = Callable[[Mapping[str, Any], Mapping[str, Path]], None]
"""A workflow's content check: receives the resolved inputs (a file input as its bytes) and the path
each file input was read from, raises :class:`WorkflowInputError` naming the input (and, for a file,
that path) to refuse them."""


@dataclass(frozen=True)
class PackagedWorkflow:
    """A workflow a package ships: what ``job new --workflow NAME`` needs to make a job of it.

    Parameters
    ----------
    name
        The workflow's name (``vasp-relax``), also job.json's ``workflow``.
    summary
        One sentence for ``workflows list``.
    runner
        The runner's path: ``pkg:<module>/<resource>`` for an installed one, else relative to
        ``runner_source``'s root.
    initial_step
        The step a new job starts at.
    inputs
        The declared inputs.
    arguments
        The runner's argument vector.
    runner_source
        ``installed`` (default), ``workspace`` or ``payload``.
    runner_sha256
        The digest that pins a ``workspace`` runner (the store entry the caller published); an installed
        ``pkg:`` runner's is computed from the file it resolves to, and a payload runner has none.
    workdir_mode, workdir_path
        job.json's ``workdir``.
    data_mode
        job.json's ``data.mode`` (``none`` or ``transactional``).
    extensions
        Workspace extensions the workflow needs (``transactional-data-v1``).
    claim, retry_policy, resources, priority
        job.json's defaults.
    check
        An optional content check run before anything is written.

    Examples
    --------
    >>> from httk.workflow.sdk.packaged import PackagedWorkflow
    >>> PackagedWorkflow(name="w", summary="s", runner="pkg:httk.workflow/w", initial_step="a").data_mode
    'none'
    """

    name: str
    summary: str
    runner: str
    initial_step: str
    inputs: tuple[WorkflowInput, ...] = ()
    arguments: tuple[str, ...] = ()
    runner_source: str = "installed"
    runner_sha256: str | None = None
    workdir_mode: str = "persistent"
    workdir_path: str = "run"
    data_mode: str = "none"
    extensions: tuple[str, ...] = ()
    claim: Mapping[str, Any] = field(default_factory=lambda: {"pool": "default", "required_capabilities": []})
    retry_policy: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_RETRY_POLICY))
    resources: Mapping[str, int] = field(default_factory=dict)
    priority: int = 500
    check: Check | None = field(default=None, compare=False)

    def input(self, name: str) -> WorkflowInput:
        """The declared input ``name``; :class:`WorkflowInputError` when there is none."""
        for declared in self.inputs:
            if declared.name == name:
                return declared
        known = ", ".join(declared.name for declared in self.inputs) or "none"
        raise WorkflowInputError(name, f"is not an input of workflow {self.name!r} (its inputs: {known})")

    def describe(self) -> dict[str, Any]:
        """What ``workflows list --json`` shows of the workflow."""
        return {
            "name": self.name,
            "summary": self.summary,
            "initial_step": self.initial_step,
            "data_mode": self.data_mode,
            "extensions": list(self.extensions),
            "inputs": [declared.describe() for declared in self.inputs],
        }


def resolve_inputs(
    workflow: PackagedWorkflow, given: Mapping[str, Any], *, base: Path | None = None
) -> dict[str, Any]:
    """The inputs ``build_payload`` would write: checked, typed, file inputs read into bytes.

    Raises
    ------
    WorkflowInputError
        For the first input refused, naming it.

    Examples
    --------
    >>> resolve_inputs(relax, {"structure": "POSCAR"})["structure"][:2]  # doctest: +SKIP
    b'Si'
    """
    resolved: dict[str, Any] = {}
    sources: dict[str, Path] = {}
    for name, value in given.items():
        declared = workflow.input(name)
        if declared.kind == "file":
            sources[name] = _file_path(name, value, base)
            resolved[name] = _read_file(name, sources[name])
        else:
            resolved[name] = _typed(declared, value)
    for declared in workflow.inputs:
        if declared.required and declared.name not in resolved:
            raise WorkflowInputError(
                declared.name, f"is required by workflow {workflow.name!r}: {declared.meaning}"
            )
    if workflow.check is not None:
        workflow.check(resolved, sources)
    return resolved


def build_payload(
    workflow: PackagedWorkflow,
    inputs: Mapping[str, Any],
    directory: str | os.PathLike[str],
    *,
    tag: str | None = None,
    name: str | None = None,
    priority: int | None = None,
    job_id: str | None = None,
) -> Path:
    """Write a payload of ``workflow`` for ``inputs`` into ``directory`` (created; it must not exist).

    Parameters
    ----------
    workflow
        The packaged workflow.
    inputs
        Input name to value: a path (``str`` or ``PathLike``) for a file input, a JSON value or its text
        for a value input.
    directory
        Where the payload goes; submit it with ``httk workflow job submit``.
    tag, name, priority, job_id
        job.json's ``tag``, ``name``, ``priority`` (default the workflow's) and ``id`` (default a fresh
        UUID).

    Returns
    -------
    pathlib.Path
        The payload directory.

    Raises
    ------
    WorkflowInputError
        When an input is refused (nothing is written).
    SdkError
        When the runner cannot be resolved, or the directory exists.

    Examples
    --------
    >>> build_payload(relax, {"structure": "POSCAR"}, "payloads/si", tag="silicon")  # doctest: +SKIP
    PosixPath('payloads/si')
    """
    target = Path(directory)
    if os.path.lexists(target):
        raise SdkError(f"{target}: the payload directory already exists")
    resolved = resolve_inputs(workflow, inputs)
    job = job_document(workflow, resolved, tag=tag, name=name, priority=priority, job_id=job_id)
    staging = target.with_name(f".{target.name}.tmp.{os.getpid()}")
    try:
        (staging / "files").mkdir(parents=True)
        for declared in workflow.inputs:
            if declared.kind == "file" and declared.name in resolved:
                path = staging / "files" / (declared.destination or declared.name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(resolved[declared.name])
        (staging / "job.json").write_text(
            json.dumps(job, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def job_document(
    workflow: PackagedWorkflow,
    resolved: Mapping[str, Any],
    *,
    tag: str | None = None,
    name: str | None = None,
    priority: int | None = None,
    job_id: str | None = None,
) -> dict[str, Any]:
    """job.json for resolved inputs (file inputs as their payload paths); see :func:`build_payload`."""
    runner: dict[str, Any] = {
        "backend": "path",
        "path": workflow.runner,
        "arguments": list(workflow.arguments),
    }
    if workflow.runner_source != "payload":
        runner["source"] = workflow.runner_source
        runner["sha256"] = workflow.runner_sha256 or runner_digest(workflow.runner)
    values: dict[str, Any] = {}
    for declared in workflow.inputs:
        if declared.name in resolved:
            value = resolved[declared.name]
            values[declared.name] = (
                f"files/{declared.destination or declared.name}" if declared.kind == "file" else value
            )
    job: dict[str, Any] = {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": job_id or str(uuid.uuid4()),
    }
    if tag is not None:
        job["tag"] = tag
    job["name"] = name or f"{workflow.name} job"
    job["workflow"] = workflow.name
    job.update(
        {
            "runner": runner,
            "workdir": {"mode": workflow.workdir_mode, "path": workflow.workdir_path}
            if workflow.workdir_mode == "persistent"
            else {"mode": workflow.workdir_mode},
            "data": {"mode": workflow.data_mode},
            "initial_step": workflow.initial_step,
            "priority": workflow.priority if priority is None else priority,
            "claim": dict(workflow.claim),
            "retry_policy": dict(workflow.retry_policy),
            "resources": dict(workflow.resources),
            "inputs": values,
            "parent": None,
        }
    )
    return job


def runner_digest(runner: str) -> str:
    """The SHA-256 of an installed runner file, resolved as a manager resolves ``pkg:<module>/<path>``.

    Examples
    --------
    >>> len(runner_digest("pkg:httk.workflow.vasp/runners/vasp"))  # doctest: +SKIP
    64
    """
    path = runner_file(runner)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise SdkError(f"{path}: the runner cannot be read: {exc.strerror or exc}") from exc


def runner_file(runner: str) -> Path:
    """The file a ``pkg:<module>/<resource>`` runner names in this Python's installed packages."""
    if not runner.startswith(PKG_PREFIX):
        raise SdkError(f"runner {runner!r}: only pkg:<module>/<resource> runners can be resolved here")
    module, _, resource = runner[len(PKG_PREFIX) :].partition("/")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or ()) if spec is not None else ():
        candidate = Path(location) / resource
        if candidate.is_file():
            return candidate
    raise SdkError(f"runner {runner!r}: module {module!r} has no resource {resource!r}")


def _file_path(name: str, value: object, base: Path | None) -> Path:
    if not isinstance(value, str | os.PathLike):
        raise WorkflowInputError(name, f"is a file input and needs a path, not {type(value).__name__}")
    path = Path(value)
    return base / path if base is not None and not path.is_absolute() else path


def _read_file(name: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise WorkflowInputError(name, f"cannot read {path}: {exc.strerror or exc}") from exc


def _typed(declared: WorkflowInput, value: Any) -> Any:
    """A value input as JSON: given typed (Python) or as text (the command line)."""
    kind = declared.value_type
    if not isinstance(value, str) or kind == "string":
        return _checked_type(declared, value)
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value) if any(c in value for c in ".eE") else int(value)
        if kind == "boolean":
            lowered = value.strip().lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError(value)
        return json.loads(value)
    except ValueError:
        raise WorkflowInputError(declared.name, f"must be {_article(kind)}, not {value!r}") from None


def _checked_type(declared: WorkflowInput, value: Any) -> Any:
    kind = declared.value_type
    accepted: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "json": lambda v: True,
    }
    if kind not in accepted:
        raise WorkflowInputError(declared.name, f"declares the unknown value_type {kind!r}")
    if not accepted[kind](value):
        raise WorkflowInputError(declared.name, f"must be {_article(kind)}, not {value!r}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise WorkflowInputError(declared.name, f"cannot be written as JSON: {exc}") from None
    return value


def _article(kind: str) -> str:
    return {"integer": "an integer", "json": "a JSON value"}.get(kind, f"a {kind}")
