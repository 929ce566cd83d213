"""The v1 runner killed at every point between the program's exit and its outcome, for every kind of
decision: the next attempt completes the decision without running the step again, and every v1 side
effect (ht.reason, the archive, subtasks, the view) happens exactly once (the freeze hook runs again
only when the runner died after it). And an attempt killed whole between a step's commit and its
replay: the retry replays the commit and goes on from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import make_task

POINTS = ("program_exited", "recorded", "side_effects", "view")

API_SCRIPT = r"""#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
echo "$STEP" >>"$HT_TASK_TOP_DIR/trace"
leaf() { cp "$HT_TASK_TOP_DIR/ht_steps" .; echo leaf >kind; }
case "$STEP" in
  start) [ -e ../kind ] && HT_TASK_FINISHED; HT_TASK_NEXT second ;;
  second) [ -e ../broken ] && HT_TASK_BROKEN; HT_TASK_FINISHED ;;
  spawn) HT_TASK_CREATE leaf <<<"$(printf 'a\nb\n')"; HT_TASK_SUBTASKS collect ;;
  collect) ls -d ht.task.* >collected; HT_TASK_FINISHED ;;
  freeze) exit 0 ;;
esac
"""

# decision of the crashed step -> (initial step, marker file, expected trace of the top-level task)
SCENARIOS = {
    "advance": ("start", None, ["start", "second"]),
    "finished": ("start", None, ["start", "second"]),
    "broken": ("second", "broken", ["second", "freeze"]),
    "wait": ("spawn", None, ["spawn", "collect"]),
}


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("decision", sorted(SCENARIOS))
def test_a_runner_killed_after_the_program_completes_its_decision(
    tmp_path: Path, v1ws: V1Workspace, decision: str, point: str
) -> None:
    step, marker, expected = SCENARIOS[decision]
    task = make_task(tmp_path, f"ht.task.any.c.{step}.0.unclaimed.3.waitstart", script=API_SCRIPT)
    if marker:
        (task / marker).touch()
    job = v1ws.submit(task)
    (tmp_path / "crash").mkdir()  # a confined runner may write what lies beside the workspace already
    once = tmp_path / "crash" / "crashed"
    v1ws.run(env={"HTTK_V1_CRASH_AT": f"{decision}:{point}", "HTTK_V1_CRASH_ONCE": str(once)})
    assert once.exists(), "the crash point was never reached"
    show = v1ws.show(job)
    payload = v1ws.task(job)
    trace = (payload / "trace").read_text().split()
    if decision == "broken" and point in ("side_effects", "view"):
        expected = [*expected, "freeze"]  # the hook ran, then the runner died: it runs again
    assert trace == expected
    assert show["kind"] == ("failed" if decision == "broken" else "succeeded")
    assert show["state"]["total_attempts"] == (2 if decision == "broken" else 3)  # one retried attempt
    (view,) = v1ws.views()
    if decision == "broken":
        assert (payload / "ht.reason").read_text() == "Task gave 'broken' as return code.\n"
        assert view == "ht.task.any.c.second.1.unclaimed.3.broken"  # the retry counts as a v1 restart
        return
    assert view.endswith(".1.unclaimed.3.finished")
    assert [p.name for p in payload.glob("ht.run.current")] == []
    (archive,) = payload.glob("ht.run.*")
    if decision == "wait":
        assert (archive / "collected").read_text().split() == [
            "ht.task.any.a.start.0.unclaimed.3.finished",
            "ht.task.any.b.start.0.unclaimed.3.finished",
        ]
        assert sorted(j["tag"] for j in v1ws.list_jobs()) == ["a", "b", "c"]


# start commits its decision in a v1 transaction, then its attempt dies with it (the runner and the
# program killed together, as when a node goes) before anything replays or publishes the decision.
DIES_AFTER_COMMIT = r"""#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
echo "$STEP" >>"$HT_TASK_TOP_DIR/trace"
case "$STEP" in
  start)
    HT_TASK_ATOMIC_SECTION_START
    echo "kept" >result
    echo second >ht.nextstep
    HT_TASK_ATOMIC_SECTION_END
    kill -KILL 0 ;;
  second) [ -f result ] && HT_TASK_FINISHED; HT_TASK_BROKEN ;;
esac
"""


def test_an_attempt_killed_between_a_commit_and_its_replay_goes_on_from_the_commit(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    task = make_task(tmp_path, "ht.task.any.k.start.0.unclaimed.3.waitstart", script=DIES_AFTER_COMMIT)
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == "succeeded", show
    assert show["state"]["total_attempts"] == 3  # the killed one, its retry (the committed advance), second
    payload = v1ws.task(job)
    assert (payload / "trace").read_text().split() == ["start", "second"]  # start never ran again
    (archive,) = payload.glob("ht.run.2*")
    assert (archive / "result").read_text() == "kept\n"
    assert "ht.nextstep names second, decided before this activation (start) ran: advance" in v1ws.log(job)
