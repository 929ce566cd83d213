"""The task manager end to end: real runner processes, the real filesystem, one stored scripted runner.

Each test submits jobs whose ``inputs.steps`` script the runner of ``tests/runners.py``, runs a
:class:`Manager` until it is idle, and asserts on the state tree, the backward frame chain and what the
runner recorded. Crashes of a manager are real: a manager in a subprocess is SIGKILLed or stopped by
crash injection, and only its heartbeat's age is forged (it stands in for the time a lease takes).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._liveness import process_alive
from httk.workflow.engine.core._workspace import Workspace, init, probe_marker
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._landlock import landlock
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops._why import WhyContext, diagnose
from httk.workflow.models import validator

from tests.crashkit import count_mutations, run_crashing
from tests.runners import (
    PAYLOAD_RUNNER,
    WAIT_SECONDS,
    Record,
    age_heartbeats,
    current_marker,
    frame_chain,
    job_key,
    markers_of,
    publish_scripted_runner,
    records,
    run_bounded,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    submit_with_payload_runner,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)

MANAGER_SCRIPT = """
import socket, sys
if len(sys.argv) > 2:  # this manager's attempts look as if they ran on another host
    socket.gethostname = lambda: sys.argv[2]
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
Manager(sys.argv[1], ManagerConfig(lease_seconds=2.0, idle=True)).run()
"""

SUCCEED: dict[str, Any] = {"prepare": {}}
TWO_STEPS = {
    "prepare": {
        "action": "advance",
        "next_step": "collect",
        "runner_steps": ["prepare", "collect"],
        "write": {"name": "prepared.txt", "text": "from prepare"},
        "stdout": "preparing\n",
    },
    "collect": {"action": "succeed", "require_file": "prepared.txt", "stderr": "collected\n"},
}


def run(ws: Workspace, **config: Any) -> RunSummary:
    return Manager(ws, ManagerConfig(**config)).run()


def payload(ws: Workspace, job: dict[str, Any], placement: str = "p") -> Path:
    return ws.payload_path(placement, job_key(job))


def final(ws: Workspace, job: dict[str, Any], kind: str, placement: str = "p") -> list[dict[str, Any]]:
    """Assert the job's marker is of ``kind``; return its frames, oldest first."""
    marker = current_marker(ws, job, placement)
    assert marker.kind.value == kind, (marker, frame_chain(ws, marker)[-1])
    return frame_chain(ws, marker)


def failure_of(ws: Workspace, job: dict[str, Any]) -> dict[str, Any]:
    failure: dict[str, Any] = final(ws, job, "failed")[-1]["failure"]
    return failure


def attempt_frames(frames: list[dict[str, Any]]) -> list[str]:
    return [frame["attempt_id"] for frame in frames if frame["kind"] == "running"]


# -- the scheduling cycle ----------------------------------------------------------------------------
def test_a_two_step_job_in_a_persistent_workdir(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job(TWO_STEPS, runner)
    submit(ws, job)

    summary = run(ws)

    assert (summary.launched, summary.exit_reason) == (2, "idle")
    assert summary.census.kinds == {"succeeded": 1}
    marker = current_marker(ws, job)
    assert marker.path(ws).parent == ws.state_dir("succeeded") / "p"
    assert marker.name.generation == 9
    frames = frame_chain(ws, marker)
    kinds = ["ready", "claimed", "running", "committing"]
    assert [frame["kind"] for frame in frames] == [*kinds, *kinds, "succeeded"]
    assert frames[0]["previous_record_ref"] is None
    assert [frame["state_generation"] for frame in frames] == list(range(1, 10))
    assert all("runner_steps" not in frame for frame in frames[:3])
    assert all(frame["runner_steps"] == ["prepare", "collect"] for frame in frames[4:])
    assert frames[3]["outcome"]["next_step"] == "collect"
    assert [frame["step"] for frame in frames] == ["prepare"] * 4 + ["collect"] * 5
    first, second = records(payload(ws, job))
    assert first.workdir == second.workdir == payload(ws, job) / "run"
    assert (first.context["workdir_reused"], second.context["workdir_reused"]) == (False, True)
    assert second.context["activation_ordinal"] == 2
    assert second.context["attempt_ordinal"] == 1
    assert second.context["is_restart"] is False
    assert second.context["activation_reason"] == "advance"
    assert first.context["activation_id"] != second.context["activation_id"]
    assert (payload(ws, job) / "run" / "prepared.txt").read_text() == "from prepare"


def test_a_two_step_job_in_isolated_workdirs(ws: Workspace, tmp_path: Path) -> None:
    steps = {**TWO_STEPS, "collect": {"action": "succeed"}}
    job = scripted_job(steps, PAYLOAD_RUNNER, workdir={"mode": "isolated"})
    job_dir = submit_with_payload_runner(ws, job, tmp_path, "iso")

    run(ws)

    marker = current_marker(ws, job, "iso")
    assert marker.kind.value == "succeeded"
    assert marker.name.generation == 9
    first, second = records(job_dir)
    for record in (first, second):
        assert record.workdir == job_dir / f"run.{record.context['attempt_id']}"
        assert record.context["workdir_mode"] == "isolated"
        assert record.context["workdir_reused"] is False
        assert record.env["PWD"] == str(record.workdir)
    assert (first.workdir / "prepared.txt").is_file()
    assert not (second.workdir / "prepared.txt").exists()
    assert sorted(p.name for p in job_dir.glob("run*")) == sorted([first.workdir.name, second.workdir.name])


def test_a_durable_workspace_end_to_end(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=True)
    job = scripted_job(TWO_STEPS, publish_scripted_runner(ws, tmp_path))
    submit(ws, job)

    run(ws)

    assert final(ws, job, "succeeded")[-1]["reason"] == "succeed"
    for record in records(payload(ws, job)):
        assert record.context["durable"] is True
        assert record.env["HTTK_WORKFLOW_DURABLE"] == "1"


def test_the_outcome_is_authoritative_over_the_exit_status(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"action": "succeed", "exit": 3}}, runner)
    submit(ws, job)
    run(ws)
    final(ws, job, "succeeded")


# -- every outcome action ----------------------------------------------------------------------------
def test_advance_with_a_priority_renames_the_marker_to_it(ws: Workspace, runner: dict[str, Any]) -> None:
    steps = {"prepare": {"action": "advance", "next_step": "collect", "priority": 7}, "collect": {}}
    job = scripted_job(steps, runner)
    submit(ws, job)

    run(ws)

    marker = current_marker(ws, job)
    assert marker.name.priority == 7
    frames = final(ws, job, "succeeded")
    assert [frame["priority"] for frame in frames] == [500] * 4 + [7] * 5
    assert records(payload(ws, job))[1].context["priority"] == 7


def test_a_declared_failure_is_recorded_exactly_and_is_permanent(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    failure = {
        "code": "vasp.nonconvergent",
        "message": "electronic minimization did not converge",
        "details": {"iterations": 61, "log": "vasp/convergence.log"},
        "retryable": False,
    }
    job = scripted_job({"prepare": {"action": "fail", "failure": failure}}, runner)
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "failed")
    assert frames[-1]["failure"] == failure
    assert frames[-2]["kind"] == "committing"
    assert len(records(payload(ws, job))) == 1
    # the breadcrumb beside the kept outcome and logs, and job why reading it
    breadcrumb = payload(ws, job) / f".httk-attempt.{frames[-1]['attempt_id']}" / "error.json"
    error = json.loads(breadcrumb.read_text())
    validator("error").validate(error)
    assert (error["failure"], error["code"], error["step"]) == (failure, "vasp.nonconvergent", "prepare")
    marker = probe_marker(ws, "p", f"{job['tag']}--{job['id']}")
    assert marker is not None
    diagnosis = diagnose(ws, marker, WhyContext.read(ws))
    [found] = [f for f in diagnosis.findings if f.topic == "breadcrumb"]
    assert "error.json" in found.text and "electronic minimization did not converge" in found.text


def test_a_retryable_declared_failure_is_retried_then_succeeds(ws: Workspace, runner: dict[str, Any]) -> None:
    failure = {"code": "app.flaky", "message": "the cluster hiccuped", "retryable": True}
    steps = {"prepare": {"attempts": [{"action": "fail", "failure": failure}, {"action": "succeed"}]}}
    job = scripted_job(steps, runner, retry_on=["lease_lost"])
    submit(ws, job)

    run(ws)

    final(ws, job, "succeeded")
    first, second = records(payload(ws, job))
    assert second.context["attempt_ordinal"] == 2
    assert second.context["activation_id"] == first.context["activation_id"]
    assert second.context["previous_attempt_id"] == first.context["attempt_id"]
    assert second.context["is_restart"] is True
    assert second.context["is_unclean_restart"] is False


def test_a_retry_outcome_starts_a_clean_attempt_of_the_same_activation(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    steps = {"prepare": {"attempts": [{"action": "retry", "reason": "inputs repaired"}, {}]}}
    job = scripted_job(steps, runner)
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "succeeded")
    [retried] = [f for f in frames if f["kind"] == "ready" and f["reason"] == "retry"]
    assert retried["retry"] == {"reason": "inputs repaired"}
    first, second = records(payload(ws, job))
    assert second.context["activation_id"] == first.context["activation_id"]
    assert second.context["attempt_ordinal"] == 2
    assert second.context["attempt_reason"] == "requested_retry"
    assert second.context["previous_attempt_id"] == first.context["attempt_id"]
    assert (second.context["is_restart"], second.context["is_unclean_restart"]) == (True, False)
    assert second.env["HTTK_WORKFLOW_IS_RESTART"] == "1"
    assert second.env["HTTK_WORKFLOW_UNCLEAN_RESTART"] == "0"
    assert second.env["HTTK_WORKFLOW_ATTEMPT_REASON"] == "requested_retry"


def test_a_malformed_runner_steps_is_ignored(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"runner_steps": ["prepare", "../x"]}}, runner)
    submit(ws, job)
    run(ws)
    frames = final(ws, job, "succeeded")
    assert "runner_steps" not in frames[-2]["outcome"]
    assert all("runner_steps" not in frame for frame in frames)


def test_a_pause_outcome_parks_the_job_with_its_reason(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"action": "pause", "reason": "check the k-points"}}, runner)
    submit(ws, job)

    summary = run(ws)

    frames = final(ws, job, "paused")
    assert frames[-1]["pause"] == {"reason": "check the k-points"}
    assert summary.census.kinds == {"paused": 1}


# -- every failure code the manager emits ------------------------------------------------------------
def test_an_invalid_submitted_job_fails_with_protocol_error(ws: Workspace) -> None:
    job = scripted_job(SUCCEED, PAYLOAD_RUNNER)
    del job["initial_step"]
    key = job_key(job)
    (ws.root / "p" / key).mkdir(parents=True)
    (ws.root / "p" / key / "job.json").write_text(json.dumps(job))
    ws.marker_dir("submitted", "p").mkdir(parents=True)
    (ws.marker_dir("submitted", "p") / f"{key}.p500.g0.init").touch()

    run(ws)

    [frame] = final(ws, job, "failed")
    assert (frame["job_id"], frame["job_key"], frame["reason"]) == (job["id"], key, "invalid_submission")
    failure = frame["failure"]
    assert failure["code"] == "protocol_error"
    assert failure["message"].startswith("the submitted job is invalid: ")
    assert "initial_step" in failure["message"]
    assert "initial_step" in failure["details"]["defect"]
    assert (ws.root / "p" / key / "job.json").is_file()  # the payload is kept for diagnosis


def test_a_clean_exit_without_an_outcome_is_a_protocol_error(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"action": "exit", "exit": 0}}, runner)
    submit(ws, job)
    run(ws)
    assert failure_of(ws, job) == {
        "code": "protocol_error",
        "message": "the runner exited successfully without publishing an outcome",
        "details": {"exit_status": 0},
    }


@pytest.mark.parametrize(
    ("outcome", "defect"),
    [
        ({"attempt_id": "31fa431e-e01c-49aa-8fa8-e8af23b73c52"}, "outcome attempt_id"),
        ({"failure": {"code": "bad code", "message": "m"}}, "the published failure is malformed"),
        ({"failure": {"code": "app.x", "message": "m", "severity": 3}}, "severity"),
        ({"action": "advance", "next_step": "../collect"}, "outcome next_step"),
        ({"action": "succeed", "priority": 1000}, "outcome priority"),
        ({"action": "launch"}, "outcome action 'launch'"),
    ],
    ids=["wrong-attempt-id", "code-with-space", "extra-member", "bad-step", "bad-priority", "bad-action"],
)
def test_an_unusable_outcome_is_fenced_then_fails_with_protocol_error(
    ws: Workspace, runner: dict[str, Any], outcome: dict[str, Any], defect: str
) -> None:
    job = scripted_job({"prepare": {"action": "fail", "failure": {}, "outcome": outcome}}, runner)
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "failed")
    assert [frame["kind"] for frame in frames[-2:]] == ["committing", "failed"]
    assert frames[-2]["reason"] == "unusable_outcome"
    assert frames[-2]["outcome"] is None
    failure = frames[-1]["failure"]
    assert failure["code"] == "protocol_error"
    assert failure["message"].startswith("the published outcome is unusable: ")
    assert defect in failure["message"]
    assert set(failure) == {"code", "message"}


def test_a_nonzero_exit_without_an_outcome_is_a_process_failure(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    job = scripted_job({"prepare": {"action": "exit", "exit": 3}}, runner, retry_on=["lease_lost"])
    submit(ws, job)
    run(ws)
    assert failure_of(ws, job) == {
        "code": "process_failure",
        "message": "the runner exited with status 3 without publishing an outcome",
        "details": {"exit_status": 3},
    }


def test_a_runner_killed_by_sigkill_is_a_process_failure(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"action": "kill"}}, runner, retry_on=[])
    submit(ws, job)
    run(ws)
    assert failure_of(ws, job) == {
        "code": "process_failure",
        "message": "the runner was killed by SIGKILL without publishing an outcome",
        "details": {"signal": 9},
    }


def test_retries_of_a_process_failure_end_in_retry_exhausted(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"action": "exit", "exit": 1}}, runner, retry_on=["process_failure"])
    job["retry_policy"]["maximum_attempts_per_activation"] = 2
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "failed")
    assert len(attempt_frames(frames)) == len(records(payload(ws, job))) == 2
    failure = frames[-1]["failure"]
    assert failure["code"] == "retry_exhausted"
    assert "maximum_attempts_per_activation 2" in failure["message"]
    assert failure["details"] == {
        "last_failure": {
            "code": "process_failure",
            "message": "the runner exited with status 1 without publishing an outcome",
            "details": {"exit_status": 1},
        }
    }


def test_maximum_total_attempts_ends_in_budget_exhausted(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"action": "exit", "exit": 1}}, runner, retry_on=["process_failure"])
    job["retry_policy"]["maximum_total_attempts"] = 3
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "failed")
    assert len(records(payload(ws, job))) == 3
    failure = frames[-1]["failure"]
    assert failure["code"] == "budget_exhausted"
    assert "maximum_total_attempts 3" in failure["message"]
    assert failure["details"]["last_failure"]["code"] == "process_failure"


def test_maximum_activations_ends_an_advancing_loop(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {"action": "advance", "next_step": "prepare"}}, runner)
    job["retry_policy"]["maximum_activations"] = 3
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "failed")
    assert [r.context["activation_ordinal"] for r in records(payload(ws, job))] == [1, 2, 3]
    assert frames[-1]["failure"]["code"] == "budget_exhausted"
    assert "maximum_activations 3" in frames[-1]["failure"]["message"]
    assert frames[-2]["kind"] == "committing"


def test_a_missing_workspace_runner_is_runner_unavailable(ws: Workspace) -> None:
    missing = {"backend": "path", "source": "workspace", "path": "absent", "sha256": "0" * 64}
    job = scripted_job(SUCCEED, missing)
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "failed")
    assert [frame["kind"] for frame in frames] == ["ready", "claimed", "failed"]
    failure = frames[-1]["failure"]
    assert failure["code"] == "runner_unavailable"
    assert "'absent' was not found" in failure["message"]
    assert failure["details"] == {"path": "absent"}


def test_a_tampered_stored_runner_is_runner_mismatch(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job(SUCCEED, runner)
    submit(ws, job)
    stored = ws.runners_dir / runner["path"]
    stored.write_text(stored.read_text() + "# tampered\n")

    run(ws)

    failure = failure_of(ws, job)
    assert failure["code"] == "runner_mismatch"
    assert failure["details"]["expected_sha256"] == runner["sha256"]
    assert failure["details"]["actual_sha256"] != runner["sha256"]
    assert not records(payload(ws, job))


# -- context, environment and restart detection ------------------------------------------------------
def test_an_unclean_restart_after_sigkill(ws: Workspace, runner: dict[str, Any]) -> None:
    steps = {"prepare": {"attempts": [{"action": "kill"}, {"action": "succeed"}]}}
    job = scripted_job(steps, runner, retry_on=["process_failure"])
    submit(ws, job)

    run(ws)

    final(ws, job, "succeeded")
    first, second = records(payload(ws, job))
    assert second.context["is_restart"] is True
    assert second.context["is_unclean_restart"] is True
    assert second.context["attempt_reason"] == "process_failure"
    assert second.context["previous_attempt_id"] == first.context["attempt_id"]
    assert second.context["workdir_reused"] is True
    assert second.env["HTTK_WORKFLOW_UNCLEAN_RESTART"] == "1"
    assert second.env["HTTK_WORKFLOW_IS_RESTART"] == "1"
    assert second.env["HTTK_WORKFLOW_ATTEMPT_REASON"] == "process_failure"


def test_the_attempt_context_and_environment(
    ws: Workspace, runner: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"vasp.command": "mpirun vasp", "cores": 4, "fast": True, "grid": [1, 2], "site": "settings"}
    ws.update_document({"settings": settings})
    monkeypatch.setenv("HTTK_SITE", "deployment")
    monkeypatch.setenv("HTTK_WORKFLOW_STEP", "stale")
    job = scripted_job(SUCCEED, runner, resources={"cores": 4})
    submit(ws, job, "project-17/0/03a")

    run(ws)

    [record] = records(ws.payload_path("project-17/0/03a", job_key(job)))
    context, env = record.context, record.env
    job_dir = ws.payload_path("project-17/0/03a", job_key(job))
    control = job_dir / f".httk-attempt.{context['attempt_id']}"
    assert {k: context[k] for k in ("format", "format_version", "workspace_id", "job_id", "placement")} == {
        "format": "httk-workflow-attempt-context",
        "format_version": 1,
        "workspace_id": ws.workspace_id,
        "job_id": job["id"],
        "placement": "project-17/0/03a",
    }
    assert context["step"] == "prepare"
    assert (context["attempt_ordinal"], context["is_restart"], context["is_unclean_restart"]) == (
        1,
        False,
        False,
    )
    assert (context["attempt_reason"], context["previous_attempt_id"]) == ("initial", None)
    assert (context["activation_reason"], context["workdir_mode"]) == ("initial", "persistent")
    assert (context["data_generation"], context["durable"], context["join"]) == (None, False, None)
    assert (context["resources"], context["children"], context["settings"]) == ({"cores": 4}, [], settings)
    frames = final(ws, job, "succeeded", "project-17/0/03a")
    assert context["activation_id"] == frames[0]["activation_id"]
    assert context["attempt_id"] == frames[1]["attempt_id"]
    shipped = Path(__file__).resolve().parents[3] / "sdk-bash" / "httk-workflow.sh"
    # Other installed distributions' Bash libraries (the VASP one here) are exported beside the SDK's.
    add_ons = {
        name: path
        for name, path in _launch.installed_bash_apis()[0].items()
        if name != "HTTK_WORKFLOW_BASH_API"
    }
    assert {k: v for k, v in env.items() if k.startswith("HTTK_WORKFLOW_")} == add_ons | {
        "HTTK_WORKFLOW_BASH_API": str(shipped.resolve()),
        "HTTK_WORKFLOW_CONTEXT": str(control / "context.json"),
        "HTTK_WORKFLOW_CONTROL_DIR": str(control),
        "HTTK_WORKFLOW_WORKSPACE_DIR": str(ws.root.absolute()),
        "HTTK_WORKFLOW_JOB_DIR": str(job_dir.absolute()),
        "HTTK_WORKFLOW_WORKDIR": str(job_dir.absolute() / "run"),
        "HTTK_WORKFLOW_IS_RESTART": "0",
        "HTTK_WORKFLOW_UNCLEAN_RESTART": "0",
        "HTTK_WORKFLOW_DURABLE": "0",
        "HTTK_WORKFLOW_ATTEMPT_REASON": "initial",
        "HTTK_WORKFLOW_STEP": "prepare",
        "HTTK_WORKFLOW_PYTHON": sys.executable,
    }
    assert env["PWD"] == str(job_dir.absolute() / "run")
    assert (env["HTTK_VASP_COMMAND"], env["HTTK_CORES"], env["HTTK_FAST"]) == ("mpirun vasp", "4", "true")
    assert "HTTK_GRID" not in env
    assert env["HTTK_SITE"] == "deployment"  # the manager's environment is a deployment override


# -- D5: attempt control after a commit --------------------------------------------------------------
def test_committed_attempts_leave_their_output_in_stdio_log(ws: Workspace, runner: dict[str, Any]) -> None:
    steps = {
        "prepare": {"attempts": [{"action": "retry", "stdout": "first try"}, TWO_STEPS["prepare"]]},
        "collect": {"action": "succeed", "stderr": "collected\n"},
    }
    job = scripted_job(steps, runner)
    submit(ws, job)

    run(ws)

    job_dir = payload(ws, job)
    first, second, third = records(job_dir)
    assert not list(job_dir.glob(".httk-attempt.*"))
    assert (job_dir / "logs" / "stdio.log").read_text() == (
        f"== attempt 1 of step 'prepare' ({first.context['attempt_id']}) ==\nfirst try\n"
        f"== attempt 2 of step 'prepare' ({second.context['attempt_id']}) ==\npreparing\n"
        f"== attempt 1 of step 'collect' ({third.context['attempt_id']}) ==\n-- stderr --\ncollected\n"
    )


def test_a_failed_attempt_keeps_its_control_directory(
    ws: Workspace, runner: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # TMPDIR holds the workspace, so the confined attempt's TMPDIR is tmp/ in its control directory.
    monkeypatch.setenv("TMPDIR", str(ws.root.parent))
    failure = {"code": "app.broken", "message": "broken inputs"}
    job = scripted_job({"prepare": {"action": "fail", "failure": failure, "stdout": "evidence\n"}}, runner)
    submit(ws, job)

    run(ws)

    job_dir = payload(ws, job)
    [record] = records(job_dir)
    control = job_dir / f".httk-attempt.{record.context['attempt_id']}"
    assert sorted(p.name for p in control.iterdir()) == [
        "context.json",
        "error.json",
        "outcome.ready",
        "process.json",
        "runner",
        "stderr.log",
        "stdout.log",
        *(["tmp"] if landlock().abi is not None else []),
    ]
    assert (control / "stdout.log").read_text() == "evidence\n"
    assert not (job_dir / "logs" / "stdio.log").exists()  # logs/ itself is made for a confined runner


# -- recovery of what a dead manager left ------------------------------------------------------------
def start_manager(ws: Workspace, *host: str) -> subprocess.Popen[bytes]:
    """A manager in its own process (lease 2 s), optionally pretending to run on ``host``."""
    return subprocess.Popen(
        [sys.executable, "-c", MANAGER_SCRIPT, str(ws.root), *host],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill_manager(manager: subprocess.Popen[bytes]) -> None:
    manager.send_signal(signal.SIGKILL)
    manager.wait(timeout=WAIT_SECONDS)


def kill_group(job_dir: Path) -> None:
    """Clean up after a test: stop every runner process group recorded below ``job_dir``."""
    for process_file in job_dir.glob(".httk-attempt.*/process.json"):
        identity = {**json.loads(process_file.read_text()), "host": socket.gethostname()}
        if process_alive(identity):
            os.killpg(identity["pgid"], signal.SIGKILL)


class Captured(logging.Handler):
    """The manager's log messages, whatever routing another test configured in this process."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def manager_log() -> Iterator[Captured]:
    logger = logging.getLogger("httk.workflow.manager")
    handler, level = Captured(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def first_record(job_dir: Path) -> Record:
    return wait_until(lambda: records(job_dir), "the runner to start")[0]


@pytest.mark.parametrize("retry_on", [["lease_lost"], []], ids=["retried", "not-retried"])
def test_an_orphaned_attempt_of_a_dead_manager_is_killed_and_recovered(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path, retry_on: list[str]
) -> None:
    never = tmp_path / "never-created"
    steps = {"prepare": {"attempts": [{"wait_for": str(never)}, {"action": "succeed"}]}}
    job = scripted_job(steps, runner, retry_on=retry_on)
    submit(ws, job)
    job_dir = payload(ws, job)
    dead = start_manager(ws)
    try:
        orphan = first_record(job_dir)
        kill_manager(dead)
        [dead_id] = age_heartbeats(ws)
        control = job_dir / f".httk-attempt.{orphan.context['attempt_id']}"
        identity = json.loads((control / "process.json").read_text())
        assert process_alive(identity) is True

        run(ws)

        assert process_alive(identity) is False
        if not retry_on:
            failure = failure_of(ws, job)
            assert failure["code"] == "lease_lost"
            assert failure["message"] == f"the owning manager {dead_id} stopped heartbeating"
            assert failure["details"]["heartbeat_age_seconds"] > 3600
            return
        frames = final(ws, job, "succeeded")
        [claim] = [f for f in frames if f["kind"] == "claimed" and f["attempt_ordinal"] == 2]
        evidence = claim["takeover"]
        assert (evidence["rule"], evidence["killed_orphan"]) == ("process_gone", True)
        assert evidence["previous_manager_id"] == dead_id
        assert evidence["workdir_mode"] == "persistent"
        assert evidence["heartbeat_age_seconds"] > 3600
        assert claim["attempt_reason"] == "lease_lost"
        second = records(job_dir)[1]
        assert second.context["attempt_reason"] == "lease_lost"
        assert second.context["previous_attempt_id"] == orphan.context["attempt_id"]
        assert (second.context["is_restart"], second.context["is_unclean_restart"]) == (True, True)
    finally:
        dead.kill()
        kill_group(job_dir)


@pytest.mark.parametrize(
    ("mode", "config", "rule"),
    [
        ("persistent", {"idle": True, "idle_timeout": 0.6}, None),
        ("isolated", {}, "heartbeat_silent"),
        ("persistent", {"unsafe_persistent_takeover": True}, "unsafe_persistent_takeover"),
    ],
    ids=["persistent-left-alone", "isolated-after-grace", "unsafe-persistent"],
)
def test_an_attempt_that_ran_on_another_host(
    *,
    ws: Workspace,
    runner: dict[str, Any],
    tmp_path: Path,
    manager_log: Captured,
    mode: str,
    config: dict[str, Any],
    rule: str | None,
) -> None:
    steps = {"prepare": {"attempts": [{"wait_for": str(tmp_path / "never")}, {"action": "succeed"}]}}
    workdir = {"mode": mode, "path": "run"} if mode == "persistent" else {"mode": mode}
    job = scripted_job(steps, runner, workdir=workdir)
    submit(ws, job)
    job_dir = payload(ws, job)
    dead = start_manager(ws, "elsewhere.example")
    try:
        first_record(job_dir)
        kill_manager(dead)
        age_heartbeats(ws)

        # Left alone, the marker is examined on every idle pass (each 0.25 s) until 0.6 s of quiet.
        summary = run(ws, **config)

        if rule is None:
            assert current_marker(ws, job).kind.value == "running"
            assert summary.census.kinds == {"running": 1}
            leaving = [m for m in manager_log.messages if m.startswith("leaving attempt")]
            assert len(leaving) == 1  # logged once, not on every pass
            assert "its writer ran on host elsewhere.example" in leaving[0]
            return
        frames = final(ws, job, "succeeded")
        [claim] = [f for f in frames if f["kind"] == "claimed" and f["attempt_ordinal"] == 2]
        assert claim["takeover"]["rule"] == rule
        if mode == "isolated":
            assert claim["takeover"]["grace_seconds"] == 4.0  # twice the dead manager's 2 s lease
        else:
            assert claim["takeover"]["unsafe"] is True
    finally:
        dead.kill()
        kill_group(job_dir)


def test_an_outcome_published_before_the_manager_died_is_committed(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    never = tmp_path / "never-created"
    job = scripted_job({"prepare": {"action": "succeed", "linger_for": str(never)}}, runner)
    submit(ws, job)
    job_dir = payload(ws, job)
    dead = start_manager(ws)
    try:
        first = first_record(job_dir)
        control = job_dir / f".httk-attempt.{first.context['attempt_id']}"
        wait_until((control / "outcome.ready").is_dir, "the outcome to be published")
        kill_manager(dead)
        age_heartbeats(ws)

        summary = run(ws)

        frames = final(ws, job, "succeeded")
        assert summary.launched == 0
        assert len(attempt_frames(frames)) == len(records(job_dir)) == 1
        assert frames[-2]["kind"] == "committing"
        assert frames[-2]["manager_id"] == summary.manager_id
    finally:
        dead.kill()
        kill_group(job_dir)


def manager_code(root: Path) -> str:
    return (
        "from httk.workflow.engine.manager._manager import Manager\n"
        "from httk.workflow.engine.manager._state import ManagerConfig\n"
        f"Manager({str(root)!r}, ManagerConfig()).run()\n"
    )


def scenario(tmp_path: Path, name: str) -> tuple[Workspace, dict[str, Any]]:
    ws = init(tmp_path / name, durable=False)
    job = scripted_job(TWO_STEPS, publish_scripted_runner(ws, tmp_path / f"{name}-scratch"))
    submit(ws, job)
    return ws, job


def test_an_abandoned_commit_is_finished_without_rerunning_the_step(tmp_path: Path) -> None:
    probe, _ = scenario(tmp_path, "probe")
    trace = count_mutations(manager_code(probe.root), tmp_path / "trace")
    index = next(
        int(line.split("\t")[0])
        for line in trace
        if line.split("\t")[1] == "rename" and "/.httk-workflow/state/committing/" in line
    )
    ws, job = scenario(tmp_path, "ws")

    run_crashing(manager_code(ws.root), index)

    assert current_marker(ws, job).kind.value == "committing"
    [dead_id] = age_heartbeats(ws)
    summary = run(ws)
    frames = final(ws, job, "succeeded")
    assert [r.context["step"] for r in records(payload(ws, job))] == ["prepare", "collect"]
    assert summary.launched == 1
    committing = frames[3]
    assert (committing["kind"], committing["manager_id"]) == ("committing", dead_id)
    assert (frames[4]["kind"], frames[4]["manager_id"]) == ("ready", summary.manager_id)


# -- claim eligibility and order ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("claim", "reason", "config"),
    [
        ({"pool": "gpu", "required_capabilities": []}, "pool gpu", {"pools": ("gpu",)}),
        (
            {"pool": "default", "required_capabilities": ["avx512"]},
            "capability avx512",
            {"capabilities": ("avx512",)},
        ),
    ],
    ids=["pool", "capability"],
)
def test_only_an_eligible_manager_claims(
    ws: Workspace, runner: dict[str, Any], claim: dict[str, Any], reason: str, config: dict[str, Any]
) -> None:
    job = scripted_job(SUCCEED, runner, claim=claim)
    submit(ws, job)

    ineligible = run(ws)

    assert current_marker(ws, job).kind.value == "ready"
    assert ineligible.launched == 0
    assert ineligible.census.not_claimable == {reason: 1}
    assert f"1 not claimable here ({reason}: 1)" in ineligible.census.line()
    eligible = run(ws, **config)
    assert eligible.launched == 1
    final(ws, job, "succeeded")


def test_the_best_priority_in_the_window_launches_first(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    launches = tmp_path / "launches"
    launches.mkdir()
    jobs = [
        scripted_job({"prepare": {"launch_log": str(launches), "label": f"p{p}"}}, runner, priority=p)
        for p in (700, 100, 400, 100)
    ]
    for job in jobs:
        submit(ws, job)

    run(ws, workers=1)

    assert [path.read_text() for path in sorted(launches.iterdir())] == [
        "p100\n",
        "p100\n",
        "p400\n",
        "p700\n",
    ]
    assert all(current_marker(ws, job).kind.value == "succeeded" for job in jobs)
    assert not markers_of(ws, "ready")


# -- regressions -------------------------------------------------------------------------------------
def test_a_ready_job_whose_frame_cannot_be_read_does_not_keep_the_manager_awake(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    job = scripted_job(SUCCEED, runner, claim={"pool": "gpu", "required_capabilities": []})
    submit(ws, job)
    run(ws)  # registers it; this manager cannot claim it
    ref = current_marker(ws, job).name.ref
    assert ref is not None
    segment = ws.journal_dir / ref.writer / f"{ref.segment}.hwj"
    data = bytearray(segment.read_bytes())
    data[ref.offset + 8 + 2] ^= 0x01  # one bit inside the frame's JSON: its checksum no longer matches
    segment.write_bytes(bytes(data))

    summary = run_bounded(Manager(ws, ManagerConfig(pools=("gpu",))))

    assert summary.exit_reason == "idle"
    assert (summary.launched, summary.census.kinds) == (0, {"ready": 1})


def test_an_attempt_launched_as_a_drain_begins_is_stopped_too(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = scripted_job({"prepare": {"wait_for": str(tmp_path / "never")}}, runner)
    submit(ws, job)
    manager = Manager(ws, ManagerConfig(drain_timeout=WAIT_SECONDS))
    launch = _launch.launch_all

    def launch_as_the_signal_arrives(*args: Any) -> None:
        manager.request_drain()  # SIGTERM handled between the claim and the launch
        launch(*args)

    monkeypatch.setattr(_launch, "launch_all", launch_as_the_signal_arrives)

    summary = manager.run()

    assert summary.exit_reason == "drained"
    frames = final(ws, job, "ready")
    assert frames[-1]["attempt_reason"] == "lease_lost"
    assert frames[-1]["last_failure"]["message"] == "the manager drained and stopped the attempt"


def test_an_exit_without_outcome_that_fails_the_job_leaves_its_breadcrumb(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    job = scripted_job({"prepare": {"action": "exit", "exit": 3}}, runner, retry_on=[])
    submit(ws, job)

    run(ws)

    frames = final(ws, job, "failed")
    control = payload(ws, job) / f".httk-attempt.{frames[-1]['attempt_id']}"
    error = json.loads((control / "error.json").read_text())
    validator("error").validate(error)
    assert error["failure"] == frames[-1]["failure"] and error["code"] == "process_failure"
    assert (control / "stdout.log").exists()  # kept beside it: the attempt's evidence stays whole
