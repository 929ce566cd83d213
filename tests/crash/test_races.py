"""Managers racing for the same work: the marker rename is the only arbiter, and it must be enough.

Two or four manager processes (two workers each) start together on 1,000 submitted one-step jobs. A
barrier makes the start simultaneous without sleeping on a guess: each manager attaches, publishes its
record, announces itself with a ready file and waits; the test creates the barrier file once every
manager has announced itself. Afterwards every job must have succeeded with exactly one marker and an
intact chain, and the runner's exclusive-create log must show each activation launched exactly once.

Recoverers race too: several managers start together on attempts a SIGKILLed manager abandoned while
their runners still ran, and each attempt must be taken over exactly once.

The loser of a claim looks for the job's current marker while the winner keeps moving it; the last test
pins the interleaving that once made such a loser report corruption and die.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job
from tests.crash._scenarios import (
    Marker,
    all_markers,
    chain,
    expire_heartbeats,
    job_document,
    kill_group,
    markers_by_job,
    read_executions,
    start_manager_process,
    wait_for,
    write_runner,
)

JOBS = 1000
PLACEMENTS = 10
RACE_SECONDS = 900


def submit_race(base: Path, jobs: int = JOBS, plan: str = "succeed") -> tuple[Path, Path, set[str]]:
    """A workspace with ``jobs`` one-step jobs over ``PLACEMENTS`` placements, sharing one stored runner."""
    exec_log = base / "exec-log"
    exec_log.mkdir()
    workspace = init(base / "ws", durable=False)
    stored = publish_runner(workspace, "race-runner", write_runner(base / "runner"))
    runner = {"backend": "path", **stored.reference()}
    specs = [
        JobSpec(job_document(exec_log, plan, runner=runner), f"race/{index % PLACEMENTS}")
        for index in range(jobs)
    ]
    keys = {result.job_key for result in submit_jobs(workspace, specs)}
    workspace.close()
    assert len(keys) == jobs
    return workspace.root, exec_log, keys


def run_together(root: Path, base: Path, managers: int) -> list[dict[str, object]]:
    """Start ``managers`` manager processes behind one barrier; return their summaries."""
    barrier = base / "barrier"
    ready = [base / f"ready.{index}" for index in range(managers)]
    processes: list[subprocess.Popen[str]] = []
    try:
        for marker in ready:
            processes.append(start_manager_process(root, workers=2, barrier=barrier, ready=marker))

        def all_ready() -> bool:
            for process in processes:
                assert process.poll() is None, process.communicate()
            return all(marker.exists() for marker in ready)

        wait_for(all_ready, "every manager to attach and wait at the barrier")
        barrier.touch()
        # A bound that only catches a hang: on a loaded two-core machine 1,000 jobs take two minutes.
        outputs = [process.communicate(timeout=RACE_SECONDS) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    for process, (_out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


@pytest.mark.parametrize("managers", [2, 4])
def test_racing_managers_launch_every_activation_exactly_once(tmp_path: Path, managers: int) -> None:
    root, exec_log, keys = submit_race(tmp_path)
    summaries = run_together(root, tmp_path, managers)

    workspace = attach(root, writable=False)
    by_job = markers_by_job(workspace)
    assert set(by_job) == keys
    assert [key for key, found in by_job.items() if len(found) != 1] == []
    kinds = Counter(found[0].kind for found in by_job.values())
    assert kinds == {Kind.SUCCEEDED: JOBS}, kinds

    executions = read_executions(exec_log)
    assert executions.duplicates == [] and executions.relaunches == []
    launched_activations: list[str] = []
    for [marker] in by_job.values():
        frames = chain(workspace, marker)
        assert [f["kind"] for f in reversed(frames)] == [
            "ready",
            "claimed",
            "running",
            "committing",
            "succeeded",
        ]
        claimed = frames[3]
        assert executions.attempts.get(claimed["activation_id"]) == [claimed["attempt_id"]], claimed
        launched_activations.append(claimed["activation_id"])
    assert sorted(launched_activations) == sorted(executions.attempts)
    assert sum(int(str(summary["launched"])) for summary in summaries) == JOBS, summaries
    assert {summary["exit"] for summary in summaries} == {"idle"}, summaries


ABANDONED = 40


@pytest.mark.parametrize("managers", [2, 4])
def test_racing_recoverers_take_over_each_abandoned_attempt_once(tmp_path: Path, managers: int) -> None:
    root, exec_log, keys = submit_race(tmp_path, ABANDONED, "block")
    first = start_manager_process(root, workers=ABANDONED)
    try:
        wait_for(lambda: read_executions(exec_log).total == ABANDONED, "every first attempt to block")
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate()
    workspace = attach(root)
    abandoned = {m.name.key: workspace.reader.read(str(m.name.ref)) for m in all_running(workspace)}
    assert len(abandoned) == ABANDONED
    expire_heartbeats(workspace)
    try:
        summaries = run_together(root, tmp_path, managers)  # the orphans still run: recoverers kill them
    finally:
        for frame in abandoned.values():
            kill_group(int(frame["process"]["pgid"]))

    by_job = markers_by_job(attach(root, writable=False))
    assert set(by_job) == keys and all(len(found) == 1 for found in by_job.values())
    executions = read_executions(exec_log)
    assert executions.duplicates == [] and len(executions.relaunches) == ABANDONED
    for [marker] in by_job.values():
        frames = list(reversed(chain(workspace, marker)))
        assert [f["kind"] for f in frames] == [
            "ready",
            "claimed",
            "running",
            "ready",
            "claimed",
            "running",
            "committing",
            "succeeded",
        ]
        assert frames[3]["attempt_reason"] == "lease_lost" and frames[3]["takeover"]["rule"] == "process_gone"
        assert frames[2]["attempt_id"] == abandoned[marker.name.key]["attempt_id"]
        assert sorted(executions.attempts[frames[1]["activation_id"]]) == sorted(
            [frames[1]["attempt_id"], frames[4]["attempt_id"]]
        )
    assert sum(int(str(summary["launched"])) for summary in summaries) == ABANDONED, summaries


class _Listing:
    """A directory listing already read in full, usable like the iterator ``os.scandir`` returns."""

    def __init__(self, entries: list[os.DirEntry[str]]) -> None:
        self._entries = entries

    def __enter__(self) -> _Listing:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        return iter(self._entries)


def test_a_claim_loser_probing_while_the_winner_launches_sees_the_winner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving the manager races produced: a probe lists claimed/, the winner renames to running/.

    Listing the kind directories one after another is not atomic, so the loser's probe saw the job in
    both and raised "2 markers, which is corruption", killing that manager. The loser must instead learn
    that it lost, and where the marker is now.
    """
    workspace = init(tmp_path / "ws", durable=False)
    [submitted] = submit_jobs(workspace, [JobSpec(minimal_job(), "race/0")])
    ready = move_marker(workspace, submitted.marker, Frame(Kind.READY, {}), Trigger.REGISTER).current
    assert ready is not None
    winner, loser = attach(workspace.root), attach(workspace.root)
    claimed = move_marker(winner, ready, Frame(Kind.CLAIMED, {"manager_id": "winner"}), Trigger.CLAIM).current
    assert claimed is not None
    launched: list[MarkerLocation] = []
    real_scandir = os.scandir

    def racing_scandir(path: str) -> _Listing:
        with real_scandir(path) as entries:
            listing = list(entries)
        if not launched and os.fspath(path) == str(claimed.path(workspace).parent):
            running = move_marker(winner, claimed, Frame(Kind.RUNNING, {}), Trigger.LAUNCH).current
            assert running is not None
            launched.append(running)
        return _Listing(listing)

    monkeypatch.setattr(os, "scandir", racing_scandir)
    result = move_marker(loser, ready, Frame(Kind.CLAIMED, {"manager_id": "loser"}), Trigger.CLAIM)
    monkeypatch.undo()

    [running] = launched
    assert result.won is False
    assert result.current == running
    assert [m.path for m in markers_by_job(workspace)[ready.job_key]] == [running.path(workspace)]


def all_running(workspace: Workspace) -> list[Marker]:
    return [marker for marker in all_markers(workspace) if marker.kind is Kind.RUNNING]
