"""Submission rates and inode cost.

Prints, for this machine: library submission of N jobs (non-durable and durable), one CLI call
submitting M payload directories (non-durable and durable), and the inodes each submitted job adds with
a flat placement and a runner outside the payload. Goals (issue 2): library non-durable >= 3,000 jobs/s,
CLI >= 1,000 jobs/s, exactly 3 inodes per job.

    ./dev bench submit [--jobs 10000] [--payloads 1000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import init
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

RUNNER = {"source": "workspace", "path": "relax.py", "sha256": "a" * 64, "arguments": []}


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
        "inputs": {"index": index},
    }


def inode_count(root: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def bench_library(base: Path, jobs: int, durable: bool) -> tuple[float, float]:
    ws = init(base / f"lib-{'durable' if durable else 'fast'}", durable=durable)
    submit_jobs(ws, [JobSpec(job_document(jobs), "flat")])  # create the shared placement directories
    specs = [JobSpec(job_document(i), "flat") for i in range(jobs)]
    before = inode_count(ws.root)
    start = time.perf_counter()
    submit_jobs(ws, specs)
    elapsed = time.perf_counter() - start
    return jobs / elapsed, (inode_count(ws.root) - before) / jobs


def bench_cli(base: Path, payloads: int, durable: bool) -> float:
    label = "durable" if durable else "fast"
    root = base / f"cli-{label}"
    flags = [] if durable else ["--no-durable"]
    subprocess.run(
        [_httk(), "workflow", "workspace", "init", str(root), *flags], check=True, capture_output=True
    )
    sources = base / f"payloads-{label}"
    sources.mkdir()
    paths = []
    for i in range(payloads):
        payload = sources / f"p{i}"
        payload.mkdir()
        (payload / "job.json").write_text(json.dumps(job_document(i), indent=2))
        paths.append(str(payload))
    start = time.perf_counter()
    subprocess.run(
        [_httk(), "workflow", "job", "submit", str(root), *paths, "--placement", "flat"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return payloads / (time.perf_counter() - start)


def _httk() -> str:
    return str(Path(sys.executable).with_name("httk"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--payloads", type=int, default=1_000)
    parser.add_argument("--dir", type=Path, default=None, help="where to build the workspaces (a tmp dir)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="httk-bench-submit-", dir=args.dir))
    try:
        print(f"submission benchmark in {base} ({os.cpu_count()} cores)")
        rows: list[tuple[str, int, float, float | None]] = []
        for durable in (False, True):
            lib_rate, lib_inodes = bench_library(base, args.jobs, durable)
            label = "durable" if durable else "non-durable"
            rows.append((f"library, {label}", args.jobs, lib_rate, lib_inodes))
        for durable in (False, True):
            rate = bench_cli(base, args.payloads, durable)
            rows.append(
                (f"one CLI call, {'durable' if durable else 'non-durable'}", args.payloads, rate, None)
            )
        print(f"{'path':<28} {'jobs':>7} {'jobs/s':>9} {'inodes/job':>11}")
        for name, count, jobs_per_second, per_job in rows:
            extra = "" if per_job is None else f"{per_job:.2f}"
            print(f"{name:<28} {count:>7} {jobs_per_second:>9.0f} {extra:>11}")
        lib_fast, lib_durable, cli_fast = rows[0][2], rows[1][2], rows[2][2]
        print(f"library non-durable vs goal 3000 jobs/s: {lib_fast / 3000:.2f}x")
        print(f"CLI non-durable vs goal 1000 jobs/s:     {cli_fast / 1000:.2f}x")
        print(f"durable / non-durable (library):         {lib_durable / lib_fast:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
