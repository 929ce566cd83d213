"""``job debug`` end to end: real runner processes driven by a private, restricted manager.

The scripted Bash runner of ``tests/runners.py`` plays each step; a fan-out parent is a real Bash runner
on the shipped Bash API. A debug run that has not stopped by the deadline is drained by a SIGINT to this
process (the manager's own handler), so a test can fail but never hang.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._scan import MarkerStream
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker
from httk.workflow.engine.manager._launch import register
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops import _debug_watch
from httk.workflow.engine.ops._debug import DebugError, DebugOptions, DebugResult, debug_job
from httk.workflow.engine.ops._debug_watch import JobWatcher, stdio_sections
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.engine.requests._requests import publish_request

from tests.conftest import minimal_job
from tests.joinkit import manager_state
from tests.runners import (
    WAIT_SECONDS,
    current_marker,
    frame_chain,
    job_key,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    ws_fixture,  # noqa: F401 (a fixture)
)

TWO_STEPS = {
    "prepare": {
        "action": "advance",
        "next_step": "collect",
        "runner_steps": ["prepare", "collect"],
        "stdout": "preparing\nsecond line\n",
    },
    "collect": {"action": "succeed", "stderr": "collected\n"},
}

FAN_OUT_RUNNER = r"""#!/usr/bin/env bash
set -euo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"

fan() {
  local n
  for n in 0 1; do
    httk_workflow_spawn "part-$n" work --input "n=$n"
  done
  echo "fanned out"
  httk_workflow_wait gather --message "fanned out"
}

work() {
  local n
  httk_workflow_setting n n
  echo "working on $n"
  httk_workflow_succeed
}

gather() {
  echo "gathered"
  httk_workflow_succeed
}

httk_workflow_register_step fan
httk_workflow_register_step work
httk_workflow_register_step gather
httk_workflow_dispatch
"""


def debug(ws: Workspace, target: str | Path, **options: Any) -> tuple[DebugResult, list[str]]:
    """Run ``job debug`` in this process; its result and every line it printed."""
    lines: list[str] = []
    watchdog = threading.Timer(WAIT_SECONDS, os.kill, (os.getpid(), signal.SIGINT))
    watchdog.start()
    try:
        result = debug_job(ws.root, str(target), DebugOptions(**options), echo=lines.append)
    finally:
        watchdog.cancel()
    return result, lines


def payload_of(tmp_path: Path, job: dict[str, Any]) -> Path:
    """A payload directory outside the workspace holding ``job``."""
    payload = tmp_path / "payloads" / str(job["id"])
    payload.mkdir(parents=True)
    (payload / "job.json").write_text(json.dumps(job, indent=2))
    return payload


def transitions(lines: list[str], key: str) -> list[str]:
    """The ``from -> to`` pairs of the [debug] lines about ``key``."""
    prefix = f"[debug] {key}: "
    return [line[len(prefix) :].split(" (")[0] for line in lines if line.startswith(prefix) and "->" in line]


# -- one job -----------------------------------------------------------------------------------------
def test_a_fresh_payload_runs_to_success_with_its_output_prefixed_by_step(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    job = scripted_job(TWO_STEPS, runner)
    result, lines = debug(ws, payload_of(tmp_path, job))

    key = job_key(job)
    assert result.exit_status == 0 and result.kind is Kind.SUCCEEDED and result.placement == "debug"
    assert lines[0] == f"[debug] submitted {key} at debug"
    assert transitions(lines, key) == [
        "submitted -> ready",
        "ready -> claimed",
        "claimed -> running",
        "running -> committing",
        "committing -> ready",
        "ready -> claimed",
        "claimed -> running",
        "running -> committing",
        "committing -> succeeded",
    ]
    output = [line for line in lines if not line.startswith("[debug]")]
    assert output == ["[prepare] preparing", "[prepare] second line", "[collect stderr] collected"]
    assert lines[-1] == f"[debug] {key} succeeded (exit 0)"
    # its private manager told every reader of its manifest (job why, precheck) whom it serves
    [manifest] = (ws.control / "managers").glob("*/manager.json")
    assert json.loads(manifest.read_text())["only_jobs"] == [key]
    # job log holds the same complete record
    assert [frame["kind"] for frame in frame_chain(ws, current_marker(ws, job, "debug"))][-1] == "succeeded"


def test_a_failing_job_exits_3_showing_what_the_failed_attempt_printed(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    job = scripted_job({"prepare": {"action": "exit", "exit": 1, "stderr": "boom\n"}}, runner, retry_on=[])
    result, lines = debug(ws, payload_of(tmp_path, job))

    assert result.exit_status == 3 and result.kind is Kind.FAILED
    assert "[prepare stderr] boom" in lines
    assert lines[-1].startswith(
        f"[debug] {job_key(job)} failed: process_failure: the runner exited with status 1"
    )
    assert lines[-1].endswith("(exit 3)")


def test_a_pausing_job_exits_4_with_the_advice_to_continue_it(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    job = scripted_job({"prepare": {"action": "pause", "reason": "look first"}}, runner)
    result, lines = debug(ws, payload_of(tmp_path, job))
    assert result.exit_status == 4 and result.kind is Kind.PAUSED
    assert lines[-1] == (
        f"[debug] {job_key(job)} stopped paused: continue it with 'httk job request continue' (exit 4)"
    )


def test_unrelated_jobs_and_requests_are_never_touched(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    queued = scripted_job({"prepare": {}}, runner)
    submit(ws, queued, "debug")  # the same placement as the debugged job
    register(manager_state(ws), current_marker(ws, queued, "debug"))
    ready = current_marker(ws, queued, "debug")
    waiting_room = scripted_job({"prepare": {}}, runner)
    submit(ws, waiting_room, "debug/below")  # inside the debug manager's placement prefix
    request = publish_request(ws, "debug", job_key(queued), "pause", operator="op", reason="not yours")

    job = scripted_job({"prepare": {}}, runner)
    result, _lines = debug(ws, payload_of(tmp_path, job))

    assert result.exit_status == 0
    assert current_marker(ws, queued, "debug") == ready
    assert current_marker(ws, waiting_room, "debug/below").kind is Kind.SUBMITTED
    assert request.path.exists()  # still pending in requests/ready/, for the managers that serve it


def test_an_existing_job_is_driven_by_selector_and_step_is_refused_for_it(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    job = scripted_job(TWO_STEPS, runner)
    submit(ws, job, "proj")
    result, _lines = debug(ws, job["id"][:8])
    assert result.exit_status == 0 and result.placement == "proj"

    before = current_marker(ws, job, "proj")
    with pytest.raises(DebugError, match=r"already exists .* 'httk job request override_step'"):
        debug(ws, job_key(job), step="collect")
    assert current_marker(ws, job, "proj") == before


def test_step_starts_a_fresh_payload_at_that_step(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    job = scripted_job(TWO_STEPS, runner)
    result, lines = debug(ws, payload_of(tmp_path, job), step="collect", placement="elsewhere")
    assert result.exit_status == 0 and result.placement == "elsewhere"
    frames = frame_chain(ws, current_marker(ws, job, "elsewhere"))
    assert {frame.get("step") for frame in frames} == {"collect"}
    assert "[prepare] preparing" not in lines
    stored = json.loads((ws.payload_path("elsewhere", job_key(job)) / "job.json").read_text())
    assert stored["initial_step"] == "collect"


def test_a_terminal_job_is_reported_without_running_a_manager(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {}}, runner)
    submit(ws, job, "proj")
    Manager(ws.root, ManagerConfig()).run()
    managers = sorted(ws.managers_dir.iterdir())

    result, lines = debug(ws, job_key(job))

    assert result.exit_status == 0 and lines[-1] == f"[debug] {job_key(job)} succeeded (exit 0)"
    assert sorted(ws.managers_dir.iterdir()) == managers


# -- children --------------------------------------------------------------------------------------
def fan_out_parent(ws: Workspace) -> str:
    job = minimal_job(
        tag="fan-out", initial_step="fan", runner={"backend": "path", "path": "runner", "arguments": []}
    )
    [result] = submit_jobs(
        ws, [JobSpec(job, "campaign", {"runner": FAN_OUT_RUNNER.encode()}, frozenset({"runner"}))]
    )
    return result.job_key


def children_of(ws: Workspace, key: str) -> list[MarkerLocation]:
    placement = f"campaign/{key}.children/0"
    found = [probe_marker(ws, placement, path.name) for path in sorted(ws.root.joinpath(placement).iterdir())]
    return [marker for marker in found if marker is not None]


def test_a_waiting_parent_stops_at_4_and_with_follow_children_finishes_depth_first(ws: Workspace) -> None:
    key = fan_out_parent(ws)

    result, lines = debug(ws, key)

    assert result.exit_status == 4 and result.kind is Kind.WAITING
    assert lines[-1].endswith("it waits for its children; --follow-children drives them (exit 4)")
    assert "[fan] fanned out" in lines
    children = children_of(ws, key)
    assert len(children) == 2 and {child.kind for child in children} == {Kind.SUBMITTED}

    result, lines = debug(ws, key, follow_children=True)

    assert result.exit_status == 0 and result.kind is Kind.SUCCEEDED
    assert {child.kind for child in children_of(ws, key)} == {Kind.SUCCEEDED}
    follows = [index for index, line in enumerate(lines) if line.startswith("[debug] following child")]
    assert [lines[index].split()[3] for index in follows] == ["part-0", "part-1"]
    first_done = next(i for i, line in enumerate(lines) if "-> succeeded" in line)
    assert follows[0] < first_done < follows[1]  # the first child finished before the second began
    assert (
        lines.index("[work] working on 0")
        < lines.index("[work] working on 1")
        < lines.index("[gather] gathered")
    )


# -- the pieces ------------------------------------------------------------------------------------
def test_a_restricted_stream_returns_only_the_named_jobs(ws: Workspace, runner: dict[str, Any]) -> None:
    jobs = [scripted_job({"prepare": {}}, runner) for _ in range(3)]
    for job in jobs:
        submit(ws, job, "p")
    wanted = frozenset({job_key(jobs[1])})
    with MarkerStream(ws, Kind.SUBMITTED, only_jobs=wanted) as stream:
        result = stream.next_pass()
    assert [marker.job_key for marker in result.markers] == [job_key(jobs[1])]
    assert result.entries_visited >= 3 and result.exhausted_cycle


def test_attempts_missed_live_are_printed_from_stdio_log(ws: Workspace, runner: dict[str, Any]) -> None:
    """A watcher that starts behind the job finds every attempt's control directory retired (D5)."""
    job = scripted_job(TWO_STEPS, runner)
    [submitted] = submit_jobs(ws, [JobSpec(job, "p")])
    Manager(ws.root, ManagerConfig()).run()
    lines: list[str] = []

    JobWatcher(ws.root, submitted.marker, lines.append).stop()  # one poll and the flush, no thread

    assert [line for line in lines if not line.startswith("[debug]")] == [
        "[prepare] preparing",
        "[prepare] second line",
        "[collect stderr] collected",
    ]
    assert transitions(lines, job_key(job))[-1] == "committing -> succeeded"


def test_a_probe_that_misses_a_moving_marker_is_not_a_vanished_job(
    ws: Workspace, runner: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan crossing the marker's rename finds it nowhere: only the visibility deadline makes that gone."""
    job = scripted_job(TWO_STEPS, runner)
    [submitted] = submit_jobs(ws, [JobSpec(job, "p")])
    lines: list[str] = []
    watcher = JobWatcher(ws.root, submitted.marker, lines.append)
    register(manager_state(ws), submitted.marker)
    real = probe_marker
    probes: list[MarkerLocation | None] = []

    def probe_missing_once(*args: Any) -> MarkerLocation | None:
        probes.append(None if not probes else real(*args))
        return probes[-1]

    monkeypatch.setattr(_debug_watch, "probe_marker", probe_missing_once)

    watcher.poll()  # the missed probe
    watcher.poll()  # the marker, now ready

    assert probes[0] is None and probes[1] is not None
    assert transitions(lines, job_key(job)) == ["submitted -> ready"], lines
    assert not [line for line in lines if "gone" in line]


def test_stdio_sections_split_stdout_and_stderr_per_attempt(tmp_path: Path) -> None:
    a, b = "0f0f0f0f-0000-4000-8000-00000000000a", "0f0f0f0f-0000-4000-8000-00000000000b"
    log = tmp_path / "stdio.log"
    log.write_text(
        f"== attempt 1 of step 'relax' ({a}) ==\nout\n-- stderr --\nerr\n"
        f"== attempt 2 of step 'relax' ({b}) ==\n-- stderr --\nonly err\n"
    )
    assert stdio_sections(log, {a, b}) == {a: [(False, "out"), (True, "err")], b: [(True, "only err")]}
    assert stdio_sections(log, {b}) == {b: [(True, "only err")]}
    assert stdio_sections(tmp_path / "absent.log", {a}) == {}
