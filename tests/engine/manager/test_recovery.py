"""A manager known dead is dead now (DECISIONS D17): what it owned is recovered without waiting its lease.

Every owner here is a real manager that really died: a separate interpreter publishes its manifest and a
fresh heartbeat, moves jobs into the owned kinds with the engine calls the passes use, and exits. Its
lease (900 s) has barely begun, so only the evidence that its process is gone from this host can admit
the recovery, and that evidence must be in the frame. The controls keep everything else as it was: a
live owner on this host, and a dead owner whose host this process cannot check.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._liveness import identity_of, manager_gone, read_manifest
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, init, probe_marker
from httk.workflow.engine.manager import _recovery
from httk.workflow.engine.manager._manager import ManagerIdentity, ManagerRecord
from httk.workflow.engine.manager._request_apply import handle_requests, statistics
from httk.workflow.engine.manager._state import ManagerState

from tests.jobkinds import chain, job_in, new_state, write_request

ROOT = Path(__file__).resolve().parents[3]
LEASE = 900.0

LEAVE_AND_DIE = """
import json, subprocess, sys
from pathlib import Path
from httk.workflow.engine.core._liveness import identity_of
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.manager._manager import ManagerIdentity, ManagerRecord
from tests.jobkinds import job_in, new_state
state = new_state(Path(sys.argv[1]))
identity = ManagerIdentity(state.manager_id, ("default",), (), lease_seconds={lease!r})
ManagerRecord(state.workspace, identity, state.writer_id).create()
runner = subprocess.Popen(["sleep", "60"])
process = dict(identity_of(runner.pid))  # a runner of this host that is gone by the time anyone looks
runner.kill()
runner.wait()
keys = {{kind: job_in(state, Kind(kind), process=process).job_key for kind in sys.argv[2:]}}
print(json.dumps({{"manager_id": state.manager_id, "keys": keys}}))
"""


def leave_and_die(root: Path, *kinds: Kind) -> tuple[str, dict[Kind, str]]:
    """A manager process that leaves one job in each of ``kinds`` and exits; its id and the job keys."""
    done = subprocess.run(
        [sys.executable, "-c", LEAVE_AND_DIE.format(lease=LEASE), str(root), *(k.value for k in kinds)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    left = json.loads(done.stdout)
    return left["manager_id"], {Kind(kind): key for kind, key in left["keys"].items()}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return init(tmp_path / "ws", durable=False)


def marker_of(ws: Workspace, key: str) -> MarkerLocation:
    found = probe_marker(ws, "p", key)
    assert found is not None
    return found


def recoverer(ws: Workspace) -> ManagerState:
    return new_state(ws.root)


def test_the_manifest_records_what_tells_the_process_from_a_recycled_pid(ws: Workspace) -> None:
    dead, _ = leave_and_die(ws.root)
    manifest = read_manifest(ws, dead)
    assert manifest is not None
    assert {"host", "pid", "process"} <= set(manifest)
    assert {"start_ticks", "boot_id", "pid_namespace"} <= set(manifest["process"])
    assert manager_gone(manifest)


@pytest.mark.parametrize(
    ("change", "gone"),
    [
        ({}, False),
        ({"start_ticks": -1}, True),  # the pid now belongs to a process that started at another tick
        ({"host": "elsewhere.invalid"}, False),
        ({"boot_id": "another-boot"}, False),
        ({"pid_namespace": "pid:[1]"}, False),
        ({"start_ticks": None}, False),  # an older manifest without a start time proves nothing
    ],
    ids=["this-process", "recycled-pid", "other-host", "other-boot", "other-namespace", "no-start-time"],
)
def test_a_manager_is_gone_only_when_its_identity_proves_it(change: dict[str, Any], gone: bool) -> None:
    own = identity_of(os.getpid())
    process = {key: own[key] for key in ("start_ticks", "boot_id", "pid_namespace")}
    manifest = {"host": own["host"], "pid": own["pid"], "process": process}
    for member, value in change.items():
        if member == "host":
            manifest["host"] = value
        else:
            process[member] = value
    assert manager_gone(manifest) is gone


def test_a_dead_manager_s_claim_is_released_at_once(ws: Workspace) -> None:
    dead, keys = leave_and_die(ws.root, Kind.CLAIMED)
    state = recoverer(ws)
    assert _recovery.on_claimed_or_running(state, marker_of(ws, keys[Kind.CLAIMED])) is True
    after = marker_of(ws, keys[Kind.CLAIMED])
    assert after.kind is Kind.READY
    released = chain(ws, after)[0]["released_claim"]
    assert released["manager_id"] == dead and released["manager_process_gone"] is True
    assert 0 <= released["heartbeat_age_seconds"] < LEASE


def test_a_dead_manager_s_commit_is_finished_at_once(ws: Workspace) -> None:
    _, keys = leave_and_die(ws.root, Kind.COMMITTING)
    assert _recovery.on_committing(recoverer(ws), marker_of(ws, keys[Kind.COMMITTING])) is True
    assert marker_of(ws, keys[Kind.COMMITTING]).kind is Kind.SUCCEEDED


def test_a_dead_manager_s_attempt_whose_runner_is_gone_is_taken_over_at_once(ws: Workspace) -> None:
    dead, keys = leave_and_die(ws.root, Kind.RUNNING)
    assert _recovery.on_claimed_or_running(recoverer(ws), marker_of(ws, keys[Kind.RUNNING])) is True
    after = marker_of(ws, keys[Kind.RUNNING])
    assert after.kind is Kind.READY
    frame = chain(ws, after)[0]
    evidence = frame["takeover"]
    assert (evidence["rule"], evidence["previous_manager_id"]) == ("process_gone", dead)
    assert evidence["manager_process_gone"] is True and evidence["heartbeat_age_seconds"] < LEASE
    assert frame["last_failure"]["message"] == f"the owning manager {dead}'s process is gone from this host"
    assert frame["last_failure"]["details"]["manager_process_gone"] is True


def test_the_claimed_requests_of_a_dead_manager_are_reclaimed_at_once(ws: Workspace) -> None:
    dead, _ = leave_and_die(ws.root)
    state = recoverer(ws)
    marker = job_in(state, Kind.READY)
    request = write_request(ws, marker, "pause")
    claimed = ws.requests_dir / "claimed" / dead
    claimed.mkdir()
    os.rename(request, claimed / request.name)
    assert handle_requests(state)
    assert marker_of(ws, marker.job_key).kind is Kind.PAUSED
    assert statistics(state).reclaimed == 1 and not claimed.exists()


# -- what stays as it was ----------------------------------------------------------------------------
def test_a_live_manager_on_this_host_keeps_what_it_owns(ws: Workspace) -> None:
    owner = new_state(ws.root)
    identity = ManagerIdentity(owner.manager_id, ("default",), (), lease_seconds=LEASE)
    ManagerRecord(ws, identity, owner.writer_id).create()  # this very process: alive
    claimed, running = job_in(owner, Kind.CLAIMED), job_in(owner, Kind.RUNNING)
    committing = job_in(owner, Kind.COMMITTING)
    state = recoverer(ws)
    assert _recovery.on_claimed_or_running(state, claimed) is None
    assert _recovery.on_claimed_or_running(state, running) is None
    assert _recovery.on_committing(state, committing) is None
    for marker in (claimed, running, committing):
        assert marker_of(ws, marker.job_key) == marker


def test_a_dead_manager_whose_host_cannot_be_checked_keeps_its_lease(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, keys = leave_and_die(ws.root, Kind.CLAIMED, Kind.COMMITTING)
    monkeypatch.setattr(socket, "gethostname", lambda: "elsewhere.invalid")
    state = recoverer(ws)
    assert _recovery.on_claimed_or_running(state, marker_of(ws, keys[Kind.CLAIMED])) is None
    assert _recovery.on_committing(state, marker_of(ws, keys[Kind.COMMITTING])) is None
    assert {marker_of(ws, key).kind for key in keys.values()} == {Kind.CLAIMED, Kind.COMMITTING}
