"""``job why`` for the kinds a manager owns: claimed, running, committing, cancelling.

The owner is the manager the frame names; it is *live* while its heartbeat is younger than the lease the
frame records and its recorded process is not gone from this host (DECISIONS D17) — the comparison a
recovering manager makes (``ManagerState.owner``), including its fallback to the claim's start when no
heartbeat can be read. Once the lease has expired the job is not
stuck: recovery takes it, under the rules of ``_recovery``. Those rules are restated here as what they
need from the deployment: a running attempt whose process ran on another host is recovered only by a
live manager on that host (persistent workdir) or after ``takeover_grace_factor`` silent leases
(isolated, default 2); a cancellation is finished only by its owner or by a manager on the process's
host; a commit by any live manager whose scans include the placement.

**Wedged commits.** A commit that fails the same way every time leaves no frame behind: the marker just
stays ``committing``. The evidence is elsewhere, and two kinds of it are read:

- the manager logs (the last :data:`LOG_TAIL_BYTES` of each ``managers/<id>/log``): warning and error
  lines naming the job written since the committing frame, such as a transaction that cannot be
  replayed;
- the managers that served the job after it was abandoned (heartbeating past the owner's lease, with
  its executor and placement in their scope) and have stopped since without finishing it.

When either shows the anomaly at least :data:`WEDGE_ANOMALIES` times the job is reported as a blocked,
wedged commit with the latest recorded error, rather than as one that needs no action.

Cost: one heartbeat read per manager (done by the caller), one ``/proc`` probe for a process on this
host, and for a committing job one bounded tail read per manager log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from httk.workflow.engine.core._clock import age_seconds, parse_time
from httk.workflow.engine.core._liveness import ManagerView, SlurmOracle, process_alive, recorded_batch
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.manager._rules import DEFAULT_TAKEOVER_GRACE_FACTOR, describe
from httk.workflow.engine.publish._outcome import OUTCOME_DIR

from ._precheck import fit, manager_name
from ._why_report import BLOCKED, INFO, OK, WARNING, Answer, Case, Finding

WEDGE_ANOMALIES = 2
"""How often a commit must have gone wrong for the same attempt before it is called wedged."""
LOG_TAIL_BYTES = 64 * 1024
"""The managers' default ``--takeover-grace-factor`` (the manifest does not record it)."""
_ANOMALY_LEVELS = ("WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True, slots=True)
class Owner:
    manager_id: str | None
    view: ManagerView | None
    age: float | None
    lease: float

    @property
    def exited(self) -> bool:
        """Its recorded process is gone from this host: dead now, whatever its heartbeat (D17)."""
        return self.view is not None and self.view.exited

    @property
    def live(self) -> bool:
        return self.age is not None and self.age <= self.lease and not self.exited

    @property
    def name(self) -> str:
        if self.view is not None:
            return manager_name(self.view)
        return str(self.manager_id)

    def finding(self) -> Finding:
        heartbeat = "no readable heartbeat" if self.age is None else f"heartbeat {self.age:.1f} s old"
        expired = self.age is None or self.age > self.lease
        state = "live" if self.live else "its lease has expired" if expired else "its lease counts as expired"
        if self.exited:
            state += "; its process is gone from this host"
        batch = self.view.member("batch") if self.view is not None else None
        resources = self.view.member("resources") if self.view is not None else None
        details = {
            "manager_id": self.manager_id,
            "heartbeat_age_seconds": self.age,
            "lease_seconds": self.lease,
            "resources": resources,
            "batch": batch,
        }
        where = f" in Slurm job {batch.get('job_id')}" if isinstance(batch, dict) else ""
        capacities = f", capacities {describe(resources)}" if isinstance(resources, dict) else ""
        status = OK if self.live else WARNING
        text = f"manager {self.name}{where}: {heartbeat}, lease {self.lease:g} s ({state}){capacities}"
        return Finding("owner", status, text, details)


def owner_of(case: Case) -> Owner:
    manager_id = case.frame.get("manager_id")
    view = next((v for v in case.managers if v.manager_id == manager_id), None)
    lease = float(
        case.frame.get("lease_seconds")
        or (view.lease_seconds if view else 0)
        or case.workspace.policy.lease_seconds
    )
    age = None if view is None or view.heartbeat.updated_at is None else view.age_seconds
    if age is None:
        age = age_seconds(case.frame.get("lease_started_at"), case.now)  # what a recoverer falls back on
    return Owner(manager_id if isinstance(manager_id, str) else None, view, age, lease)


def in_scope(case: Case) -> list[ManagerView]:
    """Live managers whose scans include the placement and that serve the job's executor."""
    if case.job is None:
        return case.live
    chosen = []
    for view in case.live:
        measured = fit(case.job, case.marker.placement, view)
        if measured.meets("executor") and measured.meets("placement"):
            chosen.append(view)
    return chosen


def names(views: Sequence[ManagerView]) -> str:
    return ", ".join(manager_name(view) for view in views) or "none"


# -- claimed and running -------------------------------------------------------------------------------
def diagnose_claimed(case: Case) -> Answer:
    owner = owner_of(case)
    found = [owner.finding()]
    if owner.live:
        return Answer(f"claimed by live manager {owner.name}, which launches it next", False, found)
    return _recovered_by_anyone(case, found, "its claim is released to ready (counters undone)")


def _recovered_by_anyone(case: Case, found: list[Finding], what: str) -> Answer:
    scope = in_scope(case)
    if scope:
        found.append(Finding("recovery", OK, f"{what} by the next pass of {names(scope)}"))
        return Answer(f"its manager's lease expired: recovery, not a stuck job; {what}", False, found)
    found.append(Finding("recovery", BLOCKED, "no live manager scans its placement to recover it"))
    steps = ["start a manager (httk workflow manager run) whose placement prefixes include this placement"]
    return Answer("its manager's lease expired and no live manager can recover it", True, found, steps)


def diagnose_running(case: Case) -> Answer:
    owner = owner_of(case)
    identity = case.frame.get("process") or {}
    host = identity.get("host")
    found = [owner.finding(), _process_finding(identity)]
    if owner.live:
        return Answer(f"running under live manager {owner.name}", False, found)
    control = case.payload / f".httk-attempt.{case.frame.get('attempt_id')}"
    if (control / OUTCOME_DIR).is_dir():
        found.append(Finding("outcome", INFO, "the attempt published an outcome: recovery commits it"))
        return _recovered_by_anyone(case, found, "its published outcome is committed")
    if not identity or process_alive(identity) is False:
        return _recovered_by_anyone(case, found, "it is retried as lease_lost within its budgets")
    scope = in_scope(case)
    on_host = [view for view in scope if view.member("host") == host]
    if on_host:
        text = f"a live manager on host {host} ({names(on_host)}) proves the process stopped, then retries it"
        found.append(Finding("recovery", OK, text))
        return Answer("its manager's lease expired: recovery, not a stuck job", False, found)
    ended = _allocation_finding(case, owner, found)
    if ended:
        return _recovered_by_anyone(case, found, "it is taken over on Slurm's evidence (allocation_ended)")
    mode = (case.job or {}).get("workdir", {}).get("mode")
    if mode == "isolated" and scope:
        return _isolated_takeover(owner, found, scope)
    found.append(
        Finding(
            "recovery",
            BLOCKED,
            f"its writer ran on host {host}; only a manager there can prove it stopped "
            f"({mode or 'unknown'} workdir)",
        )
    )
    steps = [f"run a manager on host {host}", "or pass --unsafe-persistent-takeover to a manager (unsafe)"]
    if mode == "isolated":
        steps = [f"run a manager on host {host} or any live manager (none scans this placement now)"]
    return Answer(
        f"blocked: its writer ran on host {host} and no live manager there can recover it", True, found, steps
    )


def _allocation_finding(case: Case, owner: Owner, found: list[Finding]) -> bool:
    """What Slurm says about the owner's allocation (when it ran in one); whether that proves it gone."""
    batch = recorded_batch(case.workspace, owner.manager_id)
    if batch is None:
        return False
    evidence = SlurmOracle().evidence(batch)
    job = f"Slurm job {batch.get('job_id')}"
    if evidence is None:
        found.append(Finding("batch", INFO, f"its manager ran in {job}, which Slurm does not report ended"))
        return False
    state, tracking = evidence["job_state"], evidence["proctrack"]
    if evidence["sufficient"]:
        text = f"Slurm reports {job} {state} under {tracking}: no process of it is left"
        found.append(Finding("batch", OK, text, evidence))
        return True
    text = (
        f"Slurm reports {job} {state}, but under {tracking} a process can escape its job: evidence, not proof"
    )
    found.append(Finding("batch", WARNING, text, evidence))
    return False


def _isolated_takeover(owner: Owner, found: list[Finding], scope: Sequence[ManagerView]) -> Answer:
    grace = DEFAULT_TAKEOVER_GRACE_FACTOR * owner.lease
    silent = owner.age if owner.age is not None else grace
    if silent >= grace:
        text = f"the heartbeat has been silent {silent:.0f} s, past the takeover grace of {grace:g} s"
    else:
        text = f"taken over once the heartbeat has been silent {grace:g} s (in {grace - silent:.0f} s)"
    found.append(Finding("recovery", OK, f"{text}, by {names(scope)} (isolated workdir)"))
    return Answer("its manager's lease expired: an isolated attempt is taken over, not stuck", False, found)


def _process_finding(identity: Mapping[str, Any]) -> Finding:
    if not identity:
        return Finding("process", INFO, "no process identity recorded")
    where = f"pid {identity.get('pid')} on host {identity.get('host')}"
    alive = process_alive(identity)
    if alive is None:
        return Finding("process", INFO, f"{where}: cannot be checked from this host")
    return Finding("process", INFO, f"{where}: {'still running' if alive else 'gone'}")


# -- cancelling ------------------------------------------------------------------------------------
def diagnose_cancelling(case: Case) -> Answer:
    owner = owner_of(case)
    identity = case.frame.get("process") or {}
    host = identity.get("host")
    found = [owner.finding(), _process_finding(identity)]
    cancellation = case.frame.get("cancellation") or {}
    if isinstance(cancellation, Mapping) and cancellation.get("unverified_reason"):
        found.append(Finding("fence", WARNING, str(cancellation["unverified_reason"])))
    if owner.live:
        text = "fenced; its live owner stops the process group (SIGTERM, then SIGKILL) and verifies it"
        return Answer(text, False, found)
    scope = in_scope(case)
    able = scope if not identity else [view for view in scope if view.member("host") == host]
    if able:
        found.append(Finding("recovery", OK, f"{names(able)} finishes the cancellation"))
        return Answer("fenced; a live manager finishes the cancellation", False, found)
    where = "" if not identity else f" on host {host}"
    found.append(Finding("recovery", BLOCKED, f"no live manager{where} can verify that the process stopped"))
    steps = [f"run a manager{where} to finish the cancellation; the attempt stays fenced meanwhile"]
    return Answer(f"fenced, waiting for a manager{where} to verify the process stopped", True, found, steps)


# -- committing ------------------------------------------------------------------------------------
def diagnose_committing(case: Case) -> Answer:
    owner = owner_of(case)
    found = [owner.finding()]
    lines = _logged_anomalies(case)
    stopped = [] if owner.live else _stopped_resumers(case, owner)
    count = max(len(lines), len(stopped))
    if count >= WEDGE_ANOMALIES:
        error = (
            lines[-1] if lines else f"{len(stopped)} managers stopped without finishing it: {names(stopped)}"
        )
        found.append(
            Finding("commit", BLOCKED, f"wedged: the commit went wrong {count} times; latest: {error}")
        )
        steps = [
            "read the managers' logs (.httk-workflow/managers/<id>/log)",
            "repair the cause, then restart a manager",
        ]
        return Answer("a wedged commit: the same attempt's commit keeps failing", True, found, steps)
    if lines:
        found.append(Finding("commit", WARNING, f"a commit anomaly was logged: {lines[-1]}"))
    if owner.live:
        return Answer(f"its published outcome is being committed by live manager {owner.name}", False, found)
    return _recovered_by_anyone(case, found, "its commit is resumed from the committing frame")


def _logged_anomalies(case: Case) -> list[str]:
    """Warning and error lines naming the job in the managers' logs since the committing frame."""
    since = parse_time(case.frame.get("created_at"))
    if since is None:
        return []
    since = since.replace(microsecond=0)
    found: list[tuple[datetime, str]] = []
    for view in case.managers:
        for moment, level, message in _log_tail(case.workspace.managers_dir / view.manager_id / "log"):
            if level in _ANOMALY_LEVELS and case.marker.job_key in message and moment >= since:
                found.append((moment, f"{level.lower()} by manager {view.manager_id}: {message}"))
    return [text for _moment, text in sorted(found)]


def _log_tail(path: os.PathLike[str]) -> list[tuple[datetime, str, str]]:
    """``(time, LEVEL, message)`` of the parseable lines in the last :data:`LOG_TAIL_BYTES` of a log."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - LOG_TAIL_BYTES, 0))
            data = handle.read(LOG_TAIL_BYTES)
    except OSError:
        return []
    entries = []
    for raw in data.decode("utf-8", "replace").splitlines():
        entry = _parse_log_line(raw)
        if entry is not None:
            entries.append(entry)
    return entries


def _parse_log_line(line: str) -> tuple[datetime, str, str] | None:
    """A line of ``_logging``'s text format (local ``asctime``) or of its JSON lines."""
    if line.startswith("{"):
        try:
            record = json.loads(line)
            moment = datetime.strptime(str(record["time"]), "%Y-%m-%dT%H:%M:%S%z")
            return moment, str(record["level"]).upper(), str(record["message"])
        except (ValueError, KeyError, TypeError):
            return None
    parts = line.split(" ", 4)
    if len(parts) < 5:
        return None
    try:
        moment = datetime.strptime(f"{parts[0]} {parts[1]}", "%Y-%m-%d %H:%M:%S,%f").astimezone()
    except ValueError:
        return None
    return moment, parts[2], parts[4]


def _stopped_resumers(case: Case, owner: Owner) -> list[ManagerView]:
    """Managers that heartbeated in scope after the owner's lease ran out and are not live any more."""
    last = None if owner.view is None else owner.view.heartbeat.updated_at
    base = last or parse_time(case.frame.get("created_at"))
    if base is None:
        return []
    expired = base + timedelta(seconds=owner.lease if last is not None else 0.0)
    stopped = []
    for view in case.managers:
        beat = view.heartbeat.updated_at
        if view.live or view.manager_id == owner.manager_id or view.manifest is None or beat is None:
            continue
        if case.job is not None:
            measured = fit(case.job, case.marker.placement, view)
            if not (measured.meets("executor") and measured.meets("placement")):
                continue
        if beat > expired:
            stopped.append(view)
    return stopped


OWNED = {
    Kind.CLAIMED: diagnose_claimed,
    Kind.RUNNING: diagnose_running,
    Kind.COMMITTING: diagnose_committing,
    Kind.CANCELLING: diagnose_cancelling,
}
