"""Reading v1 trees: every status, nesting, the quirks of the reference's §3.6, names it cannot parse."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from httk.workflow.v1._errors import TreeError
from httk.workflow.v1._names import Status
from httk.workflow.v1._reader import STALE_SECONDS, Task, Tree, live_evidence, read_tree

from tests.v1.v1trees import DEAD_OWNER, LIVE_OWNER, fixture_tree, make_task, set_age


def by_id(tree: Tree) -> dict[str, Task]:
    return {task.name.id: task for task in tree.walk()}


def test_the_reference_tree_is_read_whole(tmp_path: Path) -> None:
    made = fixture_tree(tmp_path / "Runs")
    tree = read_tree(tmp_path / "Runs")
    top = [task.name.id for task in tree.tasks]
    assert top == ["bad", "between", "done", "live", "odd", "parent", "slow", "spawner", "twostep", "txn"]
    parent = next(task for task in tree.tasks if task.name.id == "parent")
    assert [(s.name.id, s.name.status) for s in parent.subtasks] == [
        ("sub1", Status.WAITSTART),
        ("sub2", Status.FINISHED),
    ]
    assert parent.subtasks[0].relpath == (
        "ht.task.any.parent.collect.0.unclaimed.3.waitsubtasks/ht.run.current/"
        "ht.task.any.sub1.start.0.none.2.waitstart"
    )
    assert parent.subtasks[0].path == made["sub1"]
    assert sorted(i.relpath for i in tree.ignored) == [
        "ht.tmp.staging/ht.task.any.hidden.start.0.unclaimed.3.waitstart",
        "ht.tmp.task.any.half.start.0.none.3.waitstart",
    ]
    assert tree.problems == () and tree.views == ()
    assert set(tree.heartbeats) == {LIVE_OWNER}
    walked = [
        "bad",
        "between",
        "done",
        "live",
        "odd",
        "parent",
        "sub1",
        "sub2",
        "slow",
        "spawner",
        "twostep",
        "txn",
    ]
    assert [t.name.id for t in tree.walk()] == walked


def test_control_files_are_reported_as_found(tmp_path: Path) -> None:
    fixture_tree(tmp_path)
    tasks = by_id(read_tree(tmp_path))
    between, txn, bad, done = tasks["between"], tasks["txn"], tasks["bad"], tasks["done"]
    assert between.next_step == "second" and between.run_current and between.program == "ht_steps"
    assert between.executable
    assert txn.pending_transactions == ("ht.run.current/ht.atomic.0", "ht.run.current/ht.tmp.atomic.1")
    assert txn.name.restarts == 1 and txn.name.owner == DEAD_OWNER
    assert bad.reason == "Task gave 'broken' as return code." and bad.next_step is None
    assert done.run_archives == ("ht.run.2024-01-01_12.00.00",) and not done.run_current


def test_every_status_is_found_at_any_depth(tmp_path: Path) -> None:
    parent = tmp_path
    for depth, status in enumerate(Status):
        parent = (
            make_task(parent, f"ht.task.any.t{depth}.start.0.unclaimed.3.{status.value}") / "ht.run.current"
        )
    tree = read_tree(tmp_path)
    found = [task.name.status for task in tree.walk()]
    assert found == list(Status)
    assert len(tree.tasks) == 1
    deepest = list(tree.walk())[-1]
    assert deepest.relpath.count("ht.run.current") == len(Status) - 1


def test_subtasks_two_levels_deep_and_anywhere_below_their_parent(tmp_path: Path) -> None:
    parent = make_task(tmp_path, "ht.task.any.p.collect.0.unclaimed.3.waitsubtasks")
    child = make_task(parent / "ht.run.current" / "batch" / "a", "ht.task.any.c.wait.0.none.3.waitsubtasks")
    make_task(child / "ht.run.current", "ht.task.any.g.start.0.none.3.waitstart")
    make_task(parent / "elsewhere", "ht.task.any.c2.start.0.none.1.waitstart")
    make_task(parent / "ht.run.2024-01-01_00.00.00", "ht.task.any.old.start.0.none.3.finished")
    tree = read_tree(tmp_path)
    (top,) = tree.tasks
    assert [s.name.id for s in top.subtasks] == ["c2", "old", "c"]  # in path order
    nested = next(s for s in top.subtasks if s.name.id == "c")
    assert [g.name.id for g in nested.subtasks] == ["g"]
    assert nested.relpath == "ht.task.any.p.collect.0.unclaimed.3.waitsubtasks/ht.run.current/batch/a/" + (
        "ht.task.any.c.wait.0.none.3.waitsubtasks"
    )


def test_a_name_it_cannot_parse_is_reported_with_its_path_and_not_entered(tmp_path: Path) -> None:
    bad = make_task(tmp_path / "proj", "ht.task.any.Si.x.start.0.unclaimed.3.waitstart")
    make_task(bad, "ht.task.any.inner.start.0.none.3.waitstart")  # must not surface as top-level
    make_task(tmp_path / "proj", "ht.task.any.ok.start.0.unclaimed.7.waitstart")
    make_task(tmp_path, "ht.task.any.fine.start.0.unclaimed.3.waitstart")
    tree = read_tree(tmp_path)
    assert [t.name.id for t in tree.walk()] == ["fine"]
    problems = {p.relpath: p.message for p in tree.problems}
    assert set(problems) == {
        "proj/ht.task.any.Si.x.start.0.unclaimed.3.waitstart",
        "proj/ht.task.any.ok.start.0.unclaimed.7.waitstart",
    }
    assert "shifts every later one" in problems["proj/ht.task.any.Si.x.start.0.unclaimed.3.waitstart"]
    assert "priority field '7'" in problems["proj/ht.task.any.ok.start.0.unclaimed.7.waitstart"]


def test_half_published_and_hidden_tasks_are_ignored_like_v1(tmp_path: Path) -> None:
    parent = make_task(tmp_path, "ht.task.any.p.spawn.0.unclaimed.3.waitsubtasks")
    (parent / "ht.run.current/ht.tmp.task.any.s.start.0.none.3.waitstart").mkdir(parents=True)
    (parent / "ht.run.current/ht.tmp.atomic.0/ht.task.any.staged.start.0.none.3.waitstart").mkdir(
        parents=True
    )
    make_task(
        tmp_path / "ht.tmp.waitstart" / "proj" / "deep", "ht.task.any.sent.start.0.unclaimed.3.waitstart"
    )
    (tmp_path / "ht.task.any.file.start.0.unclaimed.3.waitstart").write_text("not a directory")
    tree = read_tree(tmp_path)
    assert [t.name.id for t in tree.walk()] == ["p"]
    ignored = {i.relpath: i.reason for i in tree.ignored}
    half = f"{parent.name}/ht.run.current/ht.tmp.task.any.s.start.0.none.3.waitstart"
    assert ignored == {
        "ht.task.any.file.start.0.unclaimed.3.waitstart": "named like a task but not a directory",
        half: "half-published (ht.tmp.task.*): v1 never runs it",
        "ht.tmp.waitstart/proj/deep/ht.task.any.sent.start.0.unclaimed.3.waitstart": (
            "below an ht.tmp.* directory: v1 never runs it"
        ),
    }
    assert tree.tasks[0].pending_transactions == ("ht.run.current/ht.tmp.atomic.0",)


def test_symlinked_status_views_are_reported_and_never_followed(tmp_path: Path) -> None:
    real = make_task(tmp_path / "store", "payload")
    make_task(real, "ht.task.any.inside.start.0.unclaimed.3.waitstart")
    tree_root = tmp_path / "tree"
    tree_root.mkdir()
    (tree_root / "ht.task.any.v.second.0.unclaimed.3.finished").symlink_to(real)
    (tree_root / "data").symlink_to(tmp_path / "store")
    tree = read_tree(tree_root)
    assert tree.tasks == ()
    assert [(v.relpath, v.target) for v in tree.views] == [
        ("ht.task.any.v.second.0.unclaimed.3.finished", str(real))
    ]


def test_category_directories_are_ordinary_directories(tmp_path: Path) -> None:
    make_task(tmp_path / "ht.waitstart/2/proj/sub", "ht.task.any.q.start.0.unclaimed.2.waitstart")
    make_task(tmp_path / "ht.finished/proj/sub", "ht.task.any.r.second.0.unclaimed.2.finished")
    tree = read_tree(tmp_path)
    assert [t.relpath for t in tree.tasks] == [
        "ht.finished/proj/sub/ht.task.any.r.second.0.unclaimed.2.finished",
        "ht.waitstart/2/proj/sub/ht.task.any.q.start.0.unclaimed.2.waitstart",
    ]
    assert "ht.waitstart/2/proj/sub" in tree.directories and "" in tree.directories


def test_programs_ht_steps_first_then_ht_run(tmp_path: Path) -> None:
    both = make_task(tmp_path, "ht.task.any.both.start.0.unclaimed.3.waitstart")
    (both / "ht_run").write_text("#!/bin/sh\n")
    make_task(
        tmp_path,
        "ht.task.any.run.start.0.unclaimed.3.waitstep",
        program="ht_run",
        files={"ht.nextstep": "again\n", "ht.run.current/ht.nextstep": "ignored\n"},
    )
    make_task(tmp_path, "ht.task.any.none.start.0.unclaimed.3.waitstart", script=None)
    plain = make_task(tmp_path, "ht.task.any.plain.start.0.unclaimed.3.waitstart")
    (plain / "ht_steps").chmod(0o644)
    tasks = by_id(read_tree(tmp_path))
    assert tasks["both"].program == "ht_steps"
    assert (tasks["run"].program, tasks["run"].next_step) == ("ht_run", "again")
    assert tasks["none"].program is None
    assert tasks["plain"].program == "ht_steps" and not tasks["plain"].executable


def test_decisions_already_published_and_timeouts(tmp_path: Path) -> None:
    make_task(
        tmp_path,
        "ht.task.any.f.x.0.unclaimed.3.waitstep",
        files={"ht.run.current/ht.nextstep": "ht_finished"},
    )
    make_task(
        tmp_path,
        "ht.task.any.b.x.0.unclaimed.3.waitstep",
        files={"ht.run.current/ht.nextstep": "ht_broken\n"},
    )
    code43 = "Task returned non-defined error code (43). This usually means something unexpected have..."
    make_task(
        tmp_path, "ht.task.any.w.x.0.unclaimed.3.stopped", files={"ht.reason": f"earlier\n{code43}\n\n"}
    )
    make_task(tmp_path, "ht.task.any.e.x.0.unclaimed.3.stopped", files={"ht.reason": "...error code ()."})
    make_task(tmp_path, "ht.task.any.t.x.0.unclaimed.3.timeout", files={"ht.reason": "Task timed out.\n"})
    tasks = by_id(read_tree(tmp_path))
    assert tasks["f"].declared == "finished" and tasks["b"].declared == "broken"
    assert tasks["w"].reason_code == 43 and tasks["w"].timed_out
    assert tasks["e"].reason_code is None and not tasks["e"].timed_out
    assert tasks["t"].timed_out and tasks["t"].declared is None


def test_resume_and_pending_transactions_in_the_task_directory(tmp_path: Path) -> None:
    make_task(
        tmp_path,
        "ht.task.any.r.relax.0.unclaimed.3.broken",
        files={
            "ht.run.resume/ht.nextstep": "relax\n",
            "ht.atomic.3/x": "",
            "ht.run.current/ht.atomic.0/y": "",
        },
    )
    (task,) = read_tree(tmp_path).tasks
    assert task.resume and task.run_current
    assert task.pending_transactions == ("ht.atomic.3", "ht.run.current/ht.atomic.0")


def test_heartbeats_are_collected_from_every_stats_directory(tmp_path: Path) -> None:
    for queue, owner in (("q1", "tskmgr-a"), ("q2", "tskmgr-b")):
        stats = tmp_path / "Runs" / queue / "ht.taskmgrstats"
        stats.mkdir(parents=True)
        (stats / f"alive.{owner}").touch()
        (stats / f"taskmgr_{owner}.out").touch()
    set_age(tmp_path / "Runs/q2/ht.taskmgrstats/alive.tskmgr-b", 3600)
    beats = read_tree(tmp_path).heartbeats
    assert set(beats) == {"tskmgr-a", "tskmgr-b"}
    assert beats["tskmgr-a"] - beats["tskmgr-b"] > 3000


def test_live_evidence_follows_v1_liveness(tmp_path: Path) -> None:
    fresh = make_task(tmp_path, "ht.task.any.fresh.relax.0.tskmgr-x.3.running", age=150)
    stale = make_task(tmp_path, "ht.task.any.stale.relax.0.tskmgr-y.3.running", age=STALE_SECONDS + 60)
    beating = make_task(tmp_path, "ht.task.any.beating.relax.0.tskmgr-z.3.running", age=7200)
    make_task(tmp_path, "ht.task.any.stopped.relax.11.tskmgr-z.3.stopped", age=0)  # too many restarts
    parent = make_task(tmp_path, "ht.task.any.parent.collect.0.unclaimed.3.waitsubtasks", age=7200)
    inner = make_task(parent / "ht.run.current", "ht.task.any.inner.s.0.tskmgr-w.3.running", age=10)
    stats = tmp_path / "ht.taskmgrstats"
    stats.mkdir()
    (stats / "alive.tskmgr-z").touch()
    (stats / "alive.tskmgr-y").touch()
    set_age(stats / "alive.tskmgr-y", STALE_SECONDS + 30)
    set_age(parent, 7200)
    tree = read_tree(tmp_path)
    now = time.time()
    tasks = {t.name.id: t for t in tree.tasks}
    assert "modified 2 min" in (live_evidence(tasks["fresh"], tree, now=now) or "")
    assert live_evidence(tasks["stale"], tree, now=now) is None
    assert "alive.tskmgr-z" in (live_evidence(tasks["beating"], tree, now=now) or "")
    assert live_evidence(tasks["stopped"], tree, now=now) is None
    evidence = live_evidence(tasks["parent"], tree, now=now) or ""
    assert evidence.startswith(f"{parent.name}/ht.run.current/{inner.name} is running")
    assert live_evidence(tasks["fresh"], tree, now=now + 3600) is None
    assert fresh.exists() and stale.exists() and beating.exists()


def test_a_missing_or_non_directory_root_is_a_tree_error(tmp_path: Path) -> None:
    with pytest.raises(TreeError, match="cannot read the v1 tree"):
        read_tree(tmp_path / "absent")
    (tmp_path / "file").write_text("")
    with pytest.raises(TreeError, match="not a directory"):
        read_tree(tmp_path / "file")


def test_reading_changes_nothing(tmp_path: Path) -> None:
    fixture_tree(tmp_path)

    def snapshot() -> dict[str, tuple[int, float]]:
        return {
            str(p.relative_to(tmp_path)): (p.lstat().st_mode, p.lstat().st_mtime)
            for p in sorted(tmp_path.rglob("*"))
        }

    before = snapshot()
    read_tree(tmp_path)
    assert snapshot() == before


def test_what_no_payload_may_hold_is_found_anywhere_below_a_task(tmp_path: Path) -> None:
    make_task(tmp_path, "ht.task.any.clean.start.0.unclaimed.3.waitstart")
    linked = make_task(
        tmp_path, "ht.task.any.link.start.0.unclaimed.3.waitstep", files={"ht.run.current/x": ""}
    )
    (linked / "ht.run.current" / "POTCAR").symlink_to("/nowhere")
    fifo = make_task(tmp_path, "ht.task.any.fifo.start.0.unclaimed.3.waitstart")
    os.mkfifo(fifo / "pipe")
    staged = make_task(tmp_path, "ht.task.any.txn.start.0.unclaimed.3.waitstep", files={"ht.atomic.0/a": ""})
    (staged / "ht.atomic.0" / "b").symlink_to("a")
    parent = make_task(tmp_path, "ht.task.any.parent.start.0.unclaimed.3.waitsubtasks")
    inner = make_task(parent / "ht.run.current", "ht.task.any.inner.start.0.none.3.waitstart")
    (inner / "view").symlink_to(".")
    tasks = by_id(read_tree(tmp_path))
    assert tasks["clean"].unsafe is None
    assert tasks["link"].unsafe == f"{linked.name}/ht.run.current/POTCAR"
    assert tasks["fifo"].unsafe == f"{fifo.name}/pipe"
    assert tasks["txn"].unsafe == f"{staged.name}/ht.atomic.0/b"
    assert (
        tasks["parent"].unsafe == tasks["inner"].unsafe == f"{parent.name}/ht.run.current/{inner.name}/view"
    )
