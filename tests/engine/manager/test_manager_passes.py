"""The manager's pass table: one pass per kind a manager moves on its own, in startup recovery's order."""

from __future__ import annotations

from httk.workflow.engine.core._states import ACTIVE_KINDS, CORE_KINDS, Kind
from httk.workflow.engine.manager._manager import PASSES, SCAN_ORDER

K = Kind


def test_every_active_kind_has_exactly_one_pass_and_no_other_kind_has_one() -> None:
    assert len(SCAN_ORDER) == len(set(SCAN_ORDER))
    assert set(SCAN_ORDER) == ACTIVE_KINDS
    assert set(CORE_KINDS) - set(SCAN_ORDER) == {K.PAUSED, K.SUCCEEDED, K.FAILED, K.CANCELLED}


def test_the_scan_runs_in_startup_recovery_order_and_claims_last() -> None:
    # spec/01 "Task-manager startup and recovery": committing, cancelling, claimed and running, then
    # waiting and submitted; the claim pass over ready comes last.
    assert SCAN_ORDER == (K.COMMITTING, K.CANCELLING, K.CLAIMED, K.RUNNING, K.WAITING, K.SUBMITTED, K.READY)
    assert K.READY not in dict(PASSES)  # ready is the claim pass's, over a window, not a marker handler
