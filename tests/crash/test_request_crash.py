"""Request application and cancellation stopped after each of their mutations in turn.

For every scenario of :mod:`tests.crash._request_scenarios` the uninterrupted settle is traced once to
learn its mutation list (N entries) and its result. Then for EVERY k in 1..N: a fresh workspace, a settle
in a fresh interpreter stopped right after mutation k (``HTTK_WORKFLOW_CRASH_AFTER=k``, exit 86), the
crashed manager's claimed directory aged past its lease (it is dead: nothing touches it again), and a
fresh settle in this process. The result must be the uninterrupted one: the same marker kind, generation
and priority, the same reasons on the job's chain, the request named by exactly as many frames (a request
is never applied twice), and the request file retired, quarantined or removed exactly as before.

A cancelled runner is real: its process group (a Bash runner and the ``sleep`` it started) must be gone
after every crash point.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from httk.workflow.engine.core._liveness import group_alive

from tests.crash._request_scenarios import (
    SCENARIOS,
    Built,
    age_claims,
    settle,
    settle_code,
    signature,
)
from tests.crashkit import count_mutations, run_crashing


def _cleanup(built: Built) -> None:
    if built.live is not None:
        pgid = built.live.process.pid
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
        built.live.process.wait(timeout=10)


def _check_stopped(built: Built) -> None:
    if built.live is not None:
        assert not group_alive(built.live.process.pid), "a cancelled attempt's group survived"


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_crash_point_converges_to_the_uninterrupted_result(tmp_path: Path, scenario: str) -> None:
    build = SCENARIOS[scenario]
    reference = build(tmp_path / "reference")
    try:
        trace = count_mutations(settle_code(reference.root), tmp_path / "trace")
        expected = signature(reference)
        _check_stopped(reference)
    finally:
        _cleanup(reference)
    assert trace, "the scenario performed no mutation"
    assert expected["ready"] == expected["claimed"] == []
    failures: list[str] = []
    for k in range(1, len(trace) + 1):
        built = build(tmp_path / f"crash-{k}")
        try:
            run_crashing(settle_code(built.root), k)
            age_claims(built.root)
            settle(built.root)
            got = signature(built)
            if got != expected:
                failures.append(f"crash after mutation {k} ({trace[k - 1]}): {got} != {expected}")
            _check_stopped(built)
        finally:
            _cleanup(built)
    assert not failures, "\n".join(failures)
