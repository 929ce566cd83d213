"""``precheck`` and the claim preconditions of ``job why``: would a live manager claim the job, and run it?

**Precheck** is an advisory, read-only report before managers start: will the pending jobs be able to run?

Every ``submitted`` and ``ready`` job is checked for what would stop it later:

- its job.json (registration fails an invalid one with ``protocol_error``);
- its runner, resolved read-only exactly as staging resolves it (``publish._runners``): a payload runner that
  is missing or not executable, a workspace runner whose digest is not the pinned one, and an installed
  reference that ``--runner-search-path`` cannot resolve are *failures*; a plain installed reference
  without a search path, or a ``pkg:`` module not installed here, is *indeterminate*;
- whether a live manager would claim it, in the words ``job why`` uses (below): the closest
  manager's unmet requirements, its runner allowlist, search paths and resource capacities included (a
  ready job's requirement is its frame's, a submitted job's its job.json's). With no live manager, one
  workspace-level notice replaces these per-job findings.

The environment is a workspace-level section: every workspace setting, the ``HTTK_<NAME>`` variable it is
exported as, and where an attempt started by a manager with this process's environment would take it
from (``manager._rules.settings_environment`` decides, so this cannot drift from what a manager exports).
The job schema has no member that declares environment entries, required inputs, or a workflow
realization (language jobs and their extras), so those checks are reported once as not applicable
rather than invented. This process's ``HTTK_*`` variables say nothing about a later compute node's, and
the authoritative gate is still the attempt start: the report is advisory and can become stale.

The status is failing (exit status 1 on the command line) when any job has a ``blocked`` finding.

Cost: one exhaustive walk of the two pending kinds, one job.json read per pending job (and one frame
read per ready job while a manager is live), one resolution per runner location (digests are cached),
one manifest and heartbeat read per manager.

**Claim preconditions** are measured against the managers serving a workspace now.

The job side of every precondition comes from job.json and cannot drift, except its resource requirement,
which is the current frame's (the caller passes it). The manager side is each live manager's manifest: pools,
capabilities, executors, resource capacities, placement prefixes, runner modules and search paths. Which of
pool, capabilities, executor and resources a manager lacks is decided by
:func:`~httk.workflow.engine.manager._rules.claim_mismatches`, the predicate the manager's own claim pass
applies, so a diagnosis says exactly what a manager checks; a lacking resource names the ``--worker-resource``
that would serve it. A placement outside a manager's prefixes is never scanned by it, and a runner its
allowlist or search paths cannot reach makes every claim end in ``runner_unavailable``; both count as unmet
here. A manager that is not live serves nothing and is not consulted: it is reported absent, never assumed.

Both commands word an unclaimable job the same way, through :func:`closest` and :meth:`ManagerFit.lacks`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._frames import Counters
from httk.workflow.engine.core._jobs import read_frame
from httk.workflow.engine.core._liveness import ManagerView, list_managers
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._states import CORE_KINDS, QUEUED_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.manager._rules import (
    check_retry,
    claim_mismatches,
    describe,
    requirement_of,
    settings_environment,
    unmet,
)
from httk.workflow.engine.publish._runners import RunnerReach, manager_refusal
from httk.workflow.engine.publish._submit import job_key_of
from httk.workflow.protocol import WorkflowError, placement_prefix_matches
from httk.workflow.protocol._policy import setting_environment_name

from ._show import read_job
from ._why_report import BLOCKED, INDETERMINATE, INFO, OK, WARNING, Finding, runner_finding

NO_LOCK = "not held: this workspace format has no maintenance lock"


@dataclass(frozen=True, slots=True)
class Unmet:
    """One requirement a manager does not meet: ``executor``, ``pool``, ``capabilities``, ``resources``,
    ``only_jobs``, ``placement`` or ``runner``, how to say it and, where the requirement alone does not
    say, the remedy."""

    requirement: str
    text: str
    remedy: str | None = None


@dataclass(frozen=True, slots=True)
class ManagerFit:
    """One live manager measured against one job."""

    view: ManagerView
    unmet: tuple[Unmet, ...]

    @property
    def name(self) -> str:
        return manager_name(self.view)

    def meets(self, requirement: str) -> bool:
        return all(unmet.requirement != requirement for unmet in self.unmet)

    def lacks(self) -> str:
        """``manager <id> lacks pool 'gpu' (it serves default); ...``: the wording both commands use."""
        return f"manager {self.name} lacks " + "; ".join(unmet.text for unmet in self.unmet)


def manager_name(view: ManagerView) -> str:
    label = view.member("manager_label")
    return view.manager_id + (f" ({label})" if label else "")


def _listed(values: Sequence[Any]) -> str:
    return ", ".join(str(value) for value in values) or "none"


def _strings(manifest: Mapping[str, Any], member: str) -> list[str]:
    value = manifest.get(member)
    return [str(item) for item in value] if isinstance(value, list) else []


def _capacities(manifest: Mapping[str, Any]) -> dict[str, int] | None:
    """A manifest's capacities; ``None`` for a manifest without the member (it schedules no resources)."""
    value = manifest.get("resources")
    if not isinstance(value, dict):
        return None
    return {str(label): amount for label, amount in value.items() if type(amount) is int}


def fit(
    job: Mapping[str, Any], placement: str, view: ManagerView, requirement: Mapping[str, int] | None = None
) -> ManagerFit:
    """What ``view``'s manager lacks to claim ``job`` at ``placement`` (nothing: it would claim it).

    ``requirement`` is the job's current resource requirement (:func:`._resources.requirement_of` of its
    frame); ``None`` leaves resources unmeasured.
    """
    manifest = view.manifest or {}
    pools, capabilities = _strings(manifest, "pools"), _strings(manifest, "capabilities")
    executors, capacities = _strings(manifest, "executors"), _capacities(manifest)
    unmet: list[Unmet] = []
    mismatches = claim_mismatches(
        job, pools, capabilities, executors, requirement=requirement, capacities=capacities
    )
    for requirement_name in mismatches:
        if requirement_name == "resources":
            unmet.append(_lacking_resources(requirement or {}, capacities or {}))
            continue
        if requirement_name == "pool":
            text = f"pool {job['claim']['pool']!r} (it serves {_listed(pools)})"
        elif requirement_name == "capabilities":
            missing = sorted(set(job["claim"].get("required_capabilities", ())) - set(capabilities))
            text = f"capabilities {_listed([repr(c) for c in missing])} (it has {_listed(capabilities)})"
        else:
            text = f"executor {job['runner'].get('backend', 'path')!r} (it serves {_listed(executors)})"
        unmet.append(Unmet(requirement_name, text))
    only = manifest.get("only_jobs")
    if isinstance(only, list) and str(job_key_of(job)) not in only:
        text = f"this job: it serves only {_listed(only)} (a job debug session)"
        unmet.append(Unmet("only_jobs", text, "wait for the debug session to end, or run another manager"))
    prefixes = _strings(manifest, "placement_prefixes")
    if prefixes and not any(placement_prefix_matches(placement, prefix) for prefix in prefixes):
        text = f"placement {placement!r}, outside its placement prefixes ({_listed(prefixes)})"
        unmet.append(Unmet("placement", text))
    refusal = manager_refusal(job["runner"], manifest)
    if refusal is not None:
        unmet.append(Unmet("runner", refusal))
    return ManagerFit(view, tuple(unmet))


def _lacking_resources(requirement: Mapping[str, int], capacities: Mapping[str, int]) -> Unmet:
    """``resources gpus=2 (it advertises procs=8)``, and the ``--worker-resource`` flags serving them."""
    lacking = {label: requirement[label] for label in unmet(requirement, capacities)}
    text = f"resources {describe(lacking)} (it advertises {describe(capacities)})"
    flags = " ".join(f"--worker-resource {label} {amount}" for label, amount in sorted(lacking.items()))
    return Unmet("resources", text, f"run a manager with {flags}")


def fits(
    job: Mapping[str, Any],
    placement: str,
    managers: Sequence[ManagerView],
    requirement: Mapping[str, int] | None = None,
) -> list[ManagerFit]:
    """Every live manager measured against the job, in the order ``managers`` lists them."""
    return [fit(job, placement, view, requirement) for view in managers if view.live]


def closest(measured: Sequence[ManagerFit]) -> ManagerFit | None:
    """The manager missing the fewest requirements (the first of equals); ``None`` without managers."""
    return min(measured, key=lambda candidate: len(candidate.unmet), default=None)


def accepting(measured: Sequence[ManagerFit]) -> list[ManagerFit]:
    return [candidate for candidate in measured if not candidate.unmet]


# -- the ready job's preconditions, one line each -----------------------------------------------------
def claim_findings(
    workspace: Workspace,
    job: Mapping[str, Any],
    placement: str,
    frame: Mapping[str, Any],
    measured: Sequence[ManagerFit],
) -> list[Finding]:
    """Executor, pool, capabilities, placement, runner reach, lock, profile, budgets, who would claim."""
    claim = job["claim"]
    required = list(claim.get("required_capabilities", ()))
    findings = [
        _served(measured, "executor", f"runner backend {job['runner'].get('backend', 'path')!r}"),
        _served(measured, "pool", f"claim pool {claim['pool']!r}"),
        _served(measured, "capabilities", f"capabilities {_listed([repr(c) for c in required])}"),
        _served(measured, "placement", f"placement {placement!r}", verb="scanned"),
        _served(measured, "runner", "its runner", verb="reachable", topic="runner reach"),
        Finding("maintenance lock", OK, NO_LOCK),
        profile_finding(workspace),
        budget_finding(job, frame),
        accepting_finding(measured),
    ]
    requirement = requirement_of(frame.get("resources"))
    if any(requirement.values()):
        findings.insert(-1, _served(measured, "resources", f"resources {describe(requirement)}"))
    return findings


def _served(
    measured: Sequence[ManagerFit], requirement: str, what: str, *, verb: str = "served", topic: str = ""
) -> Finding:
    topic = topic or requirement
    if not measured:
        return Finding(topic, INFO, f"{what}: no live manager to measure it against")
    serving = [candidate.name for candidate in measured if candidate.meets(requirement)]
    if serving:
        return Finding(topic, OK, f"{what}: {verb} by {_listed(serving)}")
    refusals = [
        f"{candidate.name}: {unmet.text}"
        for candidate in measured
        for unmet in candidate.unmet
        if unmet.requirement == requirement
    ]
    return Finding(topic, BLOCKED, f"{what}: {verb} by no live manager ({'; '.join(refusals)})")


def profile_finding(workspace: Workspace) -> Finding:
    reason = workspace.read_only_reason
    if reason is None:
        profile = workspace.document.get("core_profile")
        return Finding("core profile", OK, f"{profile}: managers of this version claim from this workspace")
    return Finding("core profile", BLOCKED, f"no manager of this version claims here: {reason}")


def budget_finding(job: Mapping[str, Any], frame: Mapping[str, Any]) -> Finding:
    """Whether the attempt a ready frame queues fits the budgets (a claim checks nothing else)."""
    counters = Counters.of(frame)
    verdict = check_retry(job, counters)
    used = budget_usage(job, counters)
    if verdict.code is not None:
        return Finding("budgets", BLOCKED, f"{verdict.code}: {verdict.message}")
    return Finding("budgets", OK, f"the queued attempt fits ({used})")


def budget_usage(job: Mapping[str, Any], counters: Counters) -> str:
    """``this activation 2/10, in total 5/100, activations 1/50`` (``unlimited`` for an absent limit)."""
    policy = job.get("retry_policy") or {}
    parts = []
    for label, limit, used in (
        ("this activation", "maximum_attempts_per_activation", counters.attempt_ordinal),
        ("in total", "maximum_total_attempts", counters.total_attempts),
        ("activations", "maximum_activations", counters.activation_ordinal),
    ):
        parts.append(f"{label} {used}/{policy.get(limit, 'unlimited')}")
    return ", ".join(parts)


def accepting_finding(measured: Sequence[ManagerFit]) -> Finding:
    willing = accepting(measured)
    if willing:
        return Finding("claimed by", OK, f"{_listed([c.name for c in willing])} would claim it")
    nearest = closest(measured)
    if nearest is None:
        return Finding("claimed by", BLOCKED, "no manager is live: start one (httk workflow manager run)")
    return Finding("claimed by", BLOCKED, f"no live manager can claim it: {nearest.lacks()}")


PENDING_KINDS = tuple(kind for kind in CORE_KINDS if kind in QUEUED_KINDS)  # in listing order
NOT_APPLICABLE = (
    (
        "declared environment",
        "job.json has no member declaring environment entries: nothing can be unresolved",
    ),
    ("required inputs", "job.json has no member declaring required inputs: nothing can be missing"),
    ("language jobs", "job.json has no workflow realization member: no engine extras to check"),
)


@dataclass(frozen=True, slots=True)
class JobCheck:
    """The findings of one pending job."""

    marker: MarkerLocation
    findings: tuple[Finding, ...]

    @property
    def failing(self) -> bool:
        return any(finding.status == BLOCKED for finding in self.findings)

    @property
    def indeterminate(self) -> bool:
        return any(finding.status == INDETERMINATE for finding in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.marker.job_id,
            "job_key": self.marker.job_key,
            "kind": self.marker.kind.value,
            "placement": self.marker.placement,
            "findings": [finding.as_dict() for finding in self.findings],
        }


@dataclass(frozen=True)
class PrecheckReport:
    """The workspace-level notices, the environment, and every pending job that is not plainly fine."""

    root: Path
    notices: tuple[Finding, ...]
    environment: tuple[dict[str, str], ...]
    jobs: tuple[JobCheck, ...]
    checked: int
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def failing(self) -> bool:
        return any(check.failing for check in self.jobs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "workspace": str(self.root),
            "status": "failing" if self.failing else "ok",
            "checked": self.checked,
            "counts": dict(self.counts),
            "notices": [notice.as_dict() for notice in self.notices],
            "environment": list(self.environment),
            "jobs": [check.as_dict() for check in self.jobs],
        }

    def lines(self) -> list[str]:
        lines = [f"precheck of {self.root}: {self.checked} pending jobs"]
        lines.extend(f"  {_label(notice.status)} {notice.topic}: {notice.text}" for notice in self.notices)
        for entry in self.environment:
            lines.append(f"  environment {entry['variable']} ({entry['setting']}): {entry['source']}")
        for check in self.jobs:
            lines.append(f"{check.marker.job_key} ({check.marker.kind.value} at {check.marker.placement})")
            lines.extend(
                f"  {_label(finding.status)} {finding.topic}: {finding.text}"
                for finding in check.findings
                if finding.status != OK
            )
        counts = ", ".join(f"{count} {name}" for name, count in self.counts.items())
        lines.append(f"{'FAILING' if self.failing else 'ok'}: {counts}")
        return lines


def _label(status: str) -> str:
    return {BLOCKED: "BLOCKED", WARNING: "WARNING"}.get(status, status)


def precheck(
    workspace: Workspace,
    *,
    runner_search_path: Sequence[Path] = (),
    environ: Mapping[str, str] | None = None,
) -> PrecheckReport:
    """Check every pending job of ``workspace`` (see the module docstring); nothing is written."""
    managers = list_managers(workspace)
    live = [view for view in managers if view.live]
    runners = RunnerReach(workspace, tuple(Path(root) for root in runner_search_path))
    notices = _notices(workspace, live)
    checks: list[JobCheck] = []
    counts = {"failing": 0, "indeterminate": 0, "ok": 0}
    checked = 0
    for kind in PENDING_KINDS:
        for item in walk_markers(workspace, kind):
            if not isinstance(item, MarkerLocation):
                continue  # not a marker: workspace fsck reports it
            checked += 1
            check = _check_job(workspace, item, managers if live else [], runners)
            verdict = "failing" if check.failing else "indeterminate" if check.indeterminate else "ok"
            counts[verdict] += 1
            if verdict != "ok":
                checks.append(check)
    environment = environment_entries(workspace.settings, os.environ if environ is None else environ)
    return PrecheckReport(workspace.root, tuple(notices), tuple(environment), tuple(checks), checked, counts)


def _notices(workspace: Workspace, live: list[ManagerView]) -> list[Finding]:
    notices = []
    if not live:
        text = "no manager is live, so no job is measured against one; start a manager before relying on this"
        notices.append(Finding("managers", WARNING, text))
    else:
        notices.append(
            Finding("managers", INFO, f"{len(live)} live: every pending job is measured against them")
        )
    reason = workspace.read_only_reason
    if reason is not None:
        notices.append(
            Finding("core profile", WARNING, f"no manager of this version runs jobs here: {reason}")
        )
    notices.extend(Finding(topic, INFO, f"not applicable: {text}") for topic, text in NOT_APPLICABLE)
    return notices


def _check_job(
    workspace: Workspace, marker: MarkerLocation, managers: Sequence[ManagerView], runners: RunnerReach
) -> JobCheck:
    payload = workspace.payload_path(marker.placement, marker.job_key)
    document, problem, _digest = read_job(payload)
    if document is None or problem is not None:
        return JobCheck(
            marker, (Finding("job.json", BLOCKED, f"a manager fails it with protocol_error: {problem}"),)
        )
    findings = [runner_finding(runners.check(document["runner"], payload))]
    if managers:
        requirement = _requirement(workspace, marker, document)
        findings.append(accepting_finding(fits(document, marker.placement, managers, requirement)))
    return JobCheck(marker, tuple(findings))


def _requirement(workspace: Workspace, marker: MarkerLocation, document: Mapping[str, Any]) -> dict[str, int]:
    """The resources the job's next attempt needs: its ready frame's, or job.json's before registration."""
    source: Any = document.get("resources")
    if marker.kind is Kind.READY:
        # An unreadable frame is fsck's business; job.json's requirement is then the best guess.
        with contextlib.suppress(WorkflowError):
            frame: Mapping[str, Any] = read_frame(workspace, marker) or {}
            source = frame.get("resources")
    return requirement_of(source)


def environment_entries(settings: Mapping[str, Any], environ: Mapping[str, str]) -> list[dict[str, str]]:
    """Each setting, its variable, and where an attempt's environment takes it from."""
    exported = settings_environment(settings, environ)
    entries = []
    for name in sorted(settings):
        variable = setting_environment_name(name)
        if variable in exported:
            source = "workspace setting (exported to attempts)"
        elif variable in environ and not variable.startswith("HTTK_WORKFLOW_"):
            source = "this process's environment overrides the workspace setting"
        else:
            source = "context.json only (not a scalar, or in the protocol's HTTK_WORKFLOW_ namespace)"
        entries.append({"setting": name, "variable": variable, "source": source})
    return entries
