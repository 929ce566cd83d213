"""A stage plan end to end against the same stages submitted as independent jobs, in one run.

Builds a random DAG of ``--stages`` stages (seeded: stage ``i`` depends on up to ``--fan-in`` stages
drawn from the ``--window`` before it), each a cheap Bash runner that publishes ``succeed`` with the Bash
API. Then, in fresh non-durable workspaces on this machine:

1. the plan: ``submit_stage_plan``, then one manager (``--workers``) until it is idle -- the coordinator
   paused with ``plan complete``;
2. the same stages as independent jobs (no dependencies, no coordinator), one manager until idle.

Prints both wall times, their ratio (plan / independent: what the DAG and its coordinator cost), the
critical-path length (the waves the plan needs at the least), the coordinator's activations, and the
machine's load at the start and the end.

    ./dev bench plans [--stages 1000] [--fan-in 3] [--window 50] [--workers 2] [--seed 1] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace, init, probe_marker
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.plans import critical_path_length, submit_stage_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the load probe beside this file (run as -P)
from benchmarks.throughput import load

RUNNER = r"""#!/usr/bin/env bash
set -euo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"
main() { httk_workflow_succeed; }
httk_workflow_register_step main
httk_workflow_dispatch
"""


def random_dag(stages: int, fan_in: int, window: int, seed: int) -> dict[str, list[str]]:
    """Stage id to its dependencies: each on up to ``fan_in`` of the ``window`` stages before it."""
    chooser = random.Random(seed)
    graph: dict[str, list[str]] = {}
    for index in range(stages):
        earlier = list(range(max(0, index - window), index))
        count = chooser.randint(0, min(fan_in, len(earlier)))
        graph[f"s{index:05d}"] = [f"s{need:05d}" for need in sorted(chooser.sample(earlier, count))]
    return graph


def _workspace(base: Path, name: str) -> tuple[Workspace, dict[str, Any]]:
    workspace = init(base / name, durable=False)
    source = base / f"{name}-runner"
    source.write_text(RUNNER)
    source.chmod(0o755)
    reference = publish_runner(workspace, "stage", source).reference()
    return workspace, {"backend": "path", **reference, "arguments": []}


def _run(workspace: Workspace, workers: int) -> float:
    started = time.perf_counter()
    summary = Manager(workspace.root, ManagerConfig(workers=workers, lease_seconds=600.0)).run()
    elapsed = time.perf_counter() - started
    if summary.exit_reason != "idle":
        raise SystemExit(f"the manager stopped with {summary.exit_reason}")
    return elapsed


def run_plan(base: Path, graph: dict[str, list[str]], workers: int) -> tuple[float, int]:
    """The plan's wall time (manager start to idle) and the coordinator's activations."""
    workspace, _runner = _workspace(base, "plan")
    document = {
        "format": "httk-workflow-stage-plan",
        "format_version": 1,
        "workflow_id": "bench",
        "stages": [{"id": name, "runner": "stage", "depends_on": needs} for name, needs in graph.items()],
    }
    path = base / "plan.json"
    path.write_text(json.dumps(document))
    submitted = submit_stage_plan(workspace, path)
    elapsed = _run(workspace, workers)
    marker = probe_marker(workspace, submitted.placement, submitted.job_key)
    assert marker is not None and marker.kind.value == "paused", marker
    frame = workspace.reader.read(marker.name.ref_text)
    if frame.get("pause", {}).get("reason") != "plan complete":
        raise SystemExit(f"the plan did not complete: {frame.get('pause')}")
    activations = int(frame.get("activation_ordinal") or 0)
    workspace.close()
    return elapsed, activations


def run_independent(base: Path, stages: int, workers: int) -> float:
    """The same number of stage jobs, submitted at once with no dependencies."""
    workspace, runner = _workspace(base, "independent")
    jobs = [
        {
            "format": "httk-workflow-job",
            "format_version": 1,
            "id": str(uuid.uuid4()),
            "tag": f"s{index:05d}",
            "runner": runner,
            "workdir": {"mode": "persistent", "path": "run"},
            "data": {"mode": "none"},
            "initial_step": "main",
            "priority": 500,
            "claim": {"pool": "default", "required_capabilities": []},
            "parent": None,
        }
        for index in range(stages)
    ]
    submit_jobs(workspace, [JobSpec(job, f"independent/{index // 1000}") for index, job in enumerate(jobs)])
    elapsed = _run(workspace, workers)
    workspace.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--stages", type=int, default=1000)
    parser.add_argument("--fan-in", type=int, default=3)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the workspaces go (default: a temp dir)"
    )
    args = parser.parse_args()
    graph = random_dag(args.stages, args.fan_in, args.window, args.seed)
    print(f"start: {load()}")
    base = Path(tempfile.mkdtemp(prefix="httk-bench-plans-", dir=args.dir))
    try:
        plan_seconds, activations = run_plan(base, graph, args.workers)
        independent_seconds = run_independent(base, args.stages, args.workers)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    edges = sum(len(needs) for needs in graph.values())
    print(
        f"random DAG: {args.stages} stages, {edges} dependencies, critical path {critical_path_length(graph)}"
    )
    rate = args.stages / plan_seconds
    print(f"plan:        {plan_seconds:8.2f} s  ({rate:7.1f} stages/s, {activations} activations)")
    print(f"independent: {independent_seconds:8.2f} s  ({args.stages / independent_seconds:7.1f} jobs/s)")
    print(f"ratio plan / independent: {plan_seconds / independent_seconds:.2f}")
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
