"""``job debug``: driving one job to a stop in the foreground, through a private, restricted task manager.

**What it guarantees.** Every transition is made by an ordinary :class:`~._manager.Manager`, configured
with ``only_jobs`` = the job's key, ``placement_prefixes`` = its placement, one worker, and the job's own
claim pool and capabilities: the production code paths exactly, while its marker streams and request
pass see no other job (nothing unrelated is registered, claimed, recovered or decided). Without ``idle``
such a manager stops by itself once nothing it can progress remains. The driver then probes the job's
marker, and that marker — never a timer — decides what comes next:

- ``succeeded`` (exit 0), ``failed`` (3), ``cancelled`` or ``paused`` (4): done;
- ``waiting`` with ``follow_children``: every child the waiting frame's join names that is in this
  workspace and not terminal is driven the same way, depth first in join order, and then the parent is
  run again; a round in which neither the parent nor any child moved stops (4), since its join cannot be
  decided here (a child paused, say);
- anything else (``waiting`` without ``follow_children``, or a marker the manager could not progress
  because another live manager holds its attempt or it is not claimable here): 4, with the reason.

Each run is a new manager incarnation with its manifest, heartbeat, journal writer and log file, exactly
like ``manager run``, so ``workspace managers`` and ``job why`` see it for what it is. The console shows
the watcher's lines (:mod:`._debug_watch`) and the manager's own log at ``log_level`` (errors only by
default; the full log is in its file).

**Maintenance lock.** ``spec/03`` refuses a live maintenance lock up front. This implementation has no
maintenance lock (no such file, policy member or request exists), so there is nothing to refuse.

Cost: per manager run, one census of the job's placement subtree (the manager's exit summary) and one
probe of the job's placement per watcher poll; with ``follow_children``, one run per child and one more
per round of the parent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._jobs import JOB_FILE, LoadedJob, load_job, read_frame
from httk.workflow.engine.core._states import AT_REST_KINDS, PERMANENT_KINDS, TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, probe_marker
from httk.workflow.engine.manager import _run
from httk.workflow.engine.manager._detach import refuse_detached
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._joins import JoinError, parse_join
from httk.workflow.engine.publish._submit import Submitter
from httk.workflow.protocol import (
    DEFAULT_POOL,
    InvalidDocumentError,
    WorkflowError,
    validate_placement,
    validate_step,
)

from ._debug_watch import POLL_INTERVAL, Echo, JobWatcher
from ._select import select_job

EXIT_SUCCEEDED = 0
EXIT_FAILED = 3
EXIT_STOPPED = 4
"""Kinds no manager moves on its own: the driver stops at them without running one."""


class DebugError(WorkflowError):
    """``job debug`` refuses: ``--step`` on an existing job, or a runner backend it cannot drive."""


@dataclass(frozen=True, slots=True)
class DebugOptions:
    """What ``job debug`` was asked to do; every member has the command line's default."""

    placement: str = "debug"
    step: str | None = None
    follow_children: bool = False
    log_level: str | None = None
    runner_search_path: tuple[Path, ...] = ()
    runner_modules: tuple[str, ...] = ("httk.workflow",)
    durable: bool | None = None
    poll_interval: float = POLL_INTERVAL


@dataclass(frozen=True, slots=True)
class DebugResult:
    """Where the debugged job stopped; ``interrupted`` when a signal drained the private manager."""

    job_key: str
    placement: str
    kind: Kind | None
    interrupted: bool = False

    @property
    def exit_status(self) -> int:
        """0 succeeded, 3 failed, 4 stopped without finishing (whatever else the marker says)."""
        if self.kind is Kind.SUCCEEDED:
            return EXIT_SUCCEEDED
        return EXIT_FAILED if self.kind is Kind.FAILED else EXIT_STOPPED


def debug_job(
    root: Path | str,
    target: str,
    options: DebugOptions | None = None,
    *,
    echo: Echo = print,
    cwd: Path | None = None,
) -> DebugResult:
    """Submit ``target`` (a payload directory outside the workspace) or select it (any job selector), then
    drive it until it stops (see the module docstring).

    Examples
    --------
    >>> debug_job("runs/ws", "payloads/si", DebugOptions(step="relax")).exit_status  # doctest: +SKIP
    0
    """
    options = options or DebugOptions()
    _run.level_number(options.log_level)  # a bad level is refused before anything is written
    validate_placement(options.placement)
    if options.step is not None:
        validate_step(options.step)
    workspace = attach(root, durable=options.durable)
    try:
        workspace.require_writable()
        refuse_detached(workspace.root)  # before a payload is submitted or a manager published
        marker = resolve(workspace, target, options, echo, cwd or Path.cwd())
        driver = _Driver(workspace, options, echo)
        echo(f"[debug] {marker.job_key} is {marker.kind.value} at {marker.placement}")
        final = driver.drive(marker)
        result = DebugResult(
            marker.job_key, marker.placement, final.kind if final else None, driver.interrupted
        )
        echo(conclusion(workspace, marker, final, options.follow_children, result))
        return result
    finally:
        workspace.close()


# -- what to drive -----------------------------------------------------------------------------------
def resolve(
    workspace: Workspace, target: str, options: DebugOptions, echo: Echo, cwd: Path
) -> MarkerLocation:
    """The job ``target`` names: a payload directory outside the workspace is submitted fresh at
    ``options.placement`` (its initial step replaced by ``options.step``); anything else is a selector."""
    payload = fresh_payload(workspace, target, cwd)
    if payload is not None:
        return _submit(workspace, payload, options, echo)
    marker = select_job(workspace, target, cwd=cwd)
    if options.step is not None:
        raise DebugError(
            f"--step sets the initial step of a fresh payload, but job {marker.job_key} already exists "
            f"({marker.kind.value} at generation {marker.name.generation}); changing the step of a job "
            "with a history is what 'httk job request override_step' is for"
        )
    return marker


def fresh_payload(workspace: Workspace, target: str, cwd: Path) -> Path | None:
    """``target`` as a payload directory to submit: one with a job.json, outside the workspace."""
    path = Path(target) if os.path.isabs(target) else cwd / target
    if path.is_symlink() or not (path / JOB_FILE).is_file():
        return None
    real, root = os.path.realpath(path), os.path.realpath(workspace.root)
    return None if real == root or real.startswith(root.rstrip("/") + "/") else path


def _submit(workspace: Workspace, payload: Path, options: DebugOptions, echo: Echo) -> MarkerLocation:
    submitter = Submitter(workspace)
    result = submitter.submit_payload(payload, options.placement, initial_step=options.step)
    echo(f"[debug] {result.status} {result.job_key} at {result.placement}")
    return probe_marker(workspace, result.placement, result.job_key) or result.marker


# -- driving -----------------------------------------------------------------------------------------
RESCAN_SECONDS = 1.0
"""How often a private manager looks for a detach request: one person waits on a debug session."""


class _Driver:
    """Runs private managers on one job at a time; see the module docstring for when it stops."""

    def __init__(self, workspace: Workspace, options: DebugOptions, echo: Echo) -> None:
        self.workspace = workspace
        self.options = options
        self.echo = echo
        self.interrupted = False

    def drive(self, marker: MarkerLocation) -> MarkerLocation | None:
        """Run the job until it stops, its children first whenever it waits (``follow_children``)."""
        current: MarkerLocation | None = marker
        while current is not None and current.kind not in AT_REST_KINDS and not self.interrupted:
            before = current
            current = self._run(current)
            if current is None or current.kind is not Kind.WAITING or not self.options.follow_children:
                break
            children_moved = self._drive_children(current)
            if current == before and not children_moved:
                break  # a whole round without a move: the join cannot be decided from here
            current = probe_marker(self.workspace, current.placement, current.job_key)
        return current

    def _drive_children(self, waiting: MarkerLocation) -> bool:
        """Drive each unfinished child of the waiting frame's join, in order; whether any of them moved."""
        try:
            frame = read_frame(self.workspace, waiting)
            join = parse_join(
                None if frame is None else frame.get("join"), workspace_id=self.workspace.workspace_id
            )
        except (WorkflowError, JoinError) as exc:
            self.echo(f"[debug] {waiting.job_key}: its join cannot be read, so no child is followed: {exc}")
            return False
        moved = False
        for child in join.children:
            if self.interrupted:
                break
            marker = probe_marker(self.workspace, child.placement_hint, child.job_key)
            if marker is None:
                self.echo(f"[debug] child {child.name} has no marker at {child.placement_hint}")
            elif marker.kind not in TERMINAL_KINDS:
                self.echo(f"[debug] following child {child.name} ({marker.kind.value})")
                moved |= self.drive(marker) != marker
        return moved

    def _run(self, marker: MarkerLocation) -> MarkerLocation | None:
        """One private manager run on ``marker``'s job, watched; the job's marker afterwards.

        It honours a detach (``workspace detach``) like any manager: none starts while the request is
        there, and one serving when it arrives finishes what it holds, acknowledges and stops the drive.
        """
        refuse_detached(self.workspace.root)
        manager = Manager(self.workspace.root, self._config(marker))
        manager.start()
        restore = _route_logging(manager, self.options.log_level)
        watcher = JobWatcher(self.workspace.root, marker, self.echo, self.options.poll_interval)
        watcher.start()
        try:
            summary = manager.run(rescan_interval=RESCAN_SECONDS)
        finally:
            watcher.stop()
            restore()
        if summary.exit_reason == "drained":
            self.interrupted = True
            self.echo("[debug] interrupted: the private manager drained")
        elif summary.exit_reason == "detached":
            self.interrupted = True
            self.echo("[debug] stopped: the workspace is being detached (the private manager acknowledged)")
        return probe_marker(self.workspace, marker.placement, marker.job_key)

    def _config(self, marker: MarkerLocation) -> ManagerConfig:
        """A one-worker manager that sees only this job and accepts its pool and capabilities."""
        job = _job_or_none(self.workspace, marker)
        claim = job.document["claim"] if job is not None else {}
        if job is not None and job.document["runner"].get("backend", "path") != "path":
            raise DebugError(
                f"job {marker.job_key} uses the runner backend {job.document['runner']['backend']!r}; "
                "job debug drives path runners only"
            )
        return ManagerConfig(
            workers=1,
            pools=(str(claim.get("pool", DEFAULT_POOL)),),
            capabilities=tuple(claim.get("required_capabilities", ())),
            placement_prefixes=(marker.placement,),
            only_jobs=frozenset({marker.job_key}),
            runner_search_path=self.options.runner_search_path,
            runner_modules=self.options.runner_modules,
            durable=self.options.durable,
            label="job-debug",
        )


def _job_or_none(workspace: Workspace, marker: MarkerLocation) -> LoadedJob | None:
    """The job's definition; ``None`` when it cannot be loaded (registration then fails it, as always)."""
    try:
        return load_job(workspace, marker.placement, marker.job_key)
    except (InvalidDocumentError, WorkflowError):
        return None


def _route_logging(manager: Manager, level: str | None) -> Callable[[], None]:
    """The manager's log to its file, and to the console at ``level`` (errors only without one).

    Returns what restores the previous routing (and closes the file).
    """
    logger = logging.getLogger(_run.LOGGER)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    _run.configure(
        manager.manager_id, manager.workspace.managers_dir / manager.manager_id / "log", level=level
    )
    if level is None:
        for handler in logger.handlers:
            if not isinstance(handler, logging.FileHandler):
                handler.setLevel(logging.ERROR)

    def restore() -> None:
        for handler in logger.handlers:
            handler.close()
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]

    return restore


# -- the last line -----------------------------------------------------------------------------------
def conclusion(
    workspace: Workspace,
    marker: MarkerLocation,
    final: MarkerLocation | None,
    follow_children: bool,
    result: DebugResult,
) -> str:
    """``[debug] <key> succeeded (exit 0)`` and the like, with what to do about a stop."""
    key, status = marker.job_key, result.exit_status
    if final is None:
        return f"[debug] {key} has no marker any more (exit {status})"
    kind = final.kind
    if kind is Kind.FAILED:
        failure = _frame_or_empty(workspace, final).get("failure") or {}
        return f"[debug] {key} failed: {failure.get('code')}: {failure.get('message')} (exit {status})"
    if kind in PERMANENT_KINDS:
        return f"[debug] {key} {kind.value} (exit {status})"
    if kind is Kind.PAUSED:
        advice = "continue it with 'httk job request continue'"
    elif kind is Kind.WAITING and not follow_children:
        advice = "it waits for its children; --follow-children drives them"
    elif kind is Kind.WAITING:
        advice = "its join cannot be decided from here; 'httk job why' names the children that block it"
    else:
        advice = "the private manager could not progress it (another live manager holds it, or it cannot be "
        advice += "claimed here); 'httk job why' says why"
    return f"[debug] {key} stopped {kind.value}: {advice} (exit {status})"


def _frame_or_empty(workspace: Workspace, marker: MarkerLocation) -> Mapping[str, Any]:
    try:
        return read_frame(workspace, marker) or {}
    except WorkflowError:
        return {}
