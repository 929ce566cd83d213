"""A manager killed with SIGKILL while its runner runs, taken over (or not) under each rule.

The spec's takeover table, one test per row: a persistent workdir is taken over only when the recorded
process is provably gone on this host (``process_gone``; a still-running orphan on this host is killed
first), otherwise only with ``unsafe_persistent_takeover``; an isolated workdir also after the heartbeat
has been silent for the takeover grace (``heartbeat_silent``), otherwise only with
``unsafe_isolated_takeover``. "Another host" is made honestly: the recovering process's
``socket.gethostname`` answers a different name, so the recorded identity cannot be checked from here.
The evidence must be in the new attempt's claimed frame.

A manager known dead is dead now (DECISIONS D17): without any heartbeat aged, a manager restarted on the
dead one's host resumes its jobs in its first pass, the evidence saying so (``manager_process_gone``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._liveness import group_alive
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig

from tests.crash._scenarios import (
    LEASE_SECONDS,
    Case,
    chain,
    expire_heartbeats,
    kill_group,
    new_case,
    read_executions,
    recover_until_settled,
    single_marker,
    start_manager_process,
    wait_for,
)

RECOVERY = ManagerConfig(workers=1, lease_seconds=LEASE_SECONDS)


@dataclass(frozen=True)
class Abandoned:
    """A job whose manager was SIGKILLed while its runner ran, and what the running frame recorded."""

    case: Case
    frame: dict[str, Any]

    @property
    def pgid(self) -> int:
        return int(self.frame["process"]["pgid"])


Abandon = Callable[[str], Abandoned]


@pytest.fixture
def abandon(tmp_path: Path) -> Iterator[Abandon]:
    """Run a manager until its runner blocks, SIGKILL the manager; the runner is killed at teardown."""
    started: list[Abandoned] = []

    def make(workdir_mode: str) -> Abandoned:
        case = new_case(tmp_path / f"case-{workdir_mode}", "block", workdir_mode=workdir_mode)
        manager = start_manager_process(case.root)
        try:
            wait_for(lambda: read_executions(case.exec_log).total == 1, "the first attempt to execute")
            assert manager.poll() is None, manager.communicate()
        finally:
            os.kill(manager.pid, signal.SIGKILL)
            manager.communicate()
        assert manager.returncode == -signal.SIGKILL
        workspace = attach(case.root)
        marker = single_marker(workspace, case.job_key)
        assert marker.kind is Kind.RUNNING
        frame = workspace.reader.read(str(marker.name.ref))
        started.append(Abandoned(case, frame))
        return started[-1]

    yield make
    for abandoned in started:
        kill_group(abandoned.pgid)


def _elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process now believes it runs on another host than the one that recorded the runner."""
    monkeypatch.setattr(socket, "gethostname", lambda: "elsewhere.invalid")


def _left_alone(abandoned: Abandoned, config: ManagerConfig) -> None:
    marker = single_marker(attach(abandoned.case.root), abandoned.case.job_key)
    summary = Manager(attach(abandoned.case.root), config).run()
    assert single_marker(attach(abandoned.case.root), abandoned.case.job_key) == marker
    assert summary.census.kinds["running"] == 1, summary.census
    assert group_alive(abandoned.pgid), "a manager that cannot prove the writer stopped must not stop it"


def _taken_over(abandoned: Abandoned, config: ManagerConfig, rule: str) -> dict[str, Any]:
    """Recover to success; check the evidence in the retry frame and the new attempt's claimed frame."""
    recover_until_settled(abandoned.case.root, abandoned.case.job_key, config)
    evidence = _evidence(abandoned, rule)
    assert evidence["heartbeat_age_seconds"] > abandoned.frame["lease_seconds"]
    assert evidence["manager_process_gone"] is False
    return evidence


def _evidence(abandoned: Abandoned, rule: str) -> dict[str, Any]:
    """The takeover evidence of a job that succeeded after a takeover under ``rule``, checked."""
    workspace = attach(abandoned.case.root)
    marker = single_marker(workspace, abandoned.case.job_key)
    assert marker.kind is Kind.SUCCEEDED
    frames = list(reversed(chain(workspace, marker)))
    [retry] = [
        i for i, f in enumerate(frames) if f["kind"] == "ready" and f.get("attempt_reason") == "lease_lost"
    ]
    claimed = frames[retry + 1]
    evidence: dict[str, Any] = frames[retry]["takeover"]
    assert claimed["kind"] == "claimed" and claimed["takeover"] == evidence
    assert claimed["previous_attempt_id"] == abandoned.frame["attempt_id"] and claimed["attempt_ordinal"] == 2
    assert claimed["attempt_reason"] == "lease_lost" and claimed["unclean_restart"] is True
    assert evidence["rule"] == rule
    assert evidence["previous_manager_id"] == abandoned.frame["manager_id"]
    assert evidence.get("unsafe", False) is rule.startswith("unsafe_")
    running = [f for f in frames[retry + 1 :] if f["kind"] == "running"]
    assert running and running[0]["takeover"] == evidence  # in the new attempt's running frame too
    return evidence


@pytest.mark.parametrize("runner", ["gone", "still-running"])
def test_persistent_attempt_whose_process_is_gone_on_this_host_is_taken_over(
    abandon: Abandon, runner: str
) -> None:
    abandoned = abandon("persistent")
    if runner == "gone":
        kill_group(abandoned.pgid)
    expire_heartbeats(attach(abandoned.case.root))
    _taken_over(abandoned, RECOVERY, "process_gone")
    assert not group_alive(abandoned.pgid), "the orphan is killed before its attempt is replaced"
    executions = read_executions(abandoned.case.exec_log)
    assert executions.total == 2 and len(executions.relaunches) == 1


def test_persistent_attempt_from_another_host_waits_for_the_unsafe_policy(
    abandon: Abandon, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    abandoned = abandon("persistent")
    expire_heartbeats(attach(abandoned.case.root))
    _elsewhere(monkeypatch)
    caplog.set_level(logging.INFO, logger="httk.workflow.manager")
    _left_alone(abandoned, RECOVERY)
    why = [r.getMessage() for r in caplog.records if abandoned.frame["attempt_id"] in r.getMessage()]
    assert why and abandoned.frame["process"]["host"] in why[0], caplog.text
    _taken_over(abandoned, replace(RECOVERY, unsafe_persistent_takeover=True), "unsafe_persistent_takeover")
    assert group_alive(abandoned.pgid), "the unsafe policy accepted a writer it could not stop"


@pytest.mark.parametrize("heartbeat", ["silent-past-grace", "within-grace"])
def test_isolated_attempt_from_another_host_needs_the_grace_or_the_unsafe_policy(
    abandon: Abandon, monkeypatch: pytest.MonkeyPatch, heartbeat: str
) -> None:
    abandoned = abandon("isolated")
    grace = RECOVERY.takeover_grace_factor * abandoned.frame["lease_seconds"]
    age = 5 * grace if heartbeat == "silent-past-grace" else (abandoned.frame["lease_seconds"] + grace) / 2
    expire_heartbeats(attach(abandoned.case.root), age_seconds=age)
    _elsewhere(monkeypatch)
    if heartbeat == "silent-past-grace":
        evidence = _taken_over(abandoned, RECOVERY, "heartbeat_silent")
        assert evidence["grace_seconds"] == grace and evidence["heartbeat_age_seconds"] >= age
    else:
        _left_alone(abandoned, RECOVERY)
        _taken_over(abandoned, replace(RECOVERY, unsafe_isolated_takeover=True), "unsafe_isolated_takeover")
    workdirs = {
        f["workdir"]
        for f in chain(
            attach(abandoned.case.root), single_marker(attach(abandoned.case.root), abandoned.case.job_key)
        )
        if f["kind"] == "running"
    }
    assert len(workdirs) == 2, "each isolated attempt has its own workdir"


def test_leaving_an_isolated_attempt_inside_the_grace_is_logged(
    abandon: Abandon, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    abandoned = abandon("isolated")
    lease = abandoned.frame["lease_seconds"]
    expire_heartbeats(attach(abandoned.case.root), age_seconds=1.5 * lease)
    _elsewhere(monkeypatch)
    caplog.set_level(logging.INFO, logger="httk.workflow.manager")
    _left_alone(abandoned, RECOVERY)
    assert any(abandoned.frame["attempt_id"] in r.getMessage() for r in caplog.records), caplog.text


# -- a manager known dead is dead now (D17) ------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "runner"),
    [("persistent", "exited"), ("persistent", "still-running"), ("isolated", "exited")],
)
def test_a_restarted_manager_resumes_a_dead_manager_s_jobs_at_once(
    abandon: Abandon, mode: str, runner: str
) -> None:
    abandoned = abandon(mode)
    if runner == "exited":
        kill_group(abandoned.pgid)
    # No heartbeat is aged: the dead manager's last one is seconds old and its lease is 600 s.
    summary = Manager(attach(abandoned.case.root), RECOVERY).run()
    assert summary.census.kinds["succeeded"] == 1, summary.census  # in one manager's run, its first pass
    evidence = _evidence(abandoned, "process_gone")
    assert evidence["manager_process_gone"] is True
    assert evidence["heartbeat_age_seconds"] < abandoned.frame["lease_seconds"]
    assert evidence.get("killed_orphan", False) is (runner == "still-running")
    assert not group_alive(abandoned.pgid)
    executions = read_executions(abandoned.case.exec_log)
    assert executions.total == 2 and len(executions.relaunches) == 1


def test_a_stopped_manager_is_alive_and_keeps_its_attempt(tmp_path: Path) -> None:
    """A manager whose process exists (here stopped by SIGSTOP) is not known dead: its lease holds."""
    case = new_case(tmp_path / "stopped", "block")
    manager = start_manager_process(case.root)
    try:
        wait_for(lambda: read_executions(case.exec_log).total == 1, "the first attempt to execute")
        os.kill(manager.pid, signal.SIGSTOP)
        marker = single_marker(attach(case.root), case.job_key)
        Manager(attach(case.root), replace(RECOVERY, idle=True, idle_timeout=0.5)).run()
        assert single_marker(attach(case.root), case.job_key) == marker
        assert read_executions(case.exec_log).total == 1
    finally:
        os.kill(manager.pid, signal.SIGKILL)
        manager.communicate()
        frame = attach(case.root).reader.read(str(single_marker(attach(case.root), case.job_key).name.ref))
        kill_group(int(frame["process"]["pgid"]))
