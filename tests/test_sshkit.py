"""The test suite's real OpenSSH server (``tests/sshkit.py``) runs commands for a key-authenticated client."""

from __future__ import annotations

import shutil
import subprocess

from tests.daemonkit import running, wait_for
from tests.sshkit import STOP_SECONDS, WATCHDOG, SshServer, running_server, start_server


def test_a_command_runs_on_the_server_for_the_generated_key(sshd: SshServer) -> None:
    result = sshd.ssh("echo hello from $(id -un)")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"hello from {sshd.user}\n"


def test_a_changed_host_key_is_refused_by_a_strict_client(sshd: SshServer) -> None:
    old_known_hosts = sshd.known_hosts.read_text()
    sshd.change_host_key()
    sshd.known_hosts.write_text(old_known_hosts)

    result = sshd.ssh("true")

    assert result.returncode == 255
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr


def test_stopping_the_server_ends_its_open_connections() -> None:
    with running_server() as server:
        session = subprocess.Popen(
            [
                "ssh",
                "-F",
                "none",
                "-p",
                str(server.port),
                "-i",
                str(server.identity_file),
                "-o",
                "BatchMode=yes",
                "-o",
                f"UserKnownHostsFile={server.known_hosts}",
                "-o",
                "StrictHostKeyChecking=yes",
                f"{server.user}@{server.host}",
                "sleep 600",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: len(server.connections()) >= 2, "the session's processes", 30)
        forked = server.connections()
        server.stop()
        assert not any(running(pid) for pid in forked)
        assert session.wait(STOP_SECONDS) == 255


def test_a_server_whose_owner_is_killed_is_stopped_and_removed_by_its_watchdog() -> None:
    owner = subprocess.Popen(["sleep", "600"])
    server = start_server(owner=owner.pid)
    try:
        daemon, watchdog = server.pids["sshd"], server.pids[WATCHDOG]
        assert running(daemon) and running(watchdog)

        owner.kill()
        owner.wait()

        wait_for(
            lambda: not running(daemon) and not running(watchdog) and not server.root.exists(),
            "the watchdog to stop sshd and remove the server's directory",
            STOP_SECONDS * 4,
        )
    finally:
        owner.kill()
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
