"""vasp-relax-bash (the Bash VASP API) ends with the same documents as vasp-relax (the Python runner).

Both run under one real manager from the same inputs, with the same fault striking their first run, so
each goes through a remedy, repeats and a success. What they published is compared: every committed
outcome (read back from the journal through ``job log``), the job state, the runner-reported events,
results.json and data/CONTCAR -- equal once the identities that must differ (job, activation and attempt
ids, the workflow's name, times and durations) are set aside.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from httk.workflow.engine import attach
from httk.workflow.vasp import VASP_RELAX, VASP_RELAX_BASH

from tests.runners import current_marker, frame_chain
from tests.vasp.e2e import Job, mock_command, run_manager, submit, workspace

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
VOLATILE = {"time", "seconds", "workflow", "job_id", "activation_id", "attempt_id", "transaction_id", "id"}


def normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in VOLATILE else normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(item) for item in value]
    if isinstance(value, str):
        return UUID.sub("<uuid>", value)
    return value


def outcomes(job: Job) -> list[dict[str, Any]]:
    """Every outcome the manager committed for the job, as its committing frames embed them."""
    ws = attach(job.workspace, writable=False)
    try:
        marker = current_marker(ws, {"id": job.id}, job.placement)
        return [frame["outcome"] for frame in frame_chain(ws, marker) if frame["kind"] == "committing"]
    finally:
        ws.close()


def test_the_bash_relaxation_publishes_what_the_python_one_does(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    inputs = {"vasp.command": mock_command("zpotrf*1")}
    python_job = submit(ws, VASP_RELAX, tmp_path / "in", placement="parity/python", inputs=inputs)
    bash_job = submit(ws, VASP_RELAX_BASH, tmp_path / "in", placement="parity/bash", inputs=inputs)
    run_manager(ws, "--workers", "2")
    assert python_job.kind() == bash_job.kind() == "succeeded"
    python_outcomes, bash_outcomes = outcomes(python_job), outcomes(bash_job)
    assert [o["action"] for o in python_outcomes][:2] == ["retry", "advance"]
    assert normalized(python_outcomes) == normalized(bash_outcomes)
    assert normalized(python_job.state()) == normalized(bash_job.state())
    assert normalized(python_job.events()) == normalized(bash_job.events())
    assert normalized(python_job.results()) == normalized(bash_job.results())
    contcar = (python_job.payload / "data" / "CONTCAR").read_bytes()
    assert contcar == (bash_job.payload / "data" / "CONTCAR").read_bytes()
    assert bash_job.results()["workflow"] == "vasp-relax-bash"
