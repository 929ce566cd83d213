"""The test suite's real Slurm cluster (``tests/slurmkit.py``) runs batch jobs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.daemonkit import running, wait_for
from tests.slurmkit import (
    STOP_SECONDS,
    WATCHDOG,
    SlurmCluster,
    running_cluster,
    start_cluster,
)


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


def test_a_cluster_whose_owner_is_killed_is_stopped_and_removed_by_its_watchdog() -> None:
    """A killed session leaves no daemon behind: the watchdog outlives the owner just long enough."""
    owner = subprocess.Popen(["sleep", "600"])
    cluster = start_cluster(owner=owner.pid)
    try:
        daemons = {name: pid for name, pid in cluster.pids.items() if name != WATCHDOG}
        assert set(daemons) == {"munged", "slurmctld", "slurmd"}
        assert all(running(pid) for pid in cluster.pids.values())

        owner.kill()
        owner.wait()

        wait_for(
            lambda: not any(running(pid) for pid in cluster.pids.values()) and not cluster.root.exists(),
            "the watchdog to stop every daemon and remove the cluster's directory",
            STOP_SECONDS * 4,
        )
    finally:
        owner.kill()
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


def test_a_cluster_stopped_by_its_owner_ends_its_watchdog() -> None:
    with running_cluster() as cluster:
        watchdog = cluster.pids[WATCHDOG]
        assert running(watchdog)
    assert not running(watchdog) and not cluster.root.exists()
