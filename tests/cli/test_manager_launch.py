"""``run --count/--detach/--inline`` through the process launcher, ``manager stop``, local capacities.

Real processes throughout: the installed ``httk`` launches managers as detached sessions, the test
watches their manifests, heartbeats and output files, and ``manager stop`` signals them.
"""

from __future__ import annotations

import os
import re
from typing import Any

from httk.workflow.engine.core._liveness import process_alive
from httk.workflow.engine.core._workspace import Workspace

from tests.cli.test_manager_cmd import BIN, HOST_MEMORY_MB, httk
from tests.launchkit import manifests
from tests.runners import (
    markers_of,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)

UUID = r"[0-9a-f-]{36}"
PROCS = len(os.sched_getaffinity(0))


def test_run_count_2_waits_for_both_managers_and_prints_their_summaries(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    for _ in range(6):
        submit(ws, scripted_job({"prepare": {}}, runner))

    result = httk("workflow", "run", ws.root, "--count", "2")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert re.fullmatch(rf"manager {UUID} \(pid \d+\) exited 0: summary: \d+ succeeded, .*", line), line
    assert len(markers_of(ws, "succeeded")) == 6
    shares = sorted(m["resources"]["procs"] for m in manifests(ws))
    assert sum(shares) == PROCS and max(shares) - min(shares) <= 1  # the host split two ways
    assert sum(m["resources"]["mem"] for m in manifests(ws)) == HOST_MEMORY_MB
    for manifest in manifests(ws):
        output = ws.managers_dir / manifest["manager_id"] / "output.log"
        assert output.read_text().startswith(f"httk manager {manifest['manager_id']} serving")


def test_run_detach_returns_at_once_and_manager_stop_drains_the_managers(ws: Workspace) -> None:
    result = httk("workflow", "run", ws.root, "--count", "2", "--detach", "--idle")

    assert result.returncode == 0, result.stderr
    started = re.findall(rf"^pid (\d+) manager ({UUID}) output (\S+)$", result.stdout, re.MULTILINE)
    assert len(started) == 2
    wait_until(lambda: len(manifests(ws)) == 2, "both managers to register")
    identities = [{"host": m["host"], "pid": m["pid"], **m["process"]} for m in manifests(ws)]
    assert all(process_alive(identity) for identity in identities)

    stopped = httk("workflow", "manager", "stop", ws.root, "--all")

    assert stopped.returncode == 0, stopped.stderr
    assert sorted(re.findall(rf"^manager ({UUID}): sent SIGTERM", stopped.stdout, re.MULTILINE)) == sorted(
        manager_id for _pid, manager_id, _output in started
    )
    wait_until(lambda: not any(process_alive(i) for i in identities), "both managers to exit")
    for _pid, manager_id, _output in started:
        log = (ws.managers_dir / manager_id / "log").read_text()
        assert "draining (received SIGTERM)" in log
    again = httk("workflow", "manager", "stop", ws.root, "--manager", started[0][1])
    assert again.returncode == 1 and "not live" in again.stdout


def test_inline_refuses_several_managers_and_manager_workers_is_the_default(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    refused = httk("workflow", "run", ws.root, "--inline", "--count", "2")
    assert refused.returncode == 2
    assert "--inline runs one manager in this process" in refused.stderr
    ws.update_document({"settings": {"manager.workers": 3}})

    result = httk("workflow", "run", ws.root, "--inline")

    assert result.returncode == 0, result.stderr
    assert "; workers 3; confinement " in result.stdout.splitlines()[0]


def test_manager_count_setting_launches_that_many_and_a_bad_count_is_refused(ws: Workspace) -> None:
    ws.update_document({"settings": {"manager.count": 2}})
    result = httk("workflow", "run", ws.root, "--detach")
    assert result.returncode == 0, result.stderr
    assert len(re.findall(r"^pid \d+ ", result.stdout, re.MULTILINE)) == 2
    ws.update_document({"settings": {"manager.count": "two"}})

    bad = httk("workflow", "run", ws.root)

    assert bad.returncode == 2
    assert bad.stderr == "error: the setting manager.count must be a positive integer, not 'two'\n"


def test_a_local_manager_without_worker_resources_runs_a_job_that_declares_procs(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    submit(ws, scripted_job({"prepare": {}}, runner, resources={"procs": 1, "mem": 100}))

    result = httk("workflow", "run", ws.root)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("summary: 1 succeeded")


def test_a_placement_prefix_that_matches_no_job_is_one_warning_at_start(ws: Workspace) -> None:
    result = httk("workflow", "run", ws.root, "--placement-prefix", "project-x")

    assert result.returncode == 0, result.stderr
    assert result.stderr.count("--placement-prefix project-x matches no job") == 1


def test_an_unknown_launcher_is_refused_before_anything_starts(ws: Workspace) -> None:
    ws.update_document({"settings": {"manager.launch": "cluster"}})

    result = httk("workflow", "run", ws.root)

    assert result.returncode == 2
    assert "no launcher named 'cluster'" in result.stderr
    assert manifests(ws) == []


def test_a_prelude_runs_before_a_process_launched_manager_found_on_its_path(ws: Workspace) -> None:
    prelude = f"export PATH={BIN}:$PATH\necho prelude ran"
    ws.update_document({"settings": {"environment.prelude": prelude, "manager.count": 2}})

    result = httk("workflow", "run", ws.root)

    assert result.returncode == 0, result.stderr
    for manifest in manifests(ws):
        output = (ws.managers_dir / manifest["manager_id"] / "output.log").read_text()
        assert output.splitlines()[0] == "prelude ran"
    assert len(manifests(ws)) == 2
