"""Fault injection through the filesystem seam, with real manager processes: cases, runs and oracles.

A *case* is a fresh workspace holding two jobs, each with its own execution log (the crash suite's
recording runner, :mod:`tests.crash._scenarios`): the *scenario* job follows one of the crash suite's
plans at ``proj/a``, the *bystander* job simply succeeds at ``proj/b``. Their ids are fixed, so every run
of a case lists, claims and moves them in the same order: mutation ``k`` is the same operation in every
run, which the faulted run's own trace proves (its first ``k - 1`` entries are the reference's).

A faulted run is one manager process with ``HTTK_WORKFLOW_FAULT=k:fault``. What it must do (issue 15):
exit normally, never with a traceback; log the fault as one clear error at most a few times (or absorb
it: a verified rename that finds its own work done, a reader that waits out a late name); and keep
serving the job the fault did not hit, which it finishes in that same run. Then fresh managers converge:
every job ends exactly as the reference run ends it, with one marker, an intact chain and no execution
the crash suite's rules do not justify, and ``workspace fsck`` finds nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.engine.core._faults import APPLIES, FAULT_VARIABLE, FSYNC_FAULTS, Fault
from httk.workflow.engine.core._states import TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import Submitter

from tests.crash._scenarios import (
    LEASE_SECONDS,
    chain,
    check_reexecutions,
    expire_heartbeats,
    job_document,
    manager_code,
    manager_environment,
    markers_by_job,
    normalized_trace,
    read_executions,
    recover_until_settled,
    single_marker,
    write_runner,
)
from tests.crash.test_manager_crash import EXPECTED, Expected

SCENARIO_ID = "0f0f0f0f-0000-4000-8000-00000000000a"
BYSTANDER_ID = "0f0f0f0f-0000-4000-8000-00000000000b"
RECOVERY = ManagerConfig(workers=1, lease_seconds=LEASE_SECONDS)
MAX_ERROR_LINES = 6
"""A fault is reported, not repeated: the pause, the job it hit, perhaps the retry of a neighbour."""
RUN_SECONDS = 300


@dataclass(frozen=True)
class Job:
    key: str
    exec_log: Path
    expected: Expected


@dataclass(frozen=True)
class Case:
    root: Path
    jobs: tuple[Job, Job]  # the scenario's job, then the bystander


def new_case(base: Path, plan: str, *, durable: bool) -> Case:
    """A workspace at ``base/ws`` with the scenario job (``plan``) and the bystander, both submitted."""
    base.mkdir(parents=True)
    workspace = init(base / "ws", durable=durable)
    jobs = []
    for label, job_id, job_plan, placement in (
        ("scenario", SCENARIO_ID, plan, "proj/a"),
        ("bystander", BYSTANDER_ID, "succeed", "proj/b"),
    ):
        exec_log = base / f"exec-log-{label}"
        exec_log.mkdir()
        payload = base / f"payload-{label}"
        payload.mkdir()
        document = {**job_document(exec_log, job_plan), "id": job_id}
        (payload / "job.json").write_text(json.dumps(document))
        write_runner(payload / "files" / "runner")
        result = Submitter(workspace).submit_payload(payload, placement)
        jobs.append(Job(result.job_key, exec_log, EXPECTED[job_plan]))
    workspace.close()
    return Case(workspace.root, (jobs[0], jobs[1]))


def run_manager(
    root: Path, *, fault: str | None = None, trace: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """One manager process (one worker) until idle, with the fault ``k:fault`` when given."""
    env = manager_environment(trace=trace)
    env.pop(FAULT_VARIABLE, None)
    if fault is not None:
        env[FAULT_VARIABLE] = fault
    return subprocess.run(
        [sys.executable, "-c", manager_code(root)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=RUN_SECONDS,
    )


@dataclass(frozen=True)
class Reference:
    trace: list[str]  # normalized: "<operation> <path>", as tests.crash._scenarios.normalized_trace

    def operation(self, k: int) -> str:
        return self.trace[k - 1].split(" ", 1)[0]

    def applicable(self, fault: Fault, *, durable: bool) -> list[int]:
        """Every mutation ``fault`` can happen to (an fsync fault only where durability syncs)."""
        if fault in FSYNC_FAULTS and not durable:
            return []
        return [k for k in range(1, len(self.trace) + 1) if self.operation(k) in APPLIES[fault]]


def reference(base: Path, plan: str, *, durable: bool) -> Reference:
    """The fault-free run of a case: its mutations, and both jobs settled as the plans say."""
    case = new_case(base, plan, durable=durable)
    trace = base / "trace"
    result = run_manager(case.root, trace=trace)
    assert result.returncode == 0, result.stderr
    check_settled(case)
    return Reference(normalized_trace(trace, case.root))


@dataclass(frozen=True)
class Scenario:
    plan: str
    durable: bool

    def __str__(self) -> str:
        return self.plan + ("-durable" if self.durable else "")


def fault_and_converge(base: Path, scenario: Scenario, ref: Reference, k: int, fault: Fault) -> None:
    """Inject ``fault`` at mutation ``k`` of a fresh case, check the faulted run, converge, check all."""
    case = new_case(base, scenario.plan, durable=scenario.durable)
    trace = base / "trace"
    result = run_manager(case.root, fault=f"{k}:{fault.value}", trace=trace)
    check_faulted_run(result)
    assert normalized_trace(trace, case.root)[: k - 1] == ref.trace[: k - 1], "the run diverged before k"
    unsettled = [job.key for job in case.jobs if not settled(case.root, job)]
    assert len(unsettled) <= 1, f"the faulted manager stopped serving: {unsettled} left unsettled"
    expire_heartbeats(attach(case.root))
    for job in case.jobs:
        recover_until_settled(case.root, job.key, RECOVERY)
    check_settled(case)


INJECTED = re.compile(r"injected: [a-z-]+")


def check_faulted_run(result: subprocess.CompletedProcess[str]) -> None:
    """It ended on its own (idle, status 0), without a traceback, naming the fault a few times at most."""
    assert result.returncode == 0, f"the faulted manager exited {result.returncode}:\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if INJECTED.search(line)]
    assert len(errors) <= MAX_ERROR_LINES, "\n".join(errors)


def settled(root: Path, job: Job) -> bool:
    marker = single_marker(attach(root, writable=False), job.key)
    return marker.kind in TERMINAL_KINDS or marker.kind is Kind.PAUSED


def check_settled(case: Case) -> None:
    """Each job ended as its plan says: one marker, an intact chain, justified executions; fsck clean."""
    workspace = attach(case.root, writable=False)
    assert set(markers_by_job(workspace)) == {job.key for job in case.jobs}
    for job in case.jobs:
        marker = single_marker(workspace, job.key)
        expected = job.expected
        assert marker.kind is expected.kind, f"{job.key} ended {marker.kind}, not {expected.kind}"
        frames = chain(workspace, marker)
        assert frames[0]["step"] == expected.step, frames[0]
        if expected.failure_code is not None:
            assert frames[0]["failure"]["code"] == expected.failure_code, frames[0]
        check_reexecutions(frames, read_executions(job.exec_log), requested=expected.requested_retries)
    report = fsck(attach(case.root, writable=False))
    assert report.clean, [problem.as_dict() for problem in report.problems]


def enumerate_failures(points: list[int], attempt: Callable[[int], None]) -> list[str]:
    """Run ``attempt(k)`` for every point; one line per point that failed (every one is reported)."""
    failures = []
    for k in points:
        try:
            attempt(k)
        except Exception as exc:  # each failing point is reported, not only the first
            failures.append(f"k={k}: {type(exc).__name__}: {str(exc)[:2000]}")
    return failures


def env_full_matrix() -> bool:
    """``./dev faults`` asks for every point of every scenario; ``./dev test`` runs the subset."""
    return os.environ.get("HTTK_FAULT_MATRIX", "") == "full"
