"""A real terminal for the tests: a private tmux server, ``send-keys`` to type, ``capture-pane`` to read.

:func:`install` installs Debian's ``tmux`` when it is missing (as root, through apt-get, which is what CI
is); ``./dev test`` runs ``python -m tests.tmuxkit install`` up front, as it does for Slurm.

A :class:`Terminal` is one tmux server of its own (its socket in the test's temporary directory, a
configuration file of its own, never the user's), running one command in one window of a fixed size
with the environment it was given. Its pane stays after the command exits (``remain-on-exit``), so the
exit status can be read. :meth:`Terminal.wait_for` polls the screen for a pattern with a deadline and
fails naming what it waited for and what the screen showed; :meth:`Terminal.close` kills that server
and nothing else.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.aptkit import apt_install

PACKAGES = ("tmux",)
WAIT_SECONDS = 60.0
"""How long a test waits for the screen (generous: a cold start of the monitor compiles textual)."""
CONFIG = "set -g remain-on-exit on\nset -g status off\nset -sg escape-time 0\n"


class TmuxUnavailableError(RuntimeError):
    """tmux cannot be installed here; the message says why."""


def install() -> None:
    """Install tmux with apt-get when it is missing (root only)."""
    if shutil.which("tmux") is None:
        apt_install(PACKAGES, TmuxUnavailableError)


class Terminal:
    """One command running in a private tmux server; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        width: int = 160,
        height: int = 50,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.socket = directory / "tmux.sock"
        config = directory / "tmux.conf"
        config.write_text(CONFIG)
        # The window's size is the terminal's: COLUMNS and LINES (which a test runner may export) would
        # make a program believe another one.
        self._env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")} | {
            "TERM": "xterm-256color"
        }
        self._tmux(
            "-f", str(config), "new-session", "-d", "-s", "main", "-x", str(width), "-y", str(height),
            "--", *command,
        )  # fmt: skip

    def _tmux(self, *args: str) -> str:
        with signals_unblocked():
            result = subprocess.run(
                ["tmux", "-S", str(self.socket), *args],
                env=self._env,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        if result.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
        return result.stdout

    def send(self, *keys: str) -> None:
        """Press ``keys``, each a tmux key name (``Enter``, ``Escape``, ``C-u``) or a single character."""
        self._tmux("send-keys", "-t", "main", *keys)

    def type(self, text: str) -> None:
        """Type ``text`` character by character, nothing in it read as a key name."""
        self._tmux("send-keys", "-t", "main", "-l", text)

    def screen(self) -> str:
        """What the window shows now, one line per row, after what scrolled off it (a dead pane's last
        words are pushed up by tmux's "Pane is dead" line)."""
        return self._tmux("capture-pane", "-p", "-S", "-", "-t", "main")

    def wait_for(self, pattern: str, what: str, timeout: float = WAIT_SECONDS) -> re.Match[str]:
        """Poll the screen until ``pattern`` (a regular expression) shows; fail naming ``what``."""
        deadline = time.monotonic() + timeout
        compiled = re.compile(pattern, re.MULTILINE)
        while True:
            shown = self.screen()
            found = compiled.search(shown)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"gave up after {timeout:.0f} s waiting for {what}; the screen:\n{shown}"
                )
            time.sleep(0.1)

    def exit_status(self) -> int | None:
        """The command's exit status once it has exited, else ``None``; a command killed by a signal fails
        the test naming the signal (tmux then has no status to report, only the signal)."""
        shown = self._tmux(
            "display-message",
            "-p",
            "-t",
            "main",
            "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}:#{pane_pid}",
        )
        dead, status, killed_by, pid = [*shown.strip().split(":"), "", "", ""][:4]
        if dead != "1":
            return None
        if not status and not killed_by:
            status, killed_by = zombie_status(pid)
        if killed_by:
            raise AssertionError(f"the command was killed by signal {killed_by}:\n{self.screen()}")
        return int(status) if status else None  # the status shows a moment after the pane died

    def wait_for_exit(self, timeout: float = WAIT_SECONDS) -> int:
        deadline = time.monotonic() + timeout
        while (status := self.exit_status()) is None:
            if time.monotonic() >= deadline:
                raise AssertionError(f"the command did not exit within {timeout:.0f} s:\n{self.screen()}")
            time.sleep(0.1)
        return status

    def close(self) -> None:
        """Kill this private server (and with it the command, if it still runs)."""
        subprocess.run(
            ["tmux", "-S", str(self.socket), "kill-server"], env=self._env, capture_output=True, check=False
        )


@contextmanager
def signals_unblocked() -> Iterator[None]:
    """Run tmux with no signal blocked, whatever this thread blocks.

    A blocked signal mask is inherited across ``fork`` and ``exec``, and a test runner (a CI harness, an
    xdist worker) may run with ``SIGCHLD`` blocked: a tmux server started from it never learns that its
    command exited, marks the pane dead when the terminal closes and never reaps the command, so no exit
    status ever shows. The mask is this thread's, so only the tmux started here sees the change.
    """
    blocked = signal.pthread_sigmask(signal.SIG_SETMASK, set())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def zombie_status(pid: str) -> tuple[str, str]:
    """``(status, signal)`` of a process that exited and was not reaped yet, else ``("", "")``.

    tmux 3.3 may mark a pane dead once its terminal closes and not reap the command for a long while (it
    stays a zombie, and tmux reports neither a status nor a signal): the kernel holds the zombie's wait
    status, the last field of ``/proc/PID/stat``.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return "", ""
    if not fields or fields[0] != "Z":
        return "", ""
    code = int(fields[-1])
    if os.WIFSIGNALED(code):
        return "", str(os.WTERMSIG(code))
    return (str(os.WEXITSTATUS(code)), "") if os.WIFEXITED(code) else ("", "")


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m tests.tmuxkit install")
    install()
