"""Start-up cost of the command line: ``httk --help`` and read commands on a small workspace.

The standard is "well under 0.2 s" for both. Prints the median wall time of each command over several
runs next to a bare ``python -c pass``, twice: as an installation runs it (bytecode cached, as pip leaves
it: the runs below write the cache first if ``PYTHONDONTWRITEBYTECODE`` kept it from being written), and
with no bytecode cache at all (every module compiled from source on each start, a cache in an empty
``PYTHONPYCACHEPREFIX`` that is never written), the worst a first start on a read-only checkout sees.

    ./dev bench startup [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def median_seconds(argv: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)  # warm
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    httk = str(Path(sys.executable).with_name("httk"))
    with tempfile.TemporaryDirectory() as tmp:
        ws = str(Path(tmp) / "ws")
        subprocess.run(
            [httk, "workflow", "workspace", "init", ws, "--no-durable"], check=True, capture_output=True
        )
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "httk --help": [httk, "--help"],
            "httk workflow workspace policy show": [httk, "workflow", "workspace", "policy", "show", ws],
            "httk workflow workspace settings show --json": [
                httk,
                "workflow",
                "workspace",
                "settings",
                "show",
                ws,
                "--json",
            ],
            "httk workspace status --json": [httk, "workspace", "status", ws, "--json"],
            "httk job list --limit 100": [httk, "job", "list", ws, "--limit", "100"],
        }
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        uncached = {**cached, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(Path(tmp) / "none")}
        print(f"{'command':<48} {'cached ms':>10} {'vs 200 ms':>10} {'no cache ms':>12}")
        for name, argv in cases.items():
            seconds = median_seconds(argv, args.runs, cached)
            cold = median_seconds(argv, max(args.runs // 3, 3), uncached)
            print(f"{name:<48} {seconds * 1000:>10.1f} {seconds / 0.2:>9.2f}x {cold * 1000:>12.1f}")


if __name__ == "__main__":
    main()
