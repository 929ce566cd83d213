"""The tmux kit reports a command's exit status whatever signal mask the test runner has."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.tmuxkit import Terminal


def test_an_exit_status_shows_when_the_runner_blocks_sigchld(tmp_path: Path) -> None:
    # A runner with SIGCHLD blocked is what made every monitor test wait out its deadline in CI.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    terminal = None
    try:
        terminal = Terminal(tmp_path, ["sh", "-c", "echo finished; exit 3"], env={"PATH": "/usr/bin:/bin"})
        assert terminal.wait_for_exit(timeout=20) == 3
        assert "finished" in terminal.screen()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if terminal is not None:
            terminal.close()


def test_a_command_killed_by_a_signal_fails_naming_it(tmp_path: Path) -> None:
    terminal = Terminal(tmp_path, ["sh", "-c", "kill -TERM $$"], env={"PATH": "/usr/bin:/bin"})
    try:
        try:
            terminal.wait_for_exit(timeout=20)
        except AssertionError as error:
            assert "killed by signal 15" in str(error)
        else:
            raise AssertionError("a command killed by SIGTERM was reported as exiting")
    finally:
        terminal.close()
