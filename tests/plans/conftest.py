"""The fixtures of the plan tests: a workspace with the stage runner of :mod:`tests.plans.plankit`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.engine.publish._runners import publish_runner

from tests.plans.plankit import STAGE_RUNNER


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    """A fresh non-durable workspace with the stage runner published as ``stage``."""
    workspace = init(tmp_path / "ws", durable=False)
    source = tmp_path / "stage-runner"
    source.write_text(STAGE_RUNNER)
    source.chmod(0o755)
    publish_runner(workspace, "stage", source)
    yield workspace
    workspace.close()
