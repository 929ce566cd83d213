"""``job new``: one job made from a packaged workflow or from an author's own runner, checked, submitted.

Two front ends, one builder. ``--workflow NAME`` finds the :class:`PackagedWorkflow` a package registers
under the entry point group ``httk.workflow.workflows`` (:func:`find_workflow`; the group is read only
when asked, so no other command pays for reading every distribution's metadata). ``--runner PATH``
describes an author's runner as the same kind of object (:func:`plan_runner_job`), its inputs declared as
given. Either way :func:`plan_job` does everything that can refuse -- the workspace extensions the job
needs, every input (unknown, missing, unreadable, refused by the workflow's own check), the tag, the
placement, the job.json rules, a shared runner's name and the store entry it would take -- and returns a
:class:`JobPlan`: job.json and every payload file, in memory. Nothing is written before
:func:`submit_plan`, which publishes a shared runner first (content addressed: the same bytes again
change nothing) and then submits the payload by the submission protocol. ``job new --print`` is a plan
that is never submitted.

The defaults, where the command line says nothing:

- placement ``<name>/<the first two hex digits of the job UUID>`` (the workflow's name, or the runner's
  file name without its suffix), so a campaign left at the default spreads over 256 directories instead
  of growing one that every probe of its jobs lists;
- the workflow's priority (500 for an own runner), no tag, a fresh job UUID;
- for an own runner: step ``main``, a persistent workdir ``run``, data ``none``, pool ``default`` with no
  capabilities, no resources, and the SDK's default retry policy
  (:data:`httk.workflow.sdk.packaged.DEFAULT_RETRY_POLICY`); the runner is copied to ``files/<name>``
  (mode 0755; a tree to ``files/<name>/``, entered at its ``run``), or with ``shared`` published into the
  runner store as ``<name>`` and pinned by its digest.

Cost: one entry-point lookup (reading the installed distributions' metadata) for a packaged workflow;
the inputs and the runner are read once, into memory.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.publish._runners import (
    TREE_ENTRY,
    check_runner_source,
    publish_runner,
    runner_digest,
    stored_digest,
)
from httk.workflow.engine.publish._submit import (
    JobSpec,
    SubmitResult,
    Submitter,
    job_key_of,
    refuse_unsafe_tree,
)
from httk.workflow.protocol import (
    RunnerStoreError,
    SubmissionError,
    validate_placement,
    validate_step,
    validate_tag,
)
from httk.workflow.protocol._job_rules import DATA_MODES, WORKDIR_MODES, validate_job
from httk.workflow.sdk import SdkError
from httk.workflow.sdk.packaged import (
    ENTRY_POINT_GROUP,
    PackagedWorkflow,
    WorkflowInput,
    WorkflowInputError,
    job_document,
    resolve_inputs,
)

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

DEFAULT_STEP = "main"
DEFAULT_WORKDIR = "persistent"
DEFAULT_DATA = "none"
TRANSACTIONAL_EXTENSION = "transactional-data-v1"
PAYLOAD_RUNNER_DIR = "files"
SHARD_DIGITS = 2


# -- packaged workflows -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WorkflowEntry:
    """One entry point of ``httk.workflow.workflows``: the workflow it names, or why it cannot be used."""

    name: str
    value: str
    distribution: str | None
    workflow: PackagedWorkflow | None = None
    problem: str | None = None

    def describe(self) -> str:
        """``entry point vasp-relax = httk.workflow.vasp:VASP_RELAX (httk-workflow-vasp)``."""
        source = f" ({self.distribution})" if self.distribution else ""
        return f"entry point {self.name} = {self.value}{source}"


def packaged_workflows() -> list[WorkflowEntry]:
    """Every registered workflow by name, each loaded (a broken one carries its ``problem``)."""
    from importlib.metadata import entry_points  # deferred: reading every distribution's metadata costs

    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda entry: (entry.name, entry.value))
    names = [entry.name for entry in found]
    return [_load(entry, duplicated=names.count(entry.name) > 1) for entry in found]


def find_workflow(name: str) -> PackagedWorkflow:
    """The packaged workflow ``name``; :class:`SubmissionError` when none, or no usable one, has it."""
    from importlib.metadata import entry_points

    every = entry_points(group=ENTRY_POINT_GROUP)
    matching = [entry for entry in every if entry.name == name]
    if not matching:
        known = ", ".join(sorted({entry.name for entry in every})) or "none is installed"
        raise SubmissionError(
            f"no packaged workflow is named {name!r} (installed: {known}; see httk workflow workflows list)"
        )
    entry = _load(matching[0], duplicated=len(matching) > 1)
    if entry.workflow is None:
        raise SubmissionError(f"workflow {name!r} cannot be used: {entry.describe()} {entry.problem}")
    return entry.workflow


def _load(entry: EntryPoint, *, duplicated: bool) -> WorkflowEntry:
    named = WorkflowEntry(entry.name, entry.value, entry.dist.name if entry.dist is not None else None)
    if duplicated:
        return _broken(named, "is registered more than once, by several distributions")
    try:
        value = entry.load()
    except Exception as exc:  # an add-on's import may fail in any way; the others stay usable
        return _broken(named, f"does not load: {type(exc).__name__}: {exc}")
    if not isinstance(value, PackagedWorkflow):
        return _broken(named, f"is a {type(value).__name__}, not a PackagedWorkflow")
    if value.name != entry.name:
        return _broken(named, f"describes the workflow {value.name!r}, not {entry.name!r}")
    return WorkflowEntry(named.name, named.value, named.distribution, workflow=value)


def _broken(entry: WorkflowEntry, problem: str) -> WorkflowEntry:
    return WorkflowEntry(entry.name, entry.value, entry.distribution, problem=problem)


# -- the plan -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SharedRunner:
    """A runner ``submit_plan`` publishes into the store under ``name`` before the job that pins it."""

    name: str
    source: Path
    sha256: str


@dataclass(frozen=True, slots=True)
class JobPlan:
    """A job checked whole and not yet written: job.json, its payload files, where it goes."""

    job: dict[str, Any]
    placement: str
    files: Mapping[str, bytes] = field(default_factory=dict)
    executables: frozenset[str] = frozenset()
    shared_runner: SharedRunner | None = None

    @property
    def job_key(self) -> str:
        return str(job_key_of(self.job))

    def payload(self, workspace: Workspace) -> Path:
        """Where the payload is placed."""
        return workspace.payload_path(self.placement, self.job_key)

    def job_text(self) -> str:
        """job.json as ``job new --print`` shows it (submission stores the same document, compact)."""
        return json.dumps(self.job, indent=2, ensure_ascii=False)


def plan_job(
    workspace: Workspace,
    workflow: PackagedWorkflow,
    inputs: Mapping[str, object],
    *,
    placement: str | None = None,
    tag: str | None = None,
    priority: int | None = None,
    runner_files: Mapping[str, bytes] | None = None,
    executables: frozenset[str] = frozenset(),
    shared_runner: SharedRunner | None = None,
    placement_root: str | None = None,
) -> JobPlan:
    """Check a job of ``workflow`` with ``inputs`` and build it in memory; nothing is written.

    ``inputs`` maps an input's name to its value: a path for a file input (read relative to the current
    directory), a JSON value or its text for a value input. ``runner_files`` are payload files beside the
    inputs' (an own runner's copy); ``placement_root`` is the first component of the default placement
    (the workflow's name).

    Raises
    ------
    SubmissionError
        The workspace lacks an extension the workflow needs (the message holds the command that enables
        it), or an input is refused (the message names it; the SDK's ``WorkflowInputError`` is the cause).
    InvalidNameError, InvalidDocumentError
        The tag, the placement or the job.json built from them is invalid.
    """
    _require_extensions(workspace, workflow)
    try:
        resolved = resolve_inputs(workflow, inputs)
    except WorkflowInputError as exc:
        raise SubmissionError(str(exc)) from exc
    if tag is not None:
        validate_tag(tag)
    job_id = str(uuid.uuid4())
    try:
        job = job_document(workflow, resolved, tag=tag, priority=priority, job_id=job_id)
    except SdkError as exc:  # an installed runner that does not resolve in this Python
        raise SubmissionError(f"workflow {workflow.name!r}: {exc}") from exc
    validate_job(job)
    files = dict(runner_files or {})
    for declared in workflow.inputs:
        if declared.kind == "file" and declared.name in resolved:
            files[f"files/{declared.destination or declared.name}"] = resolved[declared.name]
    root = placement_root or workflow.name
    where = validate_placement(placement or f"{root}/{job_id[:SHARD_DIGITS]}")
    return JobPlan(job, where, files, executables, shared_runner)


def _require_extensions(workspace: Workspace, workflow: PackagedWorkflow) -> None:
    for extension in workflow.extensions:
        if extension not in workspace.extensions:
            command = shlex.join(
                ["httk", "workflow", "workspace", "extension", "enable", str(workspace.root), extension]
            )
            raise SubmissionError(
                f"workflow {workflow.name!r} needs the workspace extension {extension!r}, which this "
                f"workspace does not enable; enable it (with no manager running) by: {command}",
                workspace.root,
            )


def submit_plan(workspace: Workspace, plan: JobPlan) -> SubmitResult:
    """Publish the plan's shared runner (if any), then submit its payload; the submission's result.

    Raises
    ------
    RunnerStoreError
        The shared runner's content changed after the plan was made, or other content took its store name
        meanwhile: nothing is stored and the job is not submitted.
    """
    submitter = Submitter(workspace)
    prepared = submitter.prepare(JobSpec(plan.job, plan.placement, plan.files, plan.executables))
    shared = plan.shared_runner
    if shared is not None:
        publish_runner(workspace, shared.name, shared.source, expected_sha256=shared.sha256)
    return submitter.publish(prepared)


# -- an author's own runner ---------------------------------------------------------------------------
def plan_runner_job(
    workspace: Workspace,
    runner: Path,
    *,
    step: str | None = None,
    inputs: Mapping[str, object] | None = None,
    placement: str | None = None,
    tag: str | None = None,
    priority: int | None = None,
    shared: bool = False,
    workdir: str | None = None,
    data: str | None = None,
) -> JobPlan:
    """Check a job of the runner file or tree at ``runner`` and build it in memory; nothing is written.

    ``inputs`` are JSON values (the command line gives a word that is not JSON as text), put into
    job.json's ``inputs`` as they are. ``step``, ``workdir`` and ``data`` default to ``main``,
    ``persistent`` and ``none`` (``None`` means the default); see the module for the others.
    """
    step = validate_step(step or DEFAULT_STEP)
    workdir = workdir or DEFAULT_WORKDIR
    data = data or DEFAULT_DATA
    _check_choice("workdir mode", workdir, WORKDIR_MODES)
    _check_choice("data mode", data, DATA_MODES)
    source = Path(runner)
    name = source.name
    files: dict[str, bytes] = {}
    executables: frozenset[str] = frozenset()
    digest: str | None = None
    if shared:
        check_runner_source(name, source)
        digest = runner_digest(source)
        stored = stored_digest(workspace, name)
        if stored is not None and stored != digest:
            replace = ["httk", "workflow", "runner", "publish", str(workspace.root), "--name", name]
            raise RunnerStoreError(
                f"the runner store already holds another {name!r} (digest {stored}), which jobs pin: "
                "rename this runner, or replace the stored one, after which the jobs pinned to it fail "
                f"with runner_mismatch ({shlex.join([*replace, '--replace', os.path.abspath(source)])})"
            )
        path = name
    else:
        path, files, executables = _payload_runner(source)
    declared = tuple(
        WorkflowInput(
            key, "an input of the runner", value_type="string" if isinstance(value, str) else "json"
        )
        for key, value in (inputs or {}).items()
    )
    workflow = PackagedWorkflow(
        name=name,
        summary=f"the runner {name}",
        runner=path,
        initial_step=step,
        inputs=declared,
        runner_source="workspace" if shared else "payload",
        runner_sha256=digest,
        workdir_mode=workdir,
        data_mode=data,
        extensions=(TRANSACTIONAL_EXTENSION,) if data == "transactional" else (),
    )
    return plan_job(
        workspace,
        workflow,
        dict(inputs or {}),
        placement=placement,
        tag=tag,
        priority=priority,
        runner_files=files,
        executables=executables,
        shared_runner=None if digest is None else SharedRunner(name, source, digest),
        placement_root=source.stem or name,
    )


def _check_choice(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise SubmissionError(f"the {what} must be one of {', '.join(choices)}, not {value!r}")


def _payload_runner(source: Path) -> tuple[str, dict[str, bytes], frozenset[str]]:
    """The runner's path in the payload, its files there, and which of them are executable."""
    try:
        mode = os.lstat(source).st_mode
    except OSError as exc:
        raise SubmissionError(f"the runner cannot be read: {exc.strerror or exc}", source) from None
    top = f"{PAYLOAD_RUNNER_DIR}/{source.name}"
    if stat.S_ISREG(mode):
        return top, {top: _read(source)}, frozenset({top})
    if not stat.S_ISDIR(mode):
        raise SubmissionError("a runner is a regular file or a directory (not a symlink)", source)
    if not (source / TREE_ENTRY).is_file():
        raise SubmissionError(
            f"a runner tree is entered at its top-level {TREE_ENTRY!r} file, which is missing", source
        )
    refuse_unsafe_tree(source)
    files: dict[str, bytes] = {}
    executables = {f"{top}/{TREE_ENTRY}"}
    for directory, _dirnames, filenames in os.walk(source):
        for filename in filenames:
            path = Path(directory, filename)
            relative = f"{top}/{path.relative_to(source).as_posix()}"
            files[relative] = _read(path)
            if os.lstat(path).st_mode & 0o111:
                executables.add(relative)
    return f"{top}/{TREE_ENTRY}", files, frozenset(executables)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SubmissionError(f"the runner cannot be read: {exc.strerror or exc}", path) from None
