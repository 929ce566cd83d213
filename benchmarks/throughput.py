"""End-to-end task-manager throughput, scheduling latency with many ready jobs, and bytes per marker.

Prints, for this machine:

1. for each runner (``--runners``: the minimal Bash runner, a hand-written one that parses its context
   with ``sed`` and calls ``date``, ``mkdir`` and ``mv``, and the Python SDK's no-op ``@step``) and each
   mode (``--modes``: non-durable, durable): jobs per second from manager start to its idle exit, for
   ``--jobs`` one-step jobs submitted beforehand (a quarter of them for the Python runner), 2 workers, in
   process (``Manager(path, ManagerConfig(workers=2)).run()``); the manager's CPU per job; the runner's
   own CPU per attempt measured alone in the same round, bare and behind the launch gate (attempts
   prepared exactly as a manager prepares them, run back to back from one shell); the machine's limit,
   cores / (runner + gate CPU); the fraction of it reached; and the goals of the issue as ratios, each
   the median over ``--repeat`` interleaved rounds of a ratio taken within one round. Then one
   ``httk workflow run WS --workers 2`` for comparison (``--no-cli`` skips it). The runners are
   confined (Landlock, where the kernel has it) as by default; the mode ``unconfined`` (non-durable,
   ``ManagerConfig(confine=False)``, interleaved in each round) gives confinement's cost as ratios of
   jobs/s and of the manager's CPU per job, and the unconfined manager's CPU per job;
2. with ``--ready`` ready jobs in one flat placement: the time a fresh manager needs from ``start()`` to
   its first claimed marker, and the time of one scheduling pass (``MarkerStream.next_pass`` on ready);
3. the on-disk bytes of an active (ready) marker: its directory entry, its blocks, and the journal frame
   it names;
4. with ``--profile``: where the manager's time goes (cProfile of one library run of each mode with the
   first runner): the phases of a tick, and the top functions by their own time; non-durable on the
   process's CPU clock (the manager's CPU per job is goal 1), durable on the wall clock (it waits for
   fsync).

Goals (issue 17): the manager's CPU per job at most 0.25 of the minimal runner's; end to end at least
75 % of the limit non-durable, for every runner; durable at least 0.8 of non-durable; the first claim
within 0.2 s at 100,000 ready jobs and of the same order as at 10,000; <= 500 bytes per active marker.

How the ready state is built (part 2): ``submit_jobs`` (non-durable), then every submitted marker, listed
by ``walk_markers`` before the first move, is registered with ``_launch.register`` on one
``ManagerState``: exactly the work a manager's submitted pass does, without a claim pass in between.
The page cache is warm when the fresh manager starts (the workspace was just built).

Wall times depend on what else the machine runs: the first line and the last show its load (and CPU and
I/O pressure where the kernel reports them). Ratios are taken within one round, never across rounds.

    ./dev bench throughput [--jobs 1000] [--repeat 3] [--runners minimal,sed,python]
                           [--modes non-durable,durable] [--alone 100] [--ready 10000,100000]
                           [--profile] [--no-cli] [--dir DIR]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import cProfile
import os
import pstats
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.core._jobs import read_frame
from httk.workflow.engine.core._journal import scan_segment
from httk.workflow.engine.core._scan import MarkerStream, walk_markers
from httk.workflow.engine.core._segments import (
    CHECKSUM_BYTES,
    LENGTH_BYTES,
    SEGMENT_HEADER,
    SEGMENT_SUFFIX,
    TRAILER_BYTES,
    segment_path,
)
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._transition import Move, TransitionResult
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init
from httk.workflow.engine.manager._attempt import PreparedAttempt, prepare_attempt
from httk.workflow.engine.manager._gate import GATE_SCRIPT
from httk.workflow.engine.manager._landlock import landlock
from httk.workflow.engine.manager._launch import claim_frame, plan, register
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig, ManagerState
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import RecordRef

if TYPE_CHECKING:
    from _typeshed import HasFileno

WORKERS = 2
PLACEMENT = "flat"
GOAL_FAST, GOAL_DURABLE = 150.0, 60.0
GOAL_FIRST_CLAIM = 0.2
GOAL_MARKER_BYTES = 500
FIRST_CLAIM_RUNS = 3
TIMED_PASSES = 50

# The minimal runner: reads its attempt's identity with bash builtins (no fork), then publishes succeed
# the protocol's way: a draft directory, outcome.json inside it, one rename onto outcome.ready
# (synchronized when durable).
MINIMAL_RUNNER = r"""#!/usr/bin/env bash
set -euo pipefail
job_id='' activation_id='' attempt_id=''
pattern='^ *"(job_id|activation_id|attempt_id)": "([^"]*)"'
while IFS= read -r line; do
    if [[ $line =~ $pattern ]]; then
        printf -v "${BASH_REMATCH[1]}" '%s' "${BASH_REMATCH[2]}"
    fi
done < "$HTTK_WORKFLOW_CONTEXT"
control=$HTTK_WORKFLOW_CONTROL_DIR
draft=$control/outcome.tmp.$$
mkdir "$draft"
outcome='{"format":"httk-workflow-outcome","format_version":1,"job_id":"%s",'
outcome+='"activation_id":"%s","attempt_id":"%s","action":"succeed"}\n'
# shellcheck disable=SC2059  # the format is ours
printf "$outcome" "$job_id" "$activation_id" "$attempt_id" > "$draft/outcome.json"
if [ "$HTTK_WORKFLOW_DURABLE" = 1 ]; then
    sync "$draft/outcome.json" "$draft"
fi
mv -T "$draft" "$control/outcome.ready"
if [ "$HTTK_WORKFLOW_DURABLE" = 1 ]; then
    sync "$control"
fi
"""

# What a hand-written shell runner does: sed for each member it needs, date for a timestamp, mkdir and mv
# as commands.
SED_RUNNER = r"""#!/usr/bin/env bash
set -euo pipefail
context=$HTTK_WORKFLOW_CONTEXT
job_id=$(sed -n 's/^  "job_id": "\(.*\)",$/\1/p' "$context")
activation_id=$(sed -n 's/^  "activation_id": "\(.*\)",$/\1/p' "$context")
attempt_id=$(sed -n 's/^  "attempt_id": "\(.*\)",$/\1/p' "$context")
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
control=$HTTK_WORKFLOW_CONTROL_DIR
draft=$control/outcome.tmp.$$
mkdir "$draft"
outcome='{"format":"httk-workflow-outcome","format_version":1,"job_id":"%s","activation_id":"%s",'
outcome+='"attempt_id":"%s","action":"succeed","message":"started %s"}\n'
# shellcheck disable=SC2059  # the format is ours
printf "$outcome" "$job_id" "$activation_id" "$attempt_id" "$started" > "$draft/outcome.json"
if [ "$HTTK_WORKFLOW_DURABLE" = 1 ]; then
    sync "$draft/outcome.json" "$draft"
fi
mv -T "$draft" "$control/outcome.ready"
if [ "$HTTK_WORKFLOW_DURABLE" = 1 ]; then
    sync "$control"
fi
"""

# The Python SDK's no-op step (the interpreter is this one, so it finds the SDK and its bytecode).
PYTHON_RUNNER = f"""#!{sys.executable}
from httk.workflow.sdk import Attempt, dispatch, step


@step
def start(a: Attempt) -> None:
    a.succeed()


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""

RUNNERS = {"minimal": MINIMAL_RUNNER, "sed": SED_RUNNER, "python": PYTHON_RUNNER}


def progress(message: str) -> None:
    print(f"[throughput] {message}", file=sys.stderr, flush=True)


def job_document(index: int, runner: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": str(uuid.uuid4()),
        "tag": f"bench-{index}",
        "runner": {**runner, "arguments": []},
        "workdir": {"mode": "persistent", "path": "run"},
        "data": {"mode": "none"},
        "initial_step": "start",
        "priority": 500,
        "claim": {"pool": "default", "required_capabilities": []},
        "inputs": {"index": index},
    }


def new_workspace(root: Path, runner_file: Path, jobs: int, *, durable: bool) -> Workspace:
    """A workspace holding the shared runner and ``jobs`` submitted (not yet registered) jobs."""
    ws = init(root, durable=durable)
    runner = publish_runner(ws, "succeed.sh", runner_file).reference()
    step = max(jobs // 10, 1)
    done = 0

    def report(_result: object) -> None:
        nonlocal done
        done += 1
        if done % step == 0:
            progress(f"  submitted {done:,} of {jobs:,}")

    submit_jobs(ws, (JobSpec(job_document(i, runner), PLACEMENT) for i in range(jobs)), progress=report)
    return ws


# -- 1. end to end -----------------------------------------------------------------------------------
@dataclass
class EndToEnd:
    label: str
    jobs: int
    seconds: float
    succeeded: int
    manager_cpu: float | None  # CPU seconds of the manager process (None: not separable, the CLI run)
    children_cpu: float  # CPU seconds of the gates, runners and their commands (for the CLI, everything)
    timeline: Timeline | None = None
    fsyncs: Fsyncs | None = None  # the manager's (the library runs)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


@dataclass
class Fsyncs:
    """The manager's fsyncs: in its own thread (each waited for in turn) and in the threads of a batch's
    concurrent flush (``_fsops.fsync_dirs``), which storage answers together."""

    own: int = 0
    concurrent: int = 0


@contextlib.contextmanager
def counting_fsyncs() -> Iterator[Fsyncs]:
    """Count every ``os.fsync`` of this process while inside (a count, not a timing: noise-free)."""
    counts, real, main = Fsyncs(), os.fsync, threading.main_thread()
    lock = threading.Lock()

    def fsync(fd: int | HasFileno) -> None:
        real(fd)
        with lock:
            if threading.current_thread() is main:
                counts.own += 1
            else:
                counts.concurrent += 1

    os.fsync = fsync
    try:
        yield counts
    finally:
        os.fsync = real


def bench_library(
    base: Path,
    runner_file: Path,
    jobs: int,
    *,
    durable: bool,
    confine: bool = True,
    profiler: cProfile.Profile | None = None,
) -> EndToEnd:
    label = ("durable" if durable else "non-durable") + ("" if confine else ", unconfined")
    progress(f"end to end, library, {label}: submitting {jobs:,} jobs")
    name = label.replace(", ", "-")
    ws = new_workspace(base / f"e2e-{name}-{uuid.uuid4().hex[:8]}", runner_file, jobs, durable=durable)
    root = ws.root
    ws.close()
    progress(f"end to end, library, {label}: running the manager")
    cpu, children = time.process_time(), children_cpu()
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    with counting_fsyncs() as fsyncs:
        summary: RunSummary = Manager(root, ManagerConfig(workers=WORKERS, confine=confine)).run()
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - start
    cpu, children = time.process_time() - cpu, children_cpu() - children
    name = f"library, {label}" + (" (profiled)" if profiler is not None else "")
    timeline = journal_timeline(root)
    shutil.rmtree(root, ignore_errors=True)
    succeeded = summary.census.kinds["succeeded"]
    return EndToEnd(name, jobs, seconds, succeeded, cpu, children, timeline, fsyncs)


@dataclass
class Timeline:
    """Median milliseconds between the ``created_at`` stamps of one attempt's frames (from the journal)."""

    launch: float  # claimed -> running: claim rename, prepare_attempt, spawn behind the gate, process.json
    attempt: float  # running -> committing: running rename, release, gate, runner, exit noticed, outcome read
    commit: float  # committing -> succeeded: committing rename, the decision
    refill: float  # succeeded -> the next claim: retiring the control dir, the rest of the tick, a ready pass


def journal_timeline(root: Path) -> Timeline | None:
    """Read every frame the run wrote back from its segments and time each attempt's transitions."""
    stamps: dict[tuple[str, str], float] = {}
    for path in sorted(attach(root).journal_dir.glob("*/*" + SEGMENT_SUFFIX)):
        for frame in scan_segment(path):
            record = frame.record or {}
            kind, job, created = record.get("kind"), record.get("job_id"), record.get("created_at")
            if isinstance(kind, str) and isinstance(job, str) and isinstance(created, str):
                stamps[(job, kind)] = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    jobs = {job for job, kind in stamps if kind == Kind.SUCCEEDED.value}
    if not jobs:
        return None

    def median_ms(start: str, end: str) -> float:
        return 1000 * statistics.median(stamps[(job, end)] - stamps[(job, start)] for job in jobs)

    claims = sorted(stamps[(job, Kind.CLAIMED.value)] for job in jobs)
    refills = []
    for job in jobs:
        done = stamps[(job, Kind.SUCCEEDED.value)]
        later = bisect.bisect_left(claims, done)
        if later < len(claims):
            refills.append(claims[later] - done)
    return Timeline(
        launch=median_ms(Kind.CLAIMED.value, Kind.RUNNING.value),
        attempt=median_ms(Kind.RUNNING.value, Kind.COMMITTING.value),
        commit=median_ms(Kind.COMMITTING.value, Kind.SUCCEEDED.value),
        refill=1000 * statistics.median(refills) if refills else float("nan"),
    )


def bench_cli(base: Path, runner_file: Path, jobs: int) -> EndToEnd:
    progress(f"end to end, CLI, non-durable: submitting {jobs:,} jobs")
    ws = new_workspace(base / "e2e-cli", runner_file, jobs, durable=False)
    ws.close()
    httk = str(Path(sys.executable).with_name("httk"))
    progress("end to end, CLI, non-durable: running httk workflow run")
    children = children_cpu()
    start = time.perf_counter()
    subprocess.run(
        [httk, "workflow", "run", str(ws.root), "--workers", str(WORKERS)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - start
    children = children_cpu() - children
    succeeded = sum(
        1 for item in walk_markers(attach(ws.root), Kind.SUCCEEDED) if isinstance(item, MarkerLocation)
    )
    label = "one CLI run, non-durable"
    return EndToEnd(label, jobs, seconds, succeeded, None, children, journal_timeline(ws.root))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Alone:
    """A runner's own cost, without any manager: CPU seconds per attempt bare, and behind the gate."""

    runner: float
    gated: float  # the launch gate's shell and the runner it executes

    @property
    def limit(self) -> float:
        """Jobs per second this machine's cores allow when the runner and its gate are all there is."""
        return cores() / self.gated


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def prepared_attempts(ws: Workspace, count: int) -> list[PreparedAttempt]:
    """``count`` attempts prepared exactly as a manager prepares them (context.json, staged runner, the
    attempt's environment), one per registered job, none of them claimed or started."""
    state = ManagerState(ws, ManagerConfig(), SYSTEM_CLOCK)
    prepared = []
    for marker in [m for m in walk_markers(ws, Kind.SUBMITTED) if isinstance(m, MarkerLocation)][:count]:
        register(state, marker)
        ready = next(
            m
            for m in walk_markers(ws, Kind.READY)
            if isinstance(m, MarkerLocation) and m.job_id == marker.job_id
        )
        job = state.jobs.get(ready)
        frame = read_frame(ws, ready)
        assert frame is not None
        claimed = claim_frame(state, frame, job)
        prepared.append(prepare_attempt(plan(state, ready, claimed, job), bash_apis={}, environ=os.environ))
    return prepared


def loop_script(attempts: list[PreparedAttempt], *, gated: bool) -> str:
    """One shell line per attempt: its environment as prefix assignments, then the runner (or the gate
    with the release byte on its standard input)."""
    lines = []
    for attempt in attempts:
        assignments = " ".join(f"{name}={shlex.quote(value)}" for name, value in attempt.env.items())
        argv = " ".join(shlex.quote(part) for part in attempt.argv)
        workdir = shlex.quote(str(attempt.workdir))
        if gated:
            gate = f"/bin/sh -c {shlex.quote(GATE_SCRIPT)} httk-gate {workdir}"
            lines.append(f"{assignments} {gate} {argv} <<< R")
        else:
            lines.append(f"cd {workdir}\n{assignments} {argv}")
    return "set -e\n" + "\n".join(lines) + "\n"


def time_alone(base: Path, runner_file: Path, *, durable: bool, count: int) -> Alone:
    """CPU per attempt of the runner alone and behind its gate, each over ``count`` prepared attempts run
    back to back from one shell (whose own share, a fork per line, is in both)."""
    ws = new_workspace(base / f"alone-{uuid.uuid4().hex[:8]}", runner_file, 2 * count, durable=durable)
    attempts = prepared_attempts(ws, 2 * count)
    cost = {}
    for gated, batch in ((False, attempts[:count]), (True, attempts[count:])):
        script = base / f"loop-{uuid.uuid4().hex[:8]}.sh"
        script.write_text(loop_script(batch, gated=gated))
        before = children_cpu()
        subprocess.run(["bash", str(script)], check=True, stdout=subprocess.DEVNULL)
        cost[gated] = (children_cpu() - before) / count
    ws.close()
    shutil.rmtree(ws.root, ignore_errors=True)
    return Alone(cost[False], cost[True])


# -- 2. many ready jobs ------------------------------------------------------------------------------
def build_ready(base: Path, runner_file: Path, count: int) -> Workspace:
    """``count`` ready jobs in one flat placement (see the module docstring for how)."""
    progress(f"ready {count:,}: submitting")
    start = time.perf_counter()
    ws = new_workspace(base / f"ready-{count}", runner_file, count, durable=False)
    progress(f"ready {count:,}: submitted in {time.perf_counter() - start:.1f} s; registering")
    start = time.perf_counter()
    state = ManagerState(ws, ManagerConfig(), SYSTEM_CLOCK)
    submitted = [m for m in walk_markers(ws, Kind.SUBMITTED) if isinstance(m, MarkerLocation)]
    step = max(count // 10, 1)
    for done, marker in enumerate(submitted, 1):
        register(state, marker)
        if done % step == 0:
            progress(f"  registered {done:,} of {count:,}")
    progress(f"ready {count:,}: registered in {time.perf_counter() - start:.1f} s")
    ws.close()
    return ws


@dataclass
class FirstClaim:
    claim: float  # start() until the first claimed marker exists
    tick: float  # start() plus the whole first tick (which also launches the claimed attempts)


def time_first_claim(root: Path) -> FirstClaim:
    """A fresh manager: ``start()`` and one ``tick()``, noting when its first claim rename completed."""
    manager = Manager(root, ManagerConfig(workers=WORKERS))
    state = manager.state
    move_all = state.move_all
    claims: list[float] = []

    def timed_moves(moves: Sequence[Move], **options: Any) -> list[TransitionResult]:
        results = move_all(moves, **options)  # claims are group commits: the whole batch's renames
        if any(frame.kind is Kind.CLAIMED for _marker, frame, _trigger in moves):
            claims.append(time.perf_counter())
        return results

    state.move_all = timed_moves  # type: ignore[method-assign]
    start = time.perf_counter()
    manager.start()
    manager.tick()
    tick = time.perf_counter() - start
    for live in manager.live_attempts():
        live.process.wait()
    for stream in manager._streams.values():  # a manager closes its streams only at the end of run()
        stream.close()
    manager.workspace.close()
    claim = (claims[0] - start) if claims else float("nan")
    return FirstClaim(claim, tick)


@dataclass
class PassTimes:
    first: float  # the first pass of a fresh stream (opens the listings)
    median: float  # the median of the next TIMED_PASSES passes
    markers: int  # markers the first pass returned
    cycle: float  # one whole cycle: every ready marker discovered once
    cycle_passes: int


def time_passes(ws: Workspace) -> PassTimes:
    with MarkerStream(ws, Kind.READY) as stream:
        start = time.perf_counter()
        first = stream.next_pass()
        first_seconds = time.perf_counter() - start
        samples = []
        for _ in range(TIMED_PASSES):
            start = time.perf_counter()
            stream.next_pass()
            samples.append(time.perf_counter() - start)
    with MarkerStream(ws, Kind.READY) as stream:
        start = time.perf_counter()
        passes = 1
        while not stream.next_pass().exhausted_cycle:
            passes += 1
        cycle = time.perf_counter() - start
    return PassTimes(first_seconds, statistics.median(samples), len(first.markers), cycle, passes)


# -- 3. bytes per marker -----------------------------------------------------------------------------
def print_footprint(ws: Workspace) -> None:
    """Bytes of the ready markers: names, directory entries, blocks, and the frames they name."""
    names: list[int] = []
    blocks_max = 0
    refs: list[RecordRef] = []
    for item in walk_markers(ws, Kind.READY):
        if isinstance(item, MarkerLocation) and item.name.ref is not None:
            names.append(len(str(item.name).encode()))
            blocks_max = max(blocks_max, os.lstat(item.path(ws)).st_blocks)
            refs.append(item.name.ref)
    frames, disagreeing = frame_sizes(ws, refs)
    dirent = statistics.fmean((8 + n + 3) // 4 * 4 for n in names)  # ext4: 8-byte header, 4-aligned
    directory = os.stat(ws.marker_dir(Kind.READY, PLACEMENT)).st_size
    frame = statistics.fmean(frames)
    counted = dirent + blocks_max * 512
    print(f"\n3. bytes per active marker ({len(names):,} ready markers)")
    print(f"basename bytes, mean / max:                        {statistics.fmean(names):.1f} / {max(names)}")
    print(f"ext4 directory entry (8 + name, 4-aligned), mean:  {dirent:.1f}")
    print(f"st_blocks of the marker files, max:                {blocks_max} (empty files)")
    print(f"placement directory st_size / markers:             {directory / len(names):.1f}")
    print(
        f"journal frame each names, mean / max:              {frame:.1f} / {max(frames)} "
        f"({len(frames):,} measured in segments, {disagreeing} disagree with the reference)"
    )
    print(
        f"counted: directory entry + data blocks = {counted:.1f} bytes per active marker "
        f"({ratio(counted, GOAL_MARKER_BYTES, lower_is_better=True)}); plus one inode, which the filesystem "
        "allocates per file whatever its size"
    )
    print(
        "why: a marker is an empty file whose name is its whole content, so what it occupies is its "
        "directory entry; the frame it names is journal history that stays whether or not the marker "
        f"is active; with it, {counted + frame:.0f} bytes per active marker"
    )


def frame_sizes(ws: Workspace, refs: list[RecordRef]) -> tuple[list[int], int]:
    """Each referenced frame's size from its own length prefix in the segment, and how many disagree.

    A frame is the 8-byte length, the payload, the 32-byte checksum and the 8-byte trailer; a segment
    whose header is wrong counts every frame it holds as disagreeing.
    """
    sizes: list[int] = []
    disagreeing = 0
    handles: dict[tuple[str, int], tuple[int, bool]] = {}
    try:
        for ref in refs:
            key = (ref.writer, ref.segment)
            if key not in handles:
                fd = os.open(segment_path(ws.journal_dir, ref.writer, ref.segment), os.O_RDONLY)
                handles[key] = (fd, os.pread(fd, len(SEGMENT_HEADER), 0) == SEGMENT_HEADER)
            fd, header_ok = handles[key]
            length = int.from_bytes(os.pread(fd, LENGTH_BYTES, ref.offset), "big")
            size = LENGTH_BYTES + length + CHECKSUM_BYTES + TRAILER_BYTES
            sizes.append(size)
            disagreeing += size != ref.frame_size or not header_ok
    finally:
        for fd, _ in handles.values():
            os.close(fd)
    return sizes, disagreeing


# -- profile ---------------------------------------------------------------------------------------
# (label, module file suffix, function, caller or ""): cumulative seconds; an indented row is inside the
# row above it, and the transition rows at the end cut across the others.
PROFILE_ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("whole run (Manager.run)", "_manager.py", "run", ""),
    ("  tick", "_manager.py", "tick", ""),
    ("    reap", "_manager.py", "_reap", ""),
    ("      GatedProcess.poll", "_gate.py", "poll", ""),
    ("      finish_attempt (commit an outcome)", "_commit.py", "finish_attempt", ""),
    ("        read_outcome", "_outcome.py", "read_outcome", ""),
    ("        retire_attempt_control", "_commit.py", "retire_attempt_control", ""),
    ("    passes: committing, claimed, running, submitted", "_manager.py", "_pass", ""),
    ("      MarkerStream.next_pass", "_scan.py", "next_pass", "_pass"),
    ("      register", "_launch.py", "register", ""),
    ("    claim pass (ready)", "_manager.py", "_claim_pass", ""),
    ("      MarkerStream.next_pass", "_scan.py", "next_pass", "_claim_pass"),
    ("      claimable (job cache)", "_launch.py", "claimable", ""),
    ("      claim_ready (claim and launch)", "_launch.py", "claim_ready", ""),
    ("        launch", "_launch.py", "launch", ""),
    ("          prepare_attempt", "_attempt.py", "prepare_attempt", ""),
    ("          confine (the Landlock ruleset)", "_confine.py", "confine", ""),
    ("            the confined start's thread (Confinement.within)", "_landlock.py", "within", ""),
    ("          spawn_gated", "_gate.py", "spawn_gated", ""),
    ("            posix_spawn", "~", "<built-in method posix.posix_spawn>", ""),
    ("            process identity (/proc)", "_liveness.py", "identity_of", ""),
    ("            opening the logs (_open_log)", "_gate.py", "_open_log", ""),
    ("          write_process_file", "_liveness.py", "write_process_file", ""),
    ("          release (gate byte)", "_gate.py", "release", ""),
    ("  polling sleeps (clock.sleep)", "_clock.py", "sleep", ""),
    ("  census at exit", "_state.py", "take_census", ""),
    ("transitions: move_marker", "_transition.py", "move_marker", ""),
    ("  journal append", "_journal.py", "append", ""),
    ("  marker rename (verified_rename)", "_transition.py", "verified_rename", ""),
    ("frame reads (read_frame)", "_jobs.py", "read_frame", ""),
    ("marker name parsing (MarkerName.parse)", "_markers.py", "parse", ""),
    ("fsync of files and directories", "~", "<built-in method posix.fsync>", ""),
    ("  of journal segments (append)", "~", "<built-in method posix.fsync>", "append"),
    ("  of new files (create_file)", "~", "<built-in method posix.fsync>", "create_file"),
    ("  of directories (fsync_dir)", "~", "<built-in method posix.fsync>", "fsync_dir"),
    ("    after a marker or file rename", "_fsops.py", "fsync_dir", "rename"),
    ("    after an atomic write (context, process.json)", "_fsops.py", "fsync_dir", "write_file_atomic"),
    ("    after a mkdir (control directory)", "_fsops.py", "fsync_dir", "make_dir"),
    ("    of a batch (fsync_dirs: renames, a launch's owed)", "_fsops.py", "fsync_dirs", ""),
    ("rmdir (removing control directories)", "~", "<built-in method posix.rmdir>", ""),
)

_Entry = tuple[int, int, float, float, dict[tuple[str, int, str], tuple[int, int, float, float]]]


def print_profile(profiler: cProfile.Profile, row: EndToEnd, clock: str) -> None:
    """The phases and top functions in seconds of ``clock`` ("CPU": shares of the manager's CPU)."""
    table: dict[tuple[str, int, str], _Entry] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    jobs = row.jobs
    total = row.seconds if clock == "wall" else (row.manager_cpu or row.seconds)
    print(
        f"\nprofile of the {row.label} run ({jobs} jobs, {row.seconds:.2f} s wall, "
        f"{row.manager_cpu or 0:.2f} s manager CPU with cProfile on; seconds and shares of the {clock} clock)"
    )
    print(f"{'where (cumulative)':<56} {'calls':>8} {'s':>7} {'ms/job':>7} {'share':>6}")
    for label, suffix, function, caller in PROFILE_ROWS:
        calls, seconds = _lookup(table, suffix, function, caller)
        if calls:
            print(
                f"{label:<56} {calls:>8} {seconds:>7.2f} {seconds / jobs * 1000:>7.2f} "
                f"{seconds / total:>6.0%}"
            )
    print("top functions by own time:")
    ranked = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:15]
    for (filename, line, function), (_cc, calls, own, _cum, _callers) in ranked:
        where = function if filename == "~" else f"{Path(filename).name}:{line}({function})"
        print(f"  {where:<62} {calls:>8} {own:>7.2f} s")


def _lookup(
    table: dict[tuple[str, int, str], _Entry], suffix: str, function: str, caller: str
) -> tuple[int, float]:
    calls, seconds = 0, 0.0
    for (filename, _line, name), (_cc, count, _own, cumulative, callers) in table.items():
        if name != function or not filename.endswith(suffix):
            continue
        if not caller:
            calls, seconds = calls + count, seconds + cumulative
            continue
        for (_file, _l, caller_name), (_ccc, caller_count, _t, caller_cumulative) in callers.items():
            if caller_name == caller:
                calls, seconds = calls + caller_count, seconds + caller_cumulative
    return calls, seconds


# -- main --------------------------------------------------------------------------------------------
def load() -> str:
    """The machine's load average and, where the kernel reports it, CPU and I/O pressure (other work)."""
    one, five, fifteen = os.getloadavg()
    text = f"load average {one:.2f} {five:.2f} {fifteen:.2f}"
    for resource_name in ("cpu", "io"):
        try:
            line = Path(f"/proc/pressure/{resource_name}").read_text().splitlines()[0]
        except (OSError, IndexError):
            continue
        fields = dict(field.split("=") for field in line.split()[1:])
        text += f", {resource_name} pressure {fields.get('avg60', '?')}%"
    return text


def ratio(value: float, goal: float, *, lower_is_better: bool = False) -> str:
    if lower_is_better:
        return f"{goal / value:.2f}x of goal ({'met' if value <= goal else 'missed'})"
    return f"{value / goal:.2f}x of goal ({'met' if value >= goal else 'missed'})"


GOAL_MANAGER_SHARE = 0.25  # manager CPU per job / the minimal runner's own CPU, at most
GOAL_FRACTION = 0.75  # end to end / the machine's limit with that runner, non-durable, at least
GOAL_DURABLE_SHARE = 0.8  # durable / non-durable end to end, at least


@dataclass
class Round:
    """One runner in one mode, measured once: end to end, and alone right after."""

    run: EndToEnd
    alone: Alone

    @property
    def manager_share(self) -> float:
        """Manager CPU per job over the runner's own CPU per attempt."""
        return (self.run.manager_cpu or 0.0) / self.run.jobs / self.alone.runner

    @property
    def fraction(self) -> float:
        return self.run.rate / self.alone.limit


def run_end_to_end(base: Path, runner_files: dict[str, Path], args: argparse.Namespace) -> None:
    """Every selected runner in every selected mode, ``--repeat`` interleaved rounds; medians of ratios
    taken within each round (machine load changes between rounds, not within one)."""
    modes = [mode == "durable" for mode in args.modes if mode != "unconfined"]
    rounds: dict[tuple[str, bool], list[Round]] = {}
    unconfined: dict[str, list[EndToEnd]] = {}  # the non-durable run without runner confinement
    for index in range(max(args.repeat, 1)):
        for name, runner_file in runner_files.items():
            for durable in modes:
                progress(f"round {index + 1}: {name} runner, {'durable' if durable else 'non-durable'}")
                jobs = args.jobs if name != "python" else max(args.jobs // 4, 1)
                run = bench_library(base, runner_file, jobs, durable=durable)
                alone = time_alone(base, runner_file, durable=durable, count=args.alone)
                rounds.setdefault((name, durable), []).append(Round(run, alone))
            if "unconfined" in args.modes:
                progress(f"round {index + 1}: {name} runner, non-durable, unconfined")
                jobs = args.jobs if name != "python" else max(args.jobs // 4, 1)
                run = bench_library(base, runner_file, jobs, durable=False, confine=False)
                unconfined.setdefault(name, []).append(run)
    print(
        f"\n1. end to end: one-step jobs, {WORKERS} workers, start to idle exit, {cores()} cores; "
        f"medians of {max(args.repeat, 1)} rounds"
    )
    print(
        f"{'runner':<8} {'mode':<11} {'jobs':>5} {'jobs/s':>7} {'manager':>8} {'runner':>7} {'+gate':>7} "
        f"{'mgr/run':>7} {'limit/s':>8} {'fraction':>8} {'ok':>4}"
    )
    for (name, durable), done in rounds.items():
        median = statistics.median
        print(
            f"{name:<8} {'durable' if durable else 'non-durable':<11} {done[0].run.jobs:>5} "
            f"{median(r.run.rate for r in done):>7.1f} "
            f"{median((r.run.manager_cpu or 0) / r.run.jobs for r in done) * 1000:>8.2f} "
            f"{median(r.alone.runner for r in done) * 1000:>7.2f} "
            f"{median(r.alone.gated for r in done) * 1000:>7.2f} "
            f"{median(r.manager_share for r in done):>7.2f} {median(r.alone.limit for r in done):>8.1f} "
            f"{median(r.fraction for r in done):>8.2f} "
            f"{median(r.run.succeeded / r.run.jobs for r in done):>4.0%}"
        )
    for name, runs in unconfined.items():
        confined = [r.run for r in rounds.get((name, False), [])]
        if confined:
            pairs = list(zip(confined, runs, strict=True))
            ratio = statistics.median(c.rate / u.rate for c, u in pairs)
            cpu = statistics.median(_cpu_ms(u) for _, u in pairs)
            share = statistics.median(_cpu_ms(c) / _cpu_ms(u) for c, u in pairs)
            print(
                f"runner confinement ({confinement_state()}), {name} runner, non-durable: confined / "
                f"unconfined jobs/s {ratio:.2f}; launch {_launch_ms(confined[-1])} ms vs "
                f"{_launch_ms(runs[-1])} ms median (claimed -> running, last round); manager CPU per job "
                f"unconfined {cpu:.2f} ms, confined / unconfined {share:.2f}"
            )
    print(
        "(manager, runner, +gate: CPU ms per job; runner and +gate measured alone in the same round, the\n"
        " runner bare and behind the launch gate; limit: cores / runner+gate; fraction: jobs/s / limit;\n"
        " mgr/run: the manager's CPU per job / the runner's own; ok: share of jobs that succeeded)"
    )
    print_goals(rounds)
    for (name, durable), done in rounds.items():
        timeline, fsyncs = done[-1].run.timeline, done[-1].run.fsyncs
        if timeline is not None:
            t = timeline
            print(
                f"  {name} {'durable' if durable else 'non-durable'} timeline (ms, last round): launch "
                f"{t.launch:.2f}, attempt {t.attempt:.2f}, commit {t.commit:.2f}, refill {t.refill:.2f}"
            )
        if durable and fsyncs is not None:
            jobs = done[-1].run.jobs
            print(
                f"  {name} durable: the manager's fsyncs per job {fsyncs.own / jobs:.2f} in its own thread, "
                f"{fsyncs.concurrent / jobs:.2f} in batches' concurrent flushes (last round)"
            )


def print_goals(rounds: dict[tuple[str, bool], list[Round]]) -> None:
    median = statistics.median
    minimal = rounds.get(("minimal", False))
    if minimal:
        share = median(r.manager_share for r in minimal)
        print(
            f"goal 1, manager CPU / minimal runner CPU <= {GOAL_MANAGER_SHARE}: {share:.2f} "
            f"({'met' if share <= GOAL_MANAGER_SHARE else 'missed'})"
        )
    for name in ("minimal", "sed", "python"):
        done = rounds.get((name, False))
        if done:
            fraction = median(r.fraction for r in done)
            print(
                f"goal {4 if name == 'python' else 2}, {name} runner end to end / limit >= {GOAL_FRACTION}: "
                f"{fraction:.2f} ({'met' if fraction >= GOAL_FRACTION else 'missed'})"
            )
    for name in ("minimal", "sed", "python"):
        fast, durable = rounds.get((name, False)), rounds.get((name, True))
        if fast and durable:
            share = median(d.run.rate / f.run.rate for f, d in zip(fast, durable, strict=True))
            print(
                f"goal 3, {name} runner durable / non-durable >= {GOAL_DURABLE_SHARE}: {share:.2f} "
                f"({'met' if share >= GOAL_DURABLE_SHARE else 'missed'})"
            )


def confinement_state() -> str:
    kernel = landlock()
    return f"Landlock ABI {kernel.abi}" if kernel.abi is not None else f"unavailable: {kernel.reason}"


def _cpu_ms(row: EndToEnd) -> float:
    return (row.manager_cpu or 0.0) / row.jobs * 1000


def _launch_ms(row: EndToEnd) -> str:
    return "-" if row.timeline is None else f"{row.timeline.launch:.2f}"


def run_ready(base: Path, runner_file: Path, sizes: list[int]) -> Workspace | None:
    results: list[tuple[int, list[FirstClaim], PassTimes]] = []
    largest: Workspace | None = None
    for count in sizes:
        ws = build_ready(base, runner_file, count)
        progress(f"ready {count:,}: timing the scheduling pass and the first claim")
        passes = time_passes(ws)
        claims = [time_first_claim(ws.root) for _ in range(FIRST_CLAIM_RUNS)]
        results.append((count, claims, passes))
        largest = ws
    if not results:
        return None
    print(f"\n2. scheduling with many ready jobs in one flat placement ({WORKERS} workers, warm page cache)")
    print(
        f"{'ready':>8} {'1st claim ms':>12} {'1st tick ms':>11} {'pass ms (1st)':>13} "
        f"{'pass ms (med)':>13} {'markers':>7} {'cycle s':>7} {'passes':>6}"
    )
    for count, claims, passes in results:
        claim = statistics.median(c.claim for c in claims)
        tick = statistics.median(c.tick for c in claims)
        print(
            f"{count:>8} {claim * 1000:>12.1f} {tick * 1000:>11.1f} {passes.first * 1000:>13.2f} "
            f"{passes.median * 1000:>13.2f} {passes.markers:>7} {passes.cycle:>7.2f} {passes.cycle_passes:>6}"
        )
    print(
        f"(1st claim: median of {FIRST_CLAIM_RUNS} fresh managers, start() until the first claimed marker; "
        "1st tick adds launching the claimed attempts)"
    )
    top_count, top_claims, _ = results[-1]
    top = statistics.median(c.claim for c in top_claims)
    print(
        f"first claim at {top_count:,} vs goal {GOAL_FIRST_CLAIM * 1000:.0f} ms:  "
        f"{ratio(top, GOAL_FIRST_CLAIM, lower_is_better=True)}"
    )
    if len(results) > 1:
        low = statistics.median(c.claim for c in results[0][1])
        print(f"first claim at {top_count:,} / at {results[0][0]:,}:      {top / low:.2f}")
    return largest


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument(
        "--ready",
        type=lambda text: [int(part) for part in text.split(",") if part],
        default=[10_000, 100_000],
        help="comma-separated ready-job counts (default 10000,100000; empty to skip)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to build the workspaces (a tmp dir)")
    parser.add_argument("--profile", action="store_true", help="also profile a library run of each mode")
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI run")
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds of the end-to-end cases (ratios: the median)"
    )
    parser.add_argument(
        "--runners",
        type=lambda text: [part for part in text.split(",") if part],
        default=list(RUNNERS),
        help=f"comma-separated runners of part 1 (default {','.join(RUNNERS)}; the python runner gets a "
        "quarter of --jobs)",
    )
    parser.add_argument(
        "--modes",
        type=lambda text: [
            part for part in text.split(",") if part in ("non-durable", "durable", "unconfined")
        ],
        default=["non-durable", "durable", "unconfined"],
        help="comma-separated modes of part 1 (default non-durable,durable,unconfined)",
    )
    parser.add_argument("--alone", type=int, default=100, help="attempts timed alone per runner and round")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="httk-bench-throughput-", dir=args.dir))
    try:
        print(f"throughput benchmark in {base} ({cores()} cores, {load()})")
        runner_files = {}
        for name in args.runners:
            runner_files[name] = base / f"{name}.run"
            runner_files[name].write_text(RUNNERS[name])
            runner_files[name].chmod(0o755)
        first = next(iter(runner_files.values()))
        if args.jobs > 0:
            run_end_to_end(base, runner_files, args)
            if not args.no_cli:
                row = bench_cli(base, first, args.jobs)
                print(
                    f"one CLI run (httk workflow run), non-durable, {args.runners[0]} runner: "
                    f"{row.rate:.1f} jobs/s"
                )
        largest = run_ready(base, first, args.ready)
        if largest is not None:
            print_footprint(largest)
        if args.profile and args.jobs > 0:
            profile_runs(base, first, args.jobs, args.modes)
        print(f"\nfinished ({load()})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def profile_runs(base: Path, runner_file: Path, jobs: int, modes: list[str]) -> None:
    """Non-durable on the process's CPU clock (goal 1 is CPU per job; the manager's threads, the
    confined launch's, count too), durable on the wall clock (goal 3 is jobs/s, and a durable manager
    mostly waits for fsync)."""
    for durable in (mode == "durable" for mode in modes if mode != "unconfined"):
        clock = time.perf_counter if durable else time.process_time
        profiler = cProfile.Profile(clock)
        row = bench_library(base / "profiled", runner_file, jobs, durable=durable, profiler=profiler)
        print_profile(profiler, row, "wall" if durable else "CPU")


if __name__ == "__main__":
    main()
