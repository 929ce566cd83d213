"""The v1 runner under the real manager: one ht_steps step per activation, subtasks, the v1 environment,
the watchdog, transactions before and after the program, decisions already taken, archives, views (the
exit codes: test_runner_exits.py)."""

from __future__ import annotations

import bz2
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import DEAD_OWNER, fixture_tree, make_task, scripted, trace


def test_a_two_step_task_runs_to_finished_and_archives_its_run_directory(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = scripted(
        tmp_path, "ht.task.any.two.start.0.unclaimed.3.waitstart", {"start": "2 second", "second": "10"}
    )
    (task / "ht.taskmgr.stdout").write_text("(an earlier log)\n")
    job = v1ws.submit(task)
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    payload = v1ws.task(job)
    assert trace(payload) == ["start", "second"]
    (archive,) = payload.glob("ht.run.*")
    assert archive.name != "ht.run.current" and not (payload / "ht.taskmgr.stdout").exists()
    assert bz2.decompress((archive / "ht.taskmgr.stdout.bz2").read_bytes()) == b"(an earlier log)\n"
    assert v1ws.views() == ["ht.task.any.two.second.0.unclaimed.3.finished"]
    assert payload == v1ws.payload(job) / "task" / v1ws.views()[0]  # the task directory is its view
    show = v1ws.show(job)
    assert show["state"]["activation_ordinal"] == 2 and show["state"]["reason"] == "succeed"
    assert "httk v1 any.two: next step second" in v1ws.log(job)


def test_exit_3_spawns_subtasks_two_levels_deep_and_continues_once_all_are_terminal(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    spawner = r"""#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
echo "$STEP" >>"$HT_TASK_TOP_DIR/trace"
make() { cp "$HT_TASK_TOP_DIR/ht_steps" .; echo "$2" >kind; }
case "$STEP" in
  start)
    case "$(cat ../kind 2>/dev/null || echo top)" in
      top) HT_TASK_CREATE make ./ start any 2 <<<"$(printf 'a parent\nb broken\n')"
        HT_TASK_SUBTASKS collect ;;
      parent) mkdir -p sub; HT_TASK_CREATE make sub start any 1 <<<"g leaf"; HT_TASK_SUBTASKS collect ;;
      broken) HT_TASK_BROKEN ;;
      *) HT_TASK_FINISHED ;;
    esac ;;
  collect)
    ls -d ht.task.* sub/ht.task.* 2>/dev/null | sort >collected
    HT_TASK_FINISHED ;;
  freeze) exit 0 ;;
esac
"""
    task = make_task(tmp_path, "ht.task.any.top.start.0.unclaimed.3.waitstart", script=spawner)
    job = v1ws.submit(task)
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    payload = v1ws.task(job)
    (archive,) = payload.glob("ht.run.*")
    assert (archive / "collected").read_text().split() == [
        "ht.task.any.a.collect.0.unclaimed.2.finished",
        "ht.task.any.b.start.0.unclaimed.2.broken",
    ]
    child = archive / "ht.task.any.a.collect.0.unclaimed.2.finished"
    (child_archive,) = child.glob("ht.run.*")
    assert (child_archive / "collected").read_text().split() == [
        "sub/ht.task.any.g.start.0.unclaimed.1.finished"
    ]
    assert trace(payload) == ["start", "collect"]
    assert trace(child) == ["start", "collect"]
    show = v1ws.show(job)
    assert show["state"]["activation_ordinal"] == 2
    kinds = {j["tag"]: j["kind"] for j in v1ws.list_jobs()}
    assert kinds == {"top": "succeeded", "a": "succeeded", "b": "failed", "g": "succeeded"}


ENV_DUMP = r"""#!/bin/bash
cd "$HT_TASK_CURRENT_DIR" || exit 1
{ env | grep -E '^(HT_|HTTK_DIR=|TASKMGRPID=)' | sort; echo "cwd=$PWD"; echo "args=$*"; echo "zero=$0"
  read -r -t 1 line && echo "stdin=$line" || echo "stdin=eof"; } >env.dump
echo "to stdout"; echo "to stderr" >&2
exit 10
"""


def test_the_program_gets_v1s_environment_and_its_output_appends_to_the_log(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = make_task(tmp_path, "ht.task.hpc--main.e.relax.0.unclaimed.4.waitstep", script=ENV_DUMP)
    (task / "ht.taskmgr.stdout").write_text("(earlier)\n")
    job = v1ws.submit(task)
    v1ws.run("--pool", "hpc.main", env={"HT_TASKMGR_TIMEOUT": "600"})
    assert v1ws.kind(job) == "succeeded"
    (archive,) = v1ws.task(job).glob("ht.run.*")
    dump = dict(line.split("=", 1) for line in (archive / "env.dump").read_text().splitlines())
    ran_in = (v1ws.payload(job) / "task" / task.name).resolve()  # named as it was when the step ran
    assert dump["HT_TASK_TOP_DIR"] == str(ran_in)
    assert dump["HT_TASK_CURRENT_DIR"] == dump["cwd"] == str(ran_in / "ht.run.current")
    assert (dump["HT_TASK_STEP"], dump["args"], dump["zero"]) == ("relax", "relax", "../ht_steps")
    assert dump["HT_TASK_RUN_NAME"] == "ht.run.current" and dump["stdin"] == "eof"
    assert (dump["HT_TASKMGR_TIMEOUT"], dump["HT_TASKMGR_SET"], dump["HT_TASKMGR_ATTEMPTS"]) == (
        "600",
        "hpc--main",
        "10",
    )
    assert dump["HT_TASKMGR_ROOTDIR"] == str(v1ws.path.resolve())
    assert (Path(dump["HTTK_DIR"]) / "Execution/tasks/ht_tasks_api.sh").is_file() is False  # staged, gone
    log = bz2.decompress((archive / "ht.taskmgr.stdout.bz2").read_bytes()).decode()
    assert log.startswith("(earlier)\n") and "to stdout" in log and "to stderr" in log
    assert v1ws.show(job)["priority"] == 700


@pytest.mark.parametrize("caller", ["C.UTF-8", None], ids=["LC_ALL set", "LC_ALL unset"])
def test_the_program_and_its_freeze_hook_get_the_callers_lc_all_not_the_runners_c_locale(
    tmp_path: Path, v1ws: V1Workspace, monkeypatch: pytest.MonkeyPatch, caller: str | None
) -> None:
    script = '#!/bin/bash\necho "${LC_ALL-(unset)}" >>"$HT_TASK_TOP_DIR/locale"\n'
    script += '[ "$1" = freeze ] || exit 4\n'
    task = make_task(tmp_path, "ht.task.any.loc.start.0.unclaimed.3.waitstart", script=script)
    job = v1ws.submit(task)
    if caller is None:
        monkeypatch.delenv("LC_ALL", raising=False)
    else:
        monkeypatch.setenv("LC_ALL", caller)
    v1ws.run()
    assert v1ws.show(job)["failure"]["code"] == "declared_failure"
    seen = caller or "(unset)"
    assert (v1ws.task(job) / "locale").read_text() == f"{seen}\n{seen}\n"  # the step, then its freeze hook


def test_an_ht_run_task_runs_in_its_directory_and_0_means_finished(tmp_path: Path, v1ws: V1Workspace) -> None:
    script = '#!/bin/bash\necho "$PWD $1 $HT_TASK_RUN_NAME" >ran\nexit 0\n'
    task = make_task(tmp_path, "ht.task.any.r.start.0.unclaimed.3.waitstart", script=script, program="ht_run")
    job = v1ws.submit(task)
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    task_dir = v1ws.task(job)
    ran_in = task_dir.with_name(task.name).resolve()  # named as it was when the step ran
    assert (task_dir / "ran").read_text() == f"{ran_in} start .\n"
    assert sorted(p.name for p in task_dir.iterdir()) == ["ht.taskmgr.stdout", "ht_run", "ran"]
    assert sorted(p.name for p in v1ws.payload(job).iterdir()) == [".httk-job", "job.json", "logs", "task"]


def test_the_watchdog_times_a_step_out_then_the_freeze_hook_runs(tmp_path: Path, v1ws: V1Workspace) -> None:
    script = r"""#!/bin/bash
cd "$HT_TASK_CURRENT_DIR" || exit 1
echo "$1" >>"$HT_TASK_TOP_DIR/trace"
[ "$1" = freeze ] && exit 0
trap 'echo terminated >>"$HT_TASK_TOP_DIR/trace"; exit 1' TERM
sleep 1000 & wait
"""
    task = make_task(tmp_path, "ht.task.any.slow.relax.0.unclaimed.3.waitstep", script=script)
    job = v1ws.submit(task)
    v1ws.run(env={"HTTK_V1_TIMEOUT": "1"})
    show = v1ws.show(job)
    assert show["kind"] == "failed" and show["failure"]["code"] == "timeout"
    assert show["failure"]["details"]["timeout_seconds"] == 1
    assert trace(v1ws.task(job)) == ["relax", "terminated", "freeze"]
    assert (v1ws.task(job) / "ht.reason").read_text() == "Task timed out.\n"
    assert v1ws.views() == ["ht.task.any.slow.relax.0.unclaimed.3.timeout"]


def test_a_step_that_ignores_the_watchdogs_sigterm_is_killed_after_the_grace(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    script = r"""#!/bin/bash
cd "$HT_TASK_CURRENT_DIR" || exit 1
echo "$1" >>"$HT_TASK_TOP_DIR/trace"
[ "$1" = freeze ] && exit 0
echo $$ >"$HT_TASK_TOP_DIR/pid"
trap 'echo ignored >>"$HT_TASK_TOP_DIR/trace"' TERM
while :; do sleep 0.1; done
"""
    task = make_task(tmp_path, "ht.task.any.stuck.relax.0.unclaimed.3.waitstep", script=script)
    job = v1ws.submit(task)
    v1ws.run(env={"HTTK_V1_TIMEOUT": "1"})
    show = v1ws.show(job)
    assert show["kind"] == "failed" and show["failure"]["code"] == "timeout"
    payload = v1ws.task(job)
    assert trace(payload) == ["relax", "ignored", "freeze"]
    assert not Path("/proc", (payload / "pid").read_text().strip()).exists()
    log = v1ws.log(job)
    term = log.index("httk v1 any.stuck: the step ran longer than 1 s: SIGTERM to its processes")
    assert log.index("httk v1 any.stuck: the step outlived SIGTERM by 10 s: SIGKILL") > term


def test_transactions_are_replayed_before_the_program_as_v1_did(tmp_path: Path, v1ws: V1Workspace) -> None:
    made = fixture_tree(tmp_path / "tree")
    job = v1ws.submit(made["txn"], root=tmp_path / "tree")
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    payload = v1ws.task(job)
    (archive,) = payload.glob("ht.run.*")
    assert sorted(p.name for p in archive.iterdir()) == [
        "ht.nextstep",
        "ht.taskmgr.stdout.bz2",
        "ht.vars",
        "newfile",
        "oldfile.renamed",
    ]
    assert (payload / "fixture.trace").read_text().count("ran step=step3") == 1
    assert v1ws.views() == ["ht.task.any.txn.step3.2.unclaimed.3.finished"]
    assert "decided before this activation (step2) ran" in v1ws.log(job)
    assert DEAD_OWNER not in " ".join(v1ws.views())


def test_a_transaction_committed_but_not_replayed_by_the_program_is_replayed_after_it(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    script = r"""#!/bin/bash
cd "$HT_TASK_CURRENT_DIR" || exit 1
echo "$1" >>"$HT_TASK_TOP_DIR/trace"
case "$1" in
  start) mkdir ht.tmp.atomic.0; echo second >ht.tmp.atomic.0/ht.nextstep; echo r >ht.tmp.atomic.0/result
         mv ht.tmp.atomic.0 ht.atomic.0; kill -KILL $$ ;;
  second) [ -f result ] && exit 10; exit 1 ;;
esac
"""
    task = make_task(tmp_path, "ht.task.any.t.start.0.unclaimed.3.waitstart", script=script)
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    # killed by a signal: stopped (137) as v1 did, but with the committed transaction applied
    assert show["kind"] == "failed" and show["failure"]["details"]["exit_status"] == 137
    run_dir = v1ws.task(job) / "ht.run.current"
    assert sorted(p.name for p in run_dir.iterdir()) == ["ht.nextstep", "result"]


@pytest.mark.parametrize(("sentinel", "kind"), [("ht_finished", "succeeded"), ("ht_broken", "failed")])
def test_a_decision_already_in_ht_nextstep_is_completed_without_running(
    tmp_path: Path, v1ws: V1Workspace, sentinel: str, kind: str
) -> None:
    task = scripted(
        tmp_path,
        "ht.task.any.d.relax.0.unclaimed.3.waitstep",
        {"relax": "1", "freeze": "0"},
        files={"ht.run.current/ht.nextstep": f"{sentinel}\n"},
    )
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == kind
    payload = v1ws.task(job)
    if kind == "failed":
        assert show["failure"]["code"] == "declared_failure"
        assert trace(payload) == ["freeze"]
    else:
        assert trace(payload) == []
        assert [p.name for p in payload.glob("ht.run.*")] != ["ht.run.current"]


def test_an_imported_waitsubtasks_parent_spawns_only_its_active_subtasks(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    made = fixture_tree(tmp_path / "tree")
    job = v1ws.submit(made["parent"], root=tmp_path / "tree")
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    tags = sorted(j["tag"] for j in v1ws.list_jobs())
    assert tags == ["parent", "sub1"]
    payload = v1ws.task(job)
    (archive,) = payload.glob("ht.run.*")
    assert sorted(p.name for p in archive.glob("ht.task.*")) == [
        "ht.task.any.sub1.second.0.unclaimed.2.finished",
        "ht.task.any.sub2.start.0.unclaimed.2.finished",
    ]
    assert (payload / "fixture.trace").read_text().count("ran step=collect") == 1
    (child,) = [j for j in v1ws.list_jobs() if j["tag"] == "sub1"]
    child_payload = v1ws.path / child["placement"] / child["job_key"]
    # The child's own workdir stays empty: its task works where its parent made it.
    assert sorted(p.name for p in child_payload.iterdir()) == [".httk-job", "job.json", "logs", "task"]
    assert list((child_payload / "task").iterdir()) == []


def test_too_many_restarts_stops_a_task_and_freezes_it(tmp_path: Path, v1ws: V1Workspace) -> None:
    task = scripted(
        tmp_path, f"ht.task.any.x.relax.10.{DEAD_OWNER}.3.running", {"relax": "10", "freeze": "0"}, age=7200
    )
    (task / "ht.run.current").mkdir()
    job = v1ws.submit(task, attempts=10)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == "failed" and show["failure"]["message"] == "Too many restarts!"
    assert show["failure"]["details"] == {"v1_status": "stopped", "restarts": 11, "attempts": 10}
    assert trace(v1ws.task(job)) == ["freeze"]
    assert v1ws.views() == ["ht.task.any.x.relax.11.unclaimed.3.stopped"]


class Imported(NamedTuple):
    status: str
    reason: str | None
    kind: str
    code: str | None


@pytest.mark.parametrize(
    "case",
    [
        Imported("finished", None, "succeeded", None),
        Imported("broken", "Task gave 'broken' as return code.", "failed", "declared_failure"),
        Imported("timeout", "Task timed out.", "failed", "timeout"),
        Imported(
            "stopped", "Task returned non-defined error code (43). This usually...", "failed", "timeout"
        ),
        Imported(
            "stopped", "Task returned non-defined error code (5). This usually...", "failed", "v1.stopped"
        ),
    ],
    ids=lambda case: f"{case.status}-{case.code}",
)
def test_a_terminal_task_imported_ends_at_once_as_it_ended_in_v1(
    tmp_path: Path, v1ws: V1Workspace, case: Imported
) -> None:
    status, reason, kind, code = case
    files = {"ht.run.2024-01-01_12.00.00/ht.nextstep": "ht_finished\n"} if status == "finished" else {}
    if reason:
        files = {"ht.reason": f"{reason}\n", "ht.run.current/.keep": ""}
    task = scripted(tmp_path, f"ht.task.any.t.relax.0.unclaimed.3.{status}", {}, files=files)
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == kind and trace(v1ws.task(job)) == []
    if code is None:
        assert sorted(p.name for p in v1ws.task(job).glob("ht.run.*")) == ["ht.run.2024-01-01_12.00.00"]
    else:
        assert show["failure"]["code"] == code and show["failure"]["message"] == reason
        assert (v1ws.task(job) / "ht.reason").read_text() == f"{reason}\n"
    assert v1ws.views() == [f"ht.task.any.t.relax.0.unclaimed.3.{status}"]


def test_ht_run_resume_becomes_the_run_directory_and_the_old_one_is_archived(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = scripted(
        tmp_path,
        "ht.task.any.r.relax.0.unclaimed.3.waitstep",
        {"relax": "2 relax", "again": "10"},
        files={
            "ht.run.current/ht.nextstep": "relax\n",
            "ht.run.current/old": "",
            "ht.run.resume/ht.nextstep": "again\n",
            "ht.run.resume/restart.dat": "",
        },
    )
    job = v1ws.submit(task)
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    payload = v1ws.task(job)
    archives = sorted(payload.glob("ht.run.*"))
    assert len(archives) == 2
    assert sorted(p.name for p in archives[0].iterdir()) == ["ht.nextstep", "old"]
    assert (archives[1] / "restart.dat").exists() and trace(payload) == ["again"]
    assert "resuming from ht.run.resume" in v1ws.log(job)


def test_a_priority_the_step_sets_becomes_the_jobs_priority(tmp_path: Path, v1ws: V1Workspace) -> None:
    script = r"""#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
case "$STEP" in
  start) HT_TASK_SET_PRIORITY 1; HT_TASK_NEXT second ;;
  second) exit 1 ;;
esac
"""
    task = make_task(tmp_path, "ht.task.any.p.start.0.unclaimed.3.waitstart", script=script)
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == "failed" and show["priority"] == 100


def test_a_status_view_is_never_read_back(tmp_path: Path, v1ws: V1Workspace) -> None:
    task = scripted(
        tmp_path, "ht.task.any.v.start.0.unclaimed.3.waitstart", {"start": "2 second", "second": "10"}
    )
    job = v1ws.submit(task)
    view = v1ws.task(job)
    view.rename(view.with_name("ht.task.any.v.start.0.unclaimed.3.finished"))  # a lie
    v1ws.run()
    assert v1ws.kind(job) == "succeeded" and trace(v1ws.task(job)) == ["start", "second"]
    assert v1ws.views() == ["ht.task.any.v.second.0.unclaimed.3.finished"]


def test_a_task_directory_gone_from_its_payload_fails_the_job_naming_it(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = scripted(tmp_path, "ht.task.any.v.start.0.unclaimed.3.waitstart", {"start": "10"})
    job = v1ws.submit(task)
    shutil.rmtree(v1ws.task(job))
    v1ws.run()
    failure = v1ws.show(job)["failure"]
    assert failure["code"] == "v1.task_missing"
    assert "0 task directories match ht.task.any.v.* in" in failure["message"], failure


def request(v1ws: V1Workspace, job: object, *args: str) -> None:
    from tests.v1.v1jobs import _httk

    _httk("workflow", "job", "request", str(v1ws.path), str(job.key), *args)  # type: ignore[attr-defined]


def test_an_operator_continue_reruns_a_broken_task_from_its_ht_nextstep(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = scripted(tmp_path, "ht.task.any.c.relax.0.unclaimed.3.waitstep", {"relax": "4", "freeze": "0"})
    job = v1ws.submit(task)
    v1ws.run()
    assert v1ws.kind(job) == "failed"
    (v1ws.task(job) / "plan.relax").write_text("10\n")  # the operator repaired the inputs
    request(v1ws, job, "continue", "--force")
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    assert trace(v1ws.task(job)) == ["relax", "freeze", "relax"]


def test_override_step_runs_the_operators_step_even_against_ht_nextstep(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = scripted(tmp_path, "ht.task.any.o.relax.0.unclaimed.3.waitstep", {"relax": "1", "fix": "10"})
    job = v1ws.submit(task)
    v1ws.run()
    assert v1ws.kind(job) == "failed"
    (v1ws.task(job) / "ht.run.current" / "ht.nextstep").write_text("relax\n")
    request(v1ws, job, "override_step", "--step", "fix", "--force")
    v1ws.run()
    assert v1ws.kind(job) == "succeeded"
    assert trace(v1ws.task(job)) == ["relax", "fix"]


def test_cancelling_a_running_step_stops_the_program_too(tmp_path: Path, v1ws: V1Workspace) -> None:
    import subprocess
    import time

    from tests.v1.v1jobs import HTTK

    script = r"""#!/bin/bash
cd "$HT_TASK_CURRENT_DIR" || exit 1
echo $$ >"$HT_TASK_TOP_DIR/program.pid"
sleep 1000 & wait
"""
    task = make_task(tmp_path, "ht.task.any.k.relax.0.unclaimed.3.waitstep", script=script)
    job = v1ws.submit(task)
    manager = subprocess.Popen([HTTK, "workflow", "run", str(v1ws.path), "--pool", "any"])
    try:
        pid_file = v1ws.task(job) / "program.pid"
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "the program never started"
            time.sleep(0.05)
        request(v1ws, job, "cancel")
        assert manager.wait(timeout=120) == 0
    finally:
        manager.kill()
    assert v1ws.kind(job) == "cancelled"
    program = int(pid_file.read_text())
    assert (
        not Path(f"/proc/{program}").exists() or "Z" in Path(f"/proc/{program}/stat").read_text().split()[2]
    )


def test_a_next_step_that_is_no_step_name_fails_clearly(tmp_path: Path, v1ws: V1Workspace) -> None:
    task = scripted(tmp_path, "ht.task.any.n.start.0.unclaimed.3.waitstart", {"start": "2 relax+again"})
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == "failed" and show["failure"]["code"] == "v1.invalid_step"
    assert "'relax+again'" in show["failure"]["message"]
    assert v1ws.views() == ["ht.task.any.n.start.0.unclaimed.3.stopped"]


def test_a_subtask_whose_directory_is_gone_fails_naming_it(tmp_path: Path, v1ws: V1Workspace) -> None:
    import json

    from httk.workflow.engine import Submitter

    task = scripted(tmp_path, "ht.task.any.p.start.0.unclaimed.3.waitstart", {"start": "10"})
    job = v1ws.submit(task)
    staged = v1ws.workspace.tmp_dir / "orphan"
    staged.mkdir()
    document = dict(job.document, id="0d3b6a6e-7b9e-4c7b-9c52-1c1e3f6b2a10", tag="orphan")
    document["inputs"] = {
        **job.document["inputs"],
        "v1.anchor": f"{job.placement}/{job.key}",
        "v1.task": "ht.run.current/ht.task.any.gone",
        "v1.name": "ht.task.any.gone.start.0.none.3.waitstart",
    }
    (staged / "job.json").write_text(json.dumps(document))
    children = f"{job.placement}/{job.key}.children/0"  # where the runner spawns a subtask's job
    Submitter(v1ws.workspace).submit_payload(staged, children, move=True)
    v1ws.run()
    show = v1ws.show("orphan")
    assert show["kind"] == "failed" and show["failure"]["code"] == "v1.task_missing"
    assert "0 task directories match ht.task.any.gone.*" in show["failure"]["message"]


def test_a_durable_workspace_runs_v1_tasks_the_same(tmp_path: Path) -> None:
    from httk.workflow.engine import init

    durable = V1Workspace(tmp_path / "durable", init(tmp_path / "durable", name="d", durable=True))
    made = fixture_tree(tmp_path / "tree")
    jobs = [durable.submit(made[name], root=tmp_path / "tree") for name in ("spawner", "txn", "bad")]
    durable.run()
    assert [durable.kind(job) for job in jobs] == ["succeeded", "succeeded", "failed"]
