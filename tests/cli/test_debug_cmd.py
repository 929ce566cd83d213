"""``job debug`` and ``job delete`` on the command line: spellings, output, exit statuses, confirmation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.cli import _delete_cmd
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import attach, probe_marker
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig

from tests.cli.conftest import Invoke, MakePayload
from tests.joinkit import manager_state, to_running
from tests.runners import publish_scripted_runner, scripted_job


def scripted_payload(
    workspace: Path, tmp_path: Path, steps: dict[str, Any], **overrides: Any
) -> tuple[Path, str]:
    """A payload outside the workspace running the stored scripted runner; (payload, job key)."""
    ws = attach(workspace)
    runner = publish_scripted_runner(ws, tmp_path)
    ws.close()
    job = scripted_job(steps, runner, **overrides)
    payload = tmp_path / "payloads" / job["id"]
    payload.mkdir(parents=True)
    (payload / "job.json").write_text(json.dumps(job))
    return payload, f"{job['tag']}--{job['id']}"


def submitted(invoke: Invoke, workspace: Path, payload: Path, placement: str = "proj/a") -> str:
    result = invoke("job", "submit", workspace, payload, "--placement", placement, "--json")
    assert result.exit_code == 0, result.output
    key: str = json.loads(result.stdout)[0]["job_key"]
    return key


def kind_of(workspace: Path, placement: str, key: str) -> Kind | None:
    marker = probe_marker(attach(workspace, writable=False), placement, key)
    return None if marker is None else marker.kind


# -- job debug -------------------------------------------------------------------------------------
def test_debug_prints_transitions_and_output_and_exits_0(
    workspace: Path, invoke: Invoke, tmp_path: Path
) -> None:
    payload, key = scripted_payload(workspace, tmp_path, {"prepare": {"stdout": "hello\n"}})
    result = invoke("job", "debug", "--workspace", workspace, payload)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"[debug] submitted {key} at debug"
    assert (
        "[prepare] hello" in lines and f"[debug] {key}: running -> committing (outcome) step prepare" in lines
    )
    assert lines[-1] == f"[debug] {key} succeeded (exit 0)"


def test_debug_in_the_workflow_spelling_exits_3_for_a_failed_job(
    workspace: Path, invoke: Invoke, tmp_path: Path
) -> None:
    payload, key = scripted_payload(
        workspace, tmp_path, {"prepare": {"action": "exit", "exit": 2}}, retry_on=[]
    )
    result = invoke("workflow", "job", "debug", workspace, payload, "--placement", "dbg/x")
    assert result.exit_code == 3, result.output
    assert kind_of(workspace, "dbg/x", key) is Kind.FAILED


def test_debug_refuses_step_for_an_existing_job_with_status_2(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    key = submitted(invoke, workspace, make_payload("one"))
    result = invoke("job", "debug", "--workspace", workspace, key, "--step", "relax")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: --step sets the initial step of a fresh payload, but job {key}")
    assert kind_of(workspace, "proj/a", key) is Kind.SUBMITTED


def test_debug_documents_its_exit_statuses(invoke: Invoke) -> None:
    result = invoke("job", "debug", "--help")
    assert "0 the job succeeded; 3 it failed; 4 it stopped without finishing" in " ".join(
        result.stdout.split()
    )


# -- job delete ------------------------------------------------------------------------------------
@pytest.fixture
def failed_job(workspace: Path, invoke: Invoke, make_payload: MakePayload) -> str:
    """A job that failed under a real manager (its runner exits 0 without an outcome)."""
    key = submitted(invoke, workspace, make_payload("failing"))
    Manager(workspace, ManagerConfig()).run()  # in-process `workflow run` would leave its log file open
    assert kind_of(workspace, "proj/a", key) is Kind.FAILED
    return key


def test_delete_removes_a_failed_job(workspace: Path, invoke: Invoke, failed_job: str) -> None:
    result = invoke("job", "delete", "--workspace", workspace, failed_job[:12], "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"deleted {failed_job} (failed at proj/a)\n"
    assert kind_of(workspace, "proj/a", failed_job) is None
    assert not (workspace / "proj" / "a" / failed_job).exists()


def test_delete_of_a_queued_job_says_it_lingers(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    set_deadline = ("workspace", "policy", "set", workspace, "visibility_deadline_seconds", "0.05")
    assert invoke(*set_deadline).exit_code == 0
    key = submitted(invoke, workspace, make_payload("queued"))
    result = invoke("workflow", "job", "delete", workspace, key)  # stdin is no terminal: no question
    assert result.exit_code == 0, result.output
    assert "are cancelled first and their markers removed 1.05 s later" in result.stderr
    assert result.stdout == f"deleted {key} (submitted at proj/a)\n"
    assert kind_of(workspace, "proj/a", key) is None


def test_one_refused_job_deletes_none(
    workspace: Path, invoke: Invoke, failed_job: str, make_payload: MakePayload
) -> None:
    running = submitted(invoke, workspace, make_payload("running"), "proj/b")
    ws = attach(workspace)
    to_running(manager_state(ws), "proj/b", running)
    ws.close()

    result = invoke("job", "delete", "--workspace", workspace, failed_job, running, "--yes")

    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: job {running} is running: only succeeded, failed, cancelled")
    assert (
        "httk job request cancel" in result.stderr
        and "1 of 2 jobs refused; nothing was deleted" in result.stderr
    )
    assert kind_of(workspace, "proj/a", failed_job) is Kind.FAILED
    assert kind_of(workspace, "proj/b", running) is Kind.RUNNING


@pytest.mark.parametrize(("answer", "deleted"), [("n\n", False), ("y\n", True)])
def test_delete_asks_on_a_terminal(
    workspace: Path, failed_job: str, monkeypatch: pytest.MonkeyPatch, answer: str, deleted: bool
) -> None:
    from httk.workflow.cli._app import app
    from typer.testing import CliRunner

    monkeypatch.setattr(_delete_cmd, "_interactive", lambda: True)
    result = CliRunner().invoke(
        app, ["job", "delete", "--workspace", str(workspace), failed_job], input=answer
    )
    assert f"{failed_job} (failed at proj/a)" in result.stderr and "Delete these 1 job(s)" in result.stderr
    assert (kind_of(workspace, "proj/a", failed_job) is None) is deleted
    assert result.exit_code == (0 if deleted else 1)


def test_force_skips_the_question(
    workspace: Path, invoke: Invoke, failed_job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_delete_cmd, "_interactive", lambda: True)
    result = invoke("job", "delete", "--workspace", workspace, failed_job, "--force")
    assert result.exit_code == 0, result.output
    assert kind_of(workspace, "proj/a", failed_job) is None
