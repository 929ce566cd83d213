"""The Bash API's flow-level calls keep job state as one whole step does.

Two identical attempts of vasp-relax's first step, each with a ZPOTRF that strikes its run: one runs
``httk_workflow_vasp_step``'s Python half (``step``), the other the calls an author composes (``prepare``,
``run``, ``remedy``; and ``check`` of a run already recorded). Their job state and runner-reported events
must be the same record of the run and its remedy, times, durations and attempt ids aside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.sdk.attempts import make_attempt
from tests.vasp.test_bash_parity import normalized
from tests.vasp.vaspkit import MOCK, SILICON, pseudo_library


def attempt(root: Path, library: Path) -> tuple[dict[str, str], Path]:
    inputs = {
        "structure": "files/POSCAR",
        "vasp.pseudo_library": str(library),
        "vasp.command": f"{MOCK} --fault zpotrf",
        "vasp.poll_seconds": 0.05,
    }
    layout = make_attempt(root, step="relax", inputs=inputs, settings={})
    (layout.job_dir / "files").mkdir()
    (layout.job_dir / "files" / "POSCAR").write_text(SILICON)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HTTK_")}
    return {**environ, **layout.environ(HTTK_WORKFLOW_PYTHON=sys.executable)}, layout.job_dir


def call(environ: dict[str, str], out: Path, *arguments: str) -> tuple[int, list[str]]:
    """``python -m httk.workflow.vasp ARGUMENTS --out OUT``: its status and its NUL-ended fields."""
    done = subprocess.run(
        [sys.executable, "-P", "-m", "httk.workflow.vasp", *arguments, "--out", str(out)],
        env=environ,
        cwd=environ["HTTK_WORKFLOW_WORKDIR"],
        capture_output=True,
        text=True,
        check=False,
    )
    fields = out.read_bytes().split(b"\0")[:-1] if out.exists() else []
    return done.returncode, [field.decode() for field in fields]


def records(job_dir: Path) -> tuple[Any, Any]:
    state = json.loads((job_dir / ".httk-job" / "state.json").read_text())
    events = [json.loads(line) for line in (job_dir / ".httk-job" / "events.jsonl").read_text().splitlines()]
    return normalized(state), normalized(events)


def test_prepare_run_and_remedy_leave_the_record_one_step_leaves(tmp_path: Path) -> None:
    library = pseudo_library(tmp_path / "potcars", "Si")
    step_env, step_job = attempt(tmp_path / "step", library)
    flow_env, flow_job = attempt(tmp_path / "flow", library)

    status, fields = call(step_env, tmp_path / "step.out", "step", "vasp-relax")
    assert (status, fields[0], fields[3]) == (0, "retry", "zpotrf: symmetry off (ISYM = 0)")

    status, (provenance,) = call(flow_env, tmp_path / "flow.out", "prepare", "relax")
    assert status == 0 and json.loads(provenance)["kind"] == "relax"
    assert call(flow_env, tmp_path / "flow.out", "run") == (0, ["zpotrf"])
    assert call(flow_env, tmp_path / "flow.out", "check") == (0, ["zpotrf"])  # the recorded run, again
    assert call(flow_env, tmp_path / "flow.out", "remedy", "zpotrf") == (0, ["no_symmetry"])

    step_state, step_events = records(step_job)
    flow_state, flow_events = records(flow_job)
    assert flow_state == step_state
    assert [e["kind"] for e in flow_events] == ["vasp.prepared", "vasp.error", "vasp.remedy"]
    assert flow_events == step_events
    [run] = flow_state["vasp"]["runs"]
    assert (run["problems"], run["remedy"], run["outcome"]) == (["zpotrf"], "no_symmetry", "error")
    assert (flow_job / "run" / run["archive"] / "OUTCAR.gz").is_file()


def test_remedy_and_check_without_a_run_say_so(tmp_path: Path) -> None:
    environ, _ = attempt(tmp_path / "flow", pseudo_library(tmp_path / "potcars", "Si"))
    assert call(environ, tmp_path / "out", "check")[0] == 1
    assert call(environ, tmp_path / "out", "remedy", "zpotrf")[0] == 1
    assert call(environ, tmp_path / "out", "run")[0] == 1  # not prepared


def test_a_run_records_the_potcar_digests_an_interrupted_attempt_left_out(tmp_path: Path) -> None:
    """The step takes the POTCAR digests while VASP runs: an attempt that died first left them null."""
    environ, job_dir = attempt(tmp_path / "flow", pseudo_library(tmp_path / "potcars", "Si"))
    status, (provenance,) = call(environ, tmp_path / "out", "prepare", "relax")
    [digested] = json.loads(provenance)["potcar"]["datasets"]
    assert status == 0 and len(digested["sha256"]) == 64  # an author's prepare gets them at once
    path = job_dir / ".httk-job" / "state.json"
    state = json.loads(path.read_text())
    state["vasp"]["prepared"]["relax"]["potcar"]["datasets"][0]["sha256"] = None
    path.write_text(json.dumps(state))
    assert call(environ, tmp_path / "out", "run") == (0, ["zpotrf"])  # whatever the run found
    [dataset] = json.loads(path.read_text())["vasp"]["prepared"]["relax"]["potcar"]["datasets"]
    assert dataset["sha256"] == digested["sha256"]
