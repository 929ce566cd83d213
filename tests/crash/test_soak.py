"""The short soak: two managers of two workers on a scripted workload, one SIGKILLed every second.

The profile (``tests/soakkit.SHORT``) is the full soak's in small, with a fixed seed: every kill falls
within the least time the workload's work takes, so the run always sees all of them, whatever the
machine's speed. What it must then hold is ``soakkit.verdict``'s: every job terminal exactly as its
script says, one marker and an intact chain each, fsck clean, and no activation executed again except
after a retry the specification allows. ``./dev soak`` runs the full profile.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.soakkit import SHORT, soak, summary

SEED = 20260501


@pytest.mark.slow
def test_killed_managers_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    print(f"soak seed: {SEED} (replay: ./dev soak --seed {SEED})")
    run, problems = soak(tmp_path, replace(SHORT, seed=SEED))
    figures = summary(run, problems)
    print(figures)
    assert problems == [], figures
    assert len(run.kills) == SHORT.kills, figures
    assert figures["recovery_seconds"] is not None, "no killed manager held a job: the soak tested nothing"
