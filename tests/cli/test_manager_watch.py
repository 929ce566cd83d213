"""One ``httk workflow manager run`` serving several workspaces and watch roots, as a real process.

Workspaces are made with the library, moved with ``os.rename`` (what ``mv`` does on one filesystem) and
copied with ``cp -a``; the manager and ``workspace detach`` are the installed executable. What a test
waits for is a condition on disk or a line of the manager's log, each with a deadline. The order of
claims across workspaces is the order of the attempts' launch log (one file per launch, numbered by an
exclusive create), which no clock decides.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow import models
from httk.workflow.engine.core._workspace import Workspace, attach, init, probe_marker

from tests.cli.test_manager_cmd import command, httk
from tests.runners import job_key, publish_scripted_runner, scripted_job, submit, wait_until


def workspace(path: Path, scratch: Path) -> tuple[Workspace, dict[str, Any]]:
    ws = init(path, durable=False)
    return ws, publish_scripted_runner(ws, scratch / f"runner-of-{path.name}")


def job_in(ws: Workspace, runner: dict[str, Any], **script: Any) -> dict[str, Any]:
    job = scripted_job({"prepare": {"action": "succeed", **script}}, runner)
    submit(ws, job)
    return job


def kind_of(root: Path, job: dict[str, Any]) -> str | None:
    ws = attach(root, writable=False)
    marker = probe_marker(ws, "p", job_key(job))
    return None if marker is None else marker.kind.value


class Served:
    """A manager process started with ``arguments``, its log file, stopped (drained) at the end."""

    def __init__(self, tmp: Path, *arguments: str | Path) -> None:
        self.log = tmp / "manager.log"
        self.output = tmp / "manager.out"
        with self.output.open("w") as out:
            self.process = subprocess.Popen(
                command(
                    "workflow",
                    "manager",
                    "run",
                    *arguments,
                    "--idle",
                    "--no-confine",
                    "--rescan-interval",
                    "0.1",
                    "--log-file",
                    self.log,
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def logged(self, text: str) -> str:
        return wait_until(
            lambda: text if self.log.exists() and text in self.log.read_text() else None, f"log: {text}"
        )

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        return self.output.read_text()


@pytest.fixture(name="served")
def served_fixture() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for manager in started:
        manager.stop()


def succeeded(root: Path, job: dict[str, Any]) -> str | None:
    return "yes" if kind_of(root, job) == "succeeded" else None


def retired(root: Path, job: dict[str, Any]) -> str | None:
    """Succeeded, and its attempt's control directory removed: the manager has finished with the job
    (the marker moves before the control directory goes, so a copy made in between races that)."""
    payload = root / "p" / job_key(job)
    return succeeded(root, job) if not list(payload.glob(".httk-attempt.*")) else None


def copy_served(source: Path, target: Path) -> None:
    """``cp -a`` of a workspace a manager is serving, less the manager's own record: its heartbeat is
    replaced through a temporary name every beat, which a copying walk may list and then miss."""
    shutil.copytree(source, target, symlinks=True, ignore=_manager_records)


def _manager_records(directory: str, names: list[str]) -> list[str]:
    return ["managers"] if directory.endswith("/.httk-workflow") else []


def test_a_watch_root_attaches_a_workspace_renamed_in_and_detaches_one_on_request(
    tmp_path: Path, served: list[Served]
) -> None:
    root, staging, outside = tmp_path / "root", tmp_path / "staging", tmp_path / "outside"
    for directory in (root, staging, outside):
        directory.mkdir()
    one, one_runner = workspace(root / "one", tmp_path)
    two, two_runner = workspace(root / "two", tmp_path)
    three, three_runner = workspace(staging / "three", tmp_path)
    release = tmp_path / "release"
    first = job_in(one, one_runner)
    held = job_in(two, two_runner, wait_for=str(release))
    arrived = [job_in(three, three_runner) for _ in range(2)]
    manager = Served(tmp_path, "--watch-root", root, "--workers", "2")
    served.append(manager)

    wait_until(lambda: succeeded(one.root, first), "the job of one to succeed")
    wait_until(lambda: kind_of(two.root, held) == "running" or None, "the held job of two to run")
    os.rename(three.root, root / "three")  # built elsewhere, renamed in: attached without a restart
    wait_until(lambda: all(succeeded(root / "three", job) for job in arrived) or None, "three's jobs")

    detach = subprocess.Popen(
        command("workflow", "workspace", "detach", two.root, "--timeout", "60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    manager.logged(f"workspace {two.workspace_id} at {two.root}: detach requested")
    late = job_in(two, two_runner)  # submitted after the request: never claimed here
    assert detach.poll() is None  # the held attempt still runs: not quiescent
    release.touch()
    out, err = detach.communicate(timeout=60)
    assert detach.returncode == 0, err
    assert f"workspace {two.root} is quiescent (1 manager(s) acknowledged" in out
    assert kind_of(two.root, held) == "succeeded"
    assert kind_of(two.root, late) in ("submitted", "ready")
    [acknowledgement] = two.managers_dir.glob("*/detached.json")
    check(json.loads(acknowledgement.read_text()), "detach-acknowledgement")
    check(json.loads((two.control / "detach.json").read_text()), "detach-request")

    os.rename(two.root, outside / "two")  # safe now; the manager keeps serving the others
    again = job_in(one, one_runner)
    wait_until(lambda: succeeded(one.root, again), "a later job of one to succeed")
    assert kind_of(outside / "two", late) in ("submitted", "ready")

    result = httk("workflow", "workspace", "attach", outside / "two")
    assert result.returncode == 0, result.stderr
    assert "detach withdrawn" in result.stdout
    os.rename(outside / "two", root / "two")
    wait_until(lambda: succeeded(root / "two", late), "two's late job, once it is attached again")
    summary = manager.stop()
    assert f"{root / 'one'}: summary: 2 succeeded, 0 failed" in summary
    assert f"{root / 'two'}: summary: 2 succeeded, 0 failed" in summary
    assert f"{root / 'three'}: summary: 2 succeeded, 0 failed" in summary


def check(document: dict[str, Any], name: str) -> None:
    models.validator(name).validate(document)


def test_a_renamed_workspace_keeps_being_served_and_a_vanished_one_waits_for_its_return(
    tmp_path: Path, served: list[Served]
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    ws, runner = workspace(root / "alpha", tmp_path)
    first = job_in(ws, runner)
    manager = Served(tmp_path, "--watch-root", root)
    served.append(manager)
    wait_until(lambda: succeeded(root / "alpha", first), "the first job")

    os.rename(root / "alpha", root / "beta")
    manager.logged(f"workspace {ws.workspace_id} moved from {root / 'alpha'} to {root / 'beta'}")
    renamed = job_in(attach(root / "beta", durable=False), runner)
    wait_until(lambda: succeeded(root / "beta", renamed), "a job submitted at the new path")

    os.rename(root / "beta", outside / "beta")
    manager.logged(f"workspace {ws.workspace_id} vanished from {root / 'beta'}: unavailable")
    waiting = job_in(attach(outside / "beta", durable=False), runner)
    assert kind_of(outside / "beta", waiting) == "submitted"  # nobody serves it, nothing failed it
    os.rename(outside / "beta", root / "gamma")
    wait_until(lambda: succeeded(root / "gamma", waiting), "its job once the same id returns")
    summary = manager.stop()
    assert f"{root / 'gamma'}: summary: 3 succeeded, 0 failed" in summary


def test_a_copy_beside_the_live_workspace_is_refused_and_the_live_one_served(
    tmp_path: Path, served: list[Served]
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    ws, runner = workspace(root / "live", tmp_path)
    first = job_in(ws, runner)
    manager = Served(tmp_path, "--watch-root", root)
    served.append(manager)
    wait_until(lambda: retired(ws.root, first), "the first job, succeeded and its attempt retired")
    copy_served(ws.root, root / "backup")
    copied = job_in(attach(root / "backup", durable=False), runner)
    manager.logged(
        f"duplicate workspace id {ws.workspace_id}: {root / 'backup'} is a different directory "
        f"(device/inode) from the served {ws.root}; it is refused for mutation"
    )
    later = job_in(ws, runner)
    wait_until(lambda: succeeded(ws.root, later), "a later job of the live workspace")
    assert kind_of(root / "backup", copied) == "submitted"
    assert manager.log.read_text().count(f"duplicate workspace id {ws.workspace_id}") == 1  # once


def test_two_directories_with_one_id_found_together_are_both_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    ws, runner = workspace(root / "live", tmp_path)
    job = job_in(ws, runner)
    shutil.copytree(ws.root, root / "backup", symlinks=True)
    result = httk("workflow", "manager", "run", "--watch-root", root, "--no-confine")
    assert result.returncode == 0, result.stderr
    assert (
        f"duplicate workspace id {ws.workspace_id}: {root / 'backup'} and {root / 'live'} are different "
        "directories (device/inode); both are refused for mutation"
    ) in result.stderr
    assert kind_of(root / "live", job) == "submitted"
    assert kind_of(root / "backup", job) == "submitted"

    explicit = httk("workflow", "manager", "run", root / "live", root / "backup", "--no-confine")
    assert explicit.returncode == 3  # a workspace error
    assert f"duplicate workspace id {ws.workspace_id}: {root / 'backup'} is a different directory" in (
        explicit.stderr
    )


def test_discovery_stops_at_a_workspace_and_overlaps_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outer, outer_runner = workspace(root / "outer", tmp_path)
    inner, inner_runner = workspace(outer.root / "inner", tmp_path)
    outer_job, inner_job = job_in(outer, outer_runner), job_in(inner, inner_runner)
    result = httk("workflow", "manager", "run", "--watch-root", root, "--no-confine")
    assert result.returncode == 0, result.stderr
    assert kind_of(outer.root, outer_job) == "succeeded"
    assert kind_of(inner.root, inner_job) == "submitted"  # below a workspace boundary: never found

    cases = {
        ("--watch-root", outer.root / "inner"): f"--watch-root lies inside the workspace {outer.root}",
        ("--watch-root", root, "--watch-root", outer.root): f"overlaps the watch root {root}",
        (outer.root, inner.root): f"a workspace nested inside the workspace {outer.root} is refused",
        ("--watch-root", tmp_path / "missing"): "--watch-root is not a directory",
        (outer.root, tmp_path): "not a workspace: no .httk-workflow/format.json",
        (outer.root, root / "outer", "--count", "2"): "--count and --detach launch managers for one",
    }
    for arguments, error in cases.items():
        refused = httk("workflow", "manager", "run", *arguments, "--no-confine")
        assert refused.returncode != 0, arguments
        assert error in refused.stderr, (arguments, refused.stderr)
    assert kind_of(inner.root, inner_job) == "submitted"


def test_a_backlog_in_one_workspace_never_starves_another(tmp_path: Path) -> None:
    launches = tmp_path / "launches"
    launches.mkdir()
    big, big_runner = workspace(tmp_path / "big", tmp_path)
    small, small_runner = workspace(tmp_path / "small", tmp_path)
    for _ in range(12):
        job_in(big, big_runner, launch_log=str(launches), label="big")
    for _ in range(4):
        job_in(small, small_runner, launch_log=str(launches), label="small")
    result = httk("workflow", "manager", "run", big.root, small.root, "--workers", "1", "--no-confine")
    assert result.returncode == 0, result.stderr
    order = [path.read_text().strip() for path in sorted(launches.iterdir())]
    assert sorted(order) == ["big"] * 12 + ["small"] * 4
    # Round-robin while both have work: the four small jobs are interleaved with the first big ones.
    assert all(order[i] != order[i + 1] for i in range(7)), order
    assert order[8:] == ["big"] * 8, order
    assert f"{big.root}: summary: 12 succeeded, 0 failed" in result.stdout
    assert f"{small.root}: summary: 4 succeeded, 0 failed" in result.stdout


def test_a_manager_of_one_workspace_acknowledges_a_detach_and_stops(tmp_path: Path) -> None:
    ws, runner = workspace(tmp_path / "ws", tmp_path)
    job = job_in(ws, runner)
    manager = Served(tmp_path, ws.root)
    try:
        wait_until(lambda: succeeded(ws.root, job), "the job")
        result = httk("workflow", "workspace", "detach", ws.root, "--timeout", "60")
        assert result.returncode == 0, result.stderr
        assert "is quiescent (1 manager(s) acknowledged" in result.stdout
        assert manager.process.wait(timeout=60) == 0
        assert "detached (acknowledged; no longer served by this manager)" in manager.output.read_text()
        again = httk("workflow", "manager", "run", ws.root, "--no-confine")
        assert again.returncode == 3
        assert "this workspace is detached" in again.stderr
        assert httk("workflow", "workspace", "attach", ws.root).returncode == 0
        assert httk("workflow", "manager", "run", ws.root, "--no-confine").returncode == 0
    finally:
        manager.stop()
