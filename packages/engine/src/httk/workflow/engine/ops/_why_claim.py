"""Claim preconditions measured against the managers serving a workspace now (``job why``, ``precheck``).

The job side of every precondition comes from job.json and cannot drift, except its resource
requirement, which is the current frame's (the caller passes it). The manager side is each live
manager's manifest: pools, capabilities, executors, resource capacities, placement prefixes, runner
modules and search paths. Which of pool, capabilities, executor and resources a manager lacks is decided
by :func:`._launch.claim_mismatches`, the predicate the manager's own claim pass applies, so a diagnosis
says exactly what a manager checks; a lacking resource names the ``--worker-resource`` that would serve
it.
A placement outside a manager's prefixes is never scanned by it, and a runner its allowlist or search
paths cannot reach makes every claim end in ``runner_unavailable``; both count as unmet here. A manager
that is not live serves nothing and is not consulted: it is reported absent, never assumed.

Both commands word an unclaimable job the same way, through :func:`closest` and :meth:`ManagerFit.lacks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from httk.workflow.engine.core._frames import Counters
from httk.workflow.engine.core._liveness import ManagerView
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager._budgets import check_retry
from httk.workflow.engine.manager._launch import claim_mismatches
from httk.workflow.engine.manager._resources import describe, requirement_of, unmet
from httk.workflow.engine.publish._runners import manager_refusal
from httk.workflow.engine.publish._submit import job_key_of
from httk.workflow.protocol import placement_prefix_matches

from ._why_report import BLOCKED, INFO, OK, Finding

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
