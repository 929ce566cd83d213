"""``precheck``: will the pending jobs be able to run? An advisory, read-only report before managers start.

Every ``submitted`` and ``ready`` job is checked for what would stop it later:

- its job.json (registration fails an invalid one with ``protocol_error``);
- its runner, resolved read-only exactly as staging resolves it (``_why_runner``): a payload runner that
  is missing or not executable, a workspace runner whose digest is not the pinned one, and an installed
  reference that ``--runner-search-path`` cannot resolve are *failures*; a plain installed reference
  without a search path, or a ``pkg:`` module not installed here, is *indeterminate*;
- whether a live manager would claim it, in the words ``job why`` uses (``_why_claim``): the closest
  manager's unmet requirements, its runner allowlist, search paths and resource capacities included (a
  ready job's requirement is its frame's, a submitted job's its job.json's). With no live manager, one
  workspace-level notice replaces these per-job findings.

The environment is a workspace-level section: every workspace setting, the ``HTTK_<NAME>`` variable it is
exported as, and where an attempt started by a manager with this process's environment would take it
from (``_attempt._settings_environment`` decides, so this cannot drift from what a manager exports).
The job schema has no member that declares environment entries, required inputs, or a workflow
realization (language jobs and their extras), so those checks are reported once as not applicable
rather than invented. This process's ``HTTK_*`` variables say nothing about a later compute node's, and
the authoritative gate is still the attempt start: the report is advisory and can become stale.

The status is failing (exit status 1 on the command line) when any job has a ``blocked`` finding.

Cost: one exhaustive walk of the two pending kinds, one job.json read per pending job (and one frame
read per ready job while a manager is live), one resolution per runner location (digests are cached),
one manifest and heartbeat read per manager.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._jobs import read_frame
from httk.workflow.engine.core._liveness import ManagerView, list_managers
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.manager._attempt import _settings_environment
from httk.workflow.engine.manager._resources import requirement_of
from httk.workflow.engine.publish._runners import RunnerReach
from httk.workflow.protocol import WorkflowError
from httk.workflow.protocol._policy import setting_environment_name

from ._inspect_job import _read_job
from ._why_claim import accepting_finding, fits
from ._why_report import BLOCKED, INDETERMINATE, INFO, OK, WARNING, Finding, runner_finding

PENDING_KINDS = (Kind.SUBMITTED, Kind.READY)
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
    document, problem, _digest = _read_job(payload)
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
            source = (read_frame(workspace, marker) or {}).get("resources")
    return requirement_of(source)


def environment_entries(settings: Mapping[str, Any], environ: Mapping[str, str]) -> list[dict[str, str]]:
    """Each setting, its variable, and where an attempt's environment takes it from."""
    exported = _settings_environment(settings, environ)
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
