"""Allocations that end badly, against the suite's real Slurm: scancel, a lost node, the walltime.

Each test runs managers as real batch jobs through the Slurm launcher, ends the allocation the way
a cluster does (``scancel``; a node crash, played by SIGKILLing the allocation's whole process tree and
letting Slurm end the job; the time limit), and checks what a later manager finds: a published step
is never run again, a persistent-workdir attempt is taken over only on Slurm's evidence, and a
manager reaching its walltime drains first so that nothing needs recovering.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace, probe_marker

from tests.launchkit import ENDED, httk, launched_jobs, manifests, use_slurm
from tests.runners import (
    current_marker,
    frame_chain,
    markers_of,
    records,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)
from tests.slurmkit import SlurmCluster


def two_step_job(
    runner: dict[str, Any], gate: Path, *, stubborn: bool = False, **overrides: Any
) -> dict[str, Any]:
    """``prepare`` advances at once; ``relax`` waits for ``gate`` (its first attempt forever, ignoring
    SIGTERM when ``stubborn``)."""
    first: dict[str, Any] = {"wait_for": str(gate / "never"), "ignore_term": stubborn}
    steps = {
        "prepare": {"action": "advance", "next_step": "relax"},
        "relax": {"attempts": [first, {"wait_for": str(gate / "open")}]},
    }
    return scripted_job(steps, runner, **overrides)


def kind_now(ws: Workspace, job: dict[str, Any]) -> str | None:
    """The job's kind, or ``None`` when a probe raced a manager's rename (it is polled again)."""
    marker = probe_marker(ws, "p", _key(job))
    return None if marker is None else marker.kind.value


def running_relax(ws: Workspace, jobs: list[dict[str, Any]]) -> None:
    def all_running() -> bool:
        return all(kind_now(ws, job) == "running" for job in jobs) and all(
            any(r.context["step"] == "relax" for r in records(ws.payload_path("p", _key(job))))
            for job in jobs
        )

    wait_until(all_running, "every job's relax attempt to run", timeout=60)


def _key(job: dict[str, Any]) -> str:
    return f"{job['tag']}--{job['id']}"


def steps_run(ws: Workspace, job: dict[str, Any]) -> list[str]:
    return [record.context["step"] for record in records(ws.payload_path("p", _key(job)))]


def test_a_cancelled_allocation_is_recovered_by_the_next_without_rerunning_a_published_step(
    slurm: SlurmCluster, ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    jobs = [two_step_job(runner, gate) for _ in range(3)]
    for job in jobs:
        submit(ws, job)
    use_slurm(ws, **{"slurm.time_limit": "5"})
    first = httk("workflow", "run", ws.root, "--detach", "--workers", "3", "--lease-seconds", "5")
    assert first.returncode == 0, first.stderr
    (job_id,), _script = launched_jobs(first.stdout)
    running_relax(ws, jobs)
    why = httk("workflow", "job", "why", ws.root, jobs[0]["id"])
    assert re.search(
        rf"manager [0-9a-f-]+ in Slurm job {job_id}: .*, capacities nodes=1$", why.stdout, re.MULTILINE
    )

    slurm.run("scancel", job_id)

    assert slurm.wait_job(job_id, ENDED) == "CANCELLED"
    (gate / "open").touch()
    second = httk("workflow", "run", ws.root, "--detach", "--workers", "3", "--lease-seconds", "5")
    assert second.returncode == 0, second.stderr
    (second_id,), _script = launched_jobs(second.stdout)
    assert slurm.wait_job(second_id, ENDED, timeout=90) == "COMPLETED"
    assert len(markers_of(ws, "succeeded")) == 3
    for job in jobs:
        assert steps_run(ws, job) == ["prepare", "relax", "relax"]  # prepare's advance was published once


def test_a_lost_node_s_persistent_attempts_are_taken_over_or_cancelled_on_slurm_s_evidence(
    slurm: SlurmCluster, ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "open").touch()
    job, doomed = two_step_job(runner, gate), two_step_job(runner, gate, stubborn=True)
    submit(ws, job)
    submit(ws, doomed)
    use_slurm(ws, **{"slurm.time_limit": "5"})
    launched = httk("workflow", "run", ws.root, "--detach", "--lease-seconds", "3", "--workers", "2")
    assert launched.returncode == 0, launched.stderr
    (job_id,), _script = launched_jobs(launched.stdout)
    running_relax(ws, [job, doomed])
    (manifest,) = manifests(ws)
    groups = [frame_chain(ws, current_marker(ws, each))[-1]["process"]["pgid"] for each in (job, doomed)]
    cancel = httk("workflow", "job", "request", ws.root, doomed["id"], "cancel", "--reason", "wrong inputs")
    assert cancel.returncode == 0, cancel.stderr
    wait_until(lambda: kind_now(ws, doomed) == "cancelling", "the manager to fence it")

    # The node goes down (the doomed runner ignored SIGTERM): everything dies, the manager first, so
    # that it cannot reap a killed runner and commit its exit the way a live manager would.
    os.kill(manifest["pid"], signal.SIGKILL)
    for group in groups:
        os.killpg(group, signal.SIGKILL)

    assert slurm.wait_job(job_id, ENDED) == "FAILED"
    wait_until(lambda: heartbeat_age(ws, manifest["manager_id"]) > 3.5, "the dead manager's lease to run out")
    elsewhere = {"HTTK_WORKFLOW_TEST_HOSTNAME": "another-node"}
    takeover = httk("workflow", "manager", "run", "--inline", ws.root, env=elsewhere)
    assert takeover.returncode == 0, takeover.stderr
    if slurm.proctrack == "proctrack/cgroup":
        assert current_marker(ws, job).kind.value == "succeeded"
        chain = frame_chain(ws, current_marker(ws, job))
        evidence = next(f["takeover"] for f in chain if "takeover" in f)
        assert evidence["rule"] == "allocation_ended"
        assert evidence["workdir_mode"] == "persistent"
        assert evidence["batch"]["job_id"] == job_id
        assert evidence["batch"]["job_state"] == "FAILED"
        assert evidence["batch"]["proctrack"] == "proctrack/cgroup"
        log = httk("workflow", "job", "log", ws.root, job["id"])
        assert "allocation_ended" in log.stdout
        cancelled = frame_chain(ws, current_marker(ws, doomed))[-1]
        assert cancelled["kind"] == "cancelled"
        assert cancelled["cancellation"]["verified"] == "allocation_ended"
        assert cancelled["cancellation"]["batch"]["job_id"] == job_id
    else:
        assert current_marker(ws, job).kind.value == "running"  # reported, not sufficient
        assert current_marker(ws, doomed).kind.value == "cancelling"
        log_text = "".join(p.read_text() for p in ws.managers_dir.glob("*/log"))
        assert f"Slurm reports job {job_id} FAILED, but under proctrack/linuxproc" in log_text
        why = httk("workflow", "job", "why", ws.root, job["id"], env=elsewhere)
        assert "proctrack/linuxproc" in why.stdout


def heartbeat_age(ws: Workspace, manager_id: str) -> float:
    from httk.workflow.engine.core._liveness import read_heartbeat

    age = read_heartbeat(ws, manager_id).age(ws.clock.now())
    return float("inf") if age is None else age


def test_a_manager_drains_before_its_one_minute_walltime_and_leaves_nothing_to_recover(
    slurm: SlurmCluster, ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    job = two_step_job(runner, gate)
    submit(ws, job)
    use_slurm(ws, **{"slurm.time_limit": "1"})
    launched = httk("workflow", "run", ws.root, "--detach", "--drain-timeout", "20")
    assert launched.returncode == 0, launched.stderr
    (job_id,), script = launched_jobs(launched.stdout)
    assert "#SBATCH --signal=B:TERM@30\n" in script.read_text()
    running_relax(ws, [job])

    assert slurm.wait_job(job_id, ENDED, timeout=120) == "COMPLETED"  # exited 0 before the limit

    marker = current_marker(ws, job)
    assert marker.kind.value == "ready"
    last = frame_chain(ws, marker)[-1]
    assert last["attempt_reason"] == "lease_lost" and "takeover" not in last
    (manifest,) = manifests(ws)
    log_text = (ws.managers_dir / manifest["manager_id"] / "log").read_text()
    assert "draining" in log_text
    (gate / "open").touch()
    after = httk("workflow", "manager", "run", "--inline", ws.root, "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout.splitlines()[-1])["kinds"]["succeeded"] == 1
    assert not any("takeover" in frame for frame in frame_chain(ws, current_marker(ws, job)))
    assert steps_run(ws, job) == ["prepare", "relax", "relax"]
