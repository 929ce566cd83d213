"""Crash injection through the mutation seam, with real processes.

A scenario is a Python snippet run in a fresh interpreter. :func:`count_mutations` runs it once with a
mutation trace and returns how many protocol mutations it performs; :func:`run_crashing` runs it again
stopped (``os._exit``) right after mutation k. A test enumerates every k from 1 to the count.

The seam is the engine's by default; a package with a seam of its own under the same contract (the plans
coordinator's, ``httk.workflow.plans._mutations``) passes its two variables as ``seam``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from httk.workflow.engine.core._fsops import CRASH_EXIT_STATUS

T = TypeVar("T")

ENGINE_SEAM = ("HTTK_WORKFLOW_CRASH_AFTER", "HTTK_WORKFLOW_MUTATION_TRACE")
"""The crash and trace variables of the engine's mutation seam (``core/_fsops``)."""


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", code], env=full_env, capture_output=True, text=True, check=False
    )


def count_mutations(code: str, trace: Path, seam: tuple[str, str] = ENGINE_SEAM) -> list[str]:
    """Run ``code`` to completion and return its mutation trace lines."""
    trace.unlink(missing_ok=True)
    result = _run(code, {seam[1]: str(trace)})
    assert result.returncode == 0, result.stderr
    return trace.read_text().splitlines() if trace.exists() else []


def run_crashing(code: str, after: int, seam: tuple[str, str] = ENGINE_SEAM) -> None:
    """Run ``code`` and assert that it was stopped right after mutation ``after``."""
    result = _run(code, {seam[0]: str(after)})
    assert result.returncode == CRASH_EXIT_STATUS, (after, result.returncode, result.stderr)


def crash_at_every_point(
    template: Path,
    base: Path,
    code: str,
    recover: Callable[[Path], object],
    outcome: Callable[[Path], T],
    *,
    seam: tuple[str, str] = ENGINE_SEAM,
    points: Callable[[list[str]], list[str]] = lambda trace: trace,
) -> tuple[T, list[str]]:
    """Run ``code`` (with ``{root}``) on a copy of ``template`` to learn the outcome and its mutations;
    then, for every k, on a fresh copy stopped after mutation k, ``recover`` it and compare ``outcome``.

    ``points`` chooses the trace lines that are crash points (every one by default): a seam that counts
    per process crashes in the first process to reach k, so a test enumerates the mutations of one.

    Returns the reference outcome and one line per crash point whose recovered outcome differs.
    """
    reference = base / "reference"
    shutil.copytree(template, reference)
    trace = points(count_mutations(code.format(root=str(reference)), base / "trace", seam))
    assert trace, "the code performed no mutation"
    expected = outcome(reference)
    failures = []
    for k in range(1, len(trace) + 1):
        root = base / f"crash-{k}"
        shutil.copytree(template, root)
        run_crashing(code.format(root=str(root)), k, seam)
        recover(root)
        got = outcome(root)
        if got != expected:
            failures.append(f"crash after mutation {k} ({trace[k - 1]}): {got} != {expected}")
    return expected, failures


def crash_at_every_traced_point(
    template: Path, base: Path, code: str, recover: Callable[[Path], object], outcome: Callable[[Path], T]
) -> tuple[T, list[str], list[str]]:
    """:func:`crash_at_every_point` at every mutation of ``code``: the reference outcome, the failures
    and the trace lines (``count``, ``what``, ``path`` separated by tabs), for a test to check that the
    mutations it means to enumerate are among them."""
    points: list[str] = []

    def every(trace: list[str]) -> list[str]:
        points.extend(trace)
        return trace

    expected, failures = crash_at_every_point(template, base, code, recover, outcome, points=every)
    return expected, failures, points
