"""A manager SIGKILLed while the coordinator waits on a running stage; a later manager converges.

The stage ``b`` waits for a release file, so the kill lands at a known point: the coordinator is
waiting on its join, ``b``'s attempt is running under the dead manager, and ``c`` may or may not have
finished. The later manager recovers ``b`` (its owner is gone), the join decides, the coordinator
schedules ``d``, and the plan completes with every status change logged exactly once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from httk.workflow.engine.core._workspace import Workspace, probe_marker

from tests.plans.plankit import (
    coordinator_frames,
    first,
    plan,
    progress_log,
    run_manager,
    stage,
    stage_frames,
    statuses,
    submit,
)
from tests.runners import WAIT_SECONDS, age_heartbeats, wait_until

MANAGER_SCRIPT = """
import sys
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
Manager(sys.argv[1], ManagerConfig(workers=2, lease_seconds=2.0, idle=True)).run()
"""


def test_a_manager_killed_while_the_coordinator_waits_is_recovered_by_a_later_one(
    ws: Workspace, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    needs = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    stages = [stage("a"), stage("b", "a", wait_for=str(release)), stage("c", "a"), stage("d", "b", "c")]
    submitted = submit(ws, tmp_path, plan("killed", stages))
    manager = subprocess.Popen(
        [sys.executable, "-c", MANAGER_SCRIPT, str(ws.root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def waiting_on_running_b() -> bool:
            coordinator = probe_marker(ws, submitted.placement, submitted.job_key)
            return (
                coordinator is not None
                and coordinator.kind.value == "waiting"
                and statuses(ws, submitted).get("b") == "running"
            )

        wait_until(waiting_on_running_b, "the coordinator to wait on a running stage b")
    finally:
        manager.send_signal(signal.SIGKILL)
        manager.wait(timeout=WAIT_SECONDS)
    killed_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    age_heartbeats(ws)
    release.touch()

    run_manager(ws)

    assert statuses(ws, submitted) == dict.fromkeys(needs, "completed")
    frames = stage_frames(ws, submitted)
    for name, deps in needs.items():
        for dep in deps:
            assert first(frames[name], "ready") > first(frames[dep], "succeeded"), (name, dep)
    # b could finish only once released, after the kill: the later manager finished it
    assert first(frames["b"], "succeeded") > killed_at
    final = coordinator_frames(ws, submitted)[-1]
    assert (final["kind"], final["pause"]["reason"]) == ("paused", "plan complete")
    lines = progress_log(submitted)
    for name in needs:
        assert (
            sum(f"stage {name} (" in line and line.endswith(")") and "-> completed" in line for line in lines)
            == 1
        )
        assert sum(f"stage {name} (" in line and "-> ready" in line for line in lines) == 1
    assert sum(line.endswith("plan complete") for line in lines) == 1
