"""The coordinator stopped after each of its own mutations, its manager killed with it, converges under a
later manager: no stage runs twice, no progress line is said twice or lost, no amendment is applied twice.

The coordinator's mutations go through the plans package's seam (``httk.workflow.plans._mutations``),
enumerated with :func:`tests.crashkit.crash_at_every_point`. Each scenario is a workspace whose paused
coordinator has an amendment queued and the ``override_step`` that wakes it published; the code run is
a manager (a subprocess) that applies the request and runs the coordinator's activation. The reference
run lets it go to the end; a crash run holds the coordinator right after its k-th mutation (the seam's
hold file), kills the manager, then the coordinator -- a machine dying at that point -- and a later
manager, once the dead one's lease has run out, converges. The points are every mutation of that one
activation: the amendment's template, the amended ``plan.json``, each ``progress.log`` line,
``workflow-state.json``, the saved book, and the published outcome (``wait`` with the new stage job in
``cascade``, ``pause`` with ``plan blocked`` in ``blocked``); ``retry`` is the same for ``plan retry``'s
inbox command instead of an amendment.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import attach, init, probe_marker
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.plans import SubmittedPlan, amend_plan, plan_status, retry_stage
from httk.workflow.plans._mutations import CRASH_VARIABLE, TRACE_VARIABLE

from tests.crashkit import crash_at_every_point
from tests.plans.plankit import STAGE_RUNNER, plan, run_manager, stage, submit
from tests.runners import age_heartbeats

MANAGER = """
import sys
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
# unconfined: the coordinator writes the seam's trace and hold files beside the workspace
Manager(sys.argv[1], ManagerConfig(workers=2, lease_seconds=2.0, confine=False)).run()
"""

CODE = (
    f"MANAGER = {MANAGER!r}\n"
    + """
import os, signal, subprocess, sys, time
root = {root!r}
hold = root + ".hold"
env = dict(os.environ, HTTK_WORKFLOW_PLANS_CRASH_HOLD=hold)
manager = subprocess.Popen(
    [sys.executable, "-c", MANAGER, root], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
)
if "HTTK_WORKFLOW_PLANS_CRASH_AFTER" not in os.environ:
    raise SystemExit(manager.wait(timeout=300))
deadline = time.monotonic() + 120
text = ""
while not text.endswith("\\n"):
    if manager.poll() is not None or time.monotonic() > deadline:
        raise SystemExit("the coordinator did not reach the crash point")
    time.sleep(0.02)
    try:
        text = open(hold).read()
    except FileNotFoundError:
        pass
manager.kill()
manager.wait()
os.kill(int(text), signal.SIGKILL)
os._exit(86)
"""
)

SEAM = (CRASH_VARIABLE, TRACE_VARIABLE)


def _first_process(trace: list[str]) -> list[str]:
    """The mutations of the first coordinator process (the activation that applies the amendment)."""
    first = trace[0].split()[0]
    return [line for line in trace if line.split()[0] == first]


def _cascade(ws: Any, directory: Path) -> SubmittedPlan:
    """a, b after a, and c, all completed; then a parameter_change of a (a and b run again, c stays)."""
    stages = [stage("a", write="a v1"), stage("b", "a"), stage("c")]
    submitted = submit(ws, directory, plan("cascade", stages))
    run_manager(ws)
    _amend(ws, submitted, "parameter_change", "a", {"write": "a v2"})
    return submitted


def _blocked(ws: Any, directory: Path) -> SubmittedPlan:
    """a failed and b pending after it; then a criteria_change of b (nothing can start: paused again)."""
    submitted = submit(ws, directory, plan("blocked", [stage("a", fail="no"), stage("b", "a")]))
    run_manager(ws)
    _amend(ws, submitted, "criteria_change", "b", {"description": "stricter"})
    return submitted


def _amend(ws: Any, submitted: SubmittedPlan, kind: str, name: str, values: dict[str, Any]) -> None:
    said = amend_plan(
        ws, submitted.job_key, kind, name, values=values, stage_file=None, before=[],
        operator="ann", reason="for the crash test", wait=0.0,
    )  # fmt: skip
    assert said.endswith("the coordinator was paused and is asked to continue"), said


def _retry(ws: Any, directory: Path) -> SubmittedPlan:
    """a failed, then fixed and retried by ``plan retry`` (its inbox, not an amendment); b after it."""
    fixed = directory / "fixed"
    stages = [stage("a", fail="no", fail_unless=str(fixed)), stage("b", "a")]
    submitted = submit(ws, directory, plan("retry", stages))
    run_manager(ws)
    fixed.touch()
    said = retry_stage(ws, submitted.job_key, "a", operator="ann", reason="fixed")
    assert said.endswith("the coordinator was paused and is asked to continue"), said
    return submitted


SCENARIOS: dict[str, Callable[[Any, Path], SubmittedPlan]] = {
    "cascade": _cascade,
    "blocked": _blocked,
    "retry": _retry,
}


def _outcome(root: Path, submitted: SubmittedPlan) -> dict[str, Any]:
    """What the plan came to: statuses, every stage job by tag, the amendments, the log without times."""
    ws = attach(root)
    try:
        report = plan_status(ws, submitted.job_key)
        coordinator = probe_marker(ws, submitted.placement, submitted.job_key)
        assert coordinator is not None
        tags = sorted(
            path.name.split("--")[0]
            for path in (root / submitted.placement / f"{submitted.job_key}.stages").iterdir()
        )
    finally:
        ws.close()
    workdir = root / submitted.placement / submitted.job_key / "plan"
    amended = workdir / "plan.json"
    document: dict[str, Any] = (
        json.loads(amended.read_text()) if amended.exists() else {"amendments": [], "version": 1}
    )
    lines = [
        re.sub(r" \((\S+?)--\S+ g\d+\)$", r" (\1)", line.partition("] ")[2])
        for line in (workdir / "progress.log").read_text().splitlines()
    ]
    return {
        "coordinator": (coordinator.kind.value, report.message),
        "statuses": {row.id: row.status for row in report.stages},
        "stage jobs": tags,
        "amendments": [(entry["id"], entry["version"]) for entry in document["amendments"]],
        "version": document["version"],
        "log": lines,
    }


def _recover(root: Path) -> None:
    ws = attach(root)
    try:
        age_heartbeats(ws)  # the killed manager's lease has run out
        run_manager(ws)
    finally:
        ws.close()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_coordinator_killed_after_any_of_its_mutations_converges_under_a_later_manager(
    tmp_path: Path, scenario: str
) -> None:
    template = tmp_path / "template"
    ws = init(template, durable=False)
    try:
        runner = tmp_path / "stage-runner"
        runner.write_text(STAGE_RUNNER)
        runner.chmod(0o755)
        publish_runner(ws, "stage", runner)
        submitted = SCENARIOS[scenario](ws, tmp_path)
    finally:
        ws.close()
    base = tmp_path / "runs"
    base.mkdir()

    expected, failures = crash_at_every_point(
        template,
        base,
        CODE,
        _recover,
        lambda root: _outcome(root, submitted),
        seam=SEAM,
        points=_first_process,
    )

    assert failures == []
    if scenario == "retry":
        assert expected["statuses"] == {"a": "completed", "b": "completed"}
        assert expected["stage jobs"] == ["a", "a", "b"]  # the failed job stays, as history
        assert sum("stage a retried by ann: fixed" in line for line in expected["log"]) == 1
        return
    assert expected["amendments"] == [("amend-1", 2)] and expected["version"] == 2
    if scenario == "cascade":
        assert expected["coordinator"] == ("paused", "plan complete")
        assert expected["statuses"] == dict.fromkeys("abc", "completed")
        assert expected["stage jobs"] == ["a", "a-v2", "b", "b-v2", "c"]
    else:
        assert expected["coordinator"] == ("paused", "plan blocked: stage a failed (not started: b)")
        assert expected["stage jobs"] == ["a"]
    assert sum("amendment amend-1 " in line for line in expected["log"]) == 1
    assert len(list(base.glob("crash-*"))) >= 8  # template, plan.json, log lines, task list, book, outcome
    shutil.rmtree(base)  # a dozen workspace copies
