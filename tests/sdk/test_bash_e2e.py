"""The Bash API end to end: a real Bash runner sourcing sdk-bash/httk-workflow.sh under the real manager.

The manager exports the library's absolute path as HTTK_WORKFLOW_BASH_API (``ManagerConfig.bash_api``);
the runner, an executable payload file, sources it, registers its steps and dispatches. Nothing is
simulated: the manager prepares each attempt, the runner publishes through the library, the manager
validates and commits the outcome, and the tests read the frames and the published bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import Submitter

from tests.conftest import minimal_job
from tests.runners import PAYLOAD_RUNNER, current_marker, frame_chain, job_key

LIBRARY = Path(__file__).resolve().parents[2] / "sdk-bash" / "httk-workflow.sh"

RUNNER = r"""#!/usr/bin/env bash
# A two-step Bash runner as an author writes it.
set -euo pipefail
source "$HTTK_WORKFLOW_BASH_API"

prepare() {
  local command
  httk_workflow_setting command example.command "echo default"
  printf '%s\n' "$command" >prepared.txt # the working directory is the workdir
  httk_workflow_state_save '{"prepared":true}'
  httk_workflow_declare outputs '{"files":["prepared.txt"]}'
  httk_workflow_advance collect --priority 7 --resource procs=1 --message $'inputs written: "caf\xc3\xa9"\n'
}

collect() {
  local state ordinal
  [[ -f prepared.txt ]] || { httk_workflow_fail e2e.missing "prepared.txt is missing"; return; }
  httk_workflow_state_load state
  httk_workflow_context ordinal activation_ordinal
  httk_workflow_succeed --message "state $state in activation $ordinal"
}

forgetful() { :; }

httk_workflow_register_step prepare
httk_workflow_register_step collect
httk_workflow_register_step forgetful
httk_workflow_dispatch "$@"
# Keep the published bytes: the manager retires the control directory once it has committed.
cp "$HTTK_WORKFLOW_CONTROL_DIR/outcome.ready/outcome.json" "published.$HTTK_WORKFLOW_STEP.json"
"""


@pytest.fixture(params=[False, True], ids=["fast", "durable"])
def ws(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    workspace = init(tmp_path / "ws", durable=request.param)
    yield workspace
    workspace.close()


def submit_bash_job(ws: Workspace, scratch: Path, **overrides: Any) -> dict[str, Any]:
    """Submit a job whose payload runner (files/runner, executable) is the Bash runner above."""
    job = minimal_job(runner=dict(PAYLOAD_RUNNER), **overrides)
    source = scratch / f"payload-{job['id']}"
    (source / "files").mkdir(parents=True)
    (source / "job.json").write_text(json.dumps(job, indent=2))
    runner = source / "files" / "runner"
    runner.write_text(RUNNER)
    runner.chmod(0o755)
    Submitter(ws).submit_payload(source, "p")
    return job


def run_manager(ws: Workspace) -> None:
    Manager(ws, ManagerConfig(bash_api=LIBRARY)).run()


def outcomes(ws: Workspace, job: dict[str, Any]) -> dict[str, bytes]:
    """The outcome.json bytes each step published (the runner copies them into its workdir)."""
    workdir = ws.payload_path("p", job_key(job)) / "run"
    return {path.name.split(".")[1]: path.read_bytes() for path in workdir.glob("published.*.json")}


def assert_canonical(raw: bytes) -> None:
    """The bytes are exactly what Python's json.dumps writes (docs/outcome-documents.md)."""
    document = json.loads(raw)
    assert raw == json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    head = ["format", "format_version", "job_id", "activation_id", "attempt_id", "action"]
    assert list(document)[:6] == head
    assert list(document)[-1] == "runner_steps"


def test_prepare_advance_collect_succeed(ws: Workspace, tmp_path: Path) -> None:
    job = submit_bash_job(ws, tmp_path)

    run_manager(ws)

    marker = current_marker(ws, job)
    assert marker.path(ws).parent == ws.state_dir("succeeded") / "p"
    frames = frame_chain(ws, marker)
    assert [frame["kind"] for frame in frames] == ["ready", "claimed", "running", "committing"] * 2 + [
        "succeeded"
    ]
    assert all(frame["runner_steps"] == ["prepare", "collect", "forgetful"] for frame in frames[4:])
    advance = frames[3]["outcome"]
    assert (advance["action"], advance["next_step"]) == ("advance", "collect")
    assert advance["priority"] == 7
    assert advance["resources"] == {"procs": 1}
    assert advance["message"] == 'inputs written: "café"\n'
    assert frames[-2]["outcome"]["message"] == 'state {"prepared":true} in activation 2'
    published = outcomes(ws, job)
    assert sorted(published) == ["collect", "prepare"]
    for raw in published.values():
        assert_canonical(raw)
    # The committed copy adds has_transaction (the manager's, never the runner's).
    assert {**json.loads(published["prepare"]), "has_transaction": False} == advance
    payload = ws.payload_path("p", job_key(job))
    assert (payload / "run" / "prepared.txt").read_text() == "echo default\n"
    assert (payload / ".httk-job" / "state.json").read_bytes() == b'{"prepared":true}\n'
    assert (payload / ".httk-job" / "declarations" / "outputs.json").read_bytes() == (
        b'{"files":["prepared.txt"]}\n'
    )


def test_unknown_step_fails_with_unknown_step(ws: Workspace, tmp_path: Path) -> None:
    job = submit_bash_job(ws, tmp_path, initial_step="relax")

    run_manager(ws)

    marker = current_marker(ws, job)
    assert marker.path(ws).parent == ws.state_dir("failed") / "p"
    failure = frame_chain(ws, marker)[-1]["failure"]
    assert failure == {
        "code": "unknown_step",
        "message": "this runner does not implement step 'relax'; "
        "its steps are: 'prepare', 'collect', 'forgetful'",
        "details": {"step": "relax", "runner_steps": ["prepare", "collect", "forgetful"]},
    }
    assert_canonical(outcomes(ws, job)["relax"])


def test_a_step_without_an_outcome_fails_with_no_outcome(ws: Workspace, tmp_path: Path) -> None:
    job = submit_bash_job(ws, tmp_path, initial_step="forgetful")

    run_manager(ws)

    marker = current_marker(ws, job)
    assert marker.path(ws).parent == ws.state_dir("failed") / "p"
    failure = frame_chain(ws, marker)[-1]["failure"]
    assert failure == {
        "code": "no_outcome",
        "message": "step 'forgetful' returned without publishing an outcome",
        "details": {"step": "forgetful", "function": "forgetful"},
    }
