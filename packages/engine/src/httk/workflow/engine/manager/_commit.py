"""The end of an attempt: committing its outcome, or classifying an exit without one.

The specification's processing order, for a valid current outcome: validate job, activation and attempt,
and with them the join, every child bundle and the transaction (:func:`validate_publication`); append
the committing frame and rename running → committing, which fences the attempt; replay the transaction
into ``data/`` (step 4, :func:`apply_transaction`); register every child (:func:`register_spawned`,
step 5: before the destination frame, never rolled back); decide the destination (budgets included, the
data generation advanced when the transaction changed data); append its frame and rename committing →
destination; clean up afterwards. The committing frame embeds the validated outcome (with
``has_transaction``) and spawn set, so a manager that finds an abandoned committing marker replays the
transaction, registers the missing children and finishes the same decision without rerunning the step.
``data/`` itself is created by the first replay that has operations (it is absent until then).

An exit without an outcome is ``protocol_error`` for status 0 (success is ambiguous) and
``process_failure`` otherwise; retry policy and budgets then decide between ready and failed.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._frames import (
    Frame,
    failed,
    failure_of,
    next_data_generation,
    protocol_failure,
)
from httk.workflow.engine.core._frames import committing as committing_frame
from httk.workflow.engine.core._jobs import LoadedJob
from httk.workflow.engine.core._liveness import PROCESS_FILE
from httk.workflow.engine.core._states import RETIRES_ATTEMPT_CONTROL, Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.engine.publish._joins import JoinError, validate_wait
from httk.workflow.engine.publish._outcome import (
    OUTCOME_DIR,
    OUTCOME_FILE,
    TRANSACTION_DIR,
    ChildRegistrationError,
    ParentIdentity,
    SpawnedChild,
    UnusableOutcomeError,
    read_outcome,
    read_spawn_set,
    register_children,
    spawned_of,
    validate_outcome,
)
from httk.workflow.engine.publish._runners import STAGED_RUNNER
from httk.workflow.engine.publish._transactions import TransactionError, load_manifest, replay
from httk.workflow.protocol._digest import ATTEMPT_DIR_PREFIX
from httk.workflow.protocol._jsonio import dump_pretty

from ._attempt import CONTEXT_FILE, STDERR_FILE, STDIO_LOG, STDOUT_FILE
from ._rules import decide, retry_or_fail
from ._state import LiveAttempt, ManagerState
from ._storage import STORAGE_ERRORS, Unfinished, retry_delay

log = logging.getLogger("httk.workflow.manager")

_COPY_CHUNK = 1 << 20
TRANSACTIONAL_EXTENSION = "transactional-data-v1"
T = TypeVar("T")


def finish_attempt(state: ManagerState, live: LiveAttempt, status: int) -> None:
    """A process this manager launched has exited with ``status``."""
    try:
        outcome = read_outcome(live.prepared.control_dir)
    except UnusableOutcomeError as exc:
        commit(state, live.marker, live.frame, live.job, outcome=None, defect=str(exc), live=live)
        return
    if outcome is not None:
        commit(state, live.marker, live.frame, live.job, outcome=outcome, live=live)
        return
    drained = live.terminated_at is not None
    failure = exit_failure(status, drained=drained)
    decision = exit_decision(live.job.document, live.frame, failure, drained=drained)
    won = state.apply(
        live.marker, decision, Trigger.RETRY if decision.kind is Kind.READY else Trigger.FAILURE
    )
    if won:
        leave_breadcrumb(state, live, decision)


def finish_reaped(state: ManagerState, attempt_id: str, item: Unfinished) -> bool:
    """Commit what a reaped attempt left (:func:`finish_attempt`); a storage error keeps it in
    ``state.unfinished``, to be tried again (backing off) by :func:`finish_unfinished`."""
    try:
        finish_attempt(state, item.live, item.status)
    except STORAGE_ERRORS as exc:
        state.storage.failed("commit the attempt of", item.live.marker.job_key, exc)
        item.failures += 1
        item.next_try = state.clock.monotonic() + retry_delay(item.failures)
        state.unfinished[attempt_id] = item
        return False
    state.unfinished.pop(attempt_id, None)
    return True


def finish_unfinished(state: ManagerState) -> bool:
    """Try again every unfinished commit that is due; whether any of them is done now."""
    now = state.clock.monotonic()
    due = [(key, item) for key, item in state.unfinished.items() if item.next_try <= now]
    finished = [finish_reaped(state, attempt_id, item) for attempt_id, item in due]  # each, not the first
    return any(finished)


def exit_failure(status: int, *, drained: bool) -> dict[str, Any]:
    """The failure object of an attempt that ended without publishing an outcome."""
    if drained:
        return failure_of("lease_lost", "the manager drained and stopped the attempt", exit_status=status)
    if status == 0:
        return protocol_failure("the runner exited successfully without publishing an outcome", exit_status=0)
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        message = f"the runner was killed by {name} without publishing an outcome"
        return failure_of("process_failure", message, signal=-status)
    message = f"the runner exited with status {status} without publishing an outcome"
    return failure_of("process_failure", message, exit_status=status)


def exit_decision(
    job: Mapping[str, Any], frame: Mapping[str, Any], failure: dict[str, Any], *, drained: bool
) -> Frame:
    if drained:
        # Stopping the attempt was this manager's decision, never the job's: retry within budgets.
        job = {**job, "retry_policy": {**(job.get("retry_policy") or {}), "retry_on": ["lease_lost"]}}
    return retry_or_fail(job, frame, failure, declared=False, unclean=True, attempt_reason=failure["code"])


def commit(
    state: ManagerState,
    running: MarkerLocation,
    frame: Frame,
    job: LoadedJob,
    *,
    outcome: dict[str, Any] | None,
    defect: str | None = None,
    live: LiveAttempt | None = None,
) -> None:
    """Validate, fence into committing, then finish; an unusable outcome still goes through committing."""
    spawned: list[SpawnedChild] = []
    if outcome is not None:
        try:
            outcome, notes = validate_outcome(
                outcome,
                job_id=running.job_id,
                activation_id=frame["activation_id"],
                attempt_id=frame["attempt_id"],
            )
            outcome, spawned = validate_publication(state, running, frame, job, outcome)
        except UnusableOutcomeError as exc:
            defect, outcome, notes, spawned = str(exc), None, [], []
        for note in notes:
            log.info("%s: %s", running.job_key, note)
    committing = committing_frame(
        frame,
        manager_id=state.manager_id,
        writer_id=state.writer_id,
        outcome=outcome,
        defect=defect,
        spawned=[child.as_member() for child in spawned],
    )
    result = state.move(running, committing, Trigger.OUTCOME)
    if not result.won or result.current is None:
        return  # another actor fenced the attempt first (a cancellation or a recoverer): not ours to apply
    finish_committing(state, result.current, committing, job, live)


def finish_committing(
    state: ManagerState,
    marker: MarkerLocation,
    frame: Frame,
    job: LoadedJob,
    live: LiveAttempt | None,
) -> None:
    """Move a committing marker to the destination its frame's outcome decides."""
    outcome = frame.outcome
    if outcome is None:
        failure = frame.failure or protocol_failure("the published outcome is unusable")
        decision = failed(frame, failure, "failure")
    else:
        changed, corruption = False, None
        if outcome.get("has_transaction"):
            try:
                changed, corruption = apply_transaction(state, job, frame)
            except OSError as exc:
                delay = state.defer_commit(marker.job_key)
                log.warning(
                    "%s: the transaction cannot be replayed now, left committing (next try in %.0f s): %s",
                    marker.job_key,
                    delay,
                    exc,
                )
                return
        unregistered = corruption or _deferring(state, marker, lambda: register_spawned(state, job, frame))
        decision = (
            decide(job.document, frame, outcome, data_changed=changed)
            if unregistered is None
            else _with_generation(failed(frame, unregistered, "failure"), frame, changed)
        )
    won = _deferring(state, marker, lambda: state.apply(marker, decision, Trigger.COMMIT))
    state.deferred_commits.pop(marker.job_key, None)
    if won and live is not None and decision.kind in RETIRES_ATTEMPT_CONTROL:
        state.retiring.append(live)  # after the freed slot is refilled: cleanup is off the hot path
    elif won and live is not None:
        leave_breadcrumb(state, live, decision)


def _deferring(state: ManagerState, marker: MarkerLocation, step: Callable[[], T]) -> T:
    """One step of finishing a commit; a storage error defers the commit (the committing pass tries it
    again, backing off: ``_recovery.on_committing``) and is raised on to be logged."""
    try:
        return step()
    except STORAGE_ERRORS:
        state.defer_commit(marker.job_key)
        raise


BREADCRUMB = "error.json"
"""The failure breadcrumb in the kept control directory of the attempt that failed the job."""


def leave_breadcrumb(state: ManagerState, live: LiveAttempt, decision: Frame) -> None:
    """Write ``error.json`` beside the outcome and logs of an attempt that failed its job.

    Evidence for an operator (``schemas/error.schema.json``), not protocol state: written after the
    failed frame is committed, without synchronization, and a failure to write it is only logged.
    """
    failure = decision.failure
    if decision.kind is not Kind.FAILED or not isinstance(failure, dict):
        return
    frame = live.frame
    document = {
        "format": "httk-workflow-error",
        "format_version": 1,
        "job_id": live.marker.job_id,
        "job_key": live.marker.job_key,
        "attempt_id": frame["attempt_id"],
        "step": frame.step,
        "failed_at": utc_timestamp(state.clock.now()),
        "code": failure.get("code"),
        "message": failure.get("message"),
        "failure": failure,
    }
    try:
        _fsops.write_file_atomic(live.prepared.control_dir / BREADCRUMB, dump_pretty(document), durable=False)
    except OSError as exc:
        log.warning("%s: the failure breadcrumb could not be written: %s", live.marker.job_key, exc)


def _with_generation(decision: Frame, frame: Frame, changed: bool) -> Frame:
    """A failure after a replayed transaction still records the data generation it produced."""
    if frame.data_generation is None:
        return decision
    return decision.with_members(data_generation=next_data_generation(frame["data_generation"], changed))


def control_dir_of(job: LoadedJob, frame: Frame) -> Path:
    """The control directory of the attempt a running or committing frame names."""
    return job.payload_dir / f"{ATTEMPT_DIR_PREFIX}{frame['attempt_id']}"


def validate_publication(
    state: ManagerState,
    running: MarkerLocation,
    frame: Frame,
    job: LoadedJob,
    outcome: dict[str, Any],
) -> tuple[dict[str, Any], list[SpawnedChild]]:
    """Validate a valid outcome's child bundles and join; return it with its join normalized, and its set.

    Raises :class:`UnusableOutcomeError` naming the first defect; nothing has been registered then.
    """
    parent = ParentIdentity(
        state.workspace.workspace_id,
        running.job_id,
        running.job_key,
        running.placement,
        frame["activation_id"],
    )
    outcome = {**outcome, "has_transaction": validate_transaction(state, job, frame, outcome)}
    spawned = read_spawn_set(state.workspace, control_dir_of(job, frame), parent, outcome["action"])
    if outcome["action"] == "wait":
        try:
            join = validate_wait(outcome["join"], spawned, state.workspace, running.job_id)
        except JoinError as exc:
            raise UnusableOutcomeError(f"the join is unusable: {exc}") from None
        outcome = {**outcome, "join": join.as_member()}
    return outcome, spawned


def transaction_dir_of(job: LoadedJob, frame: Frame) -> Path:
    """The transaction bundle an attempt's published outcome may hold."""
    return control_dir_of(job, frame) / OUTCOME_DIR / TRANSACTION_DIR


def validate_transaction(state: ManagerState, job: LoadedJob, frame: Frame, outcome: dict[str, Any]) -> bool:
    """Step 1 for a transaction: whether the outcome carries one, after checking it fully against ``data/``.

    Raises :class:`UnusableOutcomeError` when the job may not contribute one, the expected data generation
    is not the attempt's, or the manifest, staged payload or a precondition is refused; ``data/`` is
    untouched then.
    """
    bundle = transaction_dir_of(job, frame)
    if not os.path.lexists(bundle):
        return False
    if job.document["data"]["mode"] != "transactional":
        raise UnusableOutcomeError(
            "the outcome holds a transaction but the job's data.mode is not transactional"
        )
    if TRANSACTIONAL_EXTENSION not in state.workspace.extensions:
        raise UnusableOutcomeError(
            f"the outcome holds a transaction but the workspace lacks the {TRANSACTIONAL_EXTENSION} extension"
        )
    if stat.S_ISLNK(os.lstat(bundle).st_mode) or not bundle.is_dir():
        raise UnusableOutcomeError("the outcome's transaction must be a directory")
    expected = outcome.get("expected_data_generation")
    if expected is None or expected != frame.data_generation:
        raise UnusableOutcomeError(
            f"the outcome's expected_data_generation {expected!r} is not the attempt's data generation "
            f"{frame.get('data_generation')!r}"
        )
    try:
        load_manifest(bundle, expected_data_generation=expected, data_dir=job.payload_dir / "data")
    except TransactionError as exc:
        raise UnusableOutcomeError(str(exc)) from None
    except OSError as exc:
        raise UnusableOutcomeError(f"the transaction cannot be read: {exc}") from None
    return True


def apply_transaction(
    state: ManagerState, job: LoadedJob, frame: Frame
) -> tuple[bool, dict[str, Any] | None]:
    """Step 4: replay (or verify) the committing frame's transaction; whether data changed, or the failure.

    A plain :class:`OSError` propagates: the marker stays committing and recovery replays again.
    """
    bundle = transaction_dir_of(job, frame)
    try:
        manifest = load_manifest(
            bundle, expected_data_generation=frame["data_generation"], check_payload=False
        )
        result = replay(
            job.payload_dir / "data",
            bundle,
            manifest,
            durable=state.workspace.durable,
            deadline_seconds=state.workspace.policy.visibility_deadline_seconds,
            clock=state.clock,
        )
    except TransactionError as exc:
        details = {"operation": exc.operation, "path": exc.path}
        failure = {
            "code": "transaction_corruption",
            "message": f"the committed transaction cannot be replayed: {exc}",
            "details": {key: value for key, value in details.items() if value is not None},
        }
        return False, failure
    return result.changed, None


def register_spawned(state: ManagerState, job: LoadedJob, frame: Frame) -> dict[str, Any] | None:
    """Step 5: register the committing frame's spawn set (idempotent); the failure when that is impossible."""
    try:
        spawned = spawned_of(frame)
        if spawned:
            results = register_children(state.workspace, control_dir_of(job, frame), spawned)
            fresh = sum(result.status != "already_submitted" for result in results)
            log.info("%s registered %d of its %d children", frame.get("job_key"), fresh, len(results))
    except (ValueError, ChildRegistrationError) as exc:
        return protocol_failure(f"the outcome's children cannot be registered: {exc}")
    return None


def retire_attempt_control(live: LiveAttempt) -> None:
    """D5: keep what the attempt printed in logs/stdio.log, then remove its control directory.

    Only the manager that reaped the process does this; a manager inheriting a commit leaves the
    control directory to collection. Both the captured streams and the job log are the runner's to
    replace: a stream that is a link, a special file or larger than :data:`MAX_KEPT_OUTPUT`, or a job log
    that is not one private regular file, makes the output stay where it is, with the control directory,
    for an operator and for collection — the manager never reads through a link, blocks on a FIFO, or
    writes outside the payload.
    """
    frame = live.frame
    ordinal, step, attempt_id = frame.get("attempt_ordinal"), frame.step, frame["attempt_id"]
    header = f"== attempt {ordinal} of step {step!r} ({attempt_id}) ==\n"
    prepared = live.prepared
    streams: list[tuple[int, int, bytes]] = []
    try:
        for path, label in ((prepared.stdout_path, b""), (prepared.stderr_path, b"-- stderr --\n")):
            opened = _open_output(path)
            if opened is not None:
                streams.append((*opened, label))
        log_fd = _open_job_log(live.job.payload_dir / "logs")
    except OSError as exc:
        for fd, _size, _label in streams:
            os.close(fd)
        log.warning("attempt %s: output not kept in %s/logs: %s", attempt_id, live.job.payload_dir, exc)
        return
    # Evidence for an operator, not protocol state: appended without synchronization (spec table).
    try:
        job_log = live.job.payload_dir / "logs" / STDIO_LOG
        _fsops.append(log_fd, _with_outputs(header.encode(), streams), job_log)
    except OSError as exc:
        log.warning(
            "attempt %s: output not fully kept in %s/logs, left in %s: %s",
            attempt_id,
            live.job.payload_dir,
            prepared.control_dir,
            exc,
        )
        return
    finally:
        os.close(log_fd)
        for fd, _size, _label in streams:
            os.close(fd)
    _fsops.remove_tree(prepared.control_dir, expected=RETIRED_ENTRIES)


MAX_KEPT_OUTPUT = 64 << 20
"""The most of one captured stream a job log keeps; a larger stream stays in its control directory."""

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LOGS_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_output(path: Path) -> tuple[int, int] | None:
    """A captured stream opened for copying, with its size; ``None`` when there is none or it is empty.

    Raises ``OSError`` naming why a stream the runner replaced cannot be kept.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OSError(f"{path.name} is {_unkept(exc)}") from None
    info = os.fstat(fd)
    problem = _private_file_problem(info)
    if problem is None and info.st_size > MAX_KEPT_OUTPUT:
        problem = f"{info.st_size} bytes, over the {MAX_KEPT_OUTPUT} a job log keeps per stream"
    if problem is not None:
        os.close(fd)
        raise OSError(f"{path.name} is {problem}")
    if info.st_size == 0:
        os.close(fd)
        return None
    return fd, info.st_size


def _open_job_log(logs: Path) -> int:
    """Open ``logs/stdio.log`` for appending, creating ``logs/`` on the job's first retirement; both must
    be the payload's own (no link followed) and the log one private regular file."""
    try:
        logs_fd = os.open(logs, _LOGS_FLAGS)
    except FileNotFoundError:
        with suppress(FileExistsError):  # a name that appeared since is judged by the open below
            _fsops.make_dir(logs, durable=False)
        try:
            logs_fd = os.open(logs, _LOGS_FLAGS)
        except OSError as exc:
            raise OSError(f"logs/ is {_unkept(exc)}") from None
    except OSError as exc:
        raise OSError(f"logs/ is {_unkept(exc)}") from None
    try:
        fd = _fsops.open_for_append(STDIO_LOG, dir_fd=logs_fd, flags=os.O_NONBLOCK)
    except OSError as exc:
        raise OSError(f"logs/{STDIO_LOG} is {_unkept(exc)}") from None
    finally:
        os.close(logs_fd)
    problem = _private_file_problem(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise OSError(f"logs/{STDIO_LOG} is {problem}")
    return fd


def _private_file_problem(info: os.stat_result) -> str | None:
    if not stat.S_ISREG(info.st_mode):
        return f"{'a directory' if stat.S_ISDIR(info.st_mode) else 'a special file'}, not a regular file"
    if info.st_nlink != 1:
        return f"a file with {info.st_nlink} hard links, not one private file"
    return None


def _unkept(exc: OSError) -> str:
    """What an ``open`` refused with no follow and no blocking says about the entry."""
    return {
        errno.ELOOP: "a symbolic link",
        errno.ENOTDIR: "not a directory (or a symbolic link)",
        errno.EISDIR: "a directory",
        errno.ENXIO: "a FIFO or socket nobody reads",
    }.get(exc.errno or 0, exc.strerror or str(exc))


RETIRED_ENTRIES = (
    CONTEXT_FILE,
    STAGED_RUNNER,
    PROCESS_FILE,
    STDOUT_FILE,
    STDERR_FILE,
    f"{OUTCOME_DIR}/{OUTCOME_FILE}",
    OUTCOME_DIR,
)
"""What a control directory of a plainly finished attempt holds, children first (``remove_tree``)."""


def _with_outputs(header: bytes, streams: list[tuple[int, int, bytes]]) -> Iterator[bytes]:
    """``header``, then each captured stream after its label, each ending with a newline.

    Streamed in bounded chunks, and no further than the size a stream had when opened: a runner decides
    how much it prints (an orphan may still be printing), and the manager serving every other job must
    not hold that in memory nor copy without end.
    """
    yield header
    for source, size, label in streams:
        last, left = b"", size
        while left > 0 and (chunk := os.read(source, min(_COPY_CHUNK, left))):
            yield label + chunk if not last else chunk
            last = chunk[-1:]
            left -= len(chunk)
        if last and last != b"\n":
            yield b"\n"
