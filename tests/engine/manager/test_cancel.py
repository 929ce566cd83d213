"""Cancellation with real processes: fence first, stop the whole process group, finish only on evidence.

Attempts are launched by the real launch path (:func:`_launch.claim_and_launch`: prepared attempt, gated
process, process.json, running marker, released gate) with a runner that starts ``sleep 1000 &`` in its
group and waits, so "stopped" must mean the child too. The passes are called directly, as the manager
loop will call them.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._frames import Frame, kept_members
from httk.workflow.engine.core._liveness import group_alive, proc_stat
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, init, probe_marker
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._cancel import in_progress, note_reaped, on_cancelling
from httk.workflow.engine.manager._request_apply import handle_requests
from httk.workflow.engine.manager._state import LiveAttempt, ManagerConfig, ManagerState
from httk.workflow.engine.publish._submit import Submitter
from httk.workflow.engine.requests._requests import publish_request

from tests.conftest import minimal_job
from tests.jobkinds import chain, frame_of, job_in, new_state
from tests.runners import wait_until

SPAWNS_A_CHILD = """#!/bin/bash
sleep 1000 &
echo $! > child.pid.tmp && mv child.pid.tmp child.pid
wait
"""
IGNORES_TERM = """#!/bin/bash
trap '' TERM
sleep 1000 &
echo $! > child.pid.tmp && mv child.pid.tmp child.pid
while :; do wait; done
"""
PLACEMENT = "cancel"
PAYLOAD_RUNNER = {"backend": "path", "source": "payload", "path": "files/runner", "arguments": []}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return init(tmp_path / "ws", durable=False).root


@pytest.fixture
def spawned() -> Iterator[list[LiveAttempt]]:
    """Every attempt a test launched; whatever is left of its group is killed afterwards."""
    attempts: list[LiveAttempt] = []
    yield attempts
    for live in attempts:
        pgid = live.process.pid
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
        live.process.wait(timeout=10)


def launch(state: ManagerState, tmp: Path, script: str, spawned: list[LiveAttempt]) -> LiveAttempt:
    """Submit a job whose payload runner is ``script``, claim and launch it, wait for its child."""
    job = minimal_job(
        runner={"backend": "path", "source": "payload", "path": "files/runner", "arguments": []}
    )
    source = tmp / f"payload-{job['id']}"
    (source / "files").mkdir(parents=True)
    (source / "job.json").write_text(json.dumps(job))
    (source / "files" / "runner").write_text(script)
    (source / "files" / "runner").chmod(0o755)
    submitted = Submitter(state.workspace).submit_payload(source, PLACEMENT).marker
    _launch.register(state, submitted)
    ready = current(state.workspace, submitted)
    assert _launch.claim_and_launch(state, ready, state.jobs.get(ready))
    [live] = [live for live in state.live.values() if live.marker.job_key == ready.job_key]
    spawned.append(live)
    wait_until((live.prepared.workdir / "child.pid").exists, "the runner's child")
    return live


def current(ws: Workspace, marker: MarkerLocation) -> MarkerLocation:
    found = probe_marker(ws, marker.placement, marker.job_key)
    assert found is not None
    return found


def child_pid(live: LiveAttempt) -> int:
    return int((live.prepared.workdir / "child.pid").read_text())


def gone(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is None or stat[0] in ("Z", "X", "x")


def cancel(state: ManagerState, marker: MarkerLocation) -> None:
    publish_request(state.workspace, marker.placement, marker.job_key, "cancel", operator="ann", reason="why")
    assert handle_requests(state)


def finish(state: ManagerState, marker: MarkerLocation) -> dict[str, Any]:
    """Run the cancelling pass until the job is cancelled; return the cancelled frame."""

    def cancelled() -> MarkerLocation | None:
        now = current(state.workspace, marker)
        if now.kind is Kind.CANCELLED:
            return now
        assert now.kind is Kind.CANCELLING, now
        on_cancelling(state, now)
        return None

    done = wait_until(cancelled, "a verified cancellation")
    frames = chain(state.workspace, done)
    assert [frame["kind"] for frame in frames[:3]] == ["cancelled", "cancelling", "running"]
    return frames[0]


def test_cancelling_a_running_job_stops_its_whole_group(root: Path, tmp_path: Path, spawned: Any) -> None:
    state = new_state(root)
    live = launch(state, tmp_path, SPAWNS_A_CHILD, spawned)
    child, pgid = child_pid(live), live.process.pid
    cancel(state, live.marker)  # fences, then signals right away: the attempt is this manager's
    assert current(state.workspace, live.marker).kind in (Kind.CANCELLING, Kind.CANCELLED)
    frame = finish(state, live.marker)  # the chain shows running -> cancelling -> cancelled
    assert frame["cancellation"]["verified"] == "process_exited"
    assert frame["cancellation"]["exit_status"] == -signal.SIGTERM
    assert frame["cancellation"]["signal"] == signal.SIGTERM
    assert frame["request_id"] and frame["operator"] == "ann"
    assert not group_alive(pgid) and gone(child)
    assert state.live == {} and in_progress(state) == 0
    # Evidence stays: a cancelled attempt keeps its control directory (D5).
    assert live.prepared.control_dir.is_dir()


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace(
    root: Path, tmp_path: Path, spawned: Any
) -> None:
    state = new_state(root, ManagerConfig(cancel_grace_seconds=0.3))
    live = launch(state, tmp_path, IGNORES_TERM, spawned)
    child, pgid = child_pid(live), live.process.pid
    cancel(state, live.marker)
    on_cancelling(state, current(state.workspace, live.marker))
    assert group_alive(pgid)  # SIGTERM is ignored; only the grace's SIGKILL ends it
    frame = finish(state, live.marker)
    assert frame["cancellation"]["verified"] == "process_exited"
    assert frame["cancellation"]["signal"] == signal.SIGKILL
    assert not group_alive(pgid) and gone(child)


def age_heartbeat(ws: Workspace, manager_id: str) -> None:
    """Stands in for a manager that died long ago (nobody will write its heartbeat again)."""
    directory = ws.managers_dir / manager_id
    directory.mkdir(parents=True, exist_ok=True)
    heartbeat = {"manager_id": manager_id, "updated_at": "2000-01-01T00:00:00.000000Z", "lease_seconds": 1.0}
    (directory / "heartbeat.json").write_text(json.dumps(heartbeat))


def test_a_dead_owners_attempt_is_stopped_by_another_manager(
    root: Path, tmp_path: Path, spawned: Any
) -> None:
    owner = new_state(root)
    live = launch(owner, tmp_path, SPAWNS_A_CHILD, spawned)
    child, pgid = child_pid(live), live.process.pid
    age_heartbeat(owner.workspace, owner.manager_id)
    other = new_state(root)
    cancel(other, live.marker)
    frame = finish(other, live.marker)
    fenced = chain(other.workspace, current(other.workspace, live.marker))[1]
    assert fenced["manager_id"] == owner.manager_id  # the previous owner, named for recovery
    assert fenced["cancellation"]["fenced_by"] == other.manager_id
    assert frame["cancellation"]["verified"] == "process_group_absent"
    assert frame["cancellation"]["previous_manager_id"] == owner.manager_id
    assert not group_alive(pgid) and gone(child)


def test_a_live_owner_stops_its_own_attempt_after_another_manager_fenced_it(
    root: Path, tmp_path: Path, spawned: Any
) -> None:
    owner = new_state(root)
    live = launch(owner, tmp_path, SPAWNS_A_CHILD, spawned)
    other = new_state(root)
    cancel(other, live.marker)
    fenced = current(other.workspace, live.marker)
    assert on_cancelling(other, fenced) is None  # not its process while the owner heartbeats
    assert group_alive(live.process.pid)
    frame = finish(owner, live.marker)
    assert frame["cancellation"]["verified"] == "process_exited"
    assert frame["cancellation"]["fenced_by"] == other.manager_id


def test_an_exit_reaped_by_the_reap_loop_is_process_exited_evidence(
    root: Path, tmp_path: Path, spawned: Any
) -> None:
    owner = new_state(root)
    live = launch(owner, tmp_path, SPAWNS_A_CHILD, spawned)
    assert not note_reaped(owner, live, 0)  # still running: the reap loop commits as usual
    other = new_state(root)
    cancel(other, live.marker)
    os.killpg(live.process.pid, signal.SIGKILL)  # the process dies; the owner's reap loop sees it
    status = live.process.wait(timeout=10)
    del owner.live[str(live.frame["attempt_id"])]
    assert note_reaped(owner, live, status)  # fenced: the caller must not commit it
    frame = finish(owner, live.marker)
    assert frame["cancellation"]["verified"] == "process_exited"
    assert frame["cancellation"]["exit_status"] == -signal.SIGKILL


def test_a_claim_cancelled_before_its_launch_never_runs(root: Path, tmp_path: Path) -> None:
    """The launch gate makes ``no_launched_process`` true: the launch loses its rename and aborts."""
    owner = new_state(root)
    job = minimal_job(
        runner={"backend": "path", "source": "payload", "path": "files/runner", "arguments": []}
    )
    source = tmp_path / "payload"
    (source / "files").mkdir(parents=True)
    (source / "job.json").write_text(json.dumps(job))
    (source / "files" / "runner").write_text("#!/bin/bash\ntouch ran\n")
    (source / "files" / "runner").chmod(0o755)
    submitted = Submitter(owner.workspace).submit_payload(source, PLACEMENT).marker
    _launch.register(owner, submitted)
    ready = current(owner.workspace, submitted)
    loaded = owner.jobs.get(ready)
    claim = _launch.claim_frame(owner, frame_of(owner, ready), loaded)
    claimed = owner.move(ready, Frame(Kind.CLAIMED, claim), Trigger.CLAIM).current
    assert claimed is not None
    other = new_state(root)
    cancel(other, claimed)
    done = current(owner.workspace, claimed)
    assert done.kind is Kind.CANCELLED
    assert frame_of(other, done)["cancellation"]["verified"] == "no_launched_process"
    # The owner carries on with its launch. Its aborted gate outlives the launch call for a moment,
    # so the dropped Popen (freed by the cycle collector: the lost rename's exception holds its frame)
    # warns that it is still running; the gate exits on its own right after.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        _launch.launch(owner, claimed, claim, loaded)
        gc.collect()
    assert owner.live == {}  # it lost the rename and aborted the gate
    assert not list(loaded.payload_dir.rglob("ran"))


def test_another_hosts_process_stays_cancelling_and_warns_once(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = new_state(root)
    marker = job_in(state, Kind.RUNNING)
    with caplog.at_level(logging.WARNING, logger="httk.workflow.manager"):
        cancel(state, marker)
        fenced = current(state.workspace, marker)
        for _ in range(3):
            assert on_cancelling(state, fenced) is None
    assert current(state.workspace, marker) == fenced
    warnings = [record for record in caplog.records if "stays cancelling" in record.getMessage()]
    assert len(warnings) == 1 and "elsewhere.invalid" in warnings[0].getMessage()
    assert "elsewhere.invalid" in frame_of(state, fenced)["cancellation"]["unverified_reason"]


def test_an_attempt_without_a_recorded_process_is_no_launched_process(root: Path) -> None:
    state = new_state(root)
    running = job_in(state, Kind.RUNNING)
    members = {
        key: value for key, value in kept_members(frame_of(state, running)).items() if key != "process"
    }
    members |= {"cancellation": {"attempt_id": members["attempt_id"]}, "reason": "operator_cancel"}
    fenced = state.move(running, Frame(Kind.CANCELLING, members), Trigger.CANCEL_FENCE).current
    assert fenced is not None
    assert on_cancelling(state, fenced) is True
    done = current(state.workspace, running)
    assert frame_of(state, done)["cancellation"]["verified"] == "no_launched_process"


def test_an_unrelated_process_that_reused_the_pid_is_not_the_group(root: Path) -> None:
    """The recorded leader is gone and its pid now leads another group: the attempt's group is gone.

    The stand-in for the unrelated group is a ``sleep`` of this test's own, so a wrong answer would
    only signal that.
    """
    state = new_state(root)
    stranger = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        stat = proc_stat(stranger.pid)
        assert stat is not None
        identity = {
            "host": socket.gethostname(),
            "pid": stranger.pid,
            "pgid": stranger.pid,
            "start_ticks": stat[2] - 1,  # the recorded process started earlier: this is a reuse
            "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
            "pid_namespace": os.readlink("/proc/self/ns/pid"),
        }
        running = job_in(state, Kind.RUNNING, process=identity)
        cancel(state, running)
        done = current(state.workspace, running)
        assert done.kind is Kind.CANCELLED
        assert frame_of(state, done)["cancellation"]["verified"] == "process_group_absent"
        assert stranger.poll() is None  # never signalled
    finally:
        stranger.kill()
        stranger.wait()
