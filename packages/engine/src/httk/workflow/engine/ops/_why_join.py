"""``job why`` for a waiting job: its join, every child's state, which block, which cannot be resolved.

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

from collections.abc import Sequence
from datetime import timedelta

from httk.workflow.engine.core._clock import parse_time
from httk.workflow.engine.core._liveness import ManagerView
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.manager._config import ManagerConfig
from httk.workflow.engine.publish._joins import Join, JoinError, Verdict, judge, locate, parse_join

from ._why_owned import in_scope, names
from ._why_report import BLOCKED, INFO, OK, WARNING, Answer, Case, Finding

JOIN_GRACE_SECONDS = ManagerConfig().join_grace_seconds
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
            else f", at {since + timedelta(seconds=JOIN_GRACE_SECONDS):%Y-%m-%dT%H:%M:%SZ}"
        )
        text = (
            f"first recorded unresolvable at {first}; the job fails with dependency_failure after the join "
            f"grace (default {JOIN_GRACE_SECONDS:g} s){deadline} unless they appear"
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
