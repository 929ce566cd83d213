"""The public surface of ``httk.workflow.v1``: exactly these names, sorted, each loadable."""

from __future__ import annotations

import pytest
from httk.workflow import v1

EXPECTED = [
    "Ignored",
    "ImportAction",
    "ImportEntry",
    "ImportOptions",
    "ImportRefusedError",
    "ImportReport",
    "JobPlan",
    "NewTask",
    "Problem",
    "RUNNER_PATH",
    "STALE_SECONDS",
    "Status",
    "Task",
    "TaskName",
    "TaskNameError",
    "TaskRefusedError",
    "TemplateError",
    "Tree",
    "TreeError",
    "TreeStatus",
    "V1Error",
    "View",
    "import_tree",
    "live_evidence",
    "new_task",
    "plan_job",
    "read_tree",
    "runner_root",
    "runner_sha256",
    "tree_status",
]


def test_all_is_exactly_the_public_surface_sorted() -> None:
    assert v1.__all__ == EXPECTED
    assert sorted(v1.__all__) == v1.__all__


@pytest.mark.parametrize("name", EXPECTED)
def test_every_public_name_loads(name: str) -> None:
    assert getattr(v1, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = v1.nothing
