"""Every change the coordinator makes to the filesystem itself, counted through one seam the crash tests stop.

The engine's changes go through the engine's seam (``HTTK_WORKFLOW_CRASH_AFTER``), which a runner never
imports. The coordinator keeps one of its own with the same contract, as the v1 importer does: each of
its mutations -- an amendment's template and the amended ``plan.json``, each ``progress.log`` line,
``workflow-state.json``, the saved book and the published outcome -- counts one, per process.

* ``HTTK_WORKFLOW_PLANS_MUTATION_TRACE=FILE`` appends ``<pid> <n> <what> <path>`` per mutation;
* ``HTTK_WORKFLOW_PLANS_CRASH_AFTER=k`` stops the process right after its k-th mutation with
  ``os._exit(86)``; with ``HTTK_WORKFLOW_PLANS_CRASH_HOLD=FILE`` as well, it instead creates ``FILE``
  exclusively, writes its process id there and waits to be killed -- so a test can kill the manager
  first, as a machine that dies at that point would -- and when ``FILE`` exists already (the point
  fired in an earlier process) it carries on.

Cost: one environment lookup per mutation.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

CRASH_VARIABLE = "HTTK_WORKFLOW_PLANS_CRASH_AFTER"
HOLD_VARIABLE = "HTTK_WORKFLOW_PLANS_CRASH_HOLD"
TRACE_VARIABLE = "HTTK_WORKFLOW_PLANS_MUTATION_TRACE"
CRASH_EXIT_STATUS = 86

_count = 0


def done(what: str, path: Path | str) -> None:
    """Count one mutation of ``path``; trace it; stop here when the crash point says so."""
    global _count  # noqa: PLW0603 -- one counter per process, read by the crash tests
    _count += 1
    trace = os.environ.get(TRACE_VARIABLE)
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {_count} {what} {path}\n")
    if os.environ.get(CRASH_VARIABLE) == str(_count):
        _stop(os.environ.get(HOLD_VARIABLE))


def _stop(hold: str | None) -> None:
    if not hold:
        os._exit(CRASH_EXIT_STATUS)
    try:
        fd = os.open(hold, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    while True:
        signal.pause()
