"""The soak: managers racing through a scripted workload while a driver SIGKILLs them at random.

A *workload* is drawn from a seed: jobs of a few scripted kinds (:data:`TEMPLATES`) — a chain of three
steps, a requested retry, a declared failure, a fan-out whose children all succeed, one whose join
becomes impossible, a transaction into data/ checked by the next step, and a job that blocks until the
driver cancels it. Each step also works for a scripted while, so that attempts are in flight when
managers die. The runner is Bash on the Bash API; before anything else it appends one line per attempt
(activation, attempt, step) to an append-only *activation log* outside the workspace.

The *driver* starts ``managers`` real manager processes (``httk workflow manager run --inline --idle``,
``workers`` each) on a workspace whose lease is short, then, every ``kill_every`` seconds (drawn from
the seed), SIGKILLs a random live manager (drawn from the seed) and starts a new one in its place, until
``kills`` kills; it publishes the cancel requests the workload asks for, and waits until every job is
terminal. Then the *oracle* (:func:`verdict`) requires:

- every job terminal exactly as its script says (kind, failure code, the transaction's data/);
- exactly one marker per job, every chain intact, ``workspace fsck`` clean;
- every attempt in the activation log on its job's chain and executed once; an activation executed
  more than once only after a retry the specification allows: the step's own, or ``lease_lost`` after a
  recorded takeover (the attempt's manager was gone).

Takeover needs no D17 here: a killed manager's attempts are recovered when its short lease expires, or
sooner where "a manager known dead on this host is dead now" is implemented; the oracle holds either
way. The seed is printed so that a failure can be replayed (``./dev soak --seed N``); the wall-clock
interleaving cannot be replayed, but every interleaving must pass.

``python tests/soakkit.py`` (``./dev soak``) runs the full profile; ``tests/crash/test_soak.py`` the
short one; ``benchmarks/soak.py`` measures throughput with and without kills and the recovery time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root is the import root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from httk.workflow.engine.core._clock import parse_time
from httk.workflow.engine.core._states import TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import Workspace, attach, init, probe_marker
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.engine.requests._requests import RequestError, publish_request

from tests.conftest import minimal_job
from tests.crash._scenarios import Marker, chain, manager_environment, markers_by_job

TEMPLATES = {
    "chain": 25,
    "retry": 15,
    "fail": 10,
    "fanout": 20,
    "fanout_fail": 10,
    "transaction": 15,
    "cancel": 5,
}
"""The scripted kinds of job and their weights in a workload."""

EXPECTED = {
    "chain": ("succeeded", None),
    "retry": ("succeeded", None),
    "fail": ("failed", "soak.failed"),
    "fanout": ("succeeded", None),
    "fanout_fail": ("failed", "dependency_failure"),
    "transaction": ("succeeded", None),
    "cancel": ("cancelled", None),
    "child_ok": ("succeeded", None),
    "child_bad": ("failed", "soak.child_failed"),
}
"""What each script ends in: the kind and, for a failure, its code (children by their first step)."""

RUNNER = r"""#!/usr/bin/env bash
# The soak runner. Arguments: ACTIVATION_LOG TEMPLATE WORK_SECONDS CHILDREN.
set -uo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"
log=$1 template=$2 work=$3 children=$4
activation='' attempt='' ordinal='' job=''  # set by httk_workflow_context
httk_workflow_context activation activation_id || exit 70
httk_workflow_context attempt attempt_id || exit 70
httk_workflow_context ordinal attempt_ordinal || exit 70
httk_workflow_context job job_id || exit 70
printf '%s %s %s %s\n' "$activation" "$attempt" "$HTTK_WORKFLOW_STEP" "$template" >>"$log" || exit 71
sleep "$work"

prepare() {
  local index
  case $template in
    chain) httk_workflow_advance middle ;;
    retry)
      if ((ordinal == 1)); then
        httk_workflow_retry "asked once by the script"
      else
        httk_workflow_succeed
      fi ;;
    fail) httk_workflow_fail soak.failed "the script fails here" ;;
    fanout)
      for ((index = 0; index < children; index++)); do
        httk_workflow_spawn "kid-$index" child_ok || return
      done
      httk_workflow_wait gather ;;
    fanout_fail)
      httk_workflow_spawn kid-ok child_ok || return
      httk_workflow_spawn kid-bad child_bad || return
      httk_workflow_wait gather ;;
    transaction)
      httk_workflow_transaction_begin || return
      httk_workflow_make_dir results || return
      httk_workflow_put_file results/id.txt --content "$job" || return
      httk_workflow_advance check ;;
    cancel)
      for ((index = 0; index < 60000; index++)); do sleep 0.01; done  # until cancelled (bounded)
      exit 1 ;;
  esac
}
middle() { httk_workflow_advance finish; }
finish() { httk_workflow_succeed; }
gather() { httk_workflow_succeed; }
check() {
  local data
  httk_workflow_context data data_dir || return
  if [[ $(<"$data/results/id.txt") == "$job" ]]; then
    httk_workflow_succeed
  else
    httk_workflow_fail soak.data_lost "data/results/id.txt does not hold the job id"
  fi
}
child_ok() { httk_workflow_succeed; }
child_bad() { httk_workflow_fail soak.child_failed "the script fails this child"; }

for step in prepare middle finish gather check child_ok child_bad; do
  httk_workflow_register_step "$step"
done
httk_workflow_dispatch
"""


@dataclass(frozen=True)
class Profile:
    """How hard a soak pushes: managers and workers, jobs, kills, and the timing it draws from."""

    managers: int = 4
    workers: int = 2
    jobs: int = 1000
    kills: int = 200
    kill_every: tuple[float, float] = (1.0, 3.0)
    work: tuple[float, float] = (0.2, 0.8)
    lease_seconds: float = 3.0
    deadline_seconds: float = 3600.0
    seed: int = 0


FULL = Profile()
SHORT = Profile(managers=2, jobs=60, kills=15, kill_every=(1.0, 1.0), work=(0.6, 0.6), deadline_seconds=300.0)
"""The short profile of ``./dev test``: its 15 kills, one a second, all fall within the least time its
work takes (about 130 attempts of 0.6 s on 4 workers: 20 s however fast the machine)."""


@dataclass
class Workload:
    root: Path
    activation_log: Path
    templates: dict[str, str]  # job key -> template, for the jobs submitted
    cancels: list[tuple[str, str]]  # (placement, job key) of the jobs the driver cancels


@dataclass
class Run:
    """What a driven soak did."""

    workload: Workload
    profile: Profile
    started: float
    finished: float
    kills: list[tuple[float, str]] = field(default_factory=list)  # (wall time, manager id)
    managers_started: int = 0
    manager_failures: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.finished - self.started


def build(base: Path, profile: Profile) -> Workload:
    """A fresh workspace at ``base/ws`` with the seeded workload submitted."""
    rng = random.Random(profile.seed)
    base.mkdir(parents=True, exist_ok=True)
    log = base / "activations.log"
    log.touch()
    workspace = init(base / "ws", durable=False, extensions=("transactional-data-v1",))
    workspace.update_document({"policy": {"lease_seconds": profile.lease_seconds}})
    runner_path = base / "soak-runner"
    runner_path.write_text(RUNNER)
    stored = publish_runner(workspace, "soak", runner_path)
    names, weights = zip(*TEMPLATES.items(), strict=True)
    specs, templates, cancels = [], {}, []
    for index in range(profile.jobs):
        template = rng.choices(names, weights)[0]
        work = f"{rng.uniform(*profile.work):.3f}"
        arguments = [str(log), template, work, str(rng.randint(1, 3))]
        job = minimal_job(
            runner={"backend": "path", **stored.reference(), "arguments": arguments},
            data={"mode": "transactional" if template == "transaction" else "none"},
            retry_policy={"maximum_attempts_per_activation": 50, "retry_on": ["lease_lost"]},
            tag=template.replace("_", "-"),
        )
        placement = f"soak/{index % 16:02d}"
        specs.append(JobSpec(job, placement))
        key = f"{job['tag']}--{job['id']}"
        templates[key] = template
        if template == "cancel":
            cancels.append((placement, key))
    submit_jobs(workspace, specs)
    workspace.close()
    return Workload(workspace.root, log, templates, cancels)


class Driver:
    """Runs the managers, the kill schedule and the cancellations of one soak."""

    def __init__(self, workload: Workload, profile: Profile, *, kill: bool = True) -> None:
        self.workload = workload
        self.profile = profile
        self.kill = kill
        self.rng = random.Random(profile.seed + 1)
        self.managers: dict[str, subprocess.Popen[bytes]] = {}
        self.run = Run(workload, profile, time.time(), 0.0)
        self.requested: dict[str, Path] = {}

    def start_manager(self) -> None:
        manager_id = str(uuid.uuid4())
        command = [sys.executable, "-m", "httk.workflow.cli", "workflow", "manager", "run", "--inline"]
        command += ["--idle", "--workers", str(self.profile.workers), "--manager-id", manager_id]
        output = self.workload.root.parent / f"manager-{manager_id}.out"
        with output.open("wb") as stream:
            self.managers[manager_id] = subprocess.Popen(
                [*command, str(self.workload.root)],
                env=manager_environment(),
                stdout=stream,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a signal for the driver is not one for the managers
            )
        self.run.managers_started += 1

    def drive(self) -> Run:
        """Start the managers, kill on schedule, cancel as scripted, until every job is terminal."""
        self.run.started = time.time()
        for _ in range(self.profile.managers):
            self.start_manager()
        next_kill = time.monotonic() + self.rng.uniform(*self.profile.kill_every)
        deadline = time.monotonic() + self.profile.deadline_seconds
        next_look = 0.0
        try:
            while True:
                now = time.monotonic()
                if self.kill and len(self.run.kills) < self.profile.kills and now >= next_kill:
                    self._kill_one()
                    next_kill = now + self.rng.uniform(*self.profile.kill_every)
                if now >= next_look:  # the workspace is read twice a second: the driver is no load
                    if self._all_terminal():
                        break
                    assert now < deadline, f"the soak did not finish in {self.profile.deadline_seconds} s"
                    self._check_managers()
                    self._cancel()
                    next_look = now + 0.5
                time.sleep(0.02)
            self.run.finished = time.time()
        finally:
            self._stop_all()
        return self.run

    def _kill_one(self) -> None:
        victim = self.rng.choice(sorted(self.managers))
        process = self.managers.pop(victim)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        self.run.kills.append((time.time(), victim))
        self.start_manager()

    def _check_managers(self) -> None:
        for manager_id, process in list(self.managers.items()):
            if process.poll() is not None:  # a manager must only ever end by the driver's hand
                self.run.manager_failures.append(f"manager {manager_id} exited {process.returncode}")
                del self.managers[manager_id]
                self.start_manager()

    def _cancel(self) -> None:
        """Publish a cancel for every scripted job whose attempt runs and whose last request is gone."""
        if not self.workload.cancels:
            return
        workspace = attach(self.workload.root)
        try:
            for placement, key in self.workload.cancels:
                previous = self.requested.get(key)
                if previous is not None and _still_pending(workspace, previous.name):
                    continue
                marker = probe_marker(workspace, placement, key)
                if marker is None or marker.kind is not Kind.RUNNING:
                    continue  # cancelled while its attempt runs: the fence, the stop and the evidence
                try:
                    published = publish_request(
                        workspace, placement, key, "cancel", operator="soak", reason="scripted cancel"
                    )
                except RequestError:
                    continue  # terminal already, or between two markers: asked again next round
                self.requested[key] = published.path
        finally:
            workspace.close()

    def _all_terminal(self) -> bool:
        kinds = Counter(
            found[0].kind for found in markers_by_job(attach(self.workload.root, writable=False)).values()
        )
        return bool(kinds) and set(kinds) <= TERMINAL_KINDS

    def _stop_all(self) -> None:
        for process in self.managers.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
        for manager_id, process in self.managers.items():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                self.run.manager_failures.append(f"manager {manager_id} did not drain")


def _still_pending(workspace: Workspace, name: str) -> bool:
    requests = workspace.requests_dir
    return (requests / "ready" / name).exists() or any((requests / "claimed").glob(f"*/{name}"))


# -- the oracle --------------------------------------------------------------------------------------
def verdict(run: Run) -> list[str]:
    """Every way the run broke the soak's promises (empty when it kept them all)."""
    workspace = attach(run.workload.root, writable=False)
    problems = list(run.manager_failures)
    by_job = markers_by_job(workspace)
    chains: dict[str, list[dict[str, Any]]] = {}
    for key, found in sorted(by_job.items()):
        if len(found) != 1:
            problems.append(f"{key} has {len(found)} markers")
            continue
        chains[key] = list(reversed(chain(workspace, found[0])))
        problems.extend(_ends_as_scripted(workspace, run.workload, key, found[0], chains[key]))
    missing = set(run.workload.templates) - set(by_job)
    problems.extend(f"{key} has no marker" for key in sorted(missing))
    problems.extend(_activations(run.workload.activation_log, chains))
    report = fsck(workspace)
    problems.extend(f"fsck: {problem.code} {problem.path}" for problem in report.problems)
    return problems


def _ends_as_scripted(
    workspace: Workspace, workload: Workload, key: str, marker: Marker, frames: list[dict[str, Any]]
) -> list[str]:
    first = frames[0]
    template = workload.templates.get(key) or str(first.get("step"))  # a child: by its first step
    if template not in EXPECTED:
        return [f"{key}: unexpected job (template {template!r})"]
    kind, code = EXPECTED[template]
    last = frames[-1]
    problems: list[str] = []
    if marker.kind.value != kind:
        problems.append(f"{key} ({template}) ended {marker.kind.value}, not {kind}: {last.get('failure')}")
    elif code is not None and (last.get("failure") or {}).get("code") != code:
        problems.append(f"{key} ({template}) failed with {last.get('failure')}, not {code}")
    if template == "transaction" and marker.kind is Kind.SUCCEEDED:
        payload = workspace.payload_path(marker.placement, key)
        data = payload / "data" / "results" / "id.txt"
        if not data.is_file() or data.read_text().strip() != first["job_id"]:
            problems.append(f"{key}: data/results/id.txt is not the committed one")
    return problems


ALLOWED_RERUNS = ("requested_retry", "lease_lost")


def _activations(log: Path, chains: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each logged attempt ran once and on its chain; an activation ran again only after an allowed retry."""
    problems: list[str] = []
    executed: dict[str, list[str]] = defaultdict(list)
    seen: Counter[str] = Counter()
    for line in log.read_text().splitlines():
        activation, attempt, _step, _template = line.split(" ", 3)
        executed[activation].append(attempt)
        seen[attempt] += 1
    problems.extend(f"attempt {attempt} executed {n} times" for attempt, n in seen.items() if n > 1)
    launched: dict[str, str] = {}  # attempt -> activation, for every attempt a chain launched
    allowed: Counter[str] = Counter()  # activation -> retries that may rerun it
    for frames in chains.values():
        for frame in frames:
            if frame["kind"] == "running":
                launched[frame["attempt_id"]] = frame["activation_id"]
            elif frame["kind"] == "ready" and frame.get("reason") == "retry":
                reason = frame.get("attempt_reason")
                if reason in ALLOWED_RERUNS and (reason != "lease_lost" or _lost_honestly(frame)):
                    allowed[frame["activation_id"]] += 1
                else:
                    problems.append(f"a retry of {frame['activation_id']} the soak never allows: {frame}")
    for activation, attempts in executed.items():
        for attempt in attempts:
            if launched.get(attempt) != activation:
                problems.append(f"attempt {attempt} of {activation} executed off every chain")
        if len(set(attempts)) > 1 + allowed[activation]:
            problems.append(
                f"activation {activation} executed {len(set(attempts))} times after {allowed[activation]} "
                "allowed retries"
            )
    return problems


def _lost_honestly(frame: dict[str, Any]) -> bool:
    """A lease_lost retry is honest when a takeover recorded the rule that admitted it."""
    takeover = frame.get("takeover")
    return isinstance(takeover, dict) and bool(takeover.get("rule"))


# -- figures -----------------------------------------------------------------------------------------
def recovery_seconds(run: Run) -> list[float]:
    """For each job a killed manager held, the seconds from its death to the job running again elsewhere
    (a running frame, or the commit of its outcome, by another manager)."""
    workspace = attach(run.workload.root, writable=False)
    died = {manager: moment for moment, manager in run.kills}
    delays = []
    for found in markers_by_job(workspace).values():
        frames = list(reversed(chain(workspace, found[0])))
        for index, frame in enumerate(frames):
            owner = frame.get("manager_id")
            if owner not in died or frame["kind"] not in ("claimed", "running"):
                continue
            later = [f for f in frames[index + 1 :] if f.get("manager_id") not in (owner, None)]
            resumed = next((f for f in later if f["kind"] in ("running", "committing")), None)
            moment = parse_time(resumed["created_at"]) if resumed else None
            if moment is not None and moment.timestamp() > died[owner]:
                delays.append(moment.timestamp() - died[owner])
    return delays


def soak(base: Path, profile: Profile, *, kill: bool = True) -> tuple[Run, list[str]]:
    """Build, drive and judge one soak in ``base``."""
    workload = build(base, profile)
    run = Driver(workload, profile, kill=kill).drive()
    return run, verdict(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The full soak: managers SIGKILLed at random.")
    parser.add_argument("--seed", type=int, default=None, help="replay this seed (default: a fresh one)")
    parser.add_argument("--jobs", type=int, default=FULL.jobs)
    parser.add_argument("--kills", type=int, default=FULL.kills)
    parser.add_argument("--dir", type=Path, default=None, help="keep the workspace here")
    arguments = parser.parse_args(argv)
    seed = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(1 << 31)
    profile = replace(FULL, seed=seed, jobs=arguments.jobs, kills=arguments.kills)
    print(f"soak seed: {seed} (replay: ./dev soak --seed {seed})", flush=True)
    base = arguments.dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"httk-soak-{seed}"
    run, problems = soak(base, profile)
    print(json.dumps(summary(run, problems), indent=2))
    return 1 if problems else 0


def summary(run: Run, problems: list[str]) -> dict[str, Any]:
    """The figures of one run, and its problems."""
    delays = sorted(recovery_seconds(run)) if run.kills else []
    jobs = len(markers_by_job(attach(run.workload.root, writable=False)))
    return {
        "seed": run.profile.seed,
        "jobs": jobs,
        "seconds": round(run.seconds, 1),
        "jobs_per_second": round(jobs / run.seconds, 2),
        "kills": len(run.kills),
        "managers_started": run.managers_started,
        "recovery_seconds": _quantiles(delays),
        "problems": problems[:50],
        "workspace": str(run.workload.root),
    }


def _quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None

    def pick(share: float) -> float:
        return round(values[min(len(values) - 1, int(share * len(values)))], 2)

    return {"n": len(values), "median": pick(0.5), "p90": pick(0.9), "max": round(values[-1], 2)}


if __name__ == "__main__":
    sys.exit(main())
