"""The public names of ``httk.workflow.plans``, and what a coordinator or stage process imports."""

from __future__ import annotations

import subprocess
import sys

import pytest
from httk.workflow import plans

PUBLIC = [
    "NotAPlanError",
    "PlanControlError",
    "PlanError",
    "PlanStatus",
    "STATUSES",
    "StageRow",
    "SubmittedPlan",
    "amend_plan",
    "check_plan",
    "close_plan",
    "critical_path_length",
    "find_cycle",
    "list_plans",
    "log_path",
    "plan_status",
    "read_lines",
    "read_plan",
    "retry_stage",
    "submit_stage_plan",
]


def test_all_is_exactly_the_public_names_sorted_and_each_loads() -> None:
    assert plans.__all__ == PUBLIC == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(plans, name) is not None
    assert plans.STATUSES == (
        "pending", "ready", "preparing", "running", "post_processing",
        "completed", "failed", "invalidated", "skipped",
    )  # fmt: skip


@pytest.mark.parametrize("module", ["_coordinator", "_stage_runner"])
def test_a_runner_process_imports_only_the_sdk_and_the_standard_library(module: str) -> None:
    probe = f"import httk.workflow.plans.{module}, sys; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    ours = sorted(name for name in loaded if name.startswith("httk."))
    heavy = [
        name
        for name in loaded
        if name.split(".")[0] in ("pydantic", "jsonschema", "typer", "rich", "click")
        or name.startswith(("httk.workflow.engine", "httk.workflow.models", "httk.workflow.cli"))
    ]
    assert heavy == []
    assert {name.rsplit(".", 1)[0] for name in ours} <= {
        "httk",
        "httk.workflow",
        "httk.workflow.plans",
        "httk.workflow.sdk",
        "httk.workflow.protocol",
    }
