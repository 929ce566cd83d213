"""Subtask trees an import finds already waiting: a waitsubtasks parent whose subtask waits for its own
subtask (two levels deep), and a stale running subtask, run under the real manager as v1 ran them."""

from __future__ import annotations

from pathlib import Path

from httk.workflow.v1._importer import import_tree
from httk.workflow.v1._jobdoc import WORKDIR

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import DEAD_OWNER, make_task

# A step script on v1's API: start -> finished; collect lists the subtasks it finds, then finishes.
STEPS = r"""#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
echo "$STEP" >>"$HT_TASK_TOP_DIR/trace"
case "$STEP" in
  start) HT_TASK_FINISHED ;;
  collect) ls -d ht.task.* >collected; HT_TASK_FINISHED ;;
esac
exit 1
"""


def test_a_waiting_tree_two_levels_deep_runs_its_leaves_first_then_each_parent_once(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    root = tmp_path / "Runs"
    parent = make_task(
        root,
        "ht.task.any.top.collect.0.unclaimed.3.waitsubtasks",
        script=STEPS,
        files={"ht.run.current/ht.nextstep": "collect\n"},
    )
    middle = make_task(
        parent / "ht.run.current",
        "ht.task.any.mid.collect.0.none.2.waitsubtasks",
        script=STEPS,
        files={"ht.run.current/ht.nextstep": "collect\n"},
    )
    make_task(middle / "ht.run.current", "ht.task.any.leaf.start.0.none.2.waitstart", script=STEPS)
    make_task(
        parent / "ht.run.current",
        f"ht.task.any.stale.start.4.{DEAD_OWNER}.2.running",
        script=STEPS,
        files={"ht.run.current/ht.nextstep": "start\n"},
        age=7200,
    )
    make_task(parent / "ht.run.current", "ht.task.any.done.start.0.none.2.finished", script=STEPS)
    (entry,) = import_tree(v1ws.path, root).entries
    assert entry.subtasks == 4
    v1ws.run()
    kinds = {job["tag"]: job["kind"] for job in v1ws.list_jobs()}
    assert kinds == dict.fromkeys(["top", "mid", "leaf", "stale"], "succeeded")  # not the finished one
    (payload,) = (v1ws.path / "v1" / str(entry.job_key) / WORKDIR).glob("ht.task.*")  # its task directory
    (archive,) = payload.glob("ht.run.2*")
    assert (archive / "collected").read_text().split() == [
        "ht.task.any.done.start.0.none.2.finished",
        "ht.task.any.mid.collect.0.unclaimed.2.finished",
        "ht.task.any.stale.start.5.unclaimed.2.finished",  # its restart counted, as v1 counted it
    ]
    (mid,) = archive.glob("ht.task.any.mid.*")
    (mid_archive,) = mid.glob("ht.run.2*")
    leaves = (mid_archive / "collected").read_text().split()
    assert leaves == ["ht.task.any.leaf.start.0.unclaimed.2.finished"]
    assert [(p / "trace").read_text().split() for p in (payload, mid)] == [["collect"], ["collect"]]
    (leaf,) = mid_archive.glob("ht.task.any.leaf.*")
    assert (leaf / "trace").read_text().split() == ["start"]
