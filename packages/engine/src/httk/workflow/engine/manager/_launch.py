"""Registration, claiming and launching: submitted → ready, ready → claimed → running.

A launch is ordered so that no runner can execute without its running marker: the attempt is prepared,
its process is created blocked on the launch gate, the process identity is recorded, the running
frame (naming that identity) is appended and the marker renamed, and only then is the gate released. A
lost rename aborts the gate, whose process exits without running anything.

Resources (:mod:`._resources`): a manager with capacities reads a candidate's requirement from its frame
and claims it only when its allocation fits next to the reservations of the attempts it runs; the
allocation is held in the :class:`LiveAttempt` from the launch until the attempt is reaped (claim and
launch run in one call, so nothing is claimed in between). Without capacities, or without a requirement
and capacities, the claim path costs two emptiness checks more than it did before resources existed.
"""

from __future__ import annotations

import enum
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._frames import (
    Counters,
    Frame,
    claim,
    first_activation,
    invalid_submission,
    launched,
    preparation_failed,
    protocol_failure,
    released,
)
from httk.workflow.engine.core._fsops import OwedSyncs
from httk.workflow.engine.core._jobs import LoadedJob, check_identity, check_owned_marker
from httk.workflow.engine.core._liveness import write_process_file
from httk.workflow.engine.core._states import Trigger
from httk.workflow.engine.core._transition import Move, TransitionResult
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.engine.publish._runners import RunnerFailure
from httk.workflow.protocol import ForeignOwnerError, InvalidDocumentError, WorkflowError

from ._attempt import AttemptPlan, PreparedAttempt, prepare_attempt
from ._gate import GatedProcess, spawn_gated
from ._rules import allocation, claim_mismatches, describe, fits, requirement_of, reserved, unmet
from ._state import LiveAttempt, ManagerState
from ._storage import CONTAINED, STORAGE_ERRORS, transient
from ._writable import Attempt

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

log = logging.getLogger("httk.workflow.manager")


def register(state: ManagerState, marker: MarkerLocation) -> bool | None:
    """Validate a submitted job and move it to ready, or to failed with ``protocol_error``.

    A job another account owns (its marker, payload or job.json) is not this manager's to judge: it is
    left (``None``) for that account's managers, and said once.
    """
    move = registration(state, marker)
    if move is None:
        return None
    state.move(*move)
    return True


def register_all(state: ManagerState, markers: Sequence[MarkerLocation]) -> bool:
    """:func:`register` every marker of a pass, as one group commit (one fsync of their frames); a
    storage error is contained for the job it concerns (for all of them when it is the batch's)."""
    doing = "act on the submitted job"
    moves = [
        move
        for move in (state.storage.contain(doing, m.job_key, registration, state, m) for m in markers)
        if move is not None
    ]
    acted = False
    for (marker, _frame, _trigger), outcome in zip(moves, move_each(state, moves), strict=True):
        if isinstance(outcome, BaseException):
            state.storage.note(doing, marker.job_key, outcome)
        else:
            acted = True
    return acted


def registration(state: ManagerState, marker: MarkerLocation) -> Move | None:
    """The move that registers a submitted job: to ready, or to failed when its job.json is invalid;
    ``None`` for a job another account owns (left to its own managers)."""
    try:
        check_owned_marker(state.workspace, marker)
        job = state.jobs.get(marker)
        check_identity(marker, job)
    except ForeignOwnerError as exc:
        _leave_foreign(state, marker, exc)
        return None
    except (InvalidDocumentError, WorkflowError) as exc:
        failure = protocol_failure(f"the submitted job is invalid: {exc}", defect=str(exc)[:2000])
        return marker, invalid_submission(failure), Trigger.PROTOCOL_ERROR
    return marker, first_activation(job.document, job.digest, reason="registered"), Trigger.REGISTER


def claimable(state: ManagerState, marker: MarkerLocation) -> LoadedJob | None:
    """The job behind a ready marker when this manager may claim it: its marker, payload and job.json
    are regular, non-symlink entries of this account, and it asks for a pool, capabilities and an
    executor this manager serves."""
    try:
        check_owned_marker(state.workspace, marker)
        job = state.jobs.get(marker)
    except ForeignOwnerError as exc:
        _leave_foreign(state, marker, exc)
        return None
    except (InvalidDocumentError, WorkflowError):
        return None  # reported by the census: a ready job whose definition broke is fsck's business
    if claim_mismatches(job.document, state.config.pools, state.config.capabilities):
        return None
    return job


def _leave_foreign(state: ManagerState, marker: MarkerLocation, exc: ForeignOwnerError) -> None:
    if state.first_time(f"foreign {marker.job_key}"):
        log.warning(
            "leaving %s job %s to its own account's managers: %s", marker.kind.value, marker.job_key, exc
        )


class Claim(enum.Enum):
    """What trying one ready candidate came to."""

    CLAIMED = "claimed"  # claimed, then launched (or failed while being prepared)
    LOST = "lost"  # another actor moved it first, or its frame cannot be read
    NOT_HERE = "not_here"  # this manager can never claim it: the census reports it, nobody waits for it
    LATER = "later"  # its allocation does not fit next to the running attempts' reservations yet


@dataclass(frozen=True)
class Chosen:
    """A ready candidate this manager will claim: its marker and job, the claimed frame, the allocation."""

    marker: MarkerLocation
    job: LoadedJob
    frame: Frame
    allocation: dict[str, int] | None


def claim_and_launch(state: ManagerState, marker: MarkerLocation, job: LoadedJob) -> bool:
    """Claim one ready job and launch its attempt; ``False`` when another actor won the claim (or its
    resources do not fit here)."""
    return claim_ready(state, marker, job) is Claim.CLAIMED


def claim_ready(state: ManagerState, marker: MarkerLocation, job: LoadedJob) -> Claim:
    """Claim a ready job :func:`claimable` admitted and launch its attempt, if its resources fit now."""
    chosen = choose(state, marker, job, ())
    if isinstance(chosen, Claim):
        return chosen
    return Claim.CLAIMED if claim_all(state, [chosen]) else Claim.LOST


def choose_from(
    state: ManagerState, window: list[MarkerLocation], slots: int, passed_over: list[MarkerLocation]
) -> list[Chosen]:
    """Up to ``slots`` claims, taking candidates from the front of the priority-ordered ``window``; one
    whose resources do not fit yet goes to ``passed_over``, one this manager cannot claim is dropped."""
    chosen: list[Chosen] = []
    while window and len(chosen) < slots:
        marker = window.pop(0)
        job = claimable(state, marker)
        if job is None:
            continue  # not for this manager: counted by the census, never waited for
        choice = state.storage.contain("claim", marker.job_key, choose, state, marker, job, chosen)
        if choice is Claim.LATER:
            passed_over.append(marker)
        elif isinstance(choice, Chosen):
            chosen.append(choice)
    return chosen


def choose(
    state: ManagerState, marker: MarkerLocation, job: LoadedJob, pending: Sequence[Chosen]
) -> Chosen | Claim:
    """The claim of a candidate :func:`claimable` admitted, when its resources fit next to the running
    attempts and the ``pending`` claims of the same pass; otherwise why not."""
    frame = state.awaiting_room.pop(marker, None) if state.awaiting_room else None
    if frame is None:
        frame = state.frame_or_none(marker)
        if frame is None:
            return Claim.LOST
    allocation = None
    capacities = state.config.resources
    if capacities is not None and (capacities or frame.get("resources")):
        placed = _place(state, frame, capacities, [c.allocation or {} for c in pending])
        if isinstance(placed, Claim):
            if placed is Claim.LATER:
                state.awaiting_room[marker] = frame
            return placed
        allocation = placed
    return Chosen(marker, job, claim_frame(state, frame, job), allocation)


def claim_all(state: ManagerState, chosen: Sequence[Chosen]) -> int:
    """Claim the chosen candidates as one group commit, then launch those won; how many were won. A
    storage error is contained for the claim it concerns (for each of them when it is the batch's).

    Durable, the claim renames' directories are synchronized with the launch batch's (their frames
    before the renames, as ever): what follows a claim depends on its having won, and what depends
    on its being durable, a released runner, waits for the launch batch."""
    owed = OwedSyncs() if state.workspace.durable else None
    won: list[tuple[MarkerLocation, Chosen]] = []
    claims = [(c.marker, c.frame, Trigger.CLAIM) for c in chosen]
    for c, outcome in zip(chosen, move_each(state, claims, owe_to=owed), strict=True):
        if isinstance(outcome, BaseException):
            state.storage.note("claim", c.marker.job_key, outcome)
        elif outcome.won and outcome.current is not None:
            log.info(
                "claimed %s (attempt %s of step %s)%s",
                c.marker.job_key,
                c.frame["attempt_id"],
                c.frame.get("step"),
                "" if c.allocation is None else f" allocating {describe(c.allocation)}",
            )
            won.append((outcome.current, c))
    launch_all(state, won, owed)
    return len(won)


def move_each(
    state: ManagerState,
    moves: Sequence[Move],
    owed: OwedSyncs | None = None,
    *,
    owe_to: OwedSyncs | None = None,
) -> list[TransitionResult | BaseException]:
    """The moves as one group commit (:meth:`ManagerState.move_all`, which also makes the directory
    synchronizations ``owed``, or leaves its own to ``owe_to``), each result or, in its place, the
    storage or marker error that kept that move from happening: every move's, when it was the batch's."""
    if not moves:
        return []
    errors: dict[int, BaseException] = {}
    try:
        results = state.move_all(moves, failed=errors.__setitem__, owed=owed, owe_to=owe_to)
    except CONTAINED as exc:
        return [exc] * len(moves)
    return [errors.get(index, result) for index, result in enumerate(results)]


def _place(
    state: ManagerState,
    frame: Mapping[str, Any],
    capacities: Mapping[str, int],
    pending: Sequence[Mapping[str, int]] = (),
) -> dict[str, int] | Claim:
    """The allocation of the frame's requirement when it fits now; otherwise whether it ever can here."""
    requirement = requirement_of(frame.get("resources"))
    if unmet(requirement, capacities):
        return Claim.NOT_HERE
    allocated = allocation(requirement, capacities, state.config.workers)
    taken = reserved([*(live.allocation for live in state.running_attempts()), *pending])
    if not fits(allocated, capacities, taken):
        return Claim.LATER
    return allocated


def claim_frame(state: ManagerState, frame: Mapping[str, Any], job: LoadedJob) -> Frame:
    """The claimed frame this manager writes for a new attempt of the ready job."""
    return claim(
        frame,
        manager_id=state.manager_id,
        writer_id=state.writer_id,
        lease_seconds=state.lease_seconds,
        lease_started_at=utc_timestamp(state.clock.now()),
        pool=job.document["claim"]["pool"],
        capabilities=list(job.document["claim"].get("required_capabilities", [])),
    )


def launch(
    state: ManagerState,
    claimed: MarkerLocation,
    frame: Frame,
    job: LoadedJob,
    allocation: dict[str, int] | None = None,
) -> None:
    """Prepare, spawn behind the gate, commit running, release (see the module header for the order).

    ``allocation`` (``None`` without resource scheduling) is what the attempt's context.json offers and
    what the live attempt reserves.
    """
    launch_all(state, [(claimed, Chosen(claimed, job, frame, allocation))])


@dataclass(frozen=True)
class _Started:
    """An attempt prepared and spawned behind its closed gate, with the running frame that names it."""

    claimed: MarkerLocation
    chosen: Chosen
    running: Frame
    prepared: PreparedAttempt
    process: GatedProcess


def launch_all(
    state: ManagerState, claims: Sequence[tuple[MarkerLocation, Chosen]], owed: OwedSyncs | None = None
) -> None:
    """Launch claimed attempts: prepare and spawn each behind its gate, commit their running markers as
    one group commit, then release each whose rename won (the module header's order, per attempt).

    A storage error is contained for the attempt it concerns: its gate is aborted, so nothing of its
    runner runs, and its job is given back to ready (:func:`give_back`).

    Durable, the directories the preparations made entries in (each attempt's payload and control
    directory: the control directory itself, ``.httk-job/``, ``logs/``, the workdir, context.json,
    process.json) are synchronized once for the batch, together with the running renames' directories
    (:class:`~httk.workflow.engine.core._fsops.OwedSyncs`), instead of once per entry one after another:
    spec/01 asks that context.json and process.json be durable, contents and names, before the runner
    is launched against them, and a runner is released only after :func:`move_each` returned. ``owed``
    may hold what the claims owe already (:func:`claim_all`)."""
    if owed is None and state.workspace.durable:
        owed = OwedSyncs()
    started = [
        s
        for s in (
            state.storage.contain("launch", c.job_key, _start, state, c, chosen, owed) for c, chosen in claims
        )
        if s is not None
    ]
    if not started:
        return
    outcomes = move_each(state, [(s.claimed, s.running, Trigger.LAUNCH) for s in started], owed)
    for s, outcome in zip(started, outcomes, strict=True):
        if isinstance(outcome, BaseException) or not outcome.won or outcome.current is None:
            s.process.abort()  # the gate exits without running anything
            if isinstance(outcome, STORAGE_ERRORS):
                give_back(state, s.claimed, s.chosen.frame, outcome)
            elif isinstance(outcome, BaseException):
                state.storage.note("launch", s.claimed.job_key, outcome)
            continue
        s.process.release()
        state.launched += 1
        state.live[s.chosen.frame["attempt_id"]] = LiveAttempt(
            outcome.current,
            s.running,
            s.chosen.job,
            s.prepared,
            s.process,
            allocation=s.chosen.allocation or {},
        )
        log.info(
            "launched %s step %s attempt %s (pid %s)",
            s.claimed.job_key,
            s.chosen.frame.step,
            s.chosen.frame["attempt_id"],
            s.process.pid,
        )


def _start(
    state: ManagerState, claimed: MarkerLocation, chosen: Chosen, owed: OwedSyncs | None = None
) -> _Started | None:
    """Prepare the attempt and spawn it behind its gate, process.json written; ``None`` when that failed
    (the claim has then moved to failed, or back to ready after a storage error). The directory
    synchronizations of what it made are left to ``owed`` when given (:func:`launch_all`)."""
    frame, job = chosen.frame, chosen.job
    try:
        attempt = plan(state, claimed, frame, job, chosen.allocation)
        prepared = prepare_attempt(
            attempt,
            runner_search_path=state.config.runner_search_path,
            pkg_modules=frozenset(state.config.runner_modules),
            bash_apis=bash_apis(state),
            owed=owed,
        )
        where = Attempt(
            state.workspace,
            job.document,
            job.payload_dir,
            prepared.control_dir,
            prepared.workdir,
            attempt.settings,
        )
        confinement = state.confiner.confine(where, owed)
        prepared.env.update(confinement.environment)  # a private TMPDIR, when it needs one
        try:
            process = spawn_gated(prepared, confinement=confinement)
        finally:
            confinement.close()
    except RunnerFailure as exc:
        prepare_failed(state, claimed, frame, exc.failure)
        return None
    except STORAGE_ERRORS as exc:
        if not transient(exc):
            message = f"the attempt could not be prepared: {exc}"
            prepare_failed(state, claimed, frame, {"code": "process_failure", "message": message})
        else:
            give_back(state, claimed, frame, exc)
        return None
    try:
        identity = process.identity
        write_process_file(prepared.control_dir, identity, durable=state.workspace.durable, owed=owed)
    except STORAGE_ERRORS as exc:
        process.abort()  # never released: nothing of the runner ran
        give_back(state, claimed, frame, exc)
        return None
    running = launched(frame, identity, str(prepared.workdir), confinement.record)
    return _Started(claimed, chosen, running, prepared, process)


# -- the Bash libraries runners source ------------------------------------------------------------
BASH_API_GROUP = "httk.workflow.bash_apis"
SDK_DISTRIBUTION = "httk-workflow-sdk"
BASH_API_VARIABLE = re.compile(r"HTTK_WORKFLOW_(?:[A-Z0-9]+_)*BASH_API\Z")
"""The names a library may be exported as: ``HTTK_WORKFLOW_BASH_API``, ``HTTK_WORKFLOW_VASP_BASH_API``, ..."""


def bash_apis(state: ManagerState) -> Mapping[str, str]:
    """The Bash libraries every attempt of this manager gets, by variable: found once, at its first launch.

    Not at start: reading the installed distributions' metadata (``importlib.metadata`` included) costs
    tens of milliseconds, which would delay a fresh manager's first claim. ``ManagerConfig.bash_api``
    replaces the library the group names ``HTTK_WORKFLOW_BASH_API``.
    """
    if state.bash_apis is None:
        found, problems = installed_bash_apis()
        if state.config.bash_api is not None:
            found["HTTK_WORKFLOW_BASH_API"] = os.path.abspath(state.config.bash_api)
        for problem in problems:
            log.warning("%s; its variable is not exported to runners", problem)
        log.info("Bash libraries: %s", ", ".join(f"{k}={v}" for k, v in sorted(found.items())) or "none")
        state.bash_apis = found
    return state.bash_apis


def installed_bash_apis() -> tuple[dict[str, str], list[str]]:
    """What the entry point group ``httk.workflow.bash_apis`` exports, and why an entry point was skipped.

    An entry point's name is the variable, its value a callable without arguments returning the library's
    path. One that does not load, returns no file, is named like no library variable, or repeats a name
    another distribution exports (the SDK's own wins, then by distribution name), is skipped with a
    problem naming it.
    """
    from importlib.metadata import entry_points  # deferred: a manager reads the metadata once, not every CLI

    found: dict[str, str] = {}
    problems: list[str] = []
    for entry in sorted(entry_points(group=BASH_API_GROUP), key=_precedence):
        where = f"entry point {entry.name} = {entry.value} (group {BASH_API_GROUP}{_distribution(entry)})"
        if not BASH_API_VARIABLE.match(entry.name):
            problems.append(f"{where}: the name must be a variable such as HTTK_WORKFLOW_<NAME>_BASH_API")
        elif entry.name in found:
            problems.append(f"{where}: {entry.name} is exported by another distribution already")
        else:
            try:
                path = Path(entry.load()()).resolve()
            except Exception as exc:  # an add-on's bug must not stop the manager: it is reported instead
                problems.append(f"{where} cannot be used: {type(exc).__name__}: {exc}")
                continue
            if path.is_file():
                found[entry.name] = str(path)
            else:
                problems.append(f"{where} names {path}, which is not a file")
    return found, problems


def _precedence(entry: EntryPoint) -> tuple[str, bool, str]:
    """Which of two entry points exporting one variable wins: the SDK's own, then by distribution name.

    Discovery order follows ``sys.path`` and so differs between installations; this order does not.
    """
    distribution = "" if entry.dist is None else entry.dist.name
    return entry.name, distribution != SDK_DISTRIBUTION, distribution


def _distribution(entry: EntryPoint) -> str:
    return "" if entry.dist is None else f", from {entry.dist.name} {entry.dist.version}"


def plan(
    state: ManagerState,
    claimed: MarkerLocation,
    frame: Frame,
    job: LoadedJob,
    allocation: dict[str, int] | None = None,
) -> AttemptPlan:
    """The attempt a claimed frame starts; an activation a join started gets its summary and children.

    Its resources are the allocation when the manager schedules resources, the frame's requirement else.
    """
    counters = Counters.of(frame)
    join = frame.join_summary
    if not isinstance(join, dict):
        join = None
    observations = join.get("observations") if join is not None else None
    return AttemptPlan(
        workspace=state.workspace,
        job=job.document,
        job_dir=job.payload_dir,
        job_id=claimed.job_id,
        job_key=claimed.job_key,
        placement=claimed.placement,
        step=frame["step"],
        activation_id=frame["activation_id"],
        activation_ordinal=counters.activation_ordinal,
        activation_reason=frame.get("activation_reason", "initial"),
        attempt_id=frame["attempt_id"],
        attempt_ordinal=counters.attempt_ordinal,
        total_attempts=counters.total_attempts,
        is_restart=counters.attempt_ordinal > 1,
        is_unclean_restart=bool(frame.get("unclean_restart")) and counters.attempt_ordinal > 1,
        attempt_reason=frame.get("attempt_reason", "initial"),
        previous_attempt_id=frame.get("previous_attempt_id"),
        data_generation=frame.data_generation,
        priority=claimed.name.priority,
        resources=dict(frame.get("resources") or {}) if allocation is None else allocation,
        join=join,
        children=list(observations) if isinstance(observations, list) else [],
        settings=state.workspace.settings,
    )


def give_back(state: ManagerState, claimed: MarkerLocation, frame: Frame, exc: BaseException) -> None:
    """A storage error kept this manager from launching a claim: hand the job back to ready.

    The claim's counters are undone, as for any claim whose attempt never launched. If even that move
    fails, the claim stays this manager's, which releases it on its next claimed pass
    (:func:`._recovery.on_claimed_or_running`).
    """
    state.storage.failed("launch", claimed.job_key, exc)
    evidence = {"heartbeat_age_seconds": 0.0, "storage_error": str(exc)[:500]}
    back = released(frame, state.manager_id, evidence)
    state.storage.contain(
        "give back the claim of", claimed.job_key, lambda: state.move(claimed, back, Trigger.RELEASE)
    )


def prepare_failed(
    state: ManagerState, claimed: MarkerLocation, frame: Frame, failure: dict[str, Any]
) -> None:
    log.warning("attempt of %s could not be prepared: %s", claimed.job_key, failure["message"])
    state.move(claimed, preparation_failed(frame, state.manager_id, failure), Trigger.PREPARE_FAILURE)
