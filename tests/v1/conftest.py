"""Fixtures of the v1 compatibility tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from httk.workflow.engine import init

from tests.v1.v1jobs import V1Workspace


@pytest.fixture
def v1ws(tmp_path: Path) -> V1Workspace:
    """A fresh non-durable workspace with helpers to submit v1 tasks and run the real manager."""
    path = tmp_path / "ws"
    return V1Workspace(path, init(path, name="v1-tests", durable=False))
