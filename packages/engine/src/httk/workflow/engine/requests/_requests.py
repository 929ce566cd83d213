"""Operator control requests: publishing one, and the manager's bounded pass that claims and decides them.

The life of a request file (``spec/01``, "Manual continuation and control requests"; D13)::

    requests/tmp/<id>.json ──rename──> requests/ready/<id>.json ──claim (rename)──> claimed/<manager-id>/
        claimed ──applied──> removed
        claimed ──can never apply (its job moved on, or was deleted since)──> retired/<id>.json
                                                              beside retired/<id>.json.retirement
        claimed ──malformed, naming a job that never was at its placement, or with a signature that
                  does not verify or that the workspace does not trust (D20)──> quarantine/request-<n>
                                                              beside quarantine/request-<n>.quarantine
        ready ──job served by a runner backend this manager does not serve──> left where it is

**Publishing** (:func:`publish_request`) resolves the job's current marker at its placement, captures its
exact generation and record reference (``init`` at generation 0), refuses what the manager would refuse
anyway, writes the document exclusively into ``requests/tmp/`` (synchronized when durable) and renames it
into ``requests/ready/`` by the verified rename every publication uses.

**The pass** (:func:`handle_requests`) decides at most ``budget`` requests: first those it holds (a
request that could not be applied *right now* stays in this manager's claimed directory and is retried),
then ``requests/ready/``. A request whose job this manager does not serve is remembered in memory and
not read again while it stays there. Deciding is :func:`._request_apply.apply_request`.

**Claimed files of dead managers.** A manager id is new for every process, so nothing of this process's
own past incarnations is ever in its claimed directory. What a manager that died left in
``claimed/<its-id>/`` is re-claimed (renamed into this manager's directory) once that manager's heartbeat
has been silent longer than its lease, or at once when its recorded process is gone from this host
(DECISIONS D17); without a readable heartbeat the directory's own modification time (every claim renames
into it) is the latest sign of life. Re-claiming from a manager that is only
slow is safe: a request it already applied is recognized by its ``request_id`` on the job's chain and
merely removed, and one it has not applied yet can win only one verified rename. The directories are
looked at every :data:`RECLAIM_INTERVAL_SECONDS` (and on the first pass).

Cost of a pass: one listing of ``requests/ready/`` (pending requests only: what is decided leaves it),
two small reads (request, job.json) and a probe of one placement per decided request.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import Clock, utc_timestamp
from httk.workflow.engine.core._liveness import manager_gone, read_heartbeat, read_manifest
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._transition import verified_rename
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker
from httk.workflow.protocol import InvalidDocumentError, WorkflowError, validate_priority, validate_step
from httk.workflow.protocol._jsonio import dump_pretty, read_document_bytes, read_json_object
from httk.workflow.protocol._signing import TRUST_MEMBER, SignatureFormatError

from ._documents import (
    ACTIONS,
    APPLIED,
    HOLD,
    MAX_REQUEST_BYTES,
    QUARANTINE,
    RETIRE,
    MalformedRequestError,
    Request,
    Verdict,
    parse_request,
    refusal,
    request_document,
)
from ._signatures import Signer, publication_refusal, signed

log = logging.getLogger("httk.workflow.manager")

DEFAULT_BUDGET = 64
"""Requests one pass decides at most."""

RECLAIM_INTERVAL_SECONDS = 30.0
RETIRED_FORMAT = "httk-workflow-retired-request"
QUARANTINE_FORMAT = "httk-workflow-quarantine"
RUNNER_STEPS_LOOKBACK = 64
"""Frames a client walks back from the current one looking for the runner's declared steps."""


class RequestError(WorkflowError):
    """A request the client refuses to publish (no such job, an action its state refuses, an unknown step)."""


# -- publishing ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PublishedRequest:
    """A published request: where it was put, what it says, and notes for the operator."""

    path: Path
    document: dict[str, Any]
    kind: Kind
    notes: tuple[str, ...] = ()


def publish_request(
    workspace: Workspace,
    placement: str,
    job_key: str,
    action: str,
    *,
    operator: str,
    reason: str,
    priority: int | None = None,
    step: str | None = None,
    force: bool = False,
    signer: Signer | None = None,
) -> PublishedRequest:
    """Publish a request for the job ``job_key`` at ``placement`` against its current marker, signed by
    ``signer`` when one is given (DECISIONS D20).

    Raises :class:`RequestError` when the workspace requires a signature by a trusted key and ``signer``
    is not one, when the job does not exist there, when its current state refuses the action, or (without
    ``force``) when ``step`` is not among the runner's recorded ``runner_steps``.

    Examples
    --------
    >>> published = publish_request(  # doctest: +SKIP
    ...     ws, "proj/a", key, "pause", operator="ann", reason="look"
    ... )
    >>> published.path.parent.name  # doctest: +SKIP
    'ready'
    """
    _check_arguments(action, operator=operator, priority=priority, step=step)
    workspace.require_writable()
    unpublishable = publication_refusal(
        workspace.document.get(TRUST_MEMBER), None if signer is None else signer.operator_key
    )
    if unpublishable is not None:
        raise RequestError(unpublishable)
    marker = probe_marker(workspace, placement, job_key)
    if marker is None:
        raise RequestError(f"no job {job_key} exists at placement {placement}")
    refused = refusal(action, marker.kind)
    if refused is not None:
        raise RequestError(f"{job_key}: {refused}")
    notes: list[str] = []
    if step is not None:
        notes.extend(_step_notes(workspace, marker, step, force=force))
    if action == "cancel" and marker.kind is Kind.CANCELLING:
        notes.append(f"{job_key} is already cancelling; this request changes nothing")
    document = request_document(
        request_id=str(uuid.uuid4()),
        job_key=job_key,
        placement=placement,
        expected_generation=marker.name.generation,
        expected_record_ref=marker.name.ref_text,
        action=action,
        operator=operator,
        reason=reason,
        created_at=utc_timestamp(workspace.clock.now()),
        priority=priority,
        step=step,
        force=force,
    )
    if signer is not None:
        try:
            document = signed(document, signer)
        except SignatureFormatError as exc:
            raise RequestError(f"cannot sign the request: {exc}") from None
    path = _publish(workspace, document)
    return PublishedRequest(path, document, marker.kind, tuple(notes))


def _check_arguments(action: str, *, operator: str, priority: int | None, step: str | None) -> None:
    """What the document needs: a known action, an operator, and exactly the members the action takes."""
    if action not in ACTIONS:
        raise RequestError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
    if not operator:
        raise RequestError("a request names its operator")
    if (priority is not None) != (action == "set_priority"):
        raise RequestError("a priority is given with set_priority and only with it")
    if (step is not None) != (action == "override_step"):
        raise RequestError("a step is given with override_step and only with it")
    if priority is not None:
        validate_priority(priority)
    if step is not None:
        validate_step(step)


def _step_notes(workspace: Workspace, marker: MarkerLocation, step: str, *, force: bool) -> list[str]:
    """The client-side check of an override_step against the runner's recorded steps."""
    recorded, attempted = _recorded_steps(workspace, marker)
    if recorded is None:
        why = "no attempt has run yet" if not attempted else "the runner has not declared runner_steps"
        return [f"step {step!r} could not be checked: {why}; the runner refuses it if it does not know it"]
    if step in recorded:
        return []
    message = f"step {step!r} is not one of the runner's recorded steps ({', '.join(recorded)})"
    if not force:
        raise RequestError(message + "; pass --force if the runner has since learned it")
    return [message + "; publishing anyway (--force)"]


def _recorded_steps(workspace: Workspace, marker: MarkerLocation) -> tuple[list[str] | None, bool]:
    """The newest ``runner_steps`` on the job's chain, and whether any attempt was ever made."""
    ref: object = None if marker.name.ref is None else marker.name.ref_text
    attempted = False
    for _ in range(RUNNER_STEPS_LOOKBACK):
        if not isinstance(ref, str):
            break
        try:
            frame = workspace.reader.read(ref)
        except WorkflowError:
            break
        attempted = attempted or int(frame.get("total_attempts") or 0) > 0
        steps = frame.get("runner_steps")
        if isinstance(steps, list) and all(isinstance(s, str) for s in steps):
            return steps, True
        ref = frame.get("previous_record_ref")
    return None, attempted


def _publish(workspace: Workspace, document: dict[str, Any]) -> Path:
    name = f"{document['request_id']}.json"
    durable = workspace.durable
    staging, ready = workspace.requests_dir / "tmp" / name, workspace.requests_dir / "ready" / name
    _fsops.make_dirs(staging.parent, durable=durable)
    _fsops.create_file(staging, dump_pretty(document), durable=durable)
    # A rename reported as failed may have happened, and a manager may even have claimed the request
    # already: verified_rename settles it; either answer means the request is published.
    verified_rename(
        staging,
        ready,
        durable=durable,
        deadline_seconds=workspace.policy.visibility_deadline_seconds,
        clock=workspace.clock,
        locate_current=lambda: _consumed(workspace, name),
    )
    return ready


def _consumed(workspace: Workspace, name: str) -> Path | None:
    """Where a manager put request ``name`` after taking it out of ready/, if it did."""
    retired = workspace.requests_dir / "retired" / name
    if retired.exists():
        return retired
    found = sorted((workspace.requests_dir / "claimed").glob(f"*/{name}"))
    return found[0] if found else None


# -- the manager's pass ----------------------------------------------------------------------------
@dataclass
class RequestStatistics:
    """What this manager did with requests so far."""

    applied: int = 0
    retired: int = 0
    quarantined: int = 0
    reclaimed: int = 0
    held: int = 0  # currently held for a later pass
    unserved: int = 0  # currently remembered as another backend's


class RequestHolder(Protocol):
    """Who claims and decides requests: a manager's identity, its workspace and its clock."""

    @property
    def manager_id(self) -> str: ...

    @property
    def workspace(self) -> Workspace: ...

    @property
    def clock(self) -> Clock: ...


@dataclass
class RequestMemory:
    """What one manager incarnation remembers between its request passes."""

    # Invariant: a name is in ``held`` exactly while its file sits in this manager's claimed directory
    # waiting for a later pass; ``unserved`` names sit in ready/ for another manager.
    held: set[str] = field(default_factory=set)
    unserved: set[str] = field(default_factory=set)
    last_reclaim: float | None = None
    counts: RequestStatistics = field(default_factory=RequestStatistics)

    def statistics(self) -> RequestStatistics:
        counts = self.counts
        return RequestStatistics(
            counts.applied,
            counts.retired,
            counts.quarantined,
            counts.reclaimed,
            len(self.held),
            len(self.unserved),
        )


Apply = Callable[[Request], Verdict]
"""Decides one well-formed claimed request against its job (the manager's ``apply_request``)."""


@dataclass(frozen=True, slots=True)
class _Desk:
    """One pass: the holder, what it remembers, how it decides, and the jobs it is restricted to."""

    holder: RequestHolder
    memory: RequestMemory
    apply: Apply
    only_jobs: frozenset[str] | None


def handle_requests(
    holder: RequestHolder,
    memory: RequestMemory,
    apply: Apply,
    *,
    budget: int = DEFAULT_BUDGET,
    only_jobs: frozenset[str] | None = None,
) -> bool:
    """Decide at most ``budget`` requests; whether any was applied, retired, quarantined or re-claimed.

    ``apply`` decides a well-formed request; a manager restricted to ``only_jobs`` (job keys) decides
    only requests naming one of them and re-claims nothing from other managers.
    """
    desk = _Desk(holder, memory, apply, only_jobs)
    acted = _reclaim(desk)
    decided = 0
    for name in sorted(memory.held):
        if decided >= budget:
            return acted
        decided += 1
        acted |= _decide_held(desk, name)
    for name in _ready_names(desk):
        if decided >= budget:
            break
        decided += 1
        acted |= _take(desk, name)
    return acted


def _requests(holder: RequestHolder, *parts: str) -> Path:
    return holder.workspace.requests_dir.joinpath(*parts)


def _ready_names(desk: _Desk) -> list[str]:
    memory = desk.memory
    try:
        names = os.listdir(_requests(desk.holder, "ready"))
    except FileNotFoundError:
        return []
    memory.unserved &= set(names)  # forget what another manager has taken since
    return sorted(name for name in names if name not in memory.unserved)


def _load(path: Path, name: str) -> Request | MalformedRequestError | None:
    """The request in ``path``; the defect of a malformed one; ``None`` when it is gone."""
    try:
        data = read_document_bytes(path, "request", MAX_REQUEST_BYTES)
    except InvalidDocumentError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        return MalformedRequestError("", exc.rule, str(path))
    try:
        return parse_request(data, name, path=str(path))
    except MalformedRequestError as exc:
        return exc


def _served(holder: RequestHolder, request: Request) -> bool:
    """Whether this manager serves the job's runner backend (only ``path``). No readable job.json says
    nothing about another backend, so such a request is decided here."""
    path = holder.workspace.payload_path(request.placement, request.job_key) / "job.json"
    try:
        runner = read_json_object(path, document="job.json").get("runner")
    except InvalidDocumentError:
        return True
    return not isinstance(runner, dict) or runner.get("backend", "path") == "path"


def _restricted_to(desk: _Desk, loaded: Request | MalformedRequestError) -> bool:
    """Whether this manager may decide ``loaded``: a manager restricted to some jobs (``only_jobs``, the
    private manager of ``job debug``) decides only well-formed requests naming one of them."""
    only = desk.only_jobs
    return only is None or (isinstance(loaded, Request) and loaded.job_key in only)


def _take(desk: _Desk, name: str) -> bool:
    memory = desk.memory
    ready = _requests(desk.holder, "ready", name)
    loaded = _load(ready, name)
    if loaded is None:
        return False
    if not _restricted_to(desk, loaded):
        memory.unserved.add(name)  # another job's request, left to the managers that serve it
        return False
    if isinstance(loaded, Request) and not _served(desk.holder, loaded):
        memory.unserved.add(name)
        log.info("leaving request %s for a manager serving the job's runner backend", name)
        return False
    claimed = _claim(desk.holder, ready, name)
    return claimed is not None and _decide(desk, claimed, loaded)


def _mine(holder: RequestHolder) -> Path:
    return _requests(holder, "claimed", holder.manager_id)


def _claim(holder: RequestHolder, source: Path, name: str) -> Path | None:
    """Rename ``source`` into this manager's claimed directory; ``None`` when another manager won."""
    durable = holder.workspace.durable
    _fsops.make_dirs(_mine(holder), durable=durable)
    target = _mine(holder) / name
    try:
        _fsops.rename(source, target, durable=durable)
    except FileNotFoundError:
        return None
    except OSError:
        if not target.exists():
            raise
    return target


def _decide_held(desk: _Desk, name: str) -> bool:
    holder, memory = desk.holder, desk.memory
    path = _mine(holder) / name
    loaded = _load(path, name)
    if loaded is None:
        memory.held.discard(name)
        return False
    if isinstance(loaded, Request) and not _served(holder, loaded):  # re-claimed from a dead manager
        memory.held.discard(name)
        with contextlib.suppress(FileNotFoundError):
            _fsops.rename(path, _requests(holder, "ready", name), durable=holder.workspace.durable)
        return True
    return _decide(desk, path, loaded)


def _decide(desk: _Desk, claimed: Path, loaded: Request | MalformedRequestError) -> bool:
    holder, memory, name = desk.holder, desk.memory, claimed.name
    verdict = Verdict(QUARANTINE, str(loaded)) if isinstance(loaded, MalformedRequestError) else None
    if verdict is None:
        assert isinstance(loaded, Request)
        verdict = desk.apply(loaded)
    if verdict.what == HOLD:
        if name not in memory.held:
            log.warning("request %s cannot be applied now; retrying later: %s", name, verdict.reason)
        memory.held.add(name)
        return False
    memory.held.discard(name)
    if verdict.what == APPLIED:
        _fsops.unlink(claimed, durable=holder.workspace.durable, missing_ok=True)
        memory.counts.applied += 1
        assert isinstance(loaded, Request)
        log.info("applied request %s: %s %s by %s", name, loaded.action, loaded.job_key, loaded.operator)
    elif verdict.what == RETIRE:
        retire(holder, claimed, verdict.reason)
        memory.counts.retired += 1
    else:
        quarantine(holder, claimed, verdict.reason)
        memory.counts.quarantined += 1
    return True


def retire(holder: RequestHolder, claimed: Path, reason: str) -> None:
    """Write the retirement record, then move the claimed request beside it (never rescanned)."""
    durable, name = holder.workspace.durable, claimed.name
    retired = _requests(holder, "retired")
    record = {
        "format": RETIRED_FORMAT,
        "format_version": 1,
        "request": name,
        "manager_id": holder.manager_id,
        "reason": reason,
        "retired_at": utc_timestamp(holder.clock.now()),
    }
    _fsops.make_dirs(retired, durable=durable)
    _fsops.write_file_atomic(retired / f"{name}.retirement", dump_pretty(record), durable=durable)
    with contextlib.suppress(FileNotFoundError):  # a manager that re-claimed it decides it instead
        _fsops.rename(claimed, retired / name, durable=durable)
    log.warning("retired request %s: %s", name, reason)


def quarantine(holder: RequestHolder, claimed: Path, reason: str) -> None:
    """Move a malformed or refused request into ``quarantine/`` beside a record naming whence and why.

    The entry's name is derived from the file (name, inode, size), never from its contents' claims, so
    it cannot traverse or collide, and a crash between the record and the move repeats the same names.
    """
    durable, name = holder.workspace.durable, claimed.name
    try:
        info = os.lstat(claimed)
    except FileNotFoundError:
        return
    digest = hashlib.sha256(f"{name}\0{info.st_ino}\0{info.st_size}".encode("utf-8", "surrogateescape"))
    entry = f"request-{digest.hexdigest()[:32]}"
    directory = holder.workspace.quarantine_dir
    record = {
        "format": QUARANTINE_FORMAT,
        "format_version": 1,
        "entry": entry,
        "original_path": f".httk-workflow/requests/ready/{_printable(name)}",
        "reason": _printable(reason),  # it may quote the name
        "manager_id": holder.manager_id,
        "quarantined_at": utc_timestamp(holder.clock.now()),
    }
    _fsops.make_dirs(directory, durable=durable)
    _fsops.write_file_atomic(directory / f"{entry}.quarantine", dump_pretty(record), durable=durable)
    with contextlib.suppress(FileNotFoundError):
        _fsops.rename(claimed, directory / entry, durable=durable)
    log.error("quarantined request %s: %s", _printable(name), _printable(reason))


def _printable(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# -- re-claiming what dead managers claimed --------------------------------------------------------
def _reclaim(desk: _Desk) -> bool:
    holder, memory = desk.holder, desk.memory
    if desk.only_jobs is not None:
        return False  # a restricted manager leaves what other managers claimed alone
    now = holder.clock.monotonic()
    if memory.last_reclaim is not None and now - memory.last_reclaim < RECLAIM_INTERVAL_SECONDS:
        return False
    memory.last_reclaim = now
    acted = False
    try:
        with os.scandir(_requests(holder, "claimed")) as listing:
            entries = [entry for entry in listing if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return False
    for entry in entries:
        if entry.name != holder.manager_id and _silent(holder, entry.name, Path(entry.path)):
            acted |= _reclaim_from(holder, memory, Path(entry.path))
    return acted


def _silent(holder: RequestHolder, manager_id: str, directory: Path) -> bool:
    """Whether the manager owning ``directory`` has been silent for longer than its lease, or is known
    dead: its recorded process is gone from this host (DECISIONS D17)."""
    manifest = read_manifest(holder.workspace, manager_id)
    if manifest is not None and manager_gone(manifest):
        return True
    heartbeat = read_heartbeat(holder.workspace, manager_id)
    now = holder.clock.now()
    age = heartbeat.age(now)
    lease = heartbeat.lease_seconds
    if age is None:
        try:
            age = now.timestamp() - os.lstat(directory).st_mtime
        except FileNotFoundError:
            return False
        lease = holder.workspace.policy.lease_seconds
    return age > lease


def _reclaim_from(holder: RequestHolder, memory: RequestMemory, directory: Path) -> bool:
    acted = False
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return False
    for name in names:
        if _claim(holder, directory / name, name) is not None:
            memory.held.add(name)
            memory.counts.reclaimed += 1
            acted = True
            log.info("re-claimed request %s from the silent manager %s", name, directory.name)
    _fsops.remove_dir(directory, durable=holder.workspace.durable)
    return acted
