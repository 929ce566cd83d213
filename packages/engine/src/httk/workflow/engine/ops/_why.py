"""``job why``: why is this job where it is, and what would move it? Read-only, for every state kind.


:func:`diagnose` reads a job the way ``job show`` does — its marker, the frame the marker names, its
job.json — plus the managers' manifests and heartbeats and the operator requests, and answers per kind:

==============  ===============================================================================
submitted       whether it is registered (and whether registration will accept its job.json), and
                which live managers serve its executor and scan its placement (:func:`_submitted`)
ready           every claim precondition, one line each, and which live manager would claim it
                (``_precheck``); whether its runner can be reached (``publish._runners``)
claimed,        the owner, its heartbeat age against the recorded lease, and what recovery does
running,        once the lease has expired; a wedged commit (``_why_owned``)
committing,
cancelling
waiting         the join, every child's state, which block, which cannot be resolved (below)
failed          the failure, whether a ``continue`` (or an ``override_step``) fits the budgets, and
                the last attempt's breadcrumb (``error.json``, else the end of its stderr)
paused,         the state and how to proceed
succeeded,
cancelled
==============  ===============================================================================

Ready, running and failed jobs also get the attempt-history line and, under an unlimited retry budget,
the flapping flag (``_why_history``); every kind gets its pending requests and the latest retired one,
and the last :data:`~._events.WHY_LIMIT` events its runner reported (``_events``), which say in the
runner's words what it last found and did (the VASP workflows' errors and remedies).

The job side of every precondition comes from job.json; the manager side from the manifests of managers
that are live now, read once per :class:`WhyContext` however many jobs it diagnoses. Nothing here
writes: no journal writer, no heartbeat, no file.

**A waiting job**: its join, every child's state, which block, which cannot be resolved.

The children are located exactly as the waiting pass locates them (``_joins.locate``: each state-kind
directory at each placement hint listed once, never a scan) and the condition is judged by the same
``_joins.judge``, so the verdict shown is the one the next waiting pass will reach. A child that is
still open (not succeeded, failed or cancelled) while the join is undecided *blocks* it. A child with no
marker at its placement hint *cannot be resolved*: the waiting pass records the first instant it saw
that (DECISIONS D7) and fails the job with ``dependency_failure`` once the managers' join grace has
passed since then.

Cost: the listings of one join evaluation; no frame is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import parse_time
from httk.workflow.engine.core._frames import Counters
from httk.workflow.engine.core._liveness import ManagerView, list_managers
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.manager._rules import (
    DEFAULT_JOIN_GRACE_SECONDS,
    check_advance,
    check_retry,
    requirement_of,
)
from httk.workflow.engine.publish._joins import Join, JoinError, Verdict, judge, locate, parse_join
from httk.workflow.engine.publish._runners import RunnerReach
from httk.workflow.protocol import InvalidDocumentError
from httk.workflow.protocol._jsonio import read_json_object

from ._events import WHY_LIMIT, job_events
from ._precheck import budget_usage, claim_findings, closest, fits
from ._show import read_job, read_marker_frame
from ._why_owned import OWNED, in_scope, names
from ._why_report import (
    BLOCKED,
    INFO,
    OK,
    WARNING,
    Answer,
    Case,
    Diagnosis,
    Finding,
    RequestIndex,
    attempt_history,
    runner_finding,
)

HISTORY_KINDS = frozenset({Kind.READY, Kind.RUNNING, Kind.FAILED})
BREADCRUMB = "error.json"
STDERR_TAIL_BYTES = 4096
STDERR_TAIL_LINES = 3


@dataclass
class WhyContext:
    """What every diagnosis of one command shares: the managers and requests as read once, and now."""

    workspace: Workspace
    managers: list[ManagerView]
    requests: RequestIndex
    now: datetime
    runners: RunnerReach

    @classmethod
    def read(cls, workspace: Workspace, *, now: datetime | None = None) -> WhyContext:
        moment = workspace.clock.now() if now is None else now
        return cls(
            workspace,
            list_managers(workspace, now=moment),
            RequestIndex.load(workspace),
            moment,
            RunnerReach(workspace),
        )


def diagnose(workspace: Workspace, marker: MarkerLocation, context: WhyContext | None = None) -> Diagnosis:
    """The diagnosis of the job whose current marker is ``marker``."""
    context = WhyContext.read(workspace) if context is None else context
    read = read_marker_frame(workspace, marker)
    payload = workspace.payload_path(marker.placement, marker.job_key)
    document, job_problem, _digest = read_job(payload)
    case = Case(
        workspace=workspace,
        marker=marker,
        frame=read.frame or {} if read.problem is None else {},
        frame_problem=read.problem,
        job=document if job_problem is None else None,
        job_problem=job_problem,
        managers=context.managers,
        now=context.now,
    )
    answer = _answer(case, context)
    history = None
    if marker.kind in HISTORY_KINDS and case.frame:
        history = attempt_history(workspace, marker, case.frame, case.job)
        if history.flapping:
            answer.findings.append(
                Finding("history", WARNING, "flapping: retried without end under an unlimited budget")
            )
            answer.next_steps.append("read its failures (httk job log) and pause or cancel it")
    findings = [*answer.findings, *context.requests.findings(marker.job_id)]
    events = job_events(workspace, marker, WHY_LIMIT)
    return Diagnosis(
        job_id=marker.job_id,
        job_key=marker.job_key,
        kind=marker.kind.value,
        placement=marker.placement,
        generation=marker.name.generation,
        answer=answer.text,
        blocked=answer.blocked,
        findings=tuple(findings),
        history=history,
        next_steps=tuple(answer.next_steps),
        events=events if events.events or events.problem else None,
    )


def _answer(case: Case, context: WhyContext) -> Answer:
    if case.frame_problem is not None:
        problem = case.frame_problem
        finding = Finding("frame", BLOCKED, f"{problem['code']}: {problem['detail']}")
        text = "its state frame cannot be read, so no manager moves it"
        return Answer(text, True, [finding], ["run httk workspace fsck (--repair re-points the marker)"])
    if case.job is None and case.marker.kind is not Kind.SUBMITTED:
        finding = Finding("job.json", BLOCKED, str(case.job_problem))
        text = "its job.json cannot be read, so no manager can act on it"
        return Answer(text, True, [finding], ["run httk workspace fsck"])
    handler = _HANDLERS.get(case.marker.kind)
    if handler is not None:
        return handler(case, context)
    return OWNED[case.marker.kind](case) if case.marker.kind in OWNED else _other(case)


# -- submitted and ready -----------------------------------------------------------------------------
def _submitted(case: Case, _context: WhyContext) -> Answer:
    found = []
    if case.job_problem is not None:
        found.append(
            Finding("job.json", BLOCKED, f"registration fails it with protocol_error: {case.job_problem}")
        )
    else:
        found.append(Finding("job.json", OK, "valid: registration moves it to ready"))
    scope = in_scope(case)
    backend = "path" if case.job is None else case.job["runner"].get("backend", "path")
    if scope:
        found.append(
            Finding("registered by", OK, f"the next pass of {names(scope)} (serving executor {backend!r})")
        )
        return Answer("not registered yet: a live manager registers it at its next pass", False, found)
    other = [view for view in case.live if view not in scope]
    detail = f" ({names(other)} do not serve executor {backend!r} or placement)" if other else ""
    found.append(Finding("registered by", BLOCKED, f"no live manager serves it{detail}"))
    steps = ["start a manager (httk workflow manager run) that scans this placement"]
    return Answer("not registered: no live manager serves it", True, found, steps)


def _ready(case: Case, context: WhyContext) -> Answer:
    job = case.job
    assert job is not None  # _answer handled an unreadable job.json
    measured = fits(job, case.marker.placement, case.managers, requirement_of(case.frame.get("resources")))
    found = claim_findings(case.workspace, job, case.marker.placement, case.frame, measured)
    runner = runner_finding(context.runners.check(job["runner"], case.payload))
    found.insert(5, runner)
    willing = [candidate.name for candidate in measured if not candidate.unmet]
    if willing:
        text = f"claimable: {', '.join(willing)} would claim it at its next ready pass"
        if runner.status == BLOCKED:
            text += f", and the claim would fail ({runner.text})"
        return Answer(text, False, found)
    nearest = closest(measured)
    if nearest is None:
        return Answer("no manager is live", True, found, ["start a manager (httk workflow manager run)"])
    steps = [
        unmet.remedy or _remedy(unmet.requirement, job, case.marker.placement) for unmet in nearest.unmet
    ]
    return Answer(f"no live manager can claim it: {nearest.lacks()}", True, found, steps)


def _remedy(requirement: str, job: Mapping[str, Any], placement: str) -> str:
    if requirement == "pool":
        return f"run a manager with --pool {job['claim']['pool']}"
    if requirement == "capabilities":
        flags = " ".join(f"--capability {c}" for c in job["claim"].get("required_capabilities", ()))
        return f"run a manager with {flags}"
    if requirement == "placement":
        return f"run a manager whose --placement-prefix covers {placement} (or none)"
    if requirement == "runner":
        return "run a manager whose --runner-module or --runner-search-path reaches its runner"
    return f"run a manager serving executor {job['runner'].get('backend', 'path')!r}"


# -- failed, paused, succeeded, cancelled --------------------------------------------------------------
def _failed(case: Case, _context: WhyContext) -> Answer:
    failure = case.frame.get("failure") or {}
    code, message = failure.get("code", "unknown"), failure.get("message", "")
    found = [Finding("failure", BLOCKED, f"{code}: {message}", failure)]
    last = (failure.get("details") or {}).get("last_failure") if isinstance(failure, Mapping) else None
    if isinstance(last, Mapping):
        found.append(Finding("last failure", INFO, f"{last.get('code')}: {last.get('message', '')}"))
    found.extend(_continuation(case))
    found.append(_breadcrumb(case.payload, case.frame.get("attempt_id")))
    return Answer(f"failed: {code}: {message}", True, found, _operator_steps(found))


def _paused(case: Case, _context: WhyContext) -> Answer:
    pause = case.frame.get("pause")
    reason = pause.get("reason") if isinstance(pause, Mapping) else case.frame.get("operator_reason")
    found = [Finding("pause", INFO, str(reason or "no reason recorded")), *_continuation(case)]
    return Answer(f"paused: {reason or 'no reason recorded'}", True, found, _operator_steps(found))


def _continuation(case: Case) -> list[Finding]:
    """Whether ``continue`` and ``override_step`` fit the budgets, as the manager applying them checks."""
    job = case.job or {}
    if "activation_id" not in case.frame:
        return [Finding("continue", OK, "a continue starts its first activation")]
    counters = Counters.of(case.frame)
    used = budget_usage(job, counters)
    found = []
    for action, verdict in (
        ("continue", check_retry(job, counters)),
        ("override_step", check_advance(job, counters)),
    ):
        if verdict.code is None:
            found.append(Finding(action, OK, f"fits the retry budget ({used})"))
        else:
            found.append(
                Finding(action, BLOCKED, f"refused by the budgets: {verdict.message} ({verdict.code})")
            )
    return found


def _operator_steps(found: list[Finding]) -> list[str]:
    fitting = {finding.topic for finding in found if finding.status == OK}
    steps = []
    if "continue" in fitting:
        steps.append("httk job request continue --reason ... JOB (retries the current step)")
    if "override_step" in fitting:
        steps.append("httk job request override_step --step STEP --reason ... JOB (a new activation)")
    if not steps:
        steps.append("its budgets are used up: submit a new job to run it again")
    return steps


def _breadcrumb(payload: Path, attempt_id: object) -> Finding:
    """The last attempt's ``error.json`` if it left one, else the end of its stderr."""
    if not isinstance(attempt_id, str):
        return Finding("breadcrumb", INFO, "no attempt recorded")
    control = payload / f".httk-attempt.{attempt_id}"
    try:
        error = read_json_object(control / BREADCRUMB, document=BREADCRUMB, max_bytes=64 * 1024)
        return Finding(
            "breadcrumb", INFO, f"{BREADCRUMB} of attempt {attempt_id}: {error.get('message', error)}", error
        )
    except InvalidDocumentError:
        pass
    tail = _tail_lines(control / "stderr.log")
    if tail:
        return Finding("breadcrumb", INFO, f"stderr of attempt {attempt_id} ends: {' | '.join(tail)}")
    return Finding("breadcrumb", INFO, f"attempt {attempt_id} left no {BREADCRUMB} and no stderr")


def _tail_lines(path: Path) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(handle.seek(0, 2) - STDERR_TAIL_BYTES, 0))
            text = handle.read(STDERR_TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-STDERR_TAIL_LINES:]


def _succeeded(case: Case, _context: WhyContext) -> Answer:
    found = [Finding("state", OK, "finished successfully; nothing moves it again")]
    return Answer("succeeded: nothing to do", False, found, ["httk job show JOB for its payload and workdir"])


def _cancelled(case: Case, _context: WhyContext) -> Answer:
    cancellation = case.frame.get("cancellation") or {}
    verified = cancellation.get("verified") if isinstance(cancellation, Mapping) else None
    found = [Finding("state", INFO, f"cancelled (verified: {verified or 'unknown'}); this is permanent")]
    return Answer("cancelled: nothing runs it again", False, found, ["submit a new job to run it again"])


def _other(case: Case) -> Answer:
    text = f"{case.marker.kind.value} belongs to an extension this version does not implement"
    return Answer(text, True, [Finding("state", BLOCKED, text)])


_HANDLERS: dict[Kind, Callable[[Case, WhyContext], Answer]] = {
    Kind.SUBMITTED: _submitted,
    Kind.READY: _ready,
    Kind.WAITING: lambda case, _context: diagnose_waiting(case),
    Kind.FAILED: _failed,
    Kind.PAUSED: _paused,
    Kind.SUCCEEDED: _succeeded,
    Kind.CANCELLED: _cancelled,
}


"""The managers' default ``--join-grace-seconds`` (a manifest does not record it)."""
_ENDED = {Kind.SUCCEEDED: OK, Kind.FAILED: WARNING, Kind.CANCELLED: WARNING}


def diagnose_waiting(case: Case) -> Answer:
    try:
        join = parse_join(case.frame.get("join"), workspace_id=case.workspace.workspace_id)
    except JoinError as exc:
        finding = Finding("join", BLOCKED, f"the join cannot be read: {exc}")
        return Answer(
            "its join is unreadable: the next waiting pass fails it with protocol_error", False, [finding]
        )
    sightings = locate(case.workspace, join.children)
    kinds = [None if sighting is None else sighting.kind for sighting in sightings]
    found = [Finding("join", INFO, _describe(join, str(case.frame.get("next_step"))))]
    for child, kind in zip(join.children, kinds, strict=True):
        found.append(_child_finding(child.label, child.job_key, child.placement_hint, kind))
    scope = in_scope(case)
    found.append(_evaluators(scope))
    unresolved = [child.name for child, kind in zip(join.children, kinds, strict=True) if kind is None]
    if unresolved:
        return _unresolved(case, found, unresolved, not scope)
    resolved = [kind for kind in kinds if kind is not None]
    verdict = judge(join.condition, join.count, resolved)
    if verdict is Verdict.PENDING:
        blocking = [
            child.name for child, kind in zip(join.children, kinds, strict=True) if kind not in _ENDED
        ]
        found.append(Finding("blocking", INFO, f"{len(blocking)} open children: {', '.join(blocking[:20])}"))
        return Answer(f"waiting for {len(blocking)} of {len(kinds)} children to finish", not scope, found)
    return Answer(_decided(join, verdict, str(case.frame.get("next_step"))), not scope, found)


def _describe(join: Join, next_step: str) -> str:
    condition = join.condition + (f" {join.count}" if join.count is not None else "")
    text = f"{condition} of {len(join.children)} children, then step {next_step!r}"
    step = join.impossible_step
    if step is not None:
        return text + f"; if it becomes impossible, step {step!r}"
    return text + "; if it becomes impossible, fails with dependency_failure"


def _child_finding(label: str | None, key: str, hint: str, kind: Kind | None) -> Finding:
    name = f"{label or '(no label)'} {key}"
    if kind is None:
        return Finding("child", WARNING, f"{name}: cannot be resolved at its placement hint {hint!r}")
    status = _ENDED.get(kind, INFO)
    return Finding(
        "child", status, f"{name}: {kind.value}", {"label": label, "job_key": key, "kind": kind.value}
    )


def _evaluators(scope: Sequence[ManagerView]) -> Finding:
    if scope:
        return Finding("evaluated by", OK, f"{names(scope)} (at every scan)")
    return Finding("evaluated by", BLOCKED, "no live manager scans its placement: nothing evaluates the join")


def _unresolved(case: Case, found: list[Finding], unresolved: list[str], unserved: bool) -> Answer:
    first = case.frame.get("first_unresolved_at")
    shown = ", ".join(unresolved[:20])
    if isinstance(first, str):
        since = parse_time(first)
        deadline = (
            ""
            if since is None
            else f", at {since + timedelta(seconds=DEFAULT_JOIN_GRACE_SECONDS):%Y-%m-%dT%H:%M:%SZ}"
        )
        text = (
            f"first recorded unresolvable at {first}; the job fails with dependency_failure after the join "
            f"grace (default {DEFAULT_JOIN_GRACE_SECONDS:g} s){deadline} unless they appear"
        )
    else:
        text = "the next waiting pass records when this began; the join grace runs from then"
    found.append(Finding("unresolvable", WARNING, f"{len(unresolved)} children: {shown}; {text}"))
    return Answer(f"{len(unresolved)} join children cannot be resolved in this workspace", unserved, found)


def _decided(join: Join, verdict: Verdict, next_step: str) -> str:
    if verdict is Verdict.SATISFIED:
        return f"the join is satisfied: the next waiting pass moves it to ready at step {next_step!r}"
    step = join.impossible_step
    if step is not None:
        return f"the join can no longer succeed: the next waiting pass moves it to ready at step {step!r}"
    return "the join can no longer succeed: the next waiting pass fails it with dependency_failure"
