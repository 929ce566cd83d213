"""One workflow written in both languages publishes the same documents under the real manager.

The Bash runner sources the library through HTTK_WORKFLOW_BASH_API, which the manager exports; the
Python runner uses httk.workflow.sdk. Outcomes are compared as the manager committed them (embedded in
the committing frames), after replacing the job, activation and attempt ids, which differ by nature.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace, init, probe_marker
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job

PYTHON_RUNNER = f"""#!{sys.executable}
from httk.workflow.sdk import Attempt, dispatch, step


@step
def prepare(a: Attempt) -> None:
    a.save_state({{"n": 1, "label": "tab\\there"}})
    a.advance("compute", priority=7, message='prepared \\u2713 "quoted"\\nnext')


@step
def compute(a: Attempt) -> None:
    if a.attempt_ordinal == 1:
        a.retry("the first attempt asks for another")
    else:
        a.advance("finish", resources={{"procs": 2}})


@step
def finish(a: Attempt) -> None:
    a.succeed(message=a.setting("demo.label", "no label"))


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""

BASH_RUNNER = r"""#!/usr/bin/env bash
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"

prepare() {
  httk_workflow_state_save '{"n":1,"label":"tab\there"}'
  httk_workflow_advance compute --priority 7 --message $'prepared \u2713 "quoted"\nnext'
}

compute() {
  local ordinal
  httk_workflow_context ordinal attempt_ordinal
  if [[ $ordinal == 1 ]]; then
    httk_workflow_retry "the first attempt asks for another"
  else
    httk_workflow_advance finish --resource procs=2
  fi
}

finish() {
  local label
  httk_workflow_setting label demo.label "no label"
  httk_workflow_succeed --message "$label"
}

httk_workflow_register_step prepare
httk_workflow_register_step compute
httk_workflow_register_step finish
httk_workflow_dispatch
"""


def _run(ws: Workspace, runner: str, name: str) -> dict[str, Any]:
    job = minimal_job(
        tag=name,
        runner={"backend": "path", "path": "runner", "arguments": []},
        initial_step="prepare",
        inputs={"demo.label": f"from {name}"},
    )
    submit_jobs(
        ws, [JobSpec(job, "parity", files={"runner": runner.encode()}, executables=frozenset({"runner"}))]
    )
    return job


def _committed_outcomes(ws: Workspace, job: dict[str, Any]) -> list[dict[str, Any]]:
    marker = probe_marker(ws, "parity", f"{job['tag']}--{job['id']}")
    assert marker is not None and marker.kind.value == "succeeded"
    outcomes: list[dict[str, Any]] = []
    ref = None if marker.name.ref is None else str(marker.name.ref)
    while ref is not None:
        frame = ws.reader.read(ref)
        if frame["kind"] == "committing":
            outcome = dict(frame["outcome"])
            for member in ("job_id", "activation_id", "attempt_id"):
                outcome[member] = f"<{member}>"
            outcome["message"] = outcome.get("message", "").replace(job["tag"], "<name>")
            outcomes.append(outcome)
        ref = frame["previous_record_ref"]
    return outcomes[::-1]


def test_python_and_bash_publish_the_same_documents(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    python_job = _run(ws, PYTHON_RUNNER, "python")
    bash_job = _run(ws, BASH_RUNNER, "bash")
    previous = os.umask(0o002)  # a group-writable umask, where 0644 and 0666 creations differ
    try:
        Manager(ws, ManagerConfig(workers=2)).run()
    finally:
        os.umask(previous)
    python_outcomes = _committed_outcomes(ws, python_job)
    bash_outcomes = _committed_outcomes(ws, bash_job)
    assert [o["action"] for o in python_outcomes] == ["advance", "retry", "advance", "succeed"]
    assert python_outcomes == bash_outcomes
    state = "parity/{tag}--{id}/.httk-job/state.json"
    python_state, bash_state = ws.root / state.format(**python_job), ws.root / state.format(**bash_job)
    assert python_state.read_bytes() == bash_state.read_bytes()
    assert stat.S_IMODE(python_state.stat().st_mode) == stat.S_IMODE(bash_state.stat().st_mode) == 0o664
