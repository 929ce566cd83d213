"""``job delete``: removing a finished, submitted or ready job, payload and marker, without racing a manager.

**What may be deleted.** A job whose marker is ``succeeded``, ``failed``, ``cancelled``, ``submitted`` or
``ready``. Any other state has work attached (an attempt, a fence, a join, a pause an operator may
continue) and is refused with the advice to cancel it first. Unless ``force``, a job is also refused while
the parent named in its job.json is not terminal and that parent's current frame names it — in the join it
waits for, or in the ``join_summary`` of the activation the join started (whose step may read this
child's workdir). Only the recorded parent is checked: a join may also name a job it did not spawn, and
finding every such join would mean reading the frame of every waiting job in the workspace. A payload that
holds another job's payload is refused (deleting it would delete that job's too).

**The order, and why.**

1. *The fence* (``submitted`` and ``ready`` only): one verified transition of exactly the observed marker
   to ``cancelled`` (reason ``operator_delete``, ``cancellation.verified: no_live_attempt``). A manager
   claiming the job at that instant either renames first — then this move loses, the delete is refused
   and nothing else is touched (the frame it appended is an orphan, harmless by construction) — or
   finds the job cancelled, an ordinary lost race. Unlinking the ready marker instead would not be
   race-safe: a claimer whose rename then finds no marker anywhere must classify that as an unavailable
   workspace and stop mutating (``spec/01``, verified transitions), not as a lost race. ``succeeded`` and
   ``cancelled`` markers are never moved again by anyone, so they need no fence.
2. *The payload*, bottom-up, its top-level ``job.json`` last and then the payload directory itself.
3. *The marker*, exactly the observed (or fenced) name, unlinked last — but a fenced marker only once it
   has been cancelled for :func:`linger_seconds` (the visibility deadline plus a manager's ready window).
   A manager that listed the job as ready just before the fence may still try to claim it from that
   listing; it must find the cancelled marker then, because a job whose every marker is gone would send
   its verified rename into the "workspace unavailable" verdict instead of a lost race. A batch lingers
   once, after every fence and payload removal.

**Interrupted at any instruction**, what is left is one of: the job untouched (an orphan frame at most); or
its terminal marker (``cancelled`` by the fence, reason ``operator_delete``, or the kind it had) with the
payload partly removed — job.json goes last, so a payload directory with entries still has it — or with
no payload at all, which ``workspace fsck`` does not call damage and ``workspace gc`` collects. ``job
delete`` run again on the job finishes every one of them. It never leaves a payload without a marker:
that is indistinguishable from an interrupted submission, which collection deliberately keeps and no
selector names (``spec/01``, "Submission protocol").

**A failed job** can still be revived by an operator's ``continue`` or ``override_step`` request while it is
being deleted. Then the final unlink finds its marker gone; the error says so, and running ``job delete``
again (the job is now ``ready``, with no payload left to claim) finishes it.

Cost: one probe of the job's placement, one job.json read and one probe of its parent's placement, one
walk of the payload (each directory named like a job key costs one more probe), then one unlink or rmdir
per entry, and one wait of :func:`linger_seconds` (6 s under the default policy) for a batch holding a
submitted or ready job. Only the fence, the payload directory's rmdir and the marker unlink are
synchronized when the workspace is durable: once the payload directory's removal is durable, nothing below
it can reappear.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._frames import cancelled_directly
from httk.workflow.engine.core._jobs import JOB_FILE, read_frame
from httk.workflow.engine.core._states import DISPOSABLE_KINDS, QUEUED_KINDS, TERMINAL_KINDS, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker
from httk.workflow.engine.manager._rules import DEFAULT_WINDOW_SECONDS
from httk.workflow.protocol import (
    InvalidDocumentError,
    InvalidNameError,
    JobKey,
    WorkflowError,
    validate_placement,
)
from httk.workflow.protocol._jsonio import read_json_object

from ._select import select_each

REASON = "operator_delete"


class DeleteError(WorkflowError):
    """A job the delete refuses, or one whose marker moved while it was being deleted."""


class DeleteRefusedError(DeleteError):
    """Selected jobs the delete refuses, so that it deleted none; ``refusals`` holds each, in order."""

    def __init__(self, refusals: Sequence[DeleteError], selected: int) -> None:
        super().__init__(str(refusals[-1]))
        self.refusals = tuple(refusals)
        self.add_note(f"{len(refusals)} of {selected} jobs refused; nothing was deleted")


@dataclass(frozen=True, slots=True)
class DeletePlan:
    """A job checked for deletion: the marker observed and its payload directory."""

    marker: MarkerLocation
    payload: Path

    @property
    def fenced(self) -> bool:
        """Whether the job is cancelled first and its marker removed only :func:`linger_seconds` later."""
        return self.marker.kind in QUEUED_KINDS


def plan_deletion(workspace: Workspace, selectors: Sequence[str], *, force: bool = False) -> list[DeletePlan]:
    """Check every job the selectors name (each once, in the order first named): all, or none.

    Raises :class:`DeleteRefusedError` naming every refused job when one is refused; nothing is written.
    """
    markers = select_each(workspace, selectors)
    plans: list[DeletePlan] = []
    refusals: list[DeleteError] = []
    for marker in markers:
        try:
            plans.append(plan_delete(workspace, marker, force=force))
        except DeleteError as exc:
            refusals.append(exc)
    if refusals:
        raise DeleteRefusedError(refusals, len(markers))
    return plans


def plan_delete(workspace: Workspace, marker: MarkerLocation, *, force: bool = False) -> DeletePlan:
    """Check that ``marker``'s job may be deleted; nothing is written. Raises :class:`DeleteError`."""
    key = marker.job_key
    if marker.kind not in DISPOSABLE_KINDS:
        raise DeleteError(
            f"job {key} is {marker.kind.value}: only succeeded, failed, cancelled, submitted or ready jobs "
            f"can be deleted; cancel it first with 'httk job request cancel {key}' and delete it once it "
            "is cancelled"
        )
    payload = workspace.payload_path(marker.placement, key)
    if os.path.lexists(payload) and not stat.S_ISDIR(os.lstat(payload).st_mode):
        raise DeleteError(f"the payload of job {key} is not a directory (a symlink or a file): {payload}")
    if not force:
        parent = referencing_parent(workspace, marker)
        if parent is not None:
            raise DeleteError(
                f"job {key} is a child the join of its parent {parent.job_key} ({parent.kind.value}) "
                "depends on; delete it once the parent has finished, or pass --force"
            )
    nested = _nested_job(workspace, payload)
    if nested is not None:
        raise DeleteError(
            f"the payload of job {key} holds the payload of job {nested.job_key}; delete that job first"
        )
    return DeletePlan(marker, payload)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """What became of one planned job: the marker removed, or why not (the message says what is left)."""

    plan: DeletePlan
    removed: MarkerLocation | None = None
    error: DeleteError | None = None


def linger_seconds(workspace: Workspace) -> float:
    """How long a fenced marker stays after its fence: a listing's staleness plus a manager's ready window."""
    return workspace.policy.visibility_deadline_seconds + DEFAULT_WINDOW_SECONDS


def delete_jobs(workspace: Workspace, plans: Sequence[DeletePlan], *, operator: str) -> list[DeleteResult]:
    """Fence, remove every payload, linger, then unlink every marker (see the module header).

    A job a manager moved first, or whose marker moved while its payload was being removed, gets an
    error in its result; the others are deleted regardless.
    """
    workspace.require_writable()
    clock = workspace.clock
    fenced_at: float | None = None
    pending: list[tuple[DeletePlan, MarkerLocation]] = []
    results: list[DeleteResult] = []
    for plan in plans:
        try:
            marker = plan.marker
            if plan.fenced:
                marker = _fence(workspace, marker, operator)
                fenced_at = clock.monotonic()
            _remove_payload(plan.payload, durable=workspace.durable)
        except (WorkflowError, OSError) as exc:
            results.append(DeleteResult(plan, error=_as_delete_error(exc, plan.marker)))
            continue
        pending.append((plan, marker))
    if fenced_at is not None:
        clock.sleep(max(0.0, fenced_at + linger_seconds(workspace) - clock.monotonic()))
    for plan, marker in pending:
        try:
            results.append(DeleteResult(plan, removed=_unlink_marker(workspace, marker)))
        except DeleteError as exc:
            results.append(DeleteResult(plan, error=exc))
    return results


def _as_delete_error(exc: Exception, marker: MarkerLocation) -> DeleteError:
    if isinstance(exc, DeleteError):
        return exc
    return DeleteError(f"job {marker.job_key} could not be deleted: {exc}")


def _unlink_marker(workspace: Workspace, marker: MarkerLocation) -> MarkerLocation:
    try:
        _fsops.unlink(marker.path(workspace), durable=workspace.durable)
    except FileNotFoundError:
        now = probe_marker(workspace, marker.placement, marker.job_key)
        where = "it has no marker now" if now is None else f"it is {now.kind.value} now"
        raise DeleteError(
            f"the payload of job {marker.job_key} was removed, but its {marker.kind.value} marker moved "
            f"meanwhile ({where}); run job delete again to remove it"
        ) from None
    return marker


def _fence(workspace: Workspace, marker: MarkerLocation, operator: str) -> MarkerLocation:
    """Move the exact observed submitted or ready marker to cancelled; refuse if a manager moved it first."""
    fenced = cancelled_directly(
        marker.kind,
        read_frame(workspace, marker),
        writer_id=workspace.journal().writer_id,
        operator=operator,
        reason=REASON,
    )
    result = move_marker(workspace, marker, fenced, Trigger.CANCEL)
    if not result.won or result.current is None:
        now = "gone" if result.current is None else result.current.kind.value
        raise DeleteError(
            f"job {marker.job_key} was {marker.kind.value} and is {now} now (a manager moved it meanwhile): "
            "nothing was removed; cancel it with 'httk job request cancel' and delete it once it is cancelled"
        )
    return result.current


# -- the join-parent guard -------------------------------------------------------------------------
def referencing_parent(workspace: Workspace, marker: MarkerLocation) -> MarkerLocation | None:
    """The recorded parent's marker when it is not terminal and its current frame names this job.

    A payload whose job.json is gone (a delete interrupted after removing it) has no parent to protect.
    """
    try:
        document = read_json_object(
            workspace.payload_path(marker.placement, marker.job_key) / JOB_FILE, document="job.json"
        )
    except InvalidDocumentError:
        return None
    parent = document.get("parent")
    if not isinstance(parent, dict) or parent.get("workspace_id") != workspace.workspace_id:
        return None
    key, placement = parent.get("job_key"), parent.get("placement")
    if not isinstance(key, str) or not isinstance(placement, str):
        return None
    try:
        validate_placement(placement)
        JobKey.parse(key)
    except InvalidNameError:
        return None
    current = probe_marker(workspace, placement, key)
    if current is None or current.kind in TERMINAL_KINDS:
        return None
    frame = read_frame(workspace, current)
    return current if frame is not None and names_child(frame, marker.job_id) else None


def names_child(frame: Mapping[str, Any], job_id: str) -> bool:
    """Whether a frame's join, or the join summary of its activation, names the job ``job_id``."""
    members = [*_listed(frame.get("join"), "children"), *_listed(frame.get("join_summary"), "observations")]
    return any(isinstance(member, dict) and member.get("job_id") == job_id for member in members)


def _listed(value: object, member: str) -> list[Any]:
    found = value.get(member) if isinstance(value, dict) else None
    return found if isinstance(found, list) else []


# -- the payload -----------------------------------------------------------------------------------
def _nested_job(workspace: Workspace, payload: Path) -> MarkerLocation | None:
    """The first job whose payload lies inside ``payload`` (a directory named by a job key with a marker)."""
    for directory in _directories_below(payload):
        try:
            key = JobKey.parse(directory.name)
        except InvalidNameError:
            continue
        placement = directory.parent.relative_to(workspace.root).as_posix()
        found = probe_marker(workspace, placement, str(key))
        if found is not None:
            return found
    return None


def _directories_below(root: Path) -> Iterator[Path]:
    """Every directory below ``root`` (not following symlinks), depth first, each before those below it;
    nothing for an absent ``root``. An explicit stack: a workdir may be deeper than the recursion limit."""
    stack = [iter(_subdirectories(root))]
    while stack:
        directory = next(stack[-1], None)
        if directory is None:
            stack.pop()
            continue
        yield directory
        stack.append(iter(_subdirectories(directory)))


def _subdirectories(directory: Path) -> list[Path]:
    try:
        listing = os.scandir(directory)
    except FileNotFoundError:
        return []
    with listing:
        return [Path(entry.path) for entry in listing if entry.is_dir(follow_symlinks=False)]


def _remove_payload(payload: Path, *, durable: bool) -> None:
    """Remove ``payload`` bottom-up, its job.json last, never following a symlink; absent is done."""
    if not os.path.lexists(payload):
        return
    _remove_contents(payload, keep=JOB_FILE)
    _fsops.unlink(payload / JOB_FILE, durable=False, missing_ok=True)
    _remove_directory(payload, durable=durable)


def _remove_contents(directory: Path, *, keep: str | None = None) -> None:
    """Remove everything below ``directory`` but its entry ``keep``, children before their parents,
    never following a symlink; an explicit stack, for a workdir deeper than the recursion limit."""
    stack = [(directory, _entries(directory, keep))]
    while stack:
        current, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            if stack:  # ``directory`` itself is its caller's to remove
                _remove_directory(current, durable=False)
            continue
        path, is_directory = entry
        if is_directory:
            stack.append((path, _entries(path, None)))
        else:
            _fsops.unlink(path, durable=False, missing_ok=True)


def _entries(directory: Path, keep: str | None) -> Iterator[tuple[Path, bool]]:
    with os.scandir(directory) as listing:
        found = [(Path(e.path), e.is_dir(follow_symlinks=False)) for e in listing if e.name != keep]
    return iter(found)


def _remove_directory(path: Path, *, durable: bool) -> None:
    if not _fsops.remove_dir(path, durable=durable) and os.path.lexists(path):
        raise DeleteError(f"{path} gained entries while it was being removed; run job delete again")
