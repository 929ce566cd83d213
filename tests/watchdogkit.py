"""The watchdog each daemon kit of the tests (``tests.slurmkit``, ``tests.sshkit``) starts with its daemons.

A watchdog is a process of its own session that waits for the test process that owns the daemons to
exit, however it exits (SIGKILL included), then runs the kit's ``watch`` to stop what the owner left and
remove its directory. The kit records its daemons in that directory; this module only starts and waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


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
