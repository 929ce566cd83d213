"""Join evaluation and an end-to-end fan-out/join, timed on this machine.

Prints:

1. the time of one join evaluation (:func:`_joins.evaluate`: list the state kinds at every child
   placement, judge, and — once decided — read each child's frame into the observation vector) over
   500 and 5,000 children, both while they all still run (pending: listings only) and once they all
   succeeded (decided: listings plus one frame read per child). The children sit at the SDK's default
   placements (``<parent>.children/<n // 1000>``) and are made terminal directly: one frame appended to
   the journal and one marker created per child, no process. Children per second = children / time,
   against the goal of 5,000 per second.
2. the end-to-end time of a 1,000-child fan-out and join under a real manager (2 workers, not durable):
   a Bash parent spawns 1,000 children with ``httk_workflow_spawn`` and waits for them all; each child
   publishes ``succeed`` by hand; the parent's ``gather`` step counts its succeeded children with
   ``httk_workflow_children``. Reported: the total from manager start to its idle exit, and children per
   second of that total.

    ./dev bench joins [--children 500,5000] [--fan-out 1000] [--repeat 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._frames import Frame, record_of
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init, probe_marker
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish import _joins
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import JobKey, MarkerName

GOAL_PER_SECOND = 5000.0
PARENT_KEY = f"parent--{uuid.uuid4()}"

RUNNER = r"""#!/usr/bin/env bash
set -euo pipefail
case $HTTK_WORKFLOW_STEP in
  work) # publish succeed by hand: a few builtins and coreutils
    ids=
    while IFS= read -r line; do
      case $line in
        *'"job_id": '* | *'"activation_id": '* | *'"attempt_id": '*) ids+=${line%,}, ;;
      esac
    done <"$HTTK_WORKFLOW_CONTEXT"
    ids=${ids//'": '/'":'}
    ids=${ids//'  '/}
    draft=$HTTK_WORKFLOW_CONTROL_DIR/outcome.tmp.$$
    mkdir "$draft"
    printf '{"format":"httk-workflow-outcome","format_version":1,%s"action":"succeed"}\n' "$ids" \
      >"$draft/outcome.json"
    mv -T "$draft" "$HTTK_WORKFLOW_CONTROL_DIR/outcome.ready"
    ;;
  *)
    # shellcheck source=/dev/null
    source "$HTTK_WORKFLOW_BASH_API"
    fan() {
      local n count
      httk_workflow_setting count fan_out
      for ((n = 0; n < count; n++)); do
        httk_workflow_spawn "c$n" work
      done
      httk_workflow_wait gather
    }
    gather() {
      local succeeded
      httk_workflow_children succeeded succeeded
      set -- $succeeded
      httk_workflow_succeed --message "$# children succeeded"
    }
    httk_workflow_register_step fan
    httk_workflow_register_step gather
    httk_workflow_dispatch
    ;;
esac
"""


# -- 1. one evaluation ----------------------------------------------------------------------------
def place_children(ws: Workspace, count: int, kind: Kind) -> _joins.Join:
    """``count`` children at the default placements, each with one frame and one ``kind`` marker."""
    journal = ws.journal()
    children: list[_joins.JoinChild] = []
    for index in range(count):
        key = JobKey(str(uuid.uuid4()), f"c{index}")
        placement = f"bench/{PARENT_KEY}.children/{index // 1000}"
        initial = MarkerName.initial(key, 500)
        frame = record_of(
            ws,
            MarkerLocation(Kind.SUBMITTED, placement, initial),
            Frame(
                kind,
                {
                    "step": "work",
                    "data_generation": None,
                    "attempt_id": str(uuid.uuid4()),
                    "workdir": str(ws.payload_path(placement, str(key)) / "run"),
                    "reason": kind.value,
                    "priority": 500,
                },
            ),
        )
        ref = journal.append(frame)
        directory = ws.marker_dir(kind, placement)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / str(initial.successor(ref))).touch()
        children.append(_joins.JoinChild(ws.workspace_id, key.job_id, str(key), placement, f"c{index}"))
    return _joins.Join(tuple(children), "all_succeeded")


def time_evaluation(ws: Workspace, join: _joins.Join, repeat: int) -> tuple[float, _joins.Evaluation]:
    times: list[float] = []
    evaluation = _joins.evaluate(ws, join)  # warm the page cache once, as a waiting pass would
    for _ in range(repeat):
        start = time.perf_counter()
        evaluation = _joins.evaluate(ws, join)
        times.append(time.perf_counter() - start)
    return statistics.median(times), evaluation


def bench_evaluation(base: Path, count: int, repeat: int) -> None:
    for kind, label in ((Kind.RUNNING, "pending (all running)"), (Kind.SUCCEEDED, "decided (all succeeded)")):
        root = base / f"eval-{count}-{kind.value}"
        init(root, durable=False).close()
        ws = attach(root)
        join = place_children(ws, count, kind)
        seconds, evaluation = time_evaluation(ws, join, repeat)
        expected = "pending" if kind is Kind.RUNNING else "satisfied"
        assert evaluation.verdict == expected, evaluation.verdict
        rate = count / seconds
        print(
            f"  {count:>6} children, {label:<24} {seconds * 1000:8.1f} ms  "
            f"{rate:>9,.0f} children/s  ({rate / GOAL_PER_SECOND:.1f}x the goal)"
        )
        ws.close()


# -- 2. end to end ------------------------------------------------------------------------------
def bench_fan_out(base: Path, count: int) -> None:
    root = base / "fan-out"
    init(root, durable=False).close()
    ws = attach(root)
    job = {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": str(uuid.uuid4()),
        "tag": "fan",
        "runner": {"backend": "path", "path": "runner"},
        "workdir": {"mode": "persistent", "path": "run"},
        "data": {"mode": "none"},
        "initial_step": "fan",
        "priority": 500,
        "claim": {"pool": "default"},
        "inputs": {"fan_out": count},
    }
    [result] = submit_jobs(ws, [JobSpec(job, "bench", {"runner": RUNNER.encode()}, frozenset({"runner"}))])
    ws.close()
    start = time.perf_counter()
    summary = Manager(root, ManagerConfig(workers=2, lease_seconds=600.0)).run()
    seconds = time.perf_counter() - start
    ws = attach(root, writable=False)
    marker = probe_marker(ws, "bench", result.job_key)
    assert marker is not None and marker.kind is Kind.SUCCEEDED, (marker, summary.census.line())
    frame = ws.reader.read(str(marker.name.ref))
    committing = ws.reader.read(frame["previous_record_ref"])
    message = committing["outcome"]["message"]
    assert message == f"{count} children succeeded", message
    print(
        f"  {count} children: {seconds:.2f} s from manager start to idle exit "
        f"({count / seconds:,.0f} children/s end to end; {summary.launched} attempts); {message}"
    )
    print("  the parent's phases: " + ", ".join(f"{name} {took:.2f} s" for name, took in _phases(ws, frame)))


def _phases(ws: Workspace, frame: dict[str, Any]) -> list[tuple[str, float]]:
    """Durations between the parent's frames: the fan step, the commit registering every child, the
    wait for the children, and the gather step."""
    frames = [frame]
    while frames[-1].get("previous_record_ref") is not None:
        frames.append(ws.reader.read(frames[-1]["previous_record_ref"]))
    moments: dict[tuple[str, str | None], datetime] = {}
    for older in reversed(frames):
        moments.setdefault((older["kind"], older.get("step")), datetime.fromisoformat(older["created_at"]))
    marks = [
        ("fan step", ("running", "fan"), ("committing", "fan")),
        ("commit with registration", ("committing", "fan"), ("waiting", "fan")),
        ("children and join", ("waiting", "fan"), ("ready", "gather")),
        ("gather step", ("running", "gather"), ("committing", "gather")),
    ]
    return [(name, (moments[end] - moments[begin]).total_seconds()) for name, begin, end in marks]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--children", default="500,5000", help="comma-separated join sizes to evaluate")
    parser.add_argument(
        "--fan-out", type=int, default=1000, help="children of the end-to-end fan-out (0: skip)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="evaluations timed per size (median)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build workspaces (default: a temp dir)"
    )
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="httk-bench-joins-", dir=options.dir))
    try:
        print(f"one join evaluation (median of {options.repeat}; goal {GOAL_PER_SECOND:,.0f} children/s):")
        for count in (int(text) for text in options.children.split(",") if text):
            bench_evaluation(base, count, options.repeat)
        if options.fan_out:
            print("end-to-end fan-out and join (Bash API parent, hand-publishing children, 2 workers):")
            bench_fan_out(base, options.fan_out)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
