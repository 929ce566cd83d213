"""A group commit stopped after each of its mutations: several jobs' frames share one fsync, and a crash
between it and any rename of the batch is recovered as if the batch had been moves one at a time.

Three jobs, a durable workspace, a manager with three workers: its submitted pass registers the three as
one batch (three frames appended, one fsync, three renames), its claim pass claims them as one batch and
launches them as one (three running frames, one fsync, three renames, then the gates). Up to the last of
those renames the manager's mutation list is deterministic (no runner has been released before it), and
every crash point k in it is enumerated: a fresh workspace, the manager stopped after mutation k, its
heartbeat made old, fresh managers until every job settles. Each job must end succeeded with one marker,
an intact chain of frames and no attempt executed twice or off the chain. Crashing right after the
batch's last append stands for a crash between the shared fsync and the first rename (an fsync is not a
mutation: a later process cannot tell whether it ran), and crashing after its i-th rename for a crash
before the (i+1)-th.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
from httk.workflow.engine.core._fsops import CRASH_EXIT_STATUS
from httk.workflow.engine.core._states import TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import Submitter

from tests.crash._scenarios import (
    LEASE_SECONDS,
    PLACEMENT,
    chain,
    check_reexecutions,
    crash_points,
    expire_heartbeats,
    job_document,
    manager_code,
    manager_environment,
    markers_by_job,
    normalized_trace,
    read_executions,
    single_marker,
    write_runner,
)

JOBS = 3
SHARDS = 4
RECOVERY = ManagerConfig(workers=JOBS, lease_seconds=LEASE_SECONDS)


def new_batch(base: Path) -> tuple[Path, dict[str, Path]]:
    """A durable workspace with JOBS submitted jobs that succeed; each job's execution log by job key."""
    base.mkdir(parents=True)
    workspace = init(base / "ws", durable=True)
    logs: dict[str, Path] = {}
    for index in range(JOBS):
        exec_log = base / f"exec-log-{index}"
        exec_log.mkdir()
        payload = base / f"payload-{index}"
        payload.mkdir()
        (payload / "job.json").write_text(json.dumps(job_document(exec_log, "succeed")))
        write_runner(payload / "files" / "runner")
        logs[Submitter(workspace).submit_payload(payload, PLACEMENT).job_key] = exec_log
    workspace.close()
    return workspace.root, logs


def run_manager(
    root: Path, *, crash_after: int | None = None, trace: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", manager_code(root, workers=JOBS)],
        env=manager_environment(crash_after, trace),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def batch_prefix(trace: list[str]) -> int:
    """How many leading mutations are deterministic: through the last rename into ``running``."""
    into_running = [
        i for i, line in enumerate(trace) if line.startswith("rename <ws>/.httk-workflow/state/running/")
    ]
    assert len(into_running) == JOBS, into_running
    return into_running[-1] + 1


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    base = tmp_path_factory.mktemp("group-commit-reference")
    root, logs = new_batch(base / "case")
    result = run_manager(root, trace=base / "trace")
    assert result.returncode == 0, result.stderr
    settle_and_check(root, logs)
    return normalized_trace(base / "trace", root)


def test_the_reference_commits_registrations_claims_and_launches_in_batches(reference: list[str]) -> None:
    """Three appends in a row, then the three renames they name: once per batch (the first rename into a
    kind creates its placement directories on the way)."""
    prefix = [
        line for line in reference[: batch_prefix(reference)] if not line.startswith("mkdir <ws>/.httk")
    ]
    for kind in ("ready", "claimed", "running"):
        renames = [
            i for i, line in enumerate(prefix) if line.startswith(f"rename <ws>/.httk-workflow/state/{kind}/")
        ]
        assert len(renames) == JOBS and renames == list(range(renames[0], renames[0] + JOBS)), (kind, renames)
        appends = prefix[renames[0] - JOBS : renames[0]]
        assert all(line.startswith("append <ws>/.httk-workflow/journal/") for line in appends), (
            kind,
            appends,
        )


@pytest.mark.parametrize("shard", range(SHARDS), ids=[f"{s + 1}of{SHARDS}" for s in range(SHARDS)])
def test_every_crash_inside_a_group_commit_is_recovered(
    reference: list[str], tmp_path: Path, shard: int
) -> None:
    prefix = batch_prefix(reference)
    failures = []
    points = list(crash_points(prefix, shard, SHARDS))
    assert points
    for after in points:
        try:
            crash_and_recover(tmp_path / f"k{after}", after, reference)
        except Exception:  # every failing crash point is reported, not only the first
            failures.append(f"k={after} ({reference[after - 1]}):\n{traceback.format_exc(limit=-2)}")
    assert not failures, f"{len(failures)} of {len(points)} crash points failed:\n" + "\n".join(failures)


def crash_and_recover(base: Path, after: int, reference: list[str]) -> None:
    root, logs = new_batch(base)
    result = run_manager(root, crash_after=after, trace=base / "trace")
    assert result.returncode == CRASH_EXIT_STATUS, (result.returncode, result.stderr)
    assert normalized_trace(base / "trace", root) == reference[:after], "the run diverged before k"
    expire_heartbeats(attach(root))
    settle_and_check(root, logs)


def settle_and_check(root: Path, logs: dict[str, Path], deadline_seconds: float = 60.0) -> None:
    """Fresh managers until every job is terminal; then each succeeded once, on an intact chain."""
    end = time.monotonic() + deadline_seconds
    while True:
        workspace = attach(root, writable=False)
        kinds = {key: single_marker(workspace, key).kind for key in logs}
        if all(kind in TERMINAL_KINDS for kind in kinds.values()):
            break
        assert time.monotonic() < end, f"not settled: {kinds}"
        Manager(attach(root), RECOVERY).run()
    workspace = attach(root, writable=False)
    assert sorted(markers_by_job(workspace)) == sorted(logs)
    for key, exec_log in logs.items():
        marker = single_marker(workspace, key)
        assert marker.kind is Kind.SUCCEEDED, (key, marker.kind)
        frames = chain(workspace, marker)
        executions = read_executions(exec_log)
        check_reexecutions(frames, executions, requested=0)
        assert len(executions.attempts) == 1, executions.attempts
