"""``v1 status``: the summary of a tree (statuses, sets, running tasks, heartbeats, quirks) and the jobs
an import made of its tasks, including the ones a --move took out of the tree."""

from __future__ import annotations

import json
import re
from pathlib import Path

from httk.workflow.v1._import_options import ImportOptions
from httk.workflow.v1._importer import import_tree
from httk.workflow.v1._status import tree_status
from httk.workflow.v1.cli import app
from typer.testing import CliRunner

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import DEAD_OWNER, LIVE_OWNER, fixture_tree, make_task


def test_a_tree_is_counted_per_status_and_set(tmp_path: Path) -> None:
    fixture_tree(tmp_path / "Runs")
    make_task(tmp_path / "Runs" / "q", "ht.task.hpc--main.x.start.0.unclaimed.3.waitstart")
    status = tree_status(tmp_path / "Runs")
    assert (status.tasks, status.top_level) == (13, 11)
    assert status.by_status == {
        "waitstart": {"top_level": 3, "nested": 1},
        "waitstep": {"top_level": 1, "nested": 0},
        "waitsubtasks": {"top_level": 1, "nested": 0},
        "running": {"top_level": 2, "nested": 0},
        "finished": {"top_level": 1, "nested": 1},
        "broken": {"top_level": 1, "nested": 0},
        "timeout": {"top_level": 1, "nested": 0},
        "stopped": {"top_level": 1, "nested": 0},
    }
    assert status.by_set == {"any": 12, "hpc--main": 1}
    running = {task.owner: task.live for task in status.running}
    assert running == {LIVE_OWNER: True, DEAD_OWNER: False}
    assert [(b.owner, b.fresh) for b in status.heartbeats] == [(LIVE_OWNER, True)]
    assert [q.note for q in status.quirks] == ["2 pending transaction(s), replayed before its next step"]
    assert len(status.ignored) == 2 and status.jobs == () and status.workspace is None


def test_the_quirks_of_v1_are_pointed_out(tmp_path: Path) -> None:
    make_task(
        tmp_path,
        "ht.task.any.f.x.0.unclaimed.3.waitstep",
        files={"ht.run.current/ht.nextstep": "ht_finished"},
    )
    make_task(
        tmp_path, "ht.task.any.b.x.0.unclaimed.3.waitstep", files={"ht.run.current/ht.nextstep": "ht_broken"}
    )
    code = (
        "Task returned non-defined error code ({}). This usually means something unexpected have returned..."
    )
    make_task(tmp_path, "ht.task.any.w.x.0.unclaimed.3.stopped", files={"ht.reason": code.format(43)})
    make_task(tmp_path, "ht.task.any.z.x.0.unclaimed.3.stopped", files={"ht.reason": code.format(0)})
    make_task(tmp_path, "ht.task.any.r.x.11.tskmgr-1.3.stopped", files={"ht.reason": "Too many restarts!\n"})
    make_task(tmp_path, "ht.task.any.d.x.0.unclaimed.3.finished", files={"ht.run.current/out": ""})
    make_task(tmp_path, "ht.task.any.h.x.0.unclaimed.3.waitstart", program="ht_run")
    make_task(tmp_path, "ht.task.any.n.x.0.unclaimed.3.waitstart", script=None)
    make_task(tmp_path, "ht.task.any.s.x.0.unclaimed.3.waitstep", files={"ht.run.resume/ht.nextstep": "x"})
    notes = {q.relpath.split(".")[3]: q.note for q in tree_status(tmp_path).quirks}
    assert notes == {
        "b": "ht.nextstep holds ht_broken: v1 would stop it with code (), the v1 runner ends it broken",
        "d": "finished but still holds ht.run.current (httk's reader would refuse it)",
        "f": "ht.nextstep holds ht_finished: v1 would end it broken, the v1 runner ends it finished",
        "h": "ht_run only: v1 ran it from PATH; the v1 runner runs the task's own ./ht_run",
        "n": "neither ht_steps nor ht_run: v1 would stop it with code 127",
        "r": "stopped after too many restarts; its owner tskmgr-1 is no live manager",
        "s": "ht.run.resume waits to become ht.run.current at its next step",
        "w": "stopped with code 43: v1's watchdog timed it out (imported, it fails as timeout)",
        "z": "stopped with code 0: its ht_steps exited 0, which v1 does not take as finished",
    }


def test_with_a_workspace_each_task_names_its_job_and_its_state(tmp_path: Path, v1ws: V1Workspace) -> None:
    fixture_tree(tmp_path / "Runs")
    import_tree(v1ws.path, tmp_path / "Runs")
    v1ws.run()
    status = tree_status(tmp_path / "Runs", workspace=v1ws.path)
    kinds = {job.relpath.split(".")[3]: job.kind for job in status.jobs}
    assert kinds == {
        "bad": None,
        "between": "succeeded",
        "done": None,
        "live": None,
        "odd": None,
        "parent": "succeeded",
        "slow": None,
        "spawner": "succeeded",
        "twostep": "succeeded",
        "txn": "succeeded",
    }
    twostep = next(job for job in status.jobs if "twostep" in job.relpath)
    assert twostep.placement == "v1" and str(twostep.job_key).startswith("twostep--")
    # `job show` names the v1 task each job came from: the task's path, a subtask's in its parent
    origin = tmp_path / "Runs" / twostep.relpath
    assert re.search(
        rf"^name +httk v1 task {re.escape(str(origin))} / httk\.v1$",
        v1ws.show_text(str(twostep.job_key)),
        re.M,
    )
    parent = next(job for job in status.jobs if ".parent." in job.relpath)
    (sub1,) = [job["job_key"] for job in v1ws.list_jobs() if job.get("tag") == "sub1"]
    subtask = (
        f"{parent.placement}/{parent.job_key}/task/ht.task.any.parent.collect.0.unclaimed.3.waitsubtasks/"
        "ht.run.current/ht.task.any.sub1.start.0.none.2.waitstart"
    )  # where the subtask was when it was spawned
    assert re.search(rf"^name +httk v1 subtask {re.escape(subtask)}$", v1ws.show_text(sub1), re.M)


def test_tasks_a_move_took_out_of_the_tree_are_found_in_the_workspace(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    make_task(tmp_path / "Runs" / "p", "ht.task.any.m.start.0.unclaimed.3.waitstart")
    make_task(tmp_path / "Runs" / "p", "ht.task.any.k.start.0.unclaimed.3.finished")
    import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(move=True))
    status = tree_status(tmp_path / "Runs", workspace=v1ws.path)
    assert [(j.relpath, j.kind, j.note) for j in status.jobs] == [
        ("p/ht.task.any.k.start.0.unclaimed.3.finished", None, None),
        ("p/ht.task.any.m.start.0.unclaimed.3.waitstart", "submitted", "moved out of the tree"),
    ]


def test_the_command_prints_the_summary_and_json(tmp_path: Path, v1ws: V1Workspace) -> None:
    fixture_tree(tmp_path / "Runs")
    import_tree(v1ws.path, tmp_path / "Runs")
    result = CliRunner().invoke(app, ["status", str(tmp_path / "Runs"), "--workspace", str(v1ws.path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"v1 tree {tmp_path / 'Runs'}: 12 tasks (10 top-level, 2 nested)"
    assert "  waitstart              2       1" in lines
    assert any(line.startswith("  running, stale: ht.task.any.txn.") for line in lines)
    assert any(
        line.startswith("  ht.task.any.twostep.start.0.unclaimed.3.waitstart: submitted v1/twostep--")
        for line in lines
    )
    assert "  ht.task.any.live.relax.0.tskmgr-2099-01-01_00_00_00_999.3.running: not imported" in lines
    shown = CliRunner().invoke(app, ["status", str(tmp_path / "Runs"), "--json"])
    document = json.loads(shown.stdout)
    assert document["tasks"] == 12 and document["workspace"] is None and document["jobs"] == []
    assert document["problems"] == [] and len(document["ignored"]) == 2
