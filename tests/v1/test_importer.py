"""Importing v1 trees: what each task becomes, idempotence, refusals, --move, --dry-run, live tasks."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from httk.workflow.engine import init
from httk.workflow.v1._errors import ImportRefusedError
from httk.workflow.v1._import_options import ImportOptions
from httk.workflow.v1._import_report import ImportAction
from httk.workflow.v1._importer import import_tree
from httk.workflow.v1._jobdoc import NAMESPACE
from httk.workflow.v1._runner import runner_sha256

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import DEAD_OWNER, LIVE_OWNER, fixture_tree, make_task


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry below ``root``: mode, size and (for links) target."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        target = os.readlink(path) if path.is_symlink() else ""
        found[str(path.relative_to(root))] = (info.st_mode, info.st_size if path.is_file() else 0, target)
    return found


def placed(task: Path, payload: Path) -> dict[str, tuple[int, int, str]]:
    """What ``payload`` must hold for ``task``: job.json, and the task's copy as ``task/<its name>``."""
    inside = {f"task/{task.name}/{relative}": entry for relative, entry in snapshot(task).items()}
    found = snapshot(payload)
    names = ("job.json", "task", f"task/{task.name}")
    return {**{name: found[name] for name in names if name in found}, **inside}


def actions(report: object) -> dict[str, str]:
    return {entry.relpath.split(".")[3]: entry.action.value for entry in report.entries}  # type: ignore[attr-defined]


def test_the_reference_tree_imports_its_runnable_tasks_and_nothing_else(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    made = fixture_tree(tmp_path / "Runs")
    before = snapshot(tmp_path / "Runs")
    report = import_tree(v1ws.path, tmp_path / "Runs")
    assert actions(report) == {
        "bad": "skipped_terminal",
        "between": "imported",
        "done": "skipped_terminal",
        "live": "skipped_live",
        "odd": "skipped_terminal",
        "parent": "imported",
        "slow": "skipped_terminal",
        "spawner": "imported",
        "twostep": "imported",
        "txn": "imported",
    }
    assert not report.complete  # the live task is left behind, and said so
    assert [i.relpath for i in report.ignored] == [
        "ht.tmp.staging/ht.task.any.hidden.start.0.unclaimed.3.waitstart",
        "ht.tmp.task.any.half.start.0.none.3.waitstart",
    ]
    assert snapshot(tmp_path / "Runs") == before  # copied, not touched
    parent = next(e for e in report.entries if "parent" in e.relpath)
    assert parent.subtasks == 2
    payload = v1ws.path / "v1" / str(parent.job_key)
    assert snapshot(payload) == placed(made["parent"], payload)
    assert sorted(snapshot(payload))[:3] == ["job.json", "task", f"task/{made['parent'].name}"]
    assert sorted(v1ws.views()) == sorted(
        e.relpath for e in report.entries if e.action is ImportAction.IMPORTED
    )
    assert {j["kind"] for j in v1ws.list_jobs()} == {"submitted"}
    assert not list((v1ws.path / ".httk-workflow" / "tmp").iterdir())


def test_each_job_says_what_the_task_was(tmp_path: Path, v1ws: V1Workspace) -> None:
    task = make_task(tmp_path / "Runs" / "proj", "ht.task.hpc--main.Si-A1.relax2.3.unclaimed.2.waitstep")
    report = import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(placement="legacy/a", attempts=4))
    (entry,) = report.entries
    job = json.loads((v1ws.path / "legacy/a/proj" / str(entry.job_key) / "job.json").read_text())
    expected_id = str(uuid.uuid5(NAMESPACE, "legacy/a\nproj\nht.task.hpc--main.Si-A1.2"))
    assert job == {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": expected_id,
        "tag": "si-a1",
        "name": f"httk v1 task {task.absolute()}",
        "workflow": "httk.v1",
        "runner": {
            "backend": "path",
            "source": "installed",
            "path": "pkg:httk.workflow/v1/runner",
            "sha256": runner_sha256(),
            "arguments": [],
        },
        "workdir": {"mode": "persistent", "path": "task"},
        "data": {"mode": "none"},
        "initial_step": "relax2",
        "priority": 300,
        "claim": {"pool": "hpc.main", "required_capabilities": []},
        "retry_policy": {"maximum_attempts_per_activation": 5, "retry_on": ["lease_lost", "process_failure"]},
        "resources": {},
        "parent": None,
        "inputs": {
            "v1.origin": str(task.absolute()),
            "v1.root": str((tmp_path / "Runs").absolute()),
            "v1.relpath": "proj/ht.task.hpc--main.Si-A1.relax2.3.unclaimed.2.waitstep",
            "v1.name": "ht.task.hpc--main.Si-A1.relax2.3.unclaimed.2.waitstep",
            "v1.set": "hpc--main",
            "v1.id": "Si-A1",
            "v1.step": "relax2",
            "v1.restarts": 3,
            "v1.owner": "unclaimed",
            "v1.priority": 2,
            "v1.status": "waitstep",
            "v1.attempts": 4,
        },
    }
    assert entry.placement == "legacy/a/proj" and entry.job_id == expected_id


def test_a_second_import_adds_nothing(tmp_path: Path, v1ws: V1Workspace) -> None:
    fixture_tree(tmp_path / "Runs")
    import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(include_finished=True))
    before = snapshot(v1ws.path)
    again = import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(include_finished=True))
    assert set(actions(again).values()) == {"already_imported", "skipped_live"}
    assert snapshot(v1ws.path) == before


def test_a_task_that_changed_since_its_import_is_a_conflict_not_a_second_job(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = make_task(tmp_path / "Runs", "ht.task.any.t.start.0.unclaimed.3.waitstart")
    (first,) = import_tree(v1ws.path, tmp_path / "Runs").entries
    task.rename(task.with_name("ht.task.any.t.second.0.unclaimed.3.waitstep"))  # v1 ran on meanwhile
    (again,) = import_tree(v1ws.path, tmp_path / "Runs").entries
    assert again.action is ImportAction.REFUSED and again.job_id == first.job_id
    assert "imported before with another definition" in str(again.reason)
    assert "initial_step" in str(again.reason) and "inputs.v1.status" in str(again.reason)
    assert len(v1ws.list_jobs()) == 1


def test_terminal_tasks_are_imported_only_when_asked(tmp_path: Path, v1ws: V1Workspace) -> None:
    fixture_tree(tmp_path / "Runs")
    report = import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(include_finished=True))
    assert {a for k, a in actions(report).items() if k in ("bad", "done", "odd", "slow")} == {"imported"}
    v1ws.run()
    kinds = {j["tag"]: j["kind"] for j in v1ws.list_jobs()}
    assert kinds["done"] == "succeeded" and kinds["bad"] == kinds["odd"] == kinds["slow"] == "failed"
    failures = {tag: v1ws.show(tag)["failure"]["code"] for tag in ("bad", "odd", "slow")}
    assert failures == {"bad": "declared_failure", "odd": "v1.stopped", "slow": "timeout"}
    assert kinds["sub1"] == "succeeded" and len(kinds) == 12  # s1, s2 of the spawner, sub1 of the parent


def test_a_live_task_is_left_alone_unless_forced(tmp_path: Path, v1ws: V1Workspace) -> None:
    live = make_task(tmp_path / "Runs", f"ht.task.any.live.relax.0.{LIVE_OWNER}.3.running", age=5)
    before = snapshot(live)
    (entry,) = import_tree(v1ws.path, tmp_path / "Runs").entries
    assert entry.action is ImportAction.SKIPPED_LIVE and "modified" in str(entry.reason)
    assert snapshot(live) == before and v1ws.list_jobs() == []
    (forced,) = import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(force=True)).entries
    assert forced.action is ImportAction.IMPORTED
    job = json.loads((v1ws.path / "v1" / str(forced.job_key) / "job.json").read_text())
    assert job["inputs"]["v1.restarts"] == 1  # claimed again, as v1 counts it


def test_move_renames_the_tasks_into_the_workspace(tmp_path: Path, v1ws: V1Workspace) -> None:
    made = fixture_tree(tmp_path / "Runs")
    parent_files = snapshot(made["parent"])
    report = import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(move=True))
    moved = [e for e in report.entries if e.action is ImportAction.IMPORTED]
    assert len(moved) == 5
    for entry in moved:
        assert not (tmp_path / "Runs" / entry.relpath).exists()
    parent = next(e for e in moved if "parent" in e.relpath)
    payload = v1ws.path / "v1" / str(parent.job_key)
    inside = {f"task/{made['parent'].name}/{relative}": entry for relative, entry in parent_files.items()}
    assert snapshot(payload) == {**placed(made["parent"], payload), **inside}
    assert not list((v1ws.path / ".httk-workflow" / "tmp").iterdir())  # no move left recorded
    assert made["done"].exists()  # a terminal task stays where it was
    again = import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(move=True))
    assert ImportAction.IMPORTED not in {e.action for e in again.entries}
    v1ws.run()
    assert {j["kind"] for j in v1ws.list_jobs()} == {"succeeded"}


def test_a_dry_run_writes_nothing(tmp_path: Path, v1ws: V1Workspace) -> None:
    fixture_tree(tmp_path / "Runs")
    tree, workspace = snapshot(tmp_path / "Runs"), snapshot(v1ws.path)
    report = import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(dry_run=True, include_finished=True))
    assert report.dry_run and set(actions(report).values()) == {"would_import", "skipped_live"}
    assert (snapshot(tmp_path / "Runs"), snapshot(v1ws.path)) == (tree, workspace)


@pytest.mark.parametrize(
    ("name", "setup", "reason"),
    [
        ("ht.task.any.a.start.0.unclaimed.3.waitstart", "no program", "neither ht_steps nor ht_run"),
        ("ht.task.any.a.start.0.unclaimed.3.waitstart", "not executable", "is not executable"),
        ("ht.task.any.a.relax+2.0.unclaimed.3.waitstep", "", "is not a step name"),
        ("ht.task._hpc.a.start.0.unclaimed.3.waitstart", "", "cannot be a claim pool"),
        ("ht.task.any.a.start.0.unclaimed.3.waitstart", "symlink", "symlinks are refused"),
    ],
)
def test_a_task_that_cannot_be_a_job_is_refused_with_why(
    tmp_path: Path, v1ws: V1Workspace, name: str, setup: str, reason: str
) -> None:
    task = make_task(tmp_path / "Runs", name, script=None if setup == "no program" else "#!/bin/sh\n")
    if setup == "not executable":
        (task / "ht_steps").chmod(0o644)
    elif setup == "symlink":
        (task / "ht.run.current").mkdir()
        (task / "ht.run.current" / "POTCAR").symlink_to("/nowhere")
    fine = make_task(tmp_path / "Runs", "ht.task.any.fine.start.0.unclaimed.3.waitstart")
    report = import_tree(v1ws.path, tmp_path / "Runs")
    refused = next(e for e in report.entries if e.relpath.endswith(task.name))
    assert refused.action is ImportAction.REFUSED and reason in str(refused.reason)
    assert not report.complete
    assert [e.action for e in report.entries if e.relpath == fine.name] == [ImportAction.IMPORTED]
    assert [j["tag"] for j in v1ws.list_jobs()] == ["fine"]
    assert v1ws.views() == [fine.name]
    assert not list((v1ws.path / ".httk-workflow" / "tmp").iterdir())


def test_tasks_that_would_be_one_job_are_both_refused(tmp_path: Path, v1ws: V1Workspace) -> None:
    make_task(tmp_path / "Runs", "ht.task.any.twin.start.0.unclaimed.3.waitstart")
    make_task(tmp_path / "Runs", "ht.task.any.twin.relax.2.unclaimed.3.waitstep")
    report = import_tree(v1ws.path, tmp_path / "Runs")
    assert [e.action for e in report.entries] == [ImportAction.REFUSED, ImportAction.REFUSED]
    assert "shares set, id and priority with ht.task.any.twin.start" in str(report.entries[0].reason)
    assert v1ws.list_jobs() == []


def test_names_it_cannot_parse_are_reported_and_leave_the_import_incomplete(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    make_task(tmp_path / "Runs", "ht.task.any.Si.2.start.0.unclaimed.3.waitstart")
    make_task(tmp_path / "Runs", "ht.task.any.ok.start.0.unclaimed.3.waitstart")
    report = import_tree(v1ws.path, tmp_path / "Runs")
    assert [(p.relpath, "shifts every later one" in p.message) for p in report.problems] == [
        ("ht.task.any.Si.2.start.0.unclaimed.3.waitstart", True)
    ]
    assert not report.complete and [e.action for e in report.entries] == [ImportAction.IMPORTED]


def test_what_cannot_start_is_refused_before_anything_is_written(tmp_path: Path, v1ws: V1Workspace) -> None:
    fixture_tree(tmp_path / "Runs")
    before = snapshot(v1ws.path)
    with pytest.raises(ImportRefusedError, match="is not a placement"):
        import_tree(v1ws.path, tmp_path / "Runs", ImportOptions(placement="/abs"))
    with pytest.raises(ImportRefusedError, match="overlap"):
        import_tree(v1ws.path, v1ws.path)
    inner = init(tmp_path / "Runs" / "ws", name="inner", durable=False).root
    with pytest.raises(ImportRefusedError, match="overlap"):
        import_tree(inner, tmp_path / "Runs")
    assert snapshot(v1ws.path) == before


def test_move_across_filesystems_is_refused(tmp_path: Path, v1ws: V1Workspace) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second filesystem (/dev/shm) to cross")
    root = shm / f"v1-import-test-{os.getpid()}"
    try:
        make_task(root, "ht.task.any.a.start.0.unclaimed.3.waitstart")
        with pytest.raises(ImportRefusedError, match="must be on one filesystem"):
            import_tree(v1ws.path, root, ImportOptions(move=True))
        assert [e.action for e in import_tree(v1ws.path, root).entries] == [ImportAction.IMPORTED]
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def test_a_task_that_cannot_be_copied_is_refused_alone(
    tmp_path: Path, v1ws: V1Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from httk.workflow.v1 import _importer
    from httk.workflow.v1._reader import read_tree

    for name in ("a", "b", "c"):
        make_task(tmp_path / "Runs", f"ht.task.any.{name}.start.0.unclaimed.3.waitstart")

    def read_then_lose_one(root: Path) -> object:
        tree = read_tree(root)
        shutil.rmtree(root / "ht.task.any.b.start.0.unclaimed.3.waitstart")  # gone before its copy
        return tree

    monkeypatch.setattr(_importer, "read_tree", read_then_lose_one)
    report = import_tree(v1ws.path, tmp_path / "Runs")
    assert [(e.relpath.split(".")[3], e.action) for e in report.entries] == [
        ("a", ImportAction.IMPORTED),
        ("b", ImportAction.REFUSED),
        ("c", ImportAction.IMPORTED),
    ]
    assert "it cannot be copied: cp -a" in str(report.entries[1].reason)
    assert sorted(j["tag"] for j in v1ws.list_jobs()) == ["a", "c"]


def test_v1s_category_directories_are_left_out_of_placements_and_job_ids(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    root = tmp_path / "Runs"
    make_task(root / "ht.waitstart/2/proj/sub", "ht.task.any.q.start.0.unclaimed.2.waitstart")
    make_task(root / "ht.running/proj/sub", f"ht.task.any.r.s.1.{DEAD_OWNER}.3.running", age=7200)
    make_task(root / "ht.finished/proj", "ht.task.any.f.x.0.unclaimed.3.finished")
    report = import_tree(v1ws.path, root, ImportOptions(include_finished=True))
    assert sorted((e.relpath.split("/")[0], e.placement) for e in report.entries) == [
        ("ht.finished", "v1/proj"),
        ("ht.running", "v1/proj/sub"),
        ("ht.waitstart", "v1/proj/sub"),
    ]
    # v1 ran on and moved the queued task through ht.running to ht.finished: the same job, not a second
    moved = root / "ht.finished/proj/sub/ht.task.any.q.start.0.unclaimed.2.finished"
    moved.parent.mkdir(parents=True)
    (root / "ht.waitstart/2/proj/sub/ht.task.any.q.start.0.unclaimed.2.waitstart").rename(moved)
    again = import_tree(v1ws.path, root, ImportOptions(include_finished=True))
    (entry,) = [e for e in again.entries if e.relpath.startswith("ht.finished/proj/sub/")]
    assert entry.action is ImportAction.REFUSED and "imported before with another definition" in str(
        entry.reason
    )
    assert len(v1ws.list_jobs()) == 3
