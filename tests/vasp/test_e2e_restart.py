"""A manager and its runner killed in the middle of a VASP run, and a fresh manager resuming from CONTCAR;
an operator's cancel stopping VASP through the runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from httk.workflow.vasp import VASP_RELAX, parse_poscar, read_oszicar
from httk.workflow.vasp._process import still_running

from tests.vasp.e2e import (
    HTTK,
    RUN_OPTIONS,
    Job,
    environment,
    httk,
    mock_command,
    run_manager,
    submit,
    workspace,
)

DEADLINE = 60.0
LEASE = 2.0


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _vasp_identity(job: Job) -> dict[str, object] | None:
    try:
        identity: dict[str, object] = json.loads((job.run / ".httk-vasp" / "process.json").read_text())
    except (OSError, ValueError):
        return None
    return identity


def _ionic_steps(job: Job) -> int:
    try:
        return len(read_oszicar(job.run / "OSZICAR"))
    except Exception:
        return 0


def _contcar_complete(job: Job) -> bool:
    try:
        return parse_poscar((job.run / "CONTCAR").read_text()).natoms == 2
    except Exception:
        return False


def _freeze_mid_run(job: Job) -> dict[str, object]:
    """Stop VASP (SIGSTOP) at a moment its CONTCAR is whole and it has done two ionic steps."""
    while True:
        wait_until(lambda: _vasp_identity(job) is not None and _ionic_steps(job) >= 2, "two ionic steps")
        identity = _vasp_identity(job)
        assert identity is not None
        os.kill(int(identity["pid"]), signal.SIGSTOP)  # type: ignore[call-overload]
        if _contcar_complete(job):
            return identity
        os.kill(int(identity["pid"]), signal.SIGCONT)  # type: ignore[call-overload]
        time.sleep(0.01)


def test_a_fresh_manager_resumes_a_killed_relaxation_from_its_contcar(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_RELAX, tmp_path / "in", inputs={"vasp.command": mock_command(step_seconds=0.02)})
    argv = [HTTK, "workflow", "run", str(ws), *RUN_OPTIONS, "--lease-seconds", str(LEASE)]
    manager = subprocess.Popen(argv, env=environment(), stderr=subprocess.DEVNULL)
    try:
        vasp = _freeze_mid_run(job)
        steps_done = _ionic_steps(job)
        contcar = (job.run / "CONTCAR").read_text()
        runner = json.loads(next(job.payload.glob(".httk-attempt.*/process.json")).read_text())
        os.kill(manager.pid, signal.SIGKILL)  # the node is lost: manager, runner and VASP at once
        os.killpg(int(runner["pgid"]), signal.SIGKILL)
        manager.wait()
        wait_until(lambda: not still_running(vasp), "VASP to die with its runner")
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.wait()
    # The dead manager's lease runs out (its heartbeat falls silent); then a fresh one takes the job over.
    heartbeat = next((ws / ".httk-workflow" / "managers").glob("*/heartbeat.json"))
    wait_until(
        lambda: time.time() - heartbeat.stat().st_mtime > LEASE + 0.5, "the dead manager's lease to expire"
    )
    run_manager(ws)
    assert job.kind() == "succeeded"
    state = job.state()
    first, second = state["runs"][0], state["runs"][1]
    assert first["outcome"] == "interrupted" and first["contcar"] is True
    assert len(first["ionic_steps"]) == steps_done
    archived = job.run / second["archive"] / "POSCAR"
    assert parse_poscar(archived.read_text()).positions == parse_poscar(contcar).positions
    restart = [event for event in job.events() if event["kind"] == "vasp.restart"]
    assert len(restart) == 1 and restart[0]["details"]["unclean"] is True
    assert "continuing from its CONTCAR" in restart[0]["message"]


def test_cancelling_a_running_job_stops_vasp_through_the_runner(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_RELAX, tmp_path / "in", inputs={"vasp.command": mock_command(step_seconds=0.05)})
    manager = subprocess.Popen(
        [HTTK, "workflow", "run", str(ws), *RUN_OPTIONS], env=environment(), stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: _vasp_identity(job) is not None and _ionic_steps(job) >= 1, "VASP to run")
        vasp = _vasp_identity(job)
        assert vasp is not None
        httk(
            "job", "request", str(ws), job.key, "cancel", "--operator", "test", "--reason", "no longer needed"
        )
        assert manager.wait(timeout=DEADLINE) == 0
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.wait()
    assert job.kind() == "cancelled"
    assert not still_running(vasp)
    stopped = [event for event in job.events() if event["kind"] == "vasp.stopped"]
    assert stopped and stopped[0]["details"]["signal"] == "SIGTERM"
    assert stopped[0]["details"]["stage"] == "stopcar"  # VASP ended at its STOPCAR, before any signal
    assert not (job.run / ".httk-vasp" / "process.json").exists()
