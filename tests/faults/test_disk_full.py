"""Disk full, end to end: a workspace on a small tmpfs that the test fills while a manager runs.

The filesystem is real: a size-limited tmpfs mounted by the test (root only; without it the tests skip,
naming what is missing). The recording runner of the crash suite keeps its execution log outside it, so
what ran is known even while the workspace cannot be written.

1. 500 jobs, two workers. Once some have succeeded the test fills the filesystem with a filler file;
   the manager must say that claiming is paused, claim nothing while it is (no ready job leaves ready),
   and say that it resumed once the filler is removed. It must finish every job in that same run and
   exit normally, no traceback; every job has succeeded with one marker and an intact chain, no attempt
   ran twice, an activation ran again only after a retry on its chain, and fsck is clean.
2. The dead manager of issue 15: two attempts run, the disk fills, the manager is SIGKILLed. Once space
   returns a new manager, with the workspace's default 900 s lease, must take both attempts over at
   once (its predecessor's process is gone: DECISIONS D17) and finish every job in its one run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import Workspace, attach, init
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.crash._scenarios import (
    chain,
    job_document,
    manager_environment,
    markers_by_job,
    read_executions,
    single_marker,
    wait_for,
    write_runner,
)

JOBS = 500
PLACEMENTS = 10
TMPFS_SIZE = "96m"
WAIT = 600.0
"""Bounds on real conditions (a loaded two-core machine runs 500 jobs in a minute or two)."""


def _mount(where: Path) -> str | None:
    """Mount a size-limited tmpfs at ``where``; why not, when it cannot be done here."""
    if os.geteuid() != 0:
        return "mounting a size-limited tmpfs needs root (CAP_SYS_ADMIN); this test runs as root in CI"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount and umount (util-linux) are not installed"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip()}"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "fs"
    missing = _mount(where)
    if missing is not None:
        pytest.skip(missing)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(fs: Path) -> Path:
    """Write a filler file until the filesystem refuses another byte; return it."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler


MANAGER = """
import json, logging
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
logging.basicConfig(filename={log!r}, level=logging.INFO, format="%(levelname)s %(message)s")
summary = Manager({root!r}, ManagerConfig(workers=2)).run()
print(json.dumps({{"launched": summary.launched, "exit": summary.exit_reason}}))
"""


def start_manager(root: Path, log: Path) -> subprocess.Popen[str]:
    """A manager process (two workers, the workspace's own lease) logging everything to ``log``, which
    lies outside the full filesystem; its stderr (a traceback, if any) goes there too."""
    stderr = log.with_suffix(".stderr").open("w")
    try:
        return subprocess.Popen(
            [sys.executable, "-c", MANAGER.format(root=str(root), log=str(log))],
            env=manager_environment(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    finally:
        stderr.close()


def logged(log: Path) -> str:
    text = log.read_text() if log.exists() else ""
    return text + log.with_suffix(".stderr").read_text()


def claims_while_paused(text: str) -> list[str]:
    """The claims the log shows between a pause of claiming and the resumption that ends it."""
    paused, found = False, []
    for line in text.splitlines():
        if "claiming paused" in line:
            paused = True
        elif "claiming resumed" in line:
            paused = False
        elif paused and line.startswith("INFO claimed "):
            found.append(line)
    return found


def count(workspace: Workspace, kind: Kind) -> int:
    directory = workspace.control / "state" / kind.value
    return sum(len(files) for _dirs, _sub, files in os.walk(directory))


def submit(fs: Path, base: Path, jobs: int, plan: str) -> tuple[Path, Path, list[str], dict[str, Any]]:
    exec_log = base / "exec-log"
    exec_log.mkdir()
    workspace = init(fs / "ws")
    stored = publish_runner(workspace, "recorder", write_runner(base / "runner"))
    runner = {"backend": "path", **stored.reference()}
    specs = [JobSpec(job_document(exec_log, plan, runner=runner), f"p/{i % PLACEMENTS}") for i in range(jobs)]
    keys = [result.job_key for result in submit_jobs(workspace, specs)]
    workspace.close()
    return workspace.root, exec_log, keys, runner


def check_all_succeeded(root: Path, exec_log: Path, keys: list[str]) -> None:
    """Every job succeeded exactly once: one marker, an intact chain, no attempt executed twice, and an
    activation executed again only after a retry frame on its chain."""
    workspace = attach(root, writable=False)
    assert set(markers_by_job(workspace)) == set(keys)
    executions = read_executions(exec_log)
    assert not executions.duplicates, executions.duplicates
    retried: set[str] = set()
    for key in keys:
        marker = single_marker(workspace, key)
        assert marker.kind is Kind.SUCCEEDED, (key, marker.kind)
        frames = chain(workspace, marker)
        retried |= {f["activation_id"] for f in frames if f["kind"] == "ready" and f.get("reason") == "retry"}
    for activation, attempts in executions.attempts.items():
        assert len(attempts) == 1 or activation in retried, (activation, attempts)
    report = fsck(attach(root, writable=False))
    assert report.clean, [problem.as_dict() for problem in report.problems]


@pytest.mark.slow
def test_a_full_disk_pauses_claiming_and_500_jobs_finish_once_when_space_returns(
    small_fs: Path, tmp_path: Path
) -> None:
    root, exec_log, keys, _runner = submit(small_fs, tmp_path, JOBS, "succeed")
    workspace = attach(root, writable=False)
    log = tmp_path / "manager.log"
    manager = start_manager(root, log)
    try:
        wait_for(
            lambda: count(workspace, Kind.SUCCEEDED) >= 50,
            "50 jobs to succeed",
            deadline_seconds=WAIT,
        )
        filler = fill(small_fs)
        wait_for(lambda: "claiming paused" in logged(log), "the manager to pause", deadline_seconds=60)
        assert manager.poll() is None, "the manager stopped while the disk was full"
        filler.unlink()
        out, _ = manager.communicate(timeout=WAIT)
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.communicate()
    text = logged(log)
    assert manager.returncode == 0 and "Traceback" not in text, text[-3000:]
    assert text.rindex("claiming paused") < text.rindex("claiming resumed"), text[-3000:]
    assert claims_while_paused(text) == []
    assert "No space left on device" in text
    assert json.loads(out.strip().splitlines()[-1])["exit"] == "idle"
    check_all_succeeded(root, exec_log, keys)


@pytest.mark.slow
def test_a_manager_killed_while_the_disk_is_full_is_taken_over_at_once_when_space_returns(
    small_fs: Path, tmp_path: Path
) -> None:
    root, exec_log, blocked, runner = submit(
        small_fs, tmp_path, 2, "block"
    )  # first attempts block until killed
    workspace = attach(root, writable=False)
    first_log = tmp_path / "first.log"
    first = start_manager(root, first_log)
    try:
        wait_for(lambda: count(workspace, Kind.RUNNING) == 2, "two attempts to run", deadline_seconds=WAIT)
        more = [JobSpec(job_document(exec_log, "succeed", runner=runner), f"p/{i}") for i in range(18)]
        keys = blocked + [result.job_key for result in submit_jobs(attach(root), more)]
        filler = fill(small_fs)
        wait_for(lambda: "claiming paused" in logged(first_log), "the pause", deadline_seconds=60)
        first.send_signal(signal.SIGKILL)
        first.communicate()
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    filler.unlink()
    second_log = tmp_path / "second.log"
    second = start_manager(root, second_log)  # the default lease: 900 s, which nothing here waits for
    out, _ = second.communicate(timeout=WAIT)
    text = logged(second_log)
    assert second.returncode == 0 and "Traceback" not in text, text[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["exit"] == "idle"
    check_all_succeeded(root, exec_log, keys)
    takeovers = [
        frame["takeover"]
        for key in keys
        for frame in chain(workspace, single_marker(workspace, key))
        if frame["kind"] == "ready" and "takeover" in frame
    ]
    assert len(takeovers) == 2, takeovers  # the two killed attempts, and no other
    assert all(t["manager_process_gone"] and t["rule"] == "process_gone" for t in takeovers), takeovers
