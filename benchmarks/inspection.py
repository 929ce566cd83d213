"""The read and maintenance commands on a large workspace: status, list, show, log, fsck and gc.

Builds (or reuses, with ``--dir``) a non-durable workspace of N jobs (default 100,000) spread over 400
placements and over the state kinds a real campaign shows — 10 % submitted, 20 % ready, 2 % running,
5 % failed, 3 % paused, 60 % succeeded — by submitting with ``submit_jobs`` and moving the markers with
``move_marker`` (each move a real journal frame and verified rename). Then prints, for each read, the
median wall time in-process and as a CLI subprocess (what an operator waits for, start-up included),
against the goal "status within 2 s" for 100,000 jobs; then fsck and gc over every job in jobs per
second, against the goal "fsck plus gc at 10,000 jobs/s or more".

    ./dev bench inspection [--jobs 100000] [--dir DIR] [--runs 5]

A workspace built into ``--dir`` is kept and reused by later runs with the same ``--jobs``. The page
cache is warm after the first run of each command; the "first" column is the first, colder run.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import Workspace, attach, init
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.maintenance._gc import collect_garbage
from httk.workflow.engine.ops._history import job_history
from httk.workflow.engine.ops._inspect import list_jobs, workspace_status
from httk.workflow.engine.ops._select import select_job
from httk.workflow.engine.ops._show import show_job
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

GOAL_SECONDS = 2.0
RUNNER = {"source": "workspace", "path": "relax.py", "sha256": "a" * 64, "arguments": []}
DONE = "inspect-benchmark-built"

# (share in percent, the moves that take a submitted job there)
REGISTER = (Kind.READY, Trigger.REGISTER)
LAUNCHED = [REGISTER, (Kind.CLAIMED, Trigger.CLAIM), (Kind.RUNNING, Trigger.LAUNCH)]
COMMITTED = [*LAUNCHED, (Kind.COMMITTING, Trigger.OUTCOME)]
SPREAD: list[tuple[int, list[tuple[Kind, Trigger]]]] = [
    (10, []),
    (20, [REGISTER]),
    (2, LAUNCHED),
    (5, [*COMMITTED, (Kind.FAILED, Trigger.COMMIT)]),
    (3, [REGISTER, (Kind.PAUSED, Trigger.PAUSE)]),
    (60, [*COMMITTED, (Kind.SUCCEEDED, Trigger.COMMIT)]),
]


def job_document(index: int) -> dict[str, Any]:
    return {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": str(uuid.uuid4()),
        "tag": f"bench-{index}",
        "runner": RUNNER,
        "workdir": {"mode": "persistent", "path": "run"},
        "data": {"mode": "none"},
        "initial_step": "start",
        "priority": 500,
        "claim": {"pool": "default", "required_capabilities": []},
    }


def moves_for(index: int) -> list[tuple[Kind, Trigger]]:
    slot = index % 100
    for share, moves in SPREAD:
        if slot < share:
            return moves
        slot -= share
    raise AssertionError("the spread sums to 100")


def build(root: Path, jobs: int) -> Workspace:
    done = root / DONE
    if done.is_file() and done.read_text() == str(jobs):
        print(f"reusing the {jobs}-job workspace at {root}")
        return attach(root, writable=False)
    ws = init(root, durable=False)
    start = time.perf_counter()
    specs = [JobSpec(job_document(i), f"proj-{i % 4}/{(i // 4) % 100:02d}") for i in range(jobs)]
    results = submit_jobs(ws, specs)
    submitted = time.perf_counter() - start
    start = time.perf_counter()
    frames = 0
    for index, result in enumerate(results):
        marker = result.marker
        for kind, trigger in moves_for(index):
            moved = move_marker(
                ws, marker, Frame(kind, {"step": "start", "reason": trigger.value}), trigger
            ).current
            assert moved is not None
            marker, frames = moved, frames + 1
    moved_seconds = time.perf_counter() - start
    ws.close()
    done.write_text(str(jobs))
    print(
        f"built {jobs} jobs: submitted in {submitted:.1f} s, {frames} marker moves in {moved_seconds:.1f} s"
    )
    return attach(root, writable=False)


def timed(action: Callable[[], object], runs: int) -> tuple[float, float]:
    """(first, median of the rest) wall seconds."""
    samples = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples[0], statistics.median(samples[1:])


def cli(*words: str) -> Callable[[], object]:
    httk = str(Path(sys.executable).with_name("httk"))

    def run() -> object:
        return subprocess.run([httk, *words], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="build (or reuse) the workspace here")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = (args.dir or Path(scratch)) / f"ws-{args.jobs}"
        ws = build(root, args.jobs)
        report(ws, args.jobs, args.runs)


def report(ws: Workspace, jobs: int, runs: int) -> None:
    root = str(ws.root)
    page = list_jobs(ws, kinds=["succeeded"], limit=100)
    target = page.jobs[len(page.jobs) // 2]
    job_id = target.job_id
    counts = workspace_status(ws).kinds
    print(f"{jobs} jobs: " + ", ".join(f"{count} {kind}" for kind, count in counts.items() if count))
    cases: list[tuple[str, Callable[[], object]]] = [
        ("status (in-process)", lambda: workspace_status(ws)),
        ("status --by-placement (in-process)", lambda: workspace_status(ws, by_placement=1)),
        ("job list --limit 100 (in-process)", lambda: list_jobs(ws, limit=100)),
        (
            "job list --limit 100 --after (in-process)",
            lambda: list_jobs(ws, limit=100, after=page.next_after),
        ),
        ("job list --kind failed --limit 100", lambda: list_jobs(ws, kinds=["failed"], limit=100)),
        ("job show UUID (in-process, cold index)", lambda: _show(_fresh(ws), job_id)),
        ("job show payload path (in-process)", lambda: show_job(ws, select_job(ws, _payload(ws, target)))),
        ("job log UUID (in-process, cold index)", lambda: _log(_fresh(ws), job_id)),
        ("httk workspace status --json", cli("workspace", "status", root, "--json")),
        ("httk job list --limit 100 --json", cli("job", "list", root, "--limit", "100", "--json")),
        ("httk job show UUID --json", cli("job", "show", root, job_id, "--json")),
        ("httk job show PAYLOAD --json", cli("job", "show", root, _payload(ws, target), "--json")),
        ("httk job log UUID", cli("job", "log", root, job_id)),
    ]
    print(f"{'operation':<46} {'first s':>8} {'median s':>9} {'vs 2 s':>7}")
    for name, action in cases:
        first, median = timed(action, runs)
        print(f"{name:<46} {first:>8.3f} {median:>9.3f} {median / GOAL_SECONDS:>6.2f}x")
    print(f"goal: workspace status within {GOAL_SECONDS:g} s at 100,000 jobs (this run: {jobs} jobs)")
    report_maintenance(ws, jobs, runs)


def report_maintenance(ws: Workspace, jobs: int, runs: int) -> None:
    """fsck and gc over every job, in jobs per second, against the goal of 10,000 jobs/s together.

    gc runs three ways: as the workspace's policy says (it keeps every gated category; only the first
    run removes something, the placement mirrors the moves left empty), as a dry run with every
    retention limit at zero days (every gate evaluated: each terminal job's attempt directories listed,
    every journal chain walked), and from the command line. fsck checks every marker (nothing to
    repair) and counts the always-safe leftovers, as the command does.
    """
    root = str(ws.root)
    gated = dataclasses.replace(ws, policy=dataclasses.replace(ws.policy, retention=ZERO_RETENTION))
    cases: list[tuple[str, Callable[[], object]]] = [
        ("fsck (in-process)", lambda: fsck(_fresh(ws))),
        ("gc, the workspace's policy (in-process)", lambda: _collect_writable(ws)),
        ("gc --dry-run, every limit 0 days (in-process)", lambda: collect_garbage(gated, dry_run=True)),
        ("httk workspace fsck --json", cli("workspace", "fsck", root, "--json")),
        ("httk workspace gc --json", cli("workspace", "gc", root, "--json")),
    ]
    print(f"\n{'maintenance over every job':<46} {'first s':>8} {'median s':>9} {'jobs/s':>9}")
    medians: dict[str, float] = {}
    for name, action in cases:
        first, median = timed(action, runs)
        medians[name] = median
        print(f"{name:<46} {first:>8.3f} {median:>9.3f} {jobs / median:>9,.0f}")
    for label, fsck_case, gc_case in (
        ("fsck + gc, in-process, policy as set", cases[0][0], cases[1][0]),
        ("fsck + gc, in-process, every gate at 0 days", cases[0][0], cases[2][0]),
        ("fsck + gc, command line", cases[3][0], cases[4][0]),
    ):
        rate = jobs / (medians[fsck_case] + medians[gc_case])
        print(f"{label:<46} {rate:>9,.0f} jobs/s ({rate / GOAL_MAINTENANCE_RATE:.2f}x of the goal)")
    print(f"goal: fsck plus gc at {GOAL_MAINTENANCE_RATE:,.0f} jobs/s or more")


ZERO_RETENTION = {"attempt_control_days": 0.0, "trash_days": 0.0, "journal_days": 0.0}
GOAL_MAINTENANCE_RATE = 10_000.0


def _collect_writable(ws: Workspace) -> object:
    attached = attach(ws.root)
    try:
        report = collect_garbage(attached)
    finally:
        attached.close()
    if report.removed:  # the first run prunes the placement mirrors the moves emptied; later ones nothing
        removed = {name: count.removed for name, count in report.categories.items() if count.removed}
        print(f"  (gc removed {removed})", file=sys.stderr)
    return report


def _fresh(ws: Workspace) -> Workspace:
    """A new attach: no index built by an earlier lookup (what one CLI invocation starts with)."""
    return attach(ws.root, writable=False)


def _show(ws: Workspace, selector: str) -> object:
    return show_job(ws, select_job(ws, selector))


def _log(ws: Workspace, selector: str) -> object:
    return job_history(ws, select_job(ws, selector))


def _payload(ws: Workspace, marker: Any) -> str:
    return str(ws.payload_path(marker.placement, marker.job_key))


if __name__ == "__main__":
    main()
