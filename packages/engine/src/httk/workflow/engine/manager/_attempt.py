"""An attempt, prepared: control directory, workdir, runner, context.json and environment (the process
that runs it is :mod:`._gate`'s).

What :func:`prepare_attempt` guarantees, in the order it does the work:

1. ``<job_dir>/.httk-attempt.<attempt-id>/`` is created exclusively, so two preparations can never share
   one attempt's control directory.
2. The workdir is the job's persistent ``workdir.path`` (created if absent, otherwise reused and reported
   as ``workdir_reused``) or a new ``run.<attempt-id>/`` for an isolated job.
3. The runner is resolved without following a symbolic link anywhere below its root: every component is
   opened with ``O_NOFOLLOW`` relative to its already opened parent, and empty, ``.``, ``..`` and absolute
   paths are refused before anything is opened. A payload runner is executed in place, because the job
   digest already pins it. A shared runner (``workspace`` or ``installed``) is never executed in place:
   it is copied to ``<control>/runner`` and ``runner.sha256`` is checked against that staged copy, which
   is what runs. A disagreement is ``runner_mismatch``, a runner that cannot be resolved
   ``runner_unavailable``, a persistent workdir path holding a symlink ``protocol_error`` (details
   ``reason: workdir_unavailable``): each a :class:`RunnerFailure`, which the manager turns into a
   claimed -> failed move. The staged copy is not synchronized: it is not in the specification's
   durability table, and storage that loses it has also lost the process that would have run it.
4. ``context.json`` is written last, through the mutation seam and synchronized when the workspace is
   durable, so its presence means the attempt was completely prepared. A failed preparation leaves the
   control directory without it, as evidence.

The environment (:attr:`PreparedAttempt.env`) holds only what the attempt adds to the manager's own:
the protocol's ``HTTK_WORKFLOW_*`` variables and ``HTTK_<NAME>`` for each scalar workspace setting. A
setting never overrides a variable the manager's environment already has: that variable is a deployment
override (spec/02 "Application settings": "a real HTTK_VASP_COMMAND deployment override" ranks above the
workspace setting), so the runner must still see it. Settings never export into the ``HTTK_WORKFLOW_``
namespace, which belongs to the protocol. The gate removes stale protocol variables inherited from
the manager's environment (:data:`._gate.PROTOCOL_VARIABLES`) before adding these.

**An isolated workdir of a transactional job** starts as a copy of committed ``data/`` that shares no
inode with it (a copy, or a reflink a filesystem makes for ``copy_file_range``; never a hard link), so
writes through the workdir can never reach committed data before a transaction (spec "Isolated
workdir"). Files keep their permission bits and modification time; directories get the default mode so
the runner can write there. That copy goes through no mutation seam and no fsync: these are application
files in a directory nobody reads until the attempt's context.json (written afterwards, through the
seam) says the attempt is prepared. A crash part-way leaves a half-filled ``run.<attempt-id>/`` of an
attempt that never started; the next attempt gets a new one.

Cost per attempt: two or three directories, one context.json (three fsyncs when durable), for a shared
runner one copy and one digest of its bytes, for a transactional isolated workdir one copy of ``data/``
(a reflink where the filesystem offers one): nothing grows with the number of jobs.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.publish._runners import (
    DEFAULT_PKG_MODULES,
    RunnerFailure,
    relative_components,
    resolve_runner,
)
from httk.workflow.engine.publish._transaction_manifest import TransactionError
from httk.workflow.protocol._digest import ATTEMPT_DIR_PREFIX
from httk.workflow.protocol._jsonio import dump_pretty

from ._rules import settings_environment

CONTEXT_FORMAT, CONTEXT_FILE = "httk-workflow-attempt-context", "context.json"
STDOUT_FILE, STDERR_FILE = "stdout.log", "stderr.log"
STDIO_LOG = "stdio.log"
"""The job's own log below ``<payload>/logs/``, where each retired attempt's output is kept (D5)."""


@dataclass(frozen=True)
class AttemptPlan:
    """Everything the manager decided when it claimed the job; prepare_attempt adds no decision."""

    workspace: Workspace
    job: dict[str, Any]  # the validated job.json
    job_dir: Path
    job_id: str
    job_key: str
    placement: str
    step: str
    activation_id: str
    activation_ordinal: int
    activation_reason: str
    attempt_id: str
    attempt_ordinal: int
    total_attempts: int
    is_restart: bool
    is_unclean_restart: bool
    attempt_reason: str
    previous_attempt_id: str | None
    data_generation: int | None
    priority: int
    resources: dict[str, Any] = field(default_factory=dict)
    join: dict[str, Any] | None = None
    children: list[Any] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the workspace settings snapshot


@dataclass(frozen=True)
class PreparedAttempt:
    """A prepared attempt, ready for the executor: what to run, where, and with which variables."""

    control_dir: Path
    workdir: Path
    argv: list[str]
    env: dict[str, str]  # added to (and overriding) the manager's environment
    context: dict[str, Any]
    stdout_path: Path
    stderr_path: Path


def prepare_attempt(
    plan: AttemptPlan,
    *,
    runner_search_path: Sequence[Path] = (),
    pkg_modules: frozenset[str] = DEFAULT_PKG_MODULES,
    python: str = sys.executable,
    bash_apis: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    owed: _fsops.OwedSyncs | None = None,
) -> PreparedAttempt:
    """Create the attempt's control directory and workdir, resolve its runner, write context.json.

    ``environ`` is the manager's environment (default ``os.environ``); a setting whose variable it
    already holds is not exported. ``bash_apis`` maps each Bash library's variable
    (``HTTK_WORKFLOW_BASH_API``, an add-on's ``HTTK_WORKFLOW_<NAME>_BASH_API``) to its path. Raises
    :class:`RunnerFailure` for a job whose runner or workdir cannot be used, ``ValueError`` for a backend
    other than ``path`` (the manager must leave those unclaimed), and ``FileExistsError`` when the
    attempt's control directory already exists. Durable, the directories of what it makes are
    synchronized before it returns, or left to the batch ``owed`` when given (:func:`._launch.launch_all`).
    """
    runner = plan.job["runner"]
    backend = runner.get("backend", "path")
    if backend != "path":
        raise ValueError(f"runner.backend {backend!r} is not executed by the local path executor")
    plan.workspace.require_writable()
    durable = plan.workspace.durable
    job_dir = Path(os.path.abspath(plan.job_dir))
    control = job_dir / f"{ATTEMPT_DIR_PREFIX}{plan.attempt_id}"
    _fsops.make_dir(control, durable=durable, owed=owed)
    workdir, reused = _prepare_workdir(plan, job_dir, durable, owed)
    entry = resolve_runner(
        runner,
        job_dir=job_dir,
        control=control,
        workspace=plan.workspace,
        search_path=runner_search_path,
        pkg_modules=pkg_modules,
    )
    context = _context(plan, job_dir, control, workdir, reused)
    _fsops.write_file_atomic(control / CONTEXT_FILE, dump_pretty(context), durable=durable, owed=owed)
    env = settings_environment(plan.settings, os.environ if environ is None else environ)
    env.update(_protocol_environment(context, python))
    env.update({name: os.path.abspath(path) for name, path in (bash_apis or {}).items()})
    return PreparedAttempt(
        control_dir=control,
        workdir=workdir,
        argv=[str(entry), *runner.get("arguments", [])],
        env=env,
        context=context,
        stdout_path=control / STDOUT_FILE,
        stderr_path=control / STDERR_FILE,
    )


# -- workdir ---------------------------------------------------------------------------------------
def _prepare_workdir(
    plan: AttemptPlan, job_dir: Path, durable: bool, owed: _fsops.OwedSyncs | None
) -> tuple[Path, bool]:
    """The attempt's workdir and whether it already existed."""
    if plan.job["workdir"]["mode"] == "isolated":
        workdir = job_dir / f"run.{plan.attempt_id}"
        _fsops.make_dir(workdir, durable=durable, owed=owed)
        _populate_isolated_workdir(plan, workdir)
        return workdir, False
    return _persistent_workdir(job_dir, plan.job["workdir"]["path"], durable, owed)


def _persistent_workdir(
    job_dir: Path, relative: str, durable: bool, owed: _fsops.OwedSyncs | None = None
) -> tuple[Path, bool]:
    """Walk (creating what is missing) the persistent workdir; refuse symbolic links and non-directories.

    A runner may symlink freely inside its workdir, but the manager follows nothing inside the payload.
    """
    try:
        parts = relative_components(relative, "workdir.path", "protocol_error")
    except RunnerFailure as exc:
        raise RunnerFailure(exc.code, exc.message, {**exc.details, "reason": "workdir_unavailable"}) from None
    current, existed = job_dir, True
    for part in parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            _fsops.make_dir(current, durable=durable, exist_ok=True, owed=owed)
            existed = False
            continue
        if not stat.S_ISDIR(mode):
            what = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
            # The payload itself is unusable, so this is the manager's protocol_error (spec: claimed ->
            # failed with protocol_error), with the precise reason in the details.
            raise RunnerFailure(
                "protocol_error",
                f"the persistent workdir {relative!r} cannot be used: {current} is {what}",
                {"reason": "workdir_unavailable", "workdir": relative, "path": str(current)},
            )
    return current, existed


def _populate_isolated_workdir(plan: AttemptPlan, workdir: Path) -> None:
    """Initialize a new isolated workdir: a transactional job's starts as a private copy of ``data/``.

    The copy (or reflink) never shares an inode with committed ``data/``, so writes through the workdir
    cannot reach it before a transaction (spec "Isolated workdir"). Other jobs start empty. Committed
    data holding a symbolic link or special file is the manager's ``protocol_error`` (details
    ``reason: data_unavailable``), like an unusable persistent workdir.
    """
    if plan.job["data"]["mode"] != "transactional":
        return
    data_dir = Path(os.path.abspath(plan.job_dir)) / "data"
    try:
        populate_isolated_workdir(data_dir, workdir)
    except TransactionError as exc:
        raise RunnerFailure(
            "protocol_error",
            f"the isolated workdir cannot be populated from committed data: {exc}",
            {"reason": "data_unavailable", "path": exc.path or str(data_dir)},
        ) from exc


# -- context and environment -----------------------------------------------------------------------
def _context(plan: AttemptPlan, job_dir: Path, control: Path, workdir: Path, reused: bool) -> dict[str, Any]:
    transactional = plan.job["data"]["mode"] == "transactional"
    return {
        "format": CONTEXT_FORMAT,
        "format_version": 1,
        "workspace_id": plan.workspace.workspace_id,
        "job_id": plan.job_id,
        "job_key": plan.job_key,
        "placement": plan.placement,
        "step": plan.step,
        "activation_id": plan.activation_id,
        "activation_ordinal": plan.activation_ordinal,
        "activation_reason": plan.activation_reason,
        "attempt_id": plan.attempt_id,
        "attempt_ordinal": plan.attempt_ordinal,
        "total_attempts": plan.total_attempts,
        "is_restart": plan.is_restart,
        "is_unclean_restart": plan.is_unclean_restart,
        "attempt_reason": plan.attempt_reason,
        "previous_attempt_id": plan.previous_attempt_id,
        "workdir_mode": plan.job["workdir"]["mode"],
        "workdir_reused": reused,
        "data_generation": plan.data_generation,
        "durable": plan.workspace.durable,
        "priority": plan.priority,
        "resources": plan.resources,
        "settings": plan.settings,
        "inputs": plan.job.get("inputs", {}),  # so a Bash runner reads inputs in the layout we control
        "join": plan.join,
        "children": plan.children,
        "workspace_dir": os.path.abspath(plan.workspace.root),
        "job_dir": str(job_dir),
        "control_dir": str(control),
        "workdir": str(workdir),
        "data_dir": str(job_dir / "data") if transactional else None,
    }


def _protocol_environment(context: Mapping[str, Any], python: str) -> dict[str, str]:
    env = {
        "HTTK_WORKFLOW_CONTEXT": str(Path(context["control_dir"]) / CONTEXT_FILE),
        "HTTK_WORKFLOW_CONTROL_DIR": context["control_dir"],
        "HTTK_WORKFLOW_WORKSPACE_DIR": context["workspace_dir"],
        "HTTK_WORKFLOW_JOB_DIR": context["job_dir"],
        "HTTK_WORKFLOW_WORKDIR": context["workdir"],
        "HTTK_WORKFLOW_IS_RESTART": _flag(context["is_restart"]),
        "HTTK_WORKFLOW_UNCLEAN_RESTART": _flag(context["is_unclean_restart"]),
        "HTTK_WORKFLOW_DURABLE": _flag(context["durable"]),
        "HTTK_WORKFLOW_ATTEMPT_REASON": context["attempt_reason"],
        "HTTK_WORKFLOW_STEP": context["step"],
        "HTTK_WORKFLOW_PYTHON": python,
    }
    if context["data_dir"] is not None:
        env["HTTK_WORKFLOW_DATA_DIR"] = context["data_dir"]
    return env


def _flag(value: object) -> str:
    return "1" if value else "0"


def populate_isolated_workdir(data_dir: Path, workdir: Path) -> int:
    """Copy committed ``data/`` into a new, empty isolated workdir; return how many files were copied.

    Every file is a new inode (``copy_file_range``, which a filesystem may serve as a reflink, else a
    plain copy) with the source's permission bits and modification time; never a hard link, so writes
    through the workdir cannot reach committed ``data/``. Directories get the default mode so the
    runner can write in them. An absent ``data/`` copies nothing. Not synchronized: the attempt is
    prepared only when its context.json exists, and a power cut before the runner starts loses the
    attempt, not data. Symbolic links and special files in ``data/`` are refused with
    :class:`TransactionError` (no transaction can create them).
    """
    try:
        mode = os.lstat(data_dir).st_mode
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(mode):
        raise TransactionError("committed data/ is not a directory", path=data_dir)
    copied = 0
    stack = [(data_dir, workdir)]
    while stack:
        source_dir, target_dir = stack.pop()
        with os.scandir(source_dir) as entries:
            children = sorted(entries, key=lambda entry: entry.name)
        for entry in children:
            target = target_dir / entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                _fsops.make_dir(target, durable=False)
                stack.append((Path(entry.path), target))
            elif stat.S_ISREG(mode):
                _fsops.copy_file(entry.path, target)
                copied += 1
            else:
                what = "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
                raise TransactionError(
                    f"committed data holds {what}, which an isolated workdir does not copy", path=entry.path
                )
    return copied
