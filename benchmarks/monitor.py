"""One refresh of ``httk workflow monitor``'s data against one ``workspace status``, on 100,000 jobs.

Builds (or reuses, with ``--dir``) the workspace of ``benchmarks/inspection.py`` — N jobs (default
100,000) over 400 placements, 10 % submitted, 20 % ready, 2 % running, 5 % failed, 3 % paused, 60 %
succeeded — then, in one process and alternating the two so that a noisy machine slows both alike,
times ``Monitor.refresh`` (the counts within the default budget, the managers, a page of 100 jobs) and
the exhaustive in-process ``workspace status``. Prints both medians and their ratio against the goal
"a refresh costs at most half a status", then how many refreshes one full count of the largest kind
takes (how stale a sampled count can get) and what opening one succeeded job costs (``job_detail``:
its show, its last 200 transitions, its why).

    ./dev bench monitor [--jobs 100000] [--dir DIR] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from httk.workflow.engine import workspace_status as status
from httk.workflow.engine.core._states import CORE_KINDS
from httk.workflow.engine.core._workspace import Workspace, attach
from httk.workflow.engine.ops._monitor import Certainty, JobQuery, Monitor, job_detail, jobs_page

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the workspace builder beside this file
from benchmarks.inspection import build

GOAL_RATIO = 0.5


def seconds(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="build (or reuse) the workspace here")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = (args.dir or Path(scratch)) / f"ws-{args.jobs}"
        build(root, args.jobs).close()
        report(attach(root, writable=False), args.jobs, args.runs)


def report(ws: Workspace, jobs: int, runs: int) -> None:
    query = JobQuery(limit=100)
    with Monitor(ws) as monitor:
        monitor.refresh(query)  # opens the streams: the first refresh of a session, as the screen's
        status(ws)
        refreshes, counts = [], []
        for _ in range(runs):
            refreshes.append(seconds(lambda: monitor.refresh(query)))
            counts.append(seconds(lambda: status(ws)))
        refresh, full = statistics.median(refreshes), statistics.median(counts)
        ratio = refresh / full
        print(f"{jobs} jobs, {runs} runs each, alternating, in one process")
        print(f"{'operation':<52} {'median s':>9}")
        print(f"{'monitor refresh (counts in budget, managers, page)':<52} {refresh:>9.4f}")
        print(f"{'workspace status (in-process, every marker)':<52} {full:>9.4f}")
        verdict = "met" if ratio <= GOAL_RATIO else "MISSED"
        print(f"refresh / status = {ratio:.3f} (goal <= {GOAL_RATIO}: {verdict})")
        cycle_report(monitor, query)
    target = jobs_page(ws, JobQuery.of(["succeeded"], limit=1)).jobs[0]  # a job with a history
    opened = statistics.median(
        seconds(lambda: job_detail(ws, target.placement, target.job_key)) for _ in range(runs)
    )
    print(f"{'opening one job (show, log, why)':<52} {opened:>9.4f}")


def cycle_report(monitor: Monitor, query: JobQuery) -> None:
    """Refresh until every kind has finished a full count; say how many refreshes one full count takes."""
    snapshot = monitor.refresh(query)
    refreshes = 1
    while any(count.certainty is Certainty.PARTIAL for count in snapshot.counts):
        snapshot = monitor.refresh(query)
        refreshes += 1
    largest = max(snapshot.counts, key=lambda count: count.count)
    exact = [c.kind.value for c in snapshot.counts if c.certainty is Certainty.EXACT]
    print(
        f"budget {snapshot.budget} entries a refresh ({snapshot.entries_visited} visited in the last); "
        f"the largest kind ({largest.kind.value}, {largest.count}) is counted over {largest.refreshes} "
        f"refreshes; {len(exact)} of {len(CORE_KINDS)} kinds exact in each ({', '.join(exact)}); "
        f"total {snapshot.total} (after {refreshes} more refreshes)"
    )


if __name__ == "__main__":
    main()
