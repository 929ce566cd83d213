"""A million-job workspace: submission, registration, the first claim, the reads and maintenance at scale.

Builds (or reuses, with ``--dir``) a non-durable workspace of N jobs (default 1,000,000) spread over
``--placements`` placements (default 1,000: ten projects of a hundred directories each, as a campaign
lays out its structures), submitted through the library (``submit_jobs``) in chunks, and then measures,
each figure against the goal of issue 17 item 5:

1. library submission, jobs/s (goal at least 5,000);
2. registration of every submitted job by one manager: ``httk workflow manager run --inline --idle``
   with a pool no job names, so that it registers the whole workspace and claims nothing, until no
   submitted marker is left; its wall time, jobs/s and peak RSS (the manager's memory with every job
   ready: goal at most 300 MB);
3. the first claim with every job ready: a fresh manager in a process of its own, ``start()`` until its
   first claim rename (goal at most 0.2 s), its first whole tick, and its peak RSS; one scheduling pass
   over ready (``MarkerStream.next_pass``: the first and the median of the next ones);
4. the read commands as an operator runs them (start-up included): ``workspace status`` (goal at most
   3 s), ``job list --limit 100`` (at most 0.3 s), ``job show`` and ``job why`` by UUID and by tag
   prefix, each of the last four against a bare ``find .httk-workflow/state -name PATTERN`` for the
   same job in the same round (goal at most 1.5 times it);
5. ``workspace fsck`` plus ``workspace gc`` as commands, in jobs/s (goal at least 20,000);
6. the footprint: inodes per job (every entry below the workspace), journal bytes per job and per frame.

Timed commands run ``--runs`` times after one first (colder) run; the median is reported. The ratio to
each goal is printed, never asserted. The build is the slow part (``--jobs 1000000`` takes minutes), so
keep it with ``--dir`` and run again; a kept workspace is rebuilt only when ``--jobs`` or
``--placements`` differ.

    ./dev bench scale [--jobs 1000000] [--placements 1000] [--dir DIR] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the first claim as throughput times it
from benchmarks.throughput import MINIMAL_RUNNER, load, time_first_claim
from benchmarks.throughput import job_document as throughput_job

GOAL_SUBMIT_RATE = 5_000.0
GOAL_FIRST_CLAIM = 0.2
GOAL_MANAGER_RSS_MB = 300.0
GOAL_STATUS = 3.0
GOAL_LIST = 0.3
GOAL_LOOKUP_VS_FIND = 1.5
GOAL_MAINTENANCE_RATE = 20_000.0

CHUNK = 20_000  # jobs per submit_jobs call: bounds the memory the build holds at once
BUILT = "scale-benchmark-built"
NO_POOL = "scale-benchmark-claims-nothing"
HTTK = str(Path(sys.executable).with_name("httk"))


def progress(message: str) -> None:
    print(f"[scale] {message}", file=sys.stderr, flush=True)


def tag(index: int) -> str:
    return f"scale-{index:07d}"


def placement(index: int, placements: int) -> str:
    """Ten projects, each of ``placements // 10`` directories, jobs dealt round-robin over all of them."""
    per_project = max(placements // 10, 1)
    slot = index % (per_project * 10)
    return f"project-{slot % 10}/{slot // 10:03d}"


def job_document(index: int, runner: dict[str, Any]) -> dict[str, Any]:
    """throughput.py's one-step job, tagged so that a tag prefix names exactly one job."""
    return {**throughput_job(index, runner), "tag": tag(index)}


# -- 1. the build ------------------------------------------------------------------------------------
def build(root: Path, jobs: int, placements: int) -> float | None:
    """Submit ``jobs`` jobs below ``root``; jobs/s, or None when a kept workspace of that shape is reused."""
    from httk.workflow.engine.core._workspace import init
    from httk.workflow.engine.publish._runners import publish_runner
    from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

    stamp = root / BUILT
    shape = f"{jobs} {placements}"
    if stamp.is_file() and stamp.read_text() == shape:
        progress(f"reusing the {jobs:,}-job workspace at {root}")
        return None
    if root.exists():
        shutil.rmtree(root)
    ws = init(root, durable=False)
    runner_file = root.parent / "succeed.sh"
    runner_file.write_text(MINIMAL_RUNNER)
    runner_file.chmod(0o755)
    runner = publish_runner(ws, "succeed.sh", runner_file).reference()
    started = time.perf_counter()
    for first in range(0, jobs, CHUNK):
        indices = range(first, min(first + CHUNK, jobs))
        submit_jobs(ws, (JobSpec(job_document(i, runner), placement(i, placements)) for i in indices))
        if (first // CHUNK) % 10 == 9:
            progress(f"  submitted {indices.stop:,} of {jobs:,}")
    seconds = time.perf_counter() - started
    ws.close()
    stamp.write_text(shape)
    return jobs / seconds


# -- 2. registration by one manager ------------------------------------------------------------------
@dataclass
class Registration:
    seconds: float
    rss_mb: float


def register_everything(root: Path) -> Registration | None:
    """One real manager registers every submitted job (None: nothing was left to register).

    The manager claims from a pool no job names and serves with ``--idle``: it registers, finds nothing
    to claim, and would otherwise go idle only after a whole cycle over the ready jobs. Its registration
    ends when no submitted marker is left, which is polled; its peak RSS is read then, and it is stopped.
    """
    from httk.workflow.engine.core._scan import walk_markers
    from httk.workflow.engine.core._states import Kind
    from httk.workflow.engine.core._workspace import attach

    ws = attach(root, writable=False)
    try:
        if not _any_marker(walk_markers(ws, Kind.SUBMITTED)):
            return None
        argv = [HTTK, "workflow", "manager", "run", str(root), "--inline", "--idle", "--pool", NO_POOL]
        started = time.perf_counter()
        manager = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while _any_marker(walk_markers(ws, Kind.SUBMITTED)):
                if manager.poll() is not None:
                    raise SystemExit(f"the registering manager exited with status {manager.returncode}")
                time.sleep(POLL_SECONDS)
            seconds = time.perf_counter() - started
            rss = _peak_rss_mb(manager.pid)
        finally:
            manager.terminate()
            manager.wait()
    finally:
        ws.close()
    return Registration(seconds, rss)


POLL_SECONDS = 0.5


def _any_marker(items: Iterator[object]) -> bool:
    return next(iter(items), None) is not None


def _peak_rss_mb(pid: int) -> float:
    """The peak resident set of a live process (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"/proc/{pid}/status has no VmHWM line")


# -- 3. the first claim and a scheduling pass ---------------------------------------------------------
def first_claim_child(root: Path) -> None:
    """In a process of its own: a fresh manager's ``start()`` and first ``tick()``; prints JSON."""
    figures = time_first_claim(root)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    claim = None if math.isnan(figures.claim) else figures.claim
    print(json.dumps({"claim": claim, "tick": figures.tick, "rss_mb": rss}))


@dataclass
class FirstClaim:
    claim: float | None
    tick: float
    rss_mb: float


def first_claim(root: Path) -> FirstClaim:
    done = subprocess.run(
        [sys.executable, "-P", __file__, "--first-claim-child", str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    figures = json.loads(done.stdout.splitlines()[-1])
    return FirstClaim(figures["claim"], figures["tick"], figures["rss_mb"])


def scheduling_passes(root: Path, runs: int) -> tuple[float, float, int]:
    """(first pass s, median of the next ``runs`` passes s, markers the first returned) over ready."""
    from httk.workflow.engine.core._scan import MarkerStream
    from httk.workflow.engine.core._states import Kind
    from httk.workflow.engine.core._workspace import attach

    ws = attach(root, writable=False)
    try:
        with MarkerStream(ws, Kind.READY) as stream:
            started = time.perf_counter()
            first = stream.next_pass()
            first_seconds = time.perf_counter() - started
            samples = []
            for _ in range(max(runs, 1) * 10):
                started = time.perf_counter()
                stream.next_pass()
                samples.append(time.perf_counter() - started)
    finally:
        ws.close()
    return first_seconds, statistics.median(samples), len(first.markers)


# -- 4. the read commands ----------------------------------------------------------------------------
def timed(argv: list[str], runs: int) -> tuple[float, float]:
    """(first, median of the next ``runs``) wall seconds of ``argv`` run to its end."""
    samples = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples.append(time.perf_counter() - started)
    return samples[0], statistics.median(samples[1:])


def a_job(root: Path, jobs: int, placements: int) -> tuple[str, str]:
    """(UUID, tag) of a job in the placement a sorted walk reaches last (a lookup that stops at its
    first match is then timed over nearly the whole tree), found the way ``find`` would."""
    slots = max(placements // 10, 1) * 10
    wanted = tag((jobs // 2) // slots * slots + slots - 1)
    found = subprocess.run(
        ["find", str(root / ".httk-workflow" / "state"), "-name", f"{wanted}--*"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not found:
        raise SystemExit(f"no marker of {wanted} below {root}/.httk-workflow/state")
    key = Path(found[0]).name.split(".", 1)[0]
    return key.split("--", 1)[1], wanted


def reads(root: Path, jobs: int, placements: int, runs: int) -> None:
    job_id, job_tag = a_job(root, jobs, placements)
    state = str(root / ".httk-workflow" / "state")
    find_id = ["find", state, "-name", f"*{job_id}*"]
    find_tag = ["find", state, "-name", f"{job_tag}*"]
    print(f"\n4. read commands ({runs} runs after a first; median; start-up included)")
    print(f"{'command':<44} {'first s':>8} {'median s':>9}  against")
    limits = (
        ("workspace status --json", ["workspace", "status", str(root), "--json"], GOAL_STATUS),
        ("job list --limit 100 --json", ["job", "list", str(root), "--limit", "100", "--json"], GOAL_LIST),
    )
    for label, words, goal in limits:
        first, median = timed([HTTK, *words], runs)
        verdict = "met" if median <= goal else "missed"
        against = f"goal {goal:g} s: {goal / median:.2f}x ({verdict})"
        print(f"httk {label:<39} {first:>8.3f} {median:>9.3f}  {against}")
    baselines = {"uuid": timed(find_id, runs)[1], "tag": timed(find_tag, runs)[1]}
    print(f"{'find state -name *UUID*':<44} {'':>8} {baselines['uuid']:>9.3f}")
    print(f"{'find state -name TAG*':<44} {'':>8} {baselines['tag']:>9.3f}")
    for command in ("show", "why"):
        for by, selector in (("uuid", job_id), ("tag", job_tag)):
            first, median = timed([HTTK, "job", command, str(root), selector, "--json"], runs)
            times_find = median / baselines[by]
            verdict = "met" if times_find <= GOAL_LOOKUP_VS_FIND else "missed"
            label = f"job {command} {'UUID' if by == 'uuid' else 'TAG'} --json"
            print(
                f"httk {label:<39} {first:>8.3f} {median:>9.3f}  {times_find:.2f}x find "
                f"(goal at most {GOAL_LOOKUP_VS_FIND:g}x: {verdict})"
            )


# -- 5. maintenance ----------------------------------------------------------------------------------
def maintenance(root: Path, jobs: int, runs: int) -> None:
    fsck = timed([HTTK, "workspace", "fsck", str(root), "--json"], runs)[1]
    gc = timed([HTTK, "workspace", "gc", str(root), "--json"], runs)[1]
    rate = jobs / (fsck + gc)
    verdict = "met" if rate >= GOAL_MAINTENANCE_RATE else "missed"
    print("\n5. maintenance as commands (median)")
    print(f"httk workspace fsck --json   {fsck:8.2f} s   {jobs / fsck:10,.0f} jobs/s")
    print(f"httk workspace gc --json     {gc:8.2f} s   {jobs / gc:10,.0f} jobs/s")
    print(
        f"fsck + gc                    {fsck + gc:8.2f} s   {rate:10,.0f} jobs/s "
        f"(goal at least {GOAL_MAINTENANCE_RATE:,.0f}: {rate / GOAL_MAINTENANCE_RATE:.2f}x, {verdict})"
    )


# -- 6. footprint ------------------------------------------------------------------------------------
def entries(root: Path) -> Iterator[os.DirEntry[str]]:
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as listing:
            for entry in listing:
                yield entry
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)


def footprint(root: Path, jobs: int) -> None:
    from httk.workflow.engine.core._journal import scan_segment

    inodes = 1 + sum(1 for _ in entries(root))
    journal = root / ".httk-workflow" / "journal"
    segments = [Path(entry.path) for entry in entries(journal) if entry.is_file(follow_symlinks=False)]
    journal_bytes = sum(path.stat().st_size for path in segments)
    frames = sum(1 for path in segments if path.suffix == ".hwj" for _ in scan_segment(path))
    print("\n6. footprint")
    print(f"inodes below the workspace   {inodes:,} ({inodes / jobs:.2f} per job)")
    print(
        f"journal                      {journal_bytes / 1e6:.1f} MB in {len(segments):,} files, "
        f"{frames:,} frames: {journal_bytes / jobs:.0f} bytes per job, "
        f"{journal_bytes / max(frames, 1):.0f} per frame"
    )


# -- main --------------------------------------------------------------------------------------------
def report_build(rate: float | None, registration: Registration | None, jobs: int) -> None:
    print("1. library submission, non-durable")
    if rate is None:
        print("(a kept workspace: not submitted in this run)")
    else:
        verdict = "met" if rate >= GOAL_SUBMIT_RATE else "missed"
        against = f"goal at least {GOAL_SUBMIT_RATE:,.0f}: {rate / GOAL_SUBMIT_RATE:.2f}x, {verdict}"
        print(f"{rate:,.0f} jobs/s ({against})")
    print("\n2. registration by one manager (manager run --inline --idle, a pool no job names)")
    if registration is None:
        print("(nothing was left to register: the kept workspace is registered already)")
        return
    verdict = "met" if registration.rss_mb <= GOAL_MANAGER_RSS_MB else "missed"
    print(
        f"{registration.seconds:.1f} s, {jobs / registration.seconds:,.0f} jobs/s, peak RSS "
        f"{registration.rss_mb:.0f} MB (goal at most {GOAL_MANAGER_RSS_MB:g} MB: {verdict})"
    )


def report_claim(claims: list[FirstClaim], passes: tuple[float, float, int]) -> None:
    timed_claims = [c.claim for c in claims if c.claim is not None]
    print(f"\n3. the first claim with every job ready ({len(claims)} fresh managers, median)")
    if timed_claims:
        claim = statistics.median(timed_claims)
        verdict = "met" if claim <= GOAL_FIRST_CLAIM else "missed"
        print(f"start() to the first claim   {claim:.3f} s (goal at most {GOAL_FIRST_CLAIM:g} s: {verdict})")
    else:
        print("start() to the first claim   none of the managers claimed")
    print(f"the first whole tick         {statistics.median(c.tick for c in claims):.3f} s")
    rss = max(c.rss_mb for c in claims)
    print(f"peak RSS of those managers   {rss:.0f} MB (goal at most {GOAL_MANAGER_RSS_MB:g} MB)")
    first, median, markers = passes
    print(f"one scheduling pass (ready)  first {first:.4f} s ({markers} markers), then {median:.4f} s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--placements", type=int, default=1_000)
    parser.add_argument("--dir", type=Path, default=None, help="build (or reuse) the workspace here")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--first-claim-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_claim_child is not None:
        first_claim_child(args.first_claim_child)
        return
    if args.jobs < 10 or args.placements < 10:
        parser.error("--jobs and --placements must be at least 10")
    with tempfile.TemporaryDirectory() as scratch:
        base = args.dir or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        root = base / f"scale-{args.jobs}"
        print(f"{os.cpu_count()} CPUs, {load()}; {args.jobs:,} jobs in {args.placements:,} placements")
        progress("building")
        rate = build(root, args.jobs, args.placements)
        progress("registering")
        registration = register_everything(root)
        report_build(rate, registration, args.jobs)
        progress("first claims")
        passes = scheduling_passes(root, args.runs)
        claims = [first_claim(root) for _ in range(args.runs)]
        report_claim(claims, passes)
        progress("read commands")
        reads(root, args.jobs, args.placements, args.runs)
        progress("maintenance")
        maintenance(root, args.jobs, args.runs)
        progress("footprint")
        footprint(root, args.jobs)
        print(f"\n{load()} at the end")


if __name__ == "__main__":
    main()
