"""Applying amendments again after an attempt died: the plan is amended once and the log says it once."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.plans._amendments import apply_pending
from httk.workflow.plans._book import Book
from httk.workflow.plans._control import enqueue
from httk.workflow.plans._progress import LOG_FILE, append

DOCUMENT = {
    "format": "httk-workflow-stage-plan",
    "format_version": 1,
    "workflow_id": "again",
    "version": 1,
    "stages": [{"id": "a", "runner": "r"}, {"id": "b", "runner": "r", "depends_on": ["a"]}],
    "amendments": [],
}
JOB = {"workspace_id": "w", "job_id": "j-{}", "job_key": "{}--k", "placement": "p", "kind": "succeeded"}


def _book() -> dict[str, Any]:
    jobs = {name: {k: v.format(name) for k, v in JOB.items()} for name in "ab"}
    return {"stages": {name: {"jobs": [job], "retries": 0} for name, job in jobs.items()}, "inbox": 0}


@pytest.mark.parametrize("logged", [True, False], ids=["lines-logged", "lines-not-logged"])
def test_an_amendment_applied_by_a_dead_attempt_is_applied_once(tmp_path: Path, logged: bool) -> None:
    enqueue(tmp_path / "amendments", "stage_rerun", {"type": "stage_rerun", "stage_id": "a"}, durable=False)
    saved = _book()
    first_book = Book(copy.deepcopy(saved))
    document, lines = apply_pending(tmp_path, copy.deepcopy(DOCUMENT), first_book, durable=False)
    assert (document["version"], [entry["id"] for entry in document["amendments"]]) == (2, ["amend-1"])
    assert document["amendments"][0]["invalidated_stages"] == ["a", "b"]
    if logged:
        append(tmp_path / LOG_FILE, lines, durable=False)

    # the attempt died before its outcome: the retried one starts from the saved book and the amended plan
    retried_book = Book(copy.deepcopy(saved))
    current = json.loads((tmp_path / "plan.json").read_text())
    again, retold = apply_pending(tmp_path, current, retried_book, durable=False)

    assert again == document
    assert retold == ([] if logged else lines)
    assert retried_book.document() == first_book.document()
    assert (retried_book.current("a"), retried_book.invalidated("a"), retried_book.amended) == (None, True, 1)


@pytest.mark.parametrize("stage", ["a", "relax-si", "x" * 45, "y" * 47 + "-", "z" * 48, "q" * 43 + "-ab"])
@pytest.mark.parametrize("version", [2, 10, 999])
def test_an_amended_stage_s_tag_is_a_valid_tag_however_long_its_id(stage: str, version: int) -> None:
    from httk.workflow.plans._coordinator import versioned_tag
    from httk.workflow.protocol import validate_tag

    tag = versioned_tag(stage, version)
    assert validate_tag(tag) == tag and tag.endswith(f"-v{version}")
    assert versioned_tag(stage, 1) == stage
