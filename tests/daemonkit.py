"""What the daemon kits of the tests (``tests.slurmkit``, ``tests.sshkit``) share: processes and watchdogs.

The kits start real daemons as children of the test process (:data:`CHILDREN`), ask whether one still
runs (:func:`running`) and stop it (:func:`end`). Beside its daemons each kit starts a watchdog: a
process of its own session that waits for the test process owning the daemons to exit, however it exits
(SIGKILL included), then runs the kit's ``watch`` to stop what the owner left and remove its directory.
The kit records its daemons in that directory; this module only starts the watchdog and waits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


def wait_for(condition: Callable[[], bool], what: str, timeout: float, interval: float = 0.1) -> None:
    """Poll ``condition`` until it holds; raise naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
"""The daemons this process started, by pid: it reaps them when they end (whoever asked them to)."""


def running(pid: int | None) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    if pid is None:
        return False
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def end(pid: int, stop_seconds: float) -> None:
    """SIGTERM, then SIGKILL when it outlives ``stop_seconds``; reaped when it is our child."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        try:
            wait_for(lambda: not running(pid), f"pid {pid} to exit", stop_seconds, 0.02)
            break
        except TimeoutError:
            continue
    process = CHILDREN.pop(pid, None)
    if process is not None:
        process.wait(stop_seconds)


def spawn_watchdog(kit: str, owner: int, root: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start ``python -m <kit> watch OWNER ROOT`` in a session of its own, its output appended to ``log``."""
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", kit, "watch", str(owner), str(root)],
            cwd=REPOSITORY,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_for_owner(owner: int) -> None:
    """Return once process ``owner`` has exited (at once when it is gone already): no polling, a pidfd."""
    import select

    try:
        handle = os.pidfd_open(owner)
    except ProcessLookupError:
        return
    select.select([handle], [], [])
