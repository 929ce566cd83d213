"""The test suite's real Slurm cluster (``tests/slurmkit.py``) runs batch jobs."""

from __future__ import annotations

from pathlib import Path

from tests.slurmkit import SlurmCluster


def test_a_batch_job_runs_to_completion_on_the_cluster(slurm: SlurmCluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text('#!/bin/sh\necho "job $SLURM_JOB_ID on $SLURM_CLUSTER_NAME with $SLURM_NTASKS task"\n')
    output = tmp_path / "slurm-%j.out"

    job_id = slurm.sbatch(script, "--ntasks=1", f"--output={output}")

    assert slurm.wait_job(job_id, frozenset({"COMPLETED", "FAILED"})) == "COMPLETED"
    text = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert text == f"job {job_id} on {slurm.name} with 1 task\n"
    config = slurm.run("scontrol", "show", "config").stdout
    assert f"ProctrackType           = {slurm.proctrack}" in config
