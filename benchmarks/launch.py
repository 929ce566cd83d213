"""Time from ``httk workflow run --count 4 --detach`` to four managers heartbeating.

Two launchers on one empty workspace: the built-in ``process`` launcher (four detached local
processes) and the ``slurm`` launcher against a real one-node Slurm that this script starts for the
purpose (``tests/slurmkit.py``: slurmctld, slurmd and munged on 127.0.0.1, stopped at the end). Each
run starts ``--idle`` managers, measures until each of the four has published its manifest and first
heartbeat, then stops them with ``manager stop --all`` and waits for them to be gone. Prints the
median of the runs for the command's own return and for the fourth heartbeat, per launcher, and the
ratio Slurm / process.

    ./dev bench launch [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test suite's Slurm kit

from tests.slurmkit import SlurmCluster, running_cluster

COUNT = 4
HTTK = str(Path(sys.executable).with_name("httk"))


def httk(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [HTTK, *args], capture_output=True, text=True, check=False, env={**os.environ, **(env or {})}
    )
    if result.returncode != 0:
        raise SystemExit(f"httk {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def heartbeating(ws: Path) -> int:
    return sum(1 for path in (ws / ".httk-workflow" / "managers").glob("*/heartbeat.json"))


def wait(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.01)


def one_launch(root: Path, settings: dict[str, object], env: dict[str, str]) -> tuple[float, float]:
    """(seconds until the command returned, seconds until the fourth manager heartbeated)."""
    ws = Path(tempfile.mkdtemp(dir=root)) / "ws"
    httk("workflow", "workspace", "init", str(ws), "--no-durable")
    if settings.get("manager.launch") == "cluster":
        httk("workflow", "launcher", "add", "--template", "slurm", "--workspace", str(ws), "cluster")
    document_path = ws / ".httk-workflow" / "format.json"
    document = json.loads(document_path.read_text())
    document["settings"] = settings
    document_path.write_text(json.dumps(document))
    start = time.perf_counter()
    httk("workflow", "run", str(ws), "--count", str(COUNT), "--detach", "--idle", env=env)
    returned = time.perf_counter() - start
    wait(lambda: heartbeating(ws) >= COUNT, f"{COUNT} managers to heartbeat")
    beating = time.perf_counter() - start
    httk("workflow", "manager", "stop", str(ws), "--all", env=env)
    wait(lambda: "0 live" in httk("workflow", "workspace", "status", str(ws)), "the managers to stop")
    return returned, beating


def measure(runs: int, root: Path, settings: dict[str, object], env: dict[str, str]) -> tuple[float, float]:
    samples = [one_launch(root, settings, env) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        process = measure(args.runs, root, {}, {})
        with running_cluster() as cluster:
            slurm = slurm_measure(args.runs, root, cluster)
    print(f"{COUNT} managers, median of {args.runs} runs (seconds):")
    print(f"{'launcher':<10} {'command returned':>17} {'4th heartbeat':>14}")
    print(f"{'process':<10} {process[0]:>17.3f} {process[1]:>14.3f}")
    print(f"{'slurm':<10} {slurm[0]:>17.3f} {slurm[1]:>14.3f}")
    print(f"slurm / process, to the 4th heartbeat: {slurm[1] / process[1]:.1f}x")


def slurm_measure(runs: int, root: Path, cluster: SlurmCluster) -> tuple[float, float]:
    settings: dict[str, object] = {"manager.launch": "cluster", "slurm.time_limit": "10", "slurm.ntasks": 1}
    return measure(runs, root, settings, cluster.env)


if __name__ == "__main__":
    main()
