"""The Slurm launcher against the suite's real slurmctld and slurmd (``tests/slurmkit.py``).

Each test configures a workspace the way spec/03 shows (``launcher add --template slurm``,
``manager.launch`` and ``slurm.*`` settings), launches with the real ``httk`` executable, and watches
real batch jobs: their states in Slurm, the managers' manifests, the state tree.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager._launchers import LaunchRequest
from httk.workflow.engine.manager._run import PROGRAM
from httk.workflow.engine.manager._slurm import SlurmLauncher, sbatch
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import LaunchError

from tests.launchkit import ENDED, httk, launched_jobs, manifests, use_slurm
from tests.runners import (
    markers_of,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)
from tests.slurmkit import SlurmCluster


def test_run_count_2_detach_starts_two_batch_jobs_whose_managers_finish_200_jobs(
    slurm: SlurmCluster, ws: Workspace, runner: dict[str, Any]
) -> None:
    submit_jobs(ws, [JobSpec(scripted_job({"prepare": {}}, runner), f"p/{n % 10}") for n in range(200)])
    use_slurm(ws, **{"slurm.time_limit": "10", "slurm.ntasks": 1})

    result = httk("workflow", "run", ws.root, "--count", "2", "--detach", "--workers", "2")

    assert result.returncode == 0, result.stderr
    job_ids, script = launched_jobs(result.stdout)
    assert len(job_ids) == 2
    assert script.parent == ws.root / ".httk-workflow" / "batch"
    assert stat.S_IMODE(script.stat().st_mode) == 0o700
    text = script.read_text()
    assert "#SBATCH --no-requeue\n" in text and "#SBATCH --ntasks=1\n" in text
    assert re.search(r"^#SBATCH --signal=B:TERM@300$", text, re.MULTILINE)
    assert re.search(r"^exec .* workflow manager run --inline .*--drain-before-end 300$", text, re.MULTILINE)
    for job_id in job_ids:
        assert slurm.wait_job(job_id, ENDED, timeout=120) == "COMPLETED", slurm.log_tail()
        output = script.with_name(f"{script.stem}-{job_id}.out")
        assert output.read_text().splitlines()[0].startswith("httk manager ")
    assert len(markers_of(ws, "succeeded")) == 200
    assert sorted(m["batch"]["job_id"] for m in manifests(ws)) == sorted(job_ids)
    assert {m["batch"]["cluster"] for m in manifests(ws)} == {slurm.name}


def test_a_manager_derives_its_capacities_from_the_real_allocation(
    slurm: SlurmCluster, ws: Workspace
) -> None:
    use_slurm(ws, **{"slurm.ntasks": 3, "slurm.mem": "600", "slurm.time_limit": "5"})

    result = httk("workflow", "run", ws.root, "--detach")

    assert result.returncode == 0, result.stderr
    (job_id,), _script = launched_jobs(result.stdout)
    assert slurm.wait_job(job_id, ENDED) == "COMPLETED"
    (manifest,) = manifests(ws)
    assert manifest["resources"] == {"procs": 3, "nodes": 1, "mem": 600}
    assert manifest["batch"] == {
        "system": "slurm",
        "job_id": job_id,
        "cluster": slurm.name,
        "node": slurm.node,
    }
    shown = httk("workflow", "workspace", "managers", ws.root, "--json")
    assert shown.returncode == 0, shown.stderr
    (view,) = json.loads(shown.stdout)
    assert view["resources"] == {"procs": 3, "nodes": 1, "mem": 600}
    assert view["batch"]["job_id"] == job_id


def test_a_failing_prelude_stops_the_batch_job_with_its_message_in_the_output_file(
    slurm: SlurmCluster, ws: Workspace
) -> None:
    prelude = "echo preparing the environment\necho 'module vasp/6 not found' >&2\nfalse\necho unreachable"
    use_slurm(ws, **{"environment.prelude": prelude, "slurm.time_limit": "5"})

    result = httk("workflow", "run", ws.root, "--detach")

    assert result.returncode == 0, result.stderr
    (job_id,), script = launched_jobs(result.stdout)
    assert slurm.wait_job(job_id, ENDED) == "FAILED"
    output = script.with_name(f"{script.stem}-{job_id}.out").read_text()
    assert output.splitlines() == [
        "preparing the environment",
        "module vasp/6 not found",
        "httk: environment.prelude failed with status 1",
    ]
    assert manifests(ws) == []  # no manager ever started


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("slurm.partition", "debug\nrm -rf ~"),
        ("slurm.account", "proj; touch /tmp/owned"),
        ("slurm.time_limit", "10 $(touch /tmp/owned)"),
        ("slurm.mem", "4G`id`"),
        ("slurm.partiton", "debug"),
    ],
)
def test_a_setting_that_is_not_a_plain_value_is_refused_and_nothing_is_submitted(
    slurm: SlurmCluster, ws: Workspace, setting: str, value: str
) -> None:
    use_slurm(ws, **{setting: value})

    result = httk("workflow", "run", ws.root, "--detach")

    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and setting in result.stderr
    assert not (ws.root / ".httk-workflow" / "batch").exists()
    assert slurm.jobs_below(ws.root) == []


def test_manager_stop_asks_a_slurm_manager_to_drain_through_its_batch_step(
    slurm: SlurmCluster, ws: Workspace
) -> None:
    use_slurm(ws, **{"slurm.time_limit": "5"})
    launched = httk("workflow", "run", ws.root, "--detach", "--idle")
    assert launched.returncode == 0, launched.stderr
    (job_id,), _script = launched_jobs(launched.stdout)
    (manifest,) = wait_until(lambda: manifests(ws), "the manager to register")

    stopped = httk("workflow", "manager", "stop", ws.root, "--manager", manifest["manager_id"])

    assert stopped.returncode == 0, stopped.stderr
    assert f"asked Slurm job {job_id} to drain (scancel --batch --signal=TERM {job_id})" in stopped.stdout
    assert slurm.wait_job(job_id, ENDED) == "COMPLETED"  # it drained and exited 0; nothing killed it
    log = (ws.managers_dir / manifest["manager_id"] / "log").read_text()
    assert "draining (received SIGTERM)" in log


def test_a_submission_refused_part_way_reports_the_jobs_already_queued(
    slurm: SlurmCluster, ws: Workspace
) -> None:
    use_slurm(ws, **{"slurm.time_limit": "5", "slurm.partition": "closable"})
    settings = ws.settings
    submitted: list[str] = []

    def submit_then_close_the_partition(script: Path) -> str:
        """The real sbatch; after the first job the partition stops accepting submissions."""
        job_id = sbatch(script)
        submitted.append(job_id)
        slurm.run("scontrol", "update", "PartitionName=closable", "State=INACTIVE")
        return job_id

    request = LaunchRequest(PROGRAM, ("workflow", "manager", "run", "--inline"), ws.root, 3, settings)
    try:
        with pytest.raises(LaunchError) as refused:
            SlurmLauncher(submit_then_close_the_partition).launch(request)
    finally:
        slurm.run("scontrol", "update", "PartitionName=closable", "State=UP")

    message = str(refused.value)
    assert f"submitted: 1; job_ids: {json.dumps(submitted)}" in message
    assert "sbatch refused" in message
    assert refused.value.started == tuple(submitted)
