"""The census a manager prints when it stops: every job left, classified by what would progress it.

This is the one exhaustive walk a manager makes, once, at exit; it reads job.json only for ready jobs,
to say why this manager could not claim them, and the state frame of a ready job only when the
manager schedules resources and nothing else already excludes the job (its requirement lives there).
Whether it could is :func:`._launch.claim_mismatches`, the predicate the claim pass, ``job why`` and
``precheck`` apply, so the census cannot drift from them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from httk.workflow.engine.core._jobs import load_job, read_frame
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._states import CORE_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.protocol import WorkflowError

from ._config import ManagerConfig
from ._launch import claim_mismatches
from ._resources import requirement_of, unmet

BLOCKED_GROUPS = {"capability": "capabilities", "resource": "resources"}
"""``ready_blocked`` groups reasons by the requirement's name in :func:`claim_mismatches`."""


@dataclass
class Census:
    kinds: Counter[str] = field(default_factory=Counter)
    not_claimable: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0
    anomalies: int = 0
    # The largest amount of each resource label a job not claimable here asked for (for the advice).
    resource_needs: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(self.not_claimable.items()))
        blocked = sum(self.not_claimable.values())
        parts = [
            f"{self.kinds['succeeded']} succeeded",
            f"{self.kinds['failed']} failed",
            f"{blocked} not claimable here" + (f" ({reasons})" if reasons else ""),
            f"{self.kinds['waiting']} waiting",
            f"{self.kinds['paused']} paused",
            f"{self.unreadable} unreadable",
        ]
        others = {
            k: v
            for k, v in self.kinds.items()
            if k in ("submitted", "claimed", "running", "committing", "cancelling", "cancelled") and v
        }
        if others:
            parts.append(", ".join(f"{v} {k}" for k, v in sorted(others.items())))
        if self.anomalies:
            parts.append(f"{self.anomalies} unparseable entries (run workspace fsck)")
        return "summary: " + ", ".join(parts)

    def advice(self) -> list[str]:
        """What would let a manager claim the jobs this one could not (flags for pools and capabilities)."""
        lines: list[str] = []
        for reason, count in sorted(self.not_claimable.items()):
            what, _, label = reason.partition(" ")
            if what == "pool":
                lines.append(f"{count} ready job(s) need pool {label}: run a manager with --pool {label}")
            elif what == "capability":
                lines.append(f"{count} ready job(s) need capability {label}: add --capability {label}")
            elif what == "resource":
                need = self.resource_needs.get(label, 1)
                lines.append(
                    f"{count} ready job(s) need resource {label} (up to {need}): "
                    f"add --worker-resource {label} {need}"
                )
            else:
                lines.append(f"{count} ready job(s) need {reason}, which this manager does not serve")
        if self.unreadable:
            lines.append(f"{self.unreadable} job(s) have an unreadable definition: run workspace fsck")
        return lines

    def ready_blocked(self) -> dict[str, dict[str, int]]:
        """The jobs not claimable here by requirement, then label: ``{"resources": {"gpus": 2}}``."""
        blocked: dict[str, dict[str, int]] = {}
        for reason, count in sorted(self.not_claimable.items()):
            what, _, label = reason.partition(" ")
            blocked.setdefault(BLOCKED_GROUPS.get(what, what), {})[label] = count
        return blocked

    def as_dict(self) -> dict[str, object]:
        return {
            "kinds": dict(self.kinds),
            "not_claimable": dict(self.not_claimable),
            "ready_blocked": self.ready_blocked(),
            "unreadable": self.unreadable,
            "anomalies": self.anomalies,
        }


def _why_not(
    workspace: Workspace, marker: MarkerLocation, config: ManagerConfig, census: Census
) -> str | None:
    """The first requirement the claim predicate finds unmet (``pool gpu``), ``unreadable``, or ``None``."""
    try:
        job = load_job(workspace, marker.placement, marker.job_key).document
    except WorkflowError:
        return "unreadable"
    unmet_here = claim_mismatches(job, config.pools, config.capabilities)
    requirement: dict[str, int] = {}
    if not unmet_here and config.resources is not None:
        requirement = _requirement(workspace, marker)
        unmet_here = claim_mismatches(
            job, config.pools, config.capabilities, requirement=requirement, capacities=config.resources
        )
    if not unmet_here:
        return None
    if unmet_here[0] == "pool":
        return f"pool {job['claim']['pool']}"
    if unmet_here[0] == "capabilities":
        missing = sorted(set(job["claim"].get("required_capabilities", ())) - set(config.capabilities))
        return f"capability {missing[0]}"
    if unmet_here[0] == "resources":
        label = unmet(requirement, config.resources or {})[0]
        census.resource_needs[label] = max(census.resource_needs.get(label, 0), requirement[label])
        return f"resource {label}"
    return f"executor {job['runner'].get('backend', 'path')}"


def _requirement(workspace: Workspace, marker: MarkerLocation) -> dict[str, int]:
    """The ready frame's requirement; none when the frame cannot be read (fsck's business, as in a claim)."""
    try:
        frame = read_frame(workspace, marker) or {}
    except WorkflowError:
        return {}
    return requirement_of(frame.get("resources"))


def _readable(workspace: Workspace, marker: MarkerLocation) -> bool:
    try:
        load_job(workspace, marker.placement, marker.job_key)
    except WorkflowError:
        return False
    return True


def take_census(workspace: Workspace, config: ManagerConfig) -> Census:
    census = Census()
    for kind in CORE_KINDS:
        for item in walk_markers(workspace, kind, placement_prefixes=config.placement_prefixes):
            if not isinstance(item, MarkerLocation):
                census.anomalies += 1
                continue
            census.kinds[kind.value] += 1
            if kind is Kind.READY:
                reason = _why_not(workspace, item, config, census)
                if reason == "unreadable":
                    census.unreadable += 1
                elif reason is not None:
                    census.not_claimable[reason] += 1
            elif kind in (Kind.COMMITTING, Kind.CANCELLING) and not _readable(workspace, item):
                census.unreadable += 1
    return census
