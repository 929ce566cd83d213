"""Start-up cost of the command line: ``httk --help`` and read commands on a small workspace.

The standard is "well under 0.2 s" for both. Prints the median wall time of each command over several
runs next to a bare ``python -c pass``.

    ./dev bench startup [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def median_seconds(argv: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        print(f"{'command':<48} {'median ms':>10} {'vs 200 ms':>10}")
        for name, argv in cases.items():
            seconds = median_seconds(argv, args.runs)
            print(f"{name:<48} {seconds * 1000:>10.1f} {seconds / 0.2:>9.2f}x")


if __name__ == "__main__":
    main()
