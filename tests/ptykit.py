"""Running a command on a real pseudo-terminal, as an operator's terminal runs it.

:func:`on_a_terminal` gives the process one pty as its standard input, output and error (120x40, TERM
xterm-256color, no colour or size overrides from the caller's environment) and returns its exit status
and everything it wrote, read until the terminal closes.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

ESCAPE = "\x1b["
WAIT_SECONDS = 120.0
_DROPPED = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


def terminal_environment() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in _DROPPED}
    return {**env, "TERM": "xterm-256color"}


def on_a_terminal(*argv: str | Path) -> tuple[int, str]:
    """Run ``argv`` with a 120x40 pseudo-terminal as stdin, stdout and stderr; its status and output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [str(word) for word in argv],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=terminal_environment(),
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        status = process.wait(timeout=WAIT_SECONDS)
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
            process.wait()
    return status, b"".join(chunks).decode("utf-8", "replace")
