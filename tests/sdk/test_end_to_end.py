"""The SDK under the real task manager: a Python runner submitted in a payload and run to the end.

One runner file serves three jobs in one durable workspace: ``prepare`` -> ``collect`` carrying job state
and reading workspace settings; a job whose initial step the runner does not implement (``unknown_step``);
and a step that raises on its first attempt, which the manager retries as ``process_failure``.
"""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import Submitter

from tests.conftest import minimal_job
from tests.runners import current_marker, frame_chain, job_key

RUNNER = f"""#!{sys.executable}
from httk.workflow.sdk import Attempt, dispatch, step


@step
def prepare(a: Attempt) -> None:
    a.save_state({{"prepared_by": a.attempt_id, "kpoints": a.inputs["kpoints"]}})
    (a.workdir / "prepared.txt").write_text("prepared")
    a.advance("collect", message="prepared")


@step
def collect(a: Attempt) -> None:
    state = a.state
    observed = {{
        "command": a.setting("vasp.command"),
        "repeats": a.setting("run.repeats"),
        "potcars": a.setting("vasp.potcars"),
        "kpoints": state["kpoints"],
        "workdir_file": (a.workdir / "prepared.txt").read_text(),
    }}
    a.declare("outputs", observed)
    a.succeed(message=f"ran {{observed['command']}} with {{state['kpoints']}} k-points")


@step
def flaky(a: Attempt) -> None:
    if a.attempt_ordinal == 1:
        raise RuntimeError("the first attempt crashes")
    a.succeed(message=f"{{a.attempt_reason}} unclean={{a.is_unclean_restart}}")


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""

SETTINGS = {"vasp.command": "srun -n 4 vasp_std", "run.repeats": 3, "vasp.potcars": {"Si": "PAW_PBE Si"}}
STEPS = ["prepare", "collect", "flaky"]


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    for variable in ("HTTK_VASP_COMMAND", "HTTK_RUN_REPEATS", "HTTK_VASP_POTCARS"):
        monkeypatch.delenv(variable, raising=False)  # a developer's deployment override would shadow
    workspace = init(tmp_path / "ws", durable=True)
    workspace.update_document({"settings": SETTINGS})
    yield workspace
    workspace.close()


def submit(ws: Workspace, scratch: Path, placement: str, **overrides: Any) -> dict[str, Any]:
    """Submit a job whose payload holds the executable runner.py."""
    job = minimal_job(runner={"backend": "path", "path": "runner.py"}, inputs={"kpoints": 4}, **overrides)
    source = scratch / f"payload-{job['id']}"
    source.mkdir(parents=True)
    (source / "job.json").write_text(json.dumps(job))
    runner = source / "runner.py"
    runner.write_text(RUNNER)
    runner.chmod(runner.stat().st_mode | stat.S_IXUSR)
    Submitter(ws).submit_payload(source, placement)
    return job


def frames_of(ws: Workspace, job: dict[str, Any], placement: str, kind: str) -> list[dict[str, Any]]:
    marker = current_marker(ws, job, placement)
    frames = frame_chain(ws, marker)
    assert marker.kind.value == kind, frames[-1]
    return frames


def test_a_python_sdk_runner_under_the_real_manager(ws: Workspace, tmp_path: Path) -> None:
    two_steps = submit(ws, tmp_path, "sdk/two")
    unknown = submit(ws, tmp_path, "sdk/unknown", initial_step="relax")
    flaky = submit(ws, tmp_path, "sdk/flaky", initial_step="flaky")

    Manager(ws, ManagerConfig()).run()

    # prepare -> collect, with job state, settings from the workspace and a declaration
    frames = frames_of(ws, two_steps, "sdk/two", "succeeded")
    committing = [frame for frame in frames if frame["kind"] == "committing"]
    assert [frame["outcome"]["action"] for frame in committing] == ["advance", "succeed"]
    assert committing[1]["outcome"]["message"] == "ran srun -n 4 vasp_std with 4 k-points"
    after_first_outcome = frames[frames.index(committing[0]) + 1 :]
    assert all(frame["runner_steps"] == STEPS for frame in after_first_outcome)
    job_dir = ws.payload_path("sdk/two", job_key(two_steps))
    state = json.loads((job_dir / ".httk-job" / "state.json").read_text())
    assert state == {"prepared_by": committing[0]["attempt_id"], "kpoints": 4}
    declared = (job_dir / ".httk-job" / "declarations" / "outputs.json").read_bytes()
    assert declared == (
        b'{"command":"srun -n 4 vasp_std","repeats":3,"potcars":{"Si":"PAW_PBE Si"},'
        b'"kpoints":4,"workdir_file":"prepared"}\n'
    )
    outcome = committing[1]["outcome"]  # as the manager read it; the control directory is collected
    assert json.dumps(outcome, ensure_ascii=False, separators=(",", ":")) == (
        '{"format":"httk-workflow-outcome","format_version":1,'
        f'"job_id":"{two_steps["id"]}","activation_id":"{committing[1]["activation_id"]}",'
        f'"attempt_id":"{committing[1]["attempt_id"]}","action":"succeed",'
        '"message":"ran srun -n 4 vasp_std with 4 k-points","runner_steps":["prepare","collect","flaky"],'
        '"has_transaction":false}'  # the manager's record of whether a transaction was published
    )

    # a step the runner does not implement
    failed = frames_of(ws, unknown, "sdk/unknown", "failed")[-1]
    assert failed["failure"] == {
        "code": "unknown_step",
        "message": (
            "this runner does not implement step 'relax'; its steps are: 'prepare', 'collect', 'flaky'"
        ),
        "details": {"step": "relax", "runner_steps": STEPS},
    }
    assert failed["runner_steps"] == STEPS

    # an exception: process_failure, retried (retry_on), then an unclean restart that succeeds
    frames = frames_of(ws, flaky, "sdk/flaky", "succeeded")
    retried = [frame for frame in frames if frame["kind"] == "ready" and frame.get("reason") == "retry"]
    assert [frame["last_failure"]["code"] for frame in retried] == ["process_failure"]
    final = [frame for frame in frames if frame["kind"] == "committing"][-1]
    assert final["outcome"]["message"] == "process_failure unclean=True"
