from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._liveness import (
    group_alive,
    process_alive,
    read_process_file,
    write_process_file,
)
from httk.workflow.engine.core._workspace import init
from httk.workflow.engine.manager._attempt import AttemptPlan, PreparedAttempt, prepare_attempt
from httk.workflow.engine.manager._gate import GATE_ABORTED, GatedProcess, spawn_gated
from httk.workflow.engine.publish._runners import RunnerFailure
from httk.workflow.engine.publish._submit import Submitter, job_key_of
from httk.workflow.protocol import InvalidDocumentError

from tests.conftest import minimal_job

MARKER_SCRIPT = (
    b"#!/bin/sh\n"
    b'printf "%s|%s|%s|%s\\n" "$PWD" "$HTTK_WORKFLOW_STEP" "$HTTK_VASP_COMMAND" '
    b'"${HTTK_WORKFLOW_DATA_DIR-unset}" > marker\n'
    b"echo to-stdout\n"
    b"echo to-stderr >&2\n"
)


def _prepare(tmp_path: Path, script: bytes = MARKER_SCRIPT) -> PreparedAttempt:
    """A prepared attempt of a payload runner ``script`` in a fresh non-durable workspace."""
    ws = init(tmp_path / "ws", durable=False)
    job = minimal_job()
    payload = tmp_path / "payload"
    (payload / "files").mkdir(parents=True)
    (payload / "job.json").write_text(json.dumps(job))
    (payload / "files/runner").write_bytes(script)
    (payload / "files/runner").chmod(0o755)
    Submitter(ws).submit_payload(payload, "p")
    plan = AttemptPlan(
        workspace=ws,
        job=job,
        job_dir=ws.payload_path("p", str(job_key_of(job))),
        job_id=job["id"],
        job_key=str(job_key_of(job)),
        placement="p",
        step="relax",
        activation_id=str(uuid.uuid4()),
        activation_ordinal=1,
        activation_reason="initial",
        attempt_id=str(uuid.uuid4()),
        attempt_ordinal=1,
        total_attempts=1,
        is_restart=False,
        is_unclean_restart=False,
        attempt_reason="initial",
        previous_attempt_id=None,
        data_generation=None,
        priority=500,
        settings={"vasp.command": "mpirun vasp_std"},
    )
    return prepare_attempt(plan, environ={})


def _until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll a real condition every 5 ms for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid``, or None once it is gone entirely."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return text[text.rindex(")") + 2]


def _gone_or_zombie(pid: int) -> bool:
    return _state(pid) in (None, "Z", "X")


@pytest.fixture
def gates() -> Any:
    """Every gate a test spawns is aborted and reaped at the end, whatever the test did."""
    spawned: list[GatedProcess] = []
    yield spawned
    for gate in spawned:
        gate.abort()
        gate.terminate_group(signal.SIGKILL)
        gate.wait(timeout=20)


# -- the gate --------------------------------------------------------------------------------------
def test_a_released_gate_runs_the_runner_in_its_workdir(tmp_path: Path, gates: list[GatedProcess]) -> None:
    prepared = _prepare(tmp_path)
    environ = {"PATH": os.environ["PATH"], "HTTK_WORKFLOW_DATA_DIR": "/stale/from/the/manager"}
    gate = spawn_gated(prepared, environ=environ)
    gates.append(gate)
    assert gate.poll() is None
    assert not (prepared.workdir / "marker").exists()  # blocked in the gate

    assert gate.release() is True
    assert gate.wait(timeout=20) == 0
    workdir, step, command, data_dir = (prepared.workdir / "marker").read_text().strip().split("|")
    assert (workdir, step, command) == (str(prepared.workdir), "relax", "mpirun vasp_std")
    assert data_dir == "unset"  # a stale protocol variable of the manager never reaches the runner
    assert prepared.stdout_path.read_text() == "to-stdout\n"
    assert prepared.stderr_path.read_text() == "to-stderr\n"
    assert gate.state == "released"


def test_an_aborted_gate_exits_125_and_never_runs_the_runner(
    tmp_path: Path, gates: list[GatedProcess]
) -> None:
    prepared = _prepare(tmp_path)
    gate = spawn_gated(prepared)
    gates.append(gate)
    assert gate.abort() is True
    assert gate.wait(timeout=20) == GATE_ABORTED
    assert not (prepared.workdir / "marker").exists()
    assert prepared.stdout_path.read_text() == ""
    with pytest.raises(RuntimeError, match="aborted"):
        gate.release()


def test_releasing_a_gate_that_already_died_reports_it(tmp_path: Path, gates: list[GatedProcess]) -> None:
    prepared = _prepare(tmp_path)
    gate = spawn_gated(prepared)
    gates.append(gate)
    assert gate.terminate_group(signal.SIGKILL) is True
    assert gate.wait(timeout=20) == -signal.SIGKILL
    assert gate.release() is False
    assert not (prepared.workdir / "marker").exists()
    assert gate.abort() is False  # released (however uselessly): nothing to abort


def test_a_gate_whose_manager_is_killed_before_release_never_runs_the_runner(tmp_path: Path) -> None:
    """The manager side runs in its own process, spawns the gate and SIGKILLs itself.

    The reaper in between is a child subreaper, so the orphaned gate is re-parented to it and its exit
    status can be observed exactly, by a blocking waitpid bounded by the subprocess timeout.
    """
    prepared = _prepare(tmp_path)
    fields = {f.name: getattr(prepared, f.name) for f in dataclasses.fields(prepared)}
    encoded = json.dumps(fields, default=str)
    manager = (
        "import json, os, signal, sys\n"
        "from pathlib import Path\n"
        "from httk.workflow.engine.manager._attempt import PreparedAttempt\n"
        "from httk.workflow.engine.manager._gate import spawn_gated\n"
        "f = json.loads(sys.argv[1])\n"
        "for name in ('control_dir', 'workdir', 'stdout_path', 'stderr_path'):\n"
        "    f[name] = Path(f[name])\n"
        "gate = spawn_gated(PreparedAttempt(**f))\n"
        "print(gate.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    reaper = (
        "import ctypes, json, os, subprocess, sys\n"
        "if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER\n"
        "    print(json.dumps({'skip': 'no child subreaper'})); sys.exit(0)\n"
        "m = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE)\n"
        "gate_pid = int(m.stdout.readline())\n"
        "m.wait()\n"
        "_, status = os.waitpid(gate_pid, 0)  # the orphaned gate is our child now\n"
        "print(json.dumps({'manager': m.returncode, 'gate': os.waitstatus_to_exitcode(status)}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", reaper, manager, encoded],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    outcome = json.loads(result.stdout)
    if "skip" in outcome:
        pytest.skip(outcome["skip"])
    assert outcome == {"manager": -signal.SIGKILL, "gate": GATE_ABORTED}
    assert not (prepared.workdir / "marker").exists()


def test_the_runner_inherits_only_its_standard_streams(tmp_path: Path, gates: list[GatedProcess]) -> None:
    prepared = _prepare(tmp_path, b"#!/bin/sh\nexec sleep 300\n")
    gate = spawn_gated(prepared)
    gates.append(gate)
    gate.release()
    # Asleep, not merely exec'd: while it starts, sleep itself opens (and closes) its locale files.
    assert _until(lambda: Path(f"/proc/{gate.pid}/comm").read_text() == "sleep\n" and _state(gate.pid) == "S")
    fds = {name: os.readlink(f"/proc/{gate.pid}/fd/{name}") for name in os.listdir(f"/proc/{gate.pid}/fd")}
    assert fds == {"0": "/dev/null", "1": str(prepared.stdout_path), "2": str(prepared.stderr_path)}
    assert gate.terminate_group() is True
    assert gate.wait(timeout=20) == -signal.SIGTERM


def test_a_descriptor_someone_made_inheritable_stays_with_the_manager(
    tmp_path: Path, gates: list[GatedProcess]
) -> None:
    prepared = _prepare(tmp_path, b"#!/bin/sh\nls /proc/$$/fd > fds.txt\n")
    opened = os.open(tmp_path / "inheritable", os.O_WRONLY | os.O_CREAT, 0o600)
    leaked = os.dup2(opened, 77)  # inheritable, as dup2 makes it, at a number nothing else uses
    try:
        gate = spawn_gated(prepared)
    finally:
        os.close(leaked)
        os.close(opened)
    gates.append(gate)
    gate.release()
    assert gate.wait(timeout=20) == 0
    listed = (prepared.workdir / "fds.txt").read_text().split()
    assert {"0", "1", "2"} <= set(listed)
    assert "77" not in listed


def test_an_unstartable_gate_is_a_process_failure(tmp_path: Path) -> None:
    prepared = _prepare(tmp_path)
    prepared.workdir.rmdir()
    with pytest.raises(RunnerFailure) as excinfo:
        spawn_gated(prepared)
    assert excinfo.value.code == "process_failure"


# -- identity, process.json, liveness --------------------------------------------------------------
def test_the_identity_names_a_new_session_and_survives_process_json(
    tmp_path: Path, gates: list[GatedProcess]
) -> None:
    prepared = _prepare(tmp_path)
    gate = spawn_gated(prepared)
    gates.append(gate)
    identity = gate.identity
    assert identity["host"] == socket.gethostname()
    assert identity["pid"] == identity["pgid"] == gate.pid == os.getpgid(gate.pid) == os.getsid(gate.pid)
    assert isinstance(identity["start_ticks"], int)
    assert identity["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()

    path = write_process_file(prepared.control_dir, identity, durable=True)
    assert path == prepared.control_dir / "process.json"
    recorded = read_process_file(prepared.control_dir)
    assert recorded == {"format": "httk-workflow-process", "format_version": 1, **identity}
    assert process_alive(recorded) is True


def test_an_absent_process_file_means_nothing_was_launched_but_a_damaged_one_raises(tmp_path: Path) -> None:
    assert read_process_file(tmp_path) is None
    (tmp_path / "process.json").write_text('{"pid": 1')
    with pytest.raises(InvalidDocumentError):
        read_process_file(tmp_path)


def test_process_alive_tells_live_recycled_dead_and_foreign_processes_apart(
    tmp_path: Path, gates: list[GatedProcess]
) -> None:
    prepared = _prepare(tmp_path)
    gate = spawn_gated(prepared)
    gates.append(gate)
    identity: dict[str, Any] = dict(gate.identity)
    assert process_alive(identity) is True
    assert process_alive({**identity, "start_ticks": identity["start_ticks"] + 1}) is False  # recycled pid
    assert process_alive({**identity, "host": "another-node"}) is None
    assert process_alive({**identity, "boot_id": str(uuid.uuid4())}) is None
    assert process_alive({**identity, "pid_namespace": "pid:[1]"}) is None
    assert process_alive({**identity, "pid": "12"}) is None

    gate.abort()
    assert _until(lambda: _state(gate.pid) == "Z")  # exited, not yet reaped by us
    assert process_alive(identity) is False
    gate.wait(timeout=20)
    assert process_alive(identity) is False


def test_terminate_group_also_stops_the_runners_own_children(
    tmp_path: Path, gates: list[GatedProcess]
) -> None:
    script = b"#!/bin/sh\nsleep 300 &\necho $! > child.pid.tmp\nmv child.pid.tmp child.pid\nwait\n"
    prepared = _prepare(tmp_path, script)
    gate = spawn_gated(prepared)
    gates.append(gate)
    gate.release()
    assert _until((prepared.workdir / "child.pid").exists)
    child = int((prepared.workdir / "child.pid").read_text())
    assert os.getpgid(child) == gate.pid
    assert group_alive(gate.pid) is True

    assert gate.terminate_group(signal.SIGTERM) is True
    assert gate.wait(timeout=20) == -signal.SIGTERM
    assert _until(lambda: _gone_or_zombie(child))
    assert _until(lambda: not group_alive(gate.pid))


def test_a_group_of_zombies_is_not_alive() -> None:
    process = subprocess.Popen(["true"], start_new_session=True)
    try:
        assert _until(lambda: _state(process.pid) == "Z")
        os.killpg(process.pid, 0)  # the kernel still knows the group ...
        assert group_alive(process.pid) is False  # ... but nothing in it can write any more
    finally:
        process.wait()
    assert group_alive(process.pid) is False


def test_repr_shows_the_gate_state(tmp_path: Path, gates: list[GatedProcess]) -> None:
    gate = spawn_gated(_prepare(tmp_path))
    gates.append(gate)
    assert repr(gate) == f"<GatedProcess pid={gate.pid} state=gated returncode=None>"
    gate.abort()
    gate.wait(timeout=20)
    assert repr(gate) == f"<GatedProcess pid={gate.pid} state=aborted returncode={GATE_ABORTED}>"
