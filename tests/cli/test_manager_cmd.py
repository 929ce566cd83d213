"""``httk workflow run``, ``httk workflow manager run`` and ``httk-taskmanager run`` as real processes.

The workspace and its jobs are made with the library; the manager is the installed executable, so what
is asserted is exactly what an operator sees: the banner, the summary, the exit status, the log file,
and what SIGTERM does to a manager with an attempt in flight.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._liveness import process_alive
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager._landlock import landlock

from tests.runners import (
    WAIT_SECONDS,
    current_marker,
    frame_chain,
    job_key,
    records,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)

BIN = Path(sys.executable).parent
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def command(*args: str | Path, executable: str = "httk") -> list[str]:
    return [str(BIN / executable), *(str(arg) for arg in args)]


def httk(
    *args: str | Path, executable: str = "httk", slurm: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the executable outside any SLURM allocation, or inside the one ``slurm`` describes."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
    return subprocess.run(
        command(*args, executable=executable),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**env, **(slurm or {})},
    )


HOST_MEMORY_MB = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
HOST_RESOURCES = rf"mem={HOST_MEMORY_MB},procs={len(os.sched_getaffinity(0))}"
"""What a local manager given no capacities advertises: this host's memory (MB) and processors."""


def banner_pattern(
    root: Path,
    pools: str = "default",
    capabilities: str = "-",
    workers: int = 1,
    resources: str = HOST_RESOURCES,
    *,
    confinement: str | None = None,
) -> str:
    log = re.escape(str(root / ".httk-workflow" / "managers")) + r"/(?P=id)/log"
    if confinement is None:
        abi = landlock().abi
        confinement = "unavailable" if abi is None else f"landlock ABI {abi}"
    return (
        rf"httk manager (?P<id>{UUID}) serving {re.escape(str(root))} \(log {log}; pools {pools}; "
        rf"capabilities {capabilities}; executors path; resources {resources}; workers {workers}; "
        rf"confinement {confinement}\)"
    )


def mixed_jobs(ws: Workspace, runner: dict[str, Any]) -> None:
    """One job of each outcome the summary classifies."""
    gpu = {"pool": "gpu", "required_capabilities": []}
    failure = {"code": "app.broken", "message": "broken"}
    for steps, claim in (
        ({"prepare": {}}, None),
        ({"prepare": {"action": "fail", "failure": failure}}, None),
        ({"prepare": {"action": "pause", "reason": "look"}}, None),
        ({"prepare": {}}, gpu),
    ):
        job = scripted_job(steps, runner) if claim is None else scripted_job(steps, runner, claim=claim)
        submit(ws, job)


def test_run_prints_one_banner_and_one_summary(ws: Workspace, runner: dict[str, Any]) -> None:
    mixed_jobs(ws, runner)

    result = httk("workflow", "run", ws.root)

    assert result.returncode == 0, result.stderr
    banner, summary = result.stdout.splitlines()
    assert re.fullmatch(banner_pattern(ws.root), banner), banner
    assert summary == (
        "summary: 1 succeeded, 1 failed, 1 not claimable here (pool gpu: 1), 0 waiting, 1 paused, "
        "0 unreadable"
    )
    assert result.stderr == ""


def test_manager_run_reports_its_labels_and_a_json_summary(ws: Workspace, runner: dict[str, Any]) -> None:
    mixed_jobs(ws, runner)

    result = httk(
        "workflow", "manager", "run", "--workspace", ws.root, "--json",
        "--pool", "default", "--pool", "gpu", "--capability", "avx512", "--workers", "2",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    banner, line = result.stdout.splitlines()
    match = re.fullmatch(banner_pattern(ws.root, "default,gpu", "avx512", 2), banner)
    assert match, banner
    summary = json.loads(line)
    assert {key: summary[key] for key in ("manager_id", "exit_reason", "launched", "committed")} == {
        "manager_id": match["id"],
        "exit_reason": "idle",
        "launched": 4,
        "committed": 4,
    }
    assert summary["kinds"] == {"succeeded": 2, "failed": 1, "paused": 1}
    assert (summary["not_claimable"], summary["unreadable"], summary["anomalies"]) == ({}, 0, 0)
    manifest = json.loads((ws.managers_dir / match["id"] / "manager.json").read_text())
    assert (manifest["pools"], manifest["capabilities"], manifest["workers"]) == (
        ["default", "gpu"],
        ["avx512"],
        2,
    )


def test_httk_taskmanager_run_is_the_same_manager(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {}}, runner)
    submit(ws, job)

    result = httk("run", ws.root, executable="httk-taskmanager")

    assert result.returncode == 0, result.stderr
    banner, summary = result.stdout.splitlines()
    assert re.fullmatch(banner_pattern(ws.root), banner), banner
    assert summary.startswith("summary: 1 succeeded, 0 failed,")
    assert current_marker(ws, job).kind.value == "succeeded"


def test_no_confine_runs_the_runners_unconfined_and_says_so(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {}}, runner)
    submit(ws, job)

    result = httk("workflow", "run", ws.root, "--no-confine")

    assert result.returncode == 0, result.stderr
    banner = result.stdout.splitlines()[0]
    assert re.fullmatch(banner_pattern(ws.root, confinement="off"), banner), banner
    [running] = [frame for frame in frame_chain(ws, current_marker(ws, job)) if frame["kind"] == "running"]
    assert running["confinement"] == {"enforced": False, "reason": "manager", "detail": "--no-confine"}
    logged = httk("workflow", "job", "log", ws.root, job_key(job))
    assert logged.returncode == 0, logged.stderr
    assert "confinement=(off: --no-confine)" in logged.stdout, logged.stdout


def test_the_log_file_holds_the_info_record(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job({"prepare": {}}, runner)
    submit(ws, job)

    result = httk("workflow", "run", ws.root)

    match = re.fullmatch(banner_pattern(ws.root), result.stdout.splitlines()[0])
    assert match
    log = (ws.managers_dir / match["id"] / "log").read_text()
    assert f"INFO [{match['id']}] claimed {job_key(job)}" in log
    assert f"INFO [{match['id']}] launched {job_key(job)} step prepare" in log
    assert "-> succeeded (succeed)" in log
    assert "INFO" not in result.stderr


def test_log_level_debug_echoes_to_the_console_and_log_file_moves_it(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    submit(ws, scripted_job({"prepare": {}}, runner))
    log_file = tmp_path / "elsewhere" / "manager.log"

    result = httk("workflow", "run", ws.root, "--log-level", "debug", "--log-file", log_file)

    assert result.returncode == 0, result.stderr
    assert f"(log {log_file};" in result.stdout.splitlines()[0]
    assert "INFO: claimed " in result.stderr
    assert "INFO: launched " in result.stderr
    assert " claimed " in log_file.read_text()


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--pool", "Bad Pool", "error: invalid pool 'Bad Pool': "),
        ("--capability", "GPU!", "error: invalid capability 'GPU!': "),
        ("--log-level", "verbose", "error: invalid log level 'verbose': use debug, info, warning or error"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(
    ws: Workspace, runner: dict[str, Any], option: str, value: str, message: str
) -> None:
    submit(ws, scripted_job({"prepare": {}}, runner))
    before = tree(ws.root)

    result = httk("workflow", "run", ws.root, option, value)

    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(message), line
    assert result.stdout == ""
    assert tree(ws.root) == before


def test_an_idle_timeout_names_what_would_claim_the_rest(ws: Workspace, runner: dict[str, Any]) -> None:
    submit(ws, scripted_job({"prepare": {}}, runner, claim={"pool": "gpu", "required_capabilities": []}))

    result = httk("workflow", "run", ws.root, "--idle", "--idle-timeout", "0.3")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "summary: 0 succeeded, 0 failed, 1 not claimable here (pool gpu: 1), 0 waiting, 0 paused, "
        "0 unreadable",
        "advice: 1 ready job(s) need pool gpu: run a manager with --pool gpu",
    ]


# -- resources ---------------------------------------------------------------------------------------
def test_worker_resources_are_advertised_and_a_job_beyond_them_is_reported(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    analyse = {"procs": 1, "mem": 2000, "matlab_license_slots": 1}
    submit(ws, scripted_job({"prepare": {}}, runner, resources=analyse))
    submit(ws, scripted_job({"prepare": {}}, runner))

    result = httk(
        "workflow", "run", ws.root, "--workers", "4", "--json",
        "--worker-resource", "procs", "32", "--worker-resource", "mem", "128000",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    banner, line = result.stdout.splitlines()
    match = re.fullmatch(banner_pattern(ws.root, workers=4, resources="mem=128000,procs=32"), banner)
    assert match, banner
    summary = json.loads(line)
    assert summary["kinds"] == {"succeeded": 1, "ready": 1}
    assert summary["not_claimable"] == {"resource matlab_license_slots": 1}
    assert summary["ready_blocked"] == {"resources": {"matlab_license_slots": 1}}
    assert summary["advice"] == [
        "1 ready job(s) need resource matlab_license_slots (up to 1): "
        "add --worker-resource matlab_license_slots 1"
    ]
    manifest = json.loads((ws.managers_dir / match["id"] / "manager.json").read_text())
    assert manifest["resources"] == {"procs": 32, "mem": 128000}

    licensed = httk(
        "run", "--workspace", ws.root, "--workers", "4", "--worker-resource", "procs", "32",
        "--worker-resource", "mem", "128000", "--worker-resource", "matlab_license_slots", "2",
        executable="httk-taskmanager",
    )  # fmt: skip
    assert licensed.returncode == 0, licensed.stderr
    assert licensed.stdout.splitlines()[1].startswith("summary: 2 succeeded, 0 failed, 0 not claimable here")


def test_a_manager_without_worker_resources_never_claims_a_declared_amount(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    submit(ws, scripted_job({"prepare": {}}, runner, resources={"gpus": 1}))

    result = httk("workflow", "run", ws.root)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == (
        "summary: 0 succeeded, 0 failed, 1 not claimable here (resource gpus: 1), 0 waiting, 0 paused, "
        "0 unreadable"
    )


def test_slurm_capacities_are_derived_warned_about_and_overridden(ws: Workspace) -> None:
    slurm = {
        "SLURM_JOB_ID": "4711",
        "SLURM_NTASKS": "8",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_MEM_PER_NODE": "2G",
        "SLURM_GPUS": "lots",
    }

    result = httk(
        "workflow", "manager", "run", "--workspace", ws.root, "--worker-resource", "procs", "2", slurm=slurm
    )

    assert result.returncode == 0, result.stderr
    banner = result.stdout.splitlines()[0]
    match = re.fullmatch(banner_pattern(ws.root, resources="mem=4096,nodes=2,procs=2"), banner)
    assert match, banner
    assert "SLURM capacities: ignoring SLURM_GPUS='lots': not a GPU count" in result.stderr
    manifest = json.loads((ws.managers_dir / match["id"] / "manager.json").read_text())
    assert manifest["resources"] == {"procs": 2, "nodes": 2, "mem": 4096}


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["procs", "-1"], "error: invalid amount of resource procs '-1': must be a non-negative integer"),
        (["procs", "4.5"], "error: invalid amount of resource procs '4.5': must be a non-negative integer"),
        (["Procs", "4"], "error: invalid resource name 'Procs': must be 1-48 bytes"),
        (["procs", "4", "--worker-resource", "procs", "8"], "Error: --worker-resource procs is given twice"),
        (["procs"], "Error: Option '--worker-resource' requires 2 arguments."),
    ],
    ids=["negative", "fraction", "label", "twice", "one-word"],
)
def test_a_bad_worker_resource_is_refused_before_anything_is_written(
    ws: Workspace, runner: dict[str, Any], words: list[str], message: str
) -> None:
    submit(ws, scripted_job({"prepare": {}}, runner))
    before = tree(ws.root)

    result = httk("workflow", "run", ws.root, "--worker-resource", *words)

    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(message), result.stderr
    assert result.stdout == ""
    assert tree(ws.root) == before


# -- signals -----------------------------------------------------------------------------------------
def start(ws: Workspace) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command("workflow", "run", ws.root, "--idle"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_runners(job_dir: Path) -> None:
    for process_file in job_dir.glob(".httk-attempt.*/process.json"):
        identity = json.loads(process_file.read_text())
        if process_alive(identity):
            os.killpg(identity["pgid"], signal.SIGKILL)


def test_sigterm_drains_the_running_attempt_back_to_ready(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    job = scripted_job({"prepare": {"wait_for": str(tmp_path / "never")}}, runner)
    submit(ws, job)
    job_dir = ws.payload_path("p", job_key(job))
    manager = start(ws)
    try:
        [record] = wait_until(lambda: records(job_dir), "the runner to start")
        identity = json.loads((Path(record.context["control_dir"]) / "process.json").read_text())

        manager.send_signal(signal.SIGTERM)
        stdout, stderr = manager.communicate(timeout=WAIT_SECONDS)

        assert manager.returncode == 0, stderr
        assert stdout.splitlines()[-1].startswith("summary: 0 succeeded, 0 failed,")
        assert process_alive(identity) is False
        marker = current_marker(ws, job)
        assert marker.kind.value == "ready"
        ready = frame_chain(ws, marker)[-1]
        assert ready["attempt_reason"] == "lease_lost"
        assert ready["last_failure"]["code"] == "lease_lost"
        assert ready["unclean_restart"] is True
    finally:
        manager.kill()
        manager.communicate()
        stop_runners(job_dir)


def test_a_second_signal_exits_at_once(ws: Workspace, runner: dict[str, Any], tmp_path: Path) -> None:
    job = scripted_job({"prepare": {"wait_for": str(tmp_path / "never"), "ignore_term": True}}, runner)
    submit(ws, job)
    job_dir = ws.payload_path("p", job_key(job))
    manager = start(ws)
    try:
        [record] = wait_until(lambda: records(job_dir), "the runner to start")
        manager.send_signal(signal.SIGTERM)
        wait_until((record.workdir / "term.1").exists, "the drain to signal the runner")

        manager.send_signal(signal.SIGTERM)
        manager.communicate(timeout=WAIT_SECONDS)

        assert manager.returncode == 128 + signal.SIGTERM
        assert current_marker(ws, job).kind.value == "running"  # recovered later from the expired lease
    finally:
        manager.kill()
        manager.communicate()
        stop_runners(job_dir)


# -- operator requests against a live manager ---------------------------------------------------------
def test_a_cancel_request_stops_a_running_job_and_its_whole_group(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    job = scripted_job({"prepare": {"wait_for": str(tmp_path / "never")}}, runner)
    submit(ws, job)
    job_dir = ws.payload_path("p", job_key(job))
    manager = start(ws)
    try:
        [record] = wait_until(lambda: records(job_dir), "the runner to start")
        identity = json.loads((Path(record.context["control_dir"]) / "process.json").read_text())
        request = httk(
            "workflow",
            "job",
            "request",
            ws.root,
            job["id"],
            "cancel",
            "--operator",
            "ops",
            "--reason",
            "stop",
        )
        assert request.returncode == 0, request.stderr
        wait_until(lambda: current_marker(ws, job).kind.value == "cancelled", "the job to be cancelled")
        frames = frame_chain(ws, current_marker(ws, job))
        assert [f["kind"] for f in frames[-2:]] == ["cancelling", "cancelled"]
        assert frames[-1]["cancellation"]["verified"] in ("process_exited", "process_group_absent")
        assert process_alive(identity) is False
        assert not list((ws.control / "requests" / "ready").iterdir())
    finally:
        manager.send_signal(signal.SIGTERM)
        manager.communicate(timeout=WAIT_SECONDS)
        stop_runners(job_dir)


def test_continue_revives_a_failed_job_under_a_live_manager(ws: Workspace, runner: dict[str, Any]) -> None:
    job = scripted_job(
        {"prepare": {"attempts": [{"action": "exit", "exit": 3}, {"action": "succeed"}]}}, runner, retry_on=[]
    )
    submit(ws, job)
    first = httk("workflow", "run", ws.root)
    assert first.returncode == 0, first.stderr
    assert current_marker(ws, job).kind.value == "failed"
    request = httk("job", "request", "continue", "--workspace", ws.root, job["id"], "--operator", "ops")
    assert request.returncode == 0, request.stderr
    second = httk("workflow", "run", ws.root)
    assert second.returncode == 0, second.stderr
    marker = current_marker(ws, job)
    assert marker.kind.value == "succeeded"
    frames = frame_chain(ws, marker)
    revived = next(f for f in frames if f.get("reason") == "operator_continue")
    assert revived["operator"] == "ops" and revived["attempt_reason"] == "manual_continue"
