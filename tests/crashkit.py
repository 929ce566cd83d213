"""Crash injection through the mutation seam, with real processes.

A scenario is a Python snippet run in a fresh interpreter. :func:`count_mutations` runs it once with a
mutation trace and returns how many protocol mutations it performs; :func:`run_crashing` runs it again
stopped (``os._exit``) right after mutation k. A test enumerates every k from 1 to the count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from httk.workflow.engine.core._fsops import CRASH_EXIT_STATUS


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", code], env=full_env, capture_output=True, text=True, check=False
    )


def count_mutations(code: str, trace: Path) -> list[str]:
    """Run ``code`` to completion and return its mutation trace lines."""
    trace.unlink(missing_ok=True)
    result = _run(code, {"HTTK_WORKFLOW_MUTATION_TRACE": str(trace)})
    assert result.returncode == 0, result.stderr
    return trace.read_text().splitlines() if trace.exists() else []


def run_crashing(code: str, after: int) -> None:
    """Run ``code`` and assert that it was stopped right after mutation ``after``."""
    result = _run(code, {"HTTK_WORKFLOW_CRASH_AFTER": str(after)})
    assert result.returncode == CRASH_EXIT_STATUS, (after, result.returncode, result.stderr)
