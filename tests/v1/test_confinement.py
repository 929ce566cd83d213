"""The v1 runner under the manager's Landlock confinement (on by default): what a step may write.

A top-level task writes its task directory (``task/<its v1 name>``, in its workdir ``task/``) and never
the payload beside it, which holds job.json; a subtask's job may also write the run directory of its
parent task that holds the subtask (the package's declaration, ``httk.workflow.v1._confinement``), and
nothing else of its parent. Each step probes by appending to a path and records ``ok`` or the error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine import attach
from httk.workflow.engine.core._workspace import probe_marker
from httk.workflow.engine.manager._landlock import landlock
from httk.workflow.v1._confinement import writable_paths

from tests.runners import frame_chain
from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import make_task

ABI = landlock().abi
needs_landlock = pytest.mark.skipif(ABI is None, reason=f"the kernel has no Landlock: {landlock().reason}")

PROBING = r"""#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
probe() { # <name> <path>: append nothing to PATH, and say whether that was allowed
  local out
  if out=$( { : >>"$2"; } 2>&1); then out=ok; else out=${out##*: }; fi
  printf '%s: %s\n' "$1" "$out" >>"$HT_TASK_TOP_DIR/probes"
}
leaf() { cp "$HT_TASK_TOP_DIR/ht_steps" .; echo leaf >kind; }
case "$STEP" in
  start)
    if [ -e ../kind ]; then  # a subtask, in its parent's run directory
      probe "own task directory" "$HT_TASK_TOP_DIR/note"
      probe "parent's run directory" "$HT_TASK_TOP_DIR/../from-subtask"
      probe "parent's task directory" "$HT_TASK_TOP_DIR/../../planted"
      probe "parent's job.json" "$HT_TASK_TOP_DIR/../../../../job.json"
      HT_TASK_FINISHED
    fi
    probe "own task directory" "$HT_TASK_TOP_DIR/note"
    probe "beside it in task/" "$HT_TASK_TOP_DIR/../planted"
    probe "the payload" "$HT_TASK_TOP_DIR/../../planted"
    probe "job.json" "$HT_TASK_TOP_DIR/../../job.json"
    HT_TASK_CREATE leaf <<<"a"
    HT_TASK_SUBTASKS collect
    ;;
  collect) HT_TASK_FINISHED ;;
esac
"""


def probes(task_dir: Path) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in (task_dir / "probes").read_text().splitlines())


def running_frames(v1ws: V1Workspace, placement: str, job_key: str) -> list[dict[str, Any]]:
    """The running frames of a job's chain: what confinement each attempt had."""
    workspace = attach(v1ws.path, writable=False)
    marker = probe_marker(workspace, placement, job_key)
    assert marker is not None
    return [frame for frame in frame_chain(workspace, marker) if frame["kind"] == "running"]


@needs_landlock
def test_a_confined_step_writes_its_task_directory_and_never_the_payload_or_job_json(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = make_task(tmp_path, "ht.task.any.p.start.0.unclaimed.3.waitstart", script=PROBING)
    job = v1ws.submit(task)
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    task_dir = v1ws.task(job)
    assert probes(task_dir) == {
        "own task directory": "ok",
        "beside it in task/": "ok",
        "the payload": "Permission denied",
        "job.json": "Permission denied",
    }
    (subtask,) = (p for p in task_dir.glob("ht.run.*/ht.task.*") if p.is_dir())
    assert probes(subtask) == {
        "own task directory": "ok",
        "parent's run directory": "ok",
        "parent's task directory": "Permission denied",
        "parent's job.json": "Permission denied",
    }
    # The running frames say what applied: the parent's own paths; the subtask's parent run directory.
    (child,) = [j for j in v1ws.list_jobs() if j["tag"] == "a"]
    (running,) = running_frames(v1ws, child["placement"], child["job_key"])
    record = running["confinement"]
    assert record["enforced"] is True and "refused" not in record
    declared = [Path(p) for p in record["writable"] if "ht.run.current" in p]  # as the parent was named
    waiting = "ht.task.any.p.collect.0.unclaimed.3.waitsubtasks"
    assert [(p.parent.name, p.name) for p in declared] == [(waiting, "ht.run.current")]
    for running in running_frames(v1ws, job.placement, str(job.key)):
        assert str(v1ws.payload(job).resolve() / "task") in running["confinement"]["writable"]


def test_the_declaration_names_a_subtasks_place_and_nothing_for_a_top_level_task(tmp_path: Path) -> None:
    parent = tmp_path / "ws" / "v1" / "p--key"
    run_dir = parent / "task" / "ht.task.any.p.start.0.unclaimed.3.waitsubtasks" / "ht.run.current"
    (run_dir / "ht.task.any.a.start.0.none.3.waitstart").mkdir(parents=True)
    workspace = tmp_path / "ws"
    inputs = {"v1.anchor": "v1/p--key", "v1.task": "task/ht.task.any.p/ht.run.current/ht.task.any.a"}
    assert writable_paths({"inputs": inputs}, tmp_path, workspace) == [run_dir]
    top_level = {"inputs": {"v1.name": "ht.task.any.p.start.0.unclaimed.3.waitstart"}}
    assert writable_paths(top_level, parent, workspace) == []
    (run_dir / "ht.task.any.a.relax.0.none.3.waitstep").mkdir()  # two directories match: none is named
    assert writable_paths({"inputs": inputs}, tmp_path, workspace) == []
