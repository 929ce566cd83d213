"""Throughput under a kill schedule, and how fast a killed manager's jobs run again elsewhere.

Runs one seeded soak workload (``tests/soakkit.py``: 4 managers of 2 workers, chains, retries,
failures, fan-outs and joins, transactions and cancels) twice on fresh workspaces: once while a driver
SIGKILLs a random live manager every 1 to 3 s and restarts it, once without kills. Prints, for each, the
jobs (children included) per second from the first manager's start until every job is terminal, the
ratio of the two, and — for the run with kills — the seconds from a manager's death to each job it
held running again under another manager (a running or committing frame written by another manager;
median, 90th percentile, maximum). Both runs must also pass the soak's verdict; a problem is printed.

Recovery waits for the killed manager's lease (3 s in the soak workspace) where a manager known dead
on its host is not yet taken as dead at once (DECISIONS D17); with it, the time is the next recovery
pass's. Wall times depend on what else the machine runs; the seed makes the workloads identical.

    ./dev bench soak [--jobs 1000] [--kills 200] [--seed N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the soak lives with the test suite

from tests.soakkit import FULL, soak, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=FULL.jobs)
    parser.add_argument("--kills", type=int, default=FULL.kills)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--dir", type=Path, default=None, help="keep the workspaces here")
    arguments = parser.parse_args()
    seed = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(1 << 31)
    profile = replace(FULL, jobs=arguments.jobs, kills=arguments.kills, seed=seed)
    print(
        f"soak benchmark: seed {seed}, {profile.jobs} jobs, {profile.managers} managers x {profile.workers}"
    )
    base = arguments.dir or Path(tempfile.mkdtemp(prefix="httk-soak-bench-"))
    figures = {}
    failed = False
    for name, kill in (("with kills", True), ("without kills", False)):
        run, problems = soak(base / name.replace(" ", "-"), profile, kill=kill)
        figures[name] = summary(run, problems)
        failed |= bool(problems)
        line = figures[name]
        print(
            f"{name:>14}: {line['jobs']} jobs in {line['seconds']} s = {line['jobs_per_second']} jobs/s, "
            f"{line['kills']} kills{'' if not problems else f', {len(problems)} PROBLEMS'}",
            flush=True,
        )
    with_kills, without = figures["with kills"], figures["without kills"]
    print(
        f"throughput with kills / without: {with_kills['jobs_per_second'] / without['jobs_per_second']:.2f}"
    )
    recovery = with_kills["recovery_seconds"]
    if recovery:
        print(
            f"death to running elsewhere: median {recovery['median']} s, p90 {recovery['p90']} s, "
            f"max {recovery['max']} s over {recovery['n']} jobs held by killed managers"
        )
    if failed:
        print(json.dumps({name: line["problems"] for name, line in figures.items()}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
