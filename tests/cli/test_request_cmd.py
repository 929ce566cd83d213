"""``job request``: both spellings of D6, the options each action takes, and what reaches requests/ready/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.cli._app import taskmanager_app
from typer.testing import CliRunner

from tests.cli.conftest import Invoke, MakePayload


@pytest.fixture
def job(workspace: Path, invoke: Invoke, make_payload: MakePayload) -> dict[str, Any]:
    result = invoke("job", "submit", workspace, make_payload("one"), "--placement", "proj/a", "--json")
    assert result.exit_code == 0, result.output
    [submitted] = json.loads(result.stdout)
    return dict(submitted)


def published(workspace: Path) -> list[dict[str, Any]]:
    ready = workspace / ".httk-workflow" / "requests" / "ready"
    return [json.loads(path.read_text()) for path in sorted(ready.iterdir())]


def test_the_workflow_spelling(workspace: Path, invoke: Invoke, job: dict[str, Any]) -> None:
    result = invoke(
        "workflow",
        "job",
        "request",
        workspace,
        job["job_id"],
        "pause",
        "--operator",
        "ann",
        "--reason",
        "look",
    )
    assert result.exit_code == 0, result.output
    [request] = published(workspace)
    assert result.stdout == (
        f"requested pause of {job['job_key']} (submitted at generation 0): request {request['request_id']}\n"
    )
    assert request["action"] == "pause" and request["operator"] == "ann" and request["reason"] == "look"
    assert request["job_key"] == job["job_key"] and request["placement"] == "proj/a"
    assert request["expected_generation"] == 0 and request["expected_record_ref"] == "init"


def test_the_top_level_spelling_with_a_prefix_selector(
    workspace: Path, invoke: Invoke, job: dict[str, Any]
) -> None:
    env = {"USER": "zoe", "LOGNAME": "zoe", "LNAME": "zoe", "USERNAME": "zoe"}
    result = invoke(
        "job",
        "request",
        "set_priority",
        "--workspace",
        workspace,
        job["job_id"][:8],
        "--priority",
        "3",
        env=env,
    )
    assert result.exit_code == 0, result.output
    [request] = published(workspace)
    assert request["action"] == "set_priority" and request["priority"] == 3 and request["operator"] == "zoe"


def test_json_output(workspace: Path, invoke: Invoke, job: dict[str, Any]) -> None:
    result = invoke("job", "request", workspace, job["job_key"], "cancel", "--operator", "a", "--json")
    assert result.exit_code == 0, result.output
    output = json.loads(result.stdout)
    [request] = published(workspace)
    assert output["request"] == request and output["state"] == "submitted" and output["notes"] == []
    assert output["path"] == f".httk-workflow/requests/ready/{request['request_id']}.json"


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["set_priority"], "--priority is required"),
        (["pause", "--priority", "3"], "--priority is required"),
        (["override_step"], "--step is required"),
        (["cancel", "--force"], "--force applies to continue and override_step only"),
        (["pause", "extra"], "expected JOB and ACTION"),
        (["relax"], "no ACTION given"),
        (["set_priority", "--priority", "1000"], "priority"),
    ],
)
def test_usage_errors(
    workspace: Path, invoke: Invoke, job: dict[str, Any], words: list[str], message: str
) -> None:
    result = invoke("job", "request", "--workspace", workspace, job["job_key"], *words, "--operator", "a")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert published(workspace) == []


def test_a_request_the_state_refuses_is_not_published(
    workspace: Path, invoke: Invoke, job: dict[str, Any]
) -> None:
    result = invoke("job", "request", workspace, job["job_key"], "continue", "--operator", "a")
    assert result.exit_code == 1
    assert (
        result.stderr.startswith("error: ")
        and "continue applies only to a failed or paused job" in result.stderr
    )
    assert published(workspace) == []


def test_an_unknown_job(workspace: Path, invoke: Invoke, job: dict[str, Any]) -> None:
    result = invoke("job", "request", workspace, "ffffffff", "pause", "--operator", "a")
    assert result.exit_code == 2 and published(workspace) == []


def test_the_taskmanager_alias(workspace: Path, job: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        taskmanager_app, ["request", str(workspace), job["job_key"], "pause", "--operator", "a"]
    )
    assert result.exit_code == 0, result.output
    assert len(published(workspace)) == 1
