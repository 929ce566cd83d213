"""``collect``: one record per finished job with the result document its workflow committed, or why not.

The workspace is ``tests/collectkit.py``'s, run by the real manager: a job for every way a record can be
whole or degraded, and one that has not finished.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.ops._collect import collect_results, scalar_members
from httk.workflow.protocol import InvalidNameError

from tests.collectkit import RESULTS, build


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    return build(tmp_path_factory.mktemp("collect"))


def _records(root: Path, **options: Any) -> dict[str, Any]:
    return {
        str(record.marker.name.key.tag): record
        for record in collect_results(attach(root, writable=False), **options)
    }


def test_every_finished_job_has_one_record_saying_why_it_is_degraded(
    built: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    root, _jobs = built
    records = _records(root)
    assert list(records) == [
        "results",
        "warned",
        "linked",
        "missing",
        "not-json",
        "plain",
        "fails",
        "cancelled",
    ]
    problems = {label: record.problems for label, record in records.items()}
    assert problems["results"] == () and records["results"].results == RESULTS
    assert not records["results"].degraded and records["results"].workflow == "demo-a"
    assert problems["warned"] == ("the results say: values from a fallback",)
    assert records["warned"].results is not None and records["warned"].degraded
    assert problems["fails"] == ("failed: demo.bad: the input was unphysical",)  # no "missing" beside it
    assert problems["missing"] == ("data/results.json is missing",)
    assert problems["linked"] == (
        "data/results.json is a symbolic link; protocol documents are never read through one",
    )
    assert records["linked"].results is None
    (broken,) = problems["not-json"]
    assert broken.startswith("data/results.json is not valid JSON: ")
    assert problems["plain"] == ("the job keeps no transactional data/, so it has no committed results",)
    assert problems["cancelled"] == ("cancelled: not needed (verified: no_live_attempt)",)


def test_records_are_chosen_by_workflow_and_placement(built: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    root, _jobs = built
    assert list(_records(root, workflow="demo-a")) == ["results", "warned", "not-json", "cancelled"]
    assert list(_records(root, placement="c/a")) == ["results", "warned"]
    assert list(_records(root, workflow="demo-b", placement="c/a")) == []
    with pytest.raises(InvalidNameError, match="inside data/"):
        next(collect_results(attach(root, writable=False), document="../job.json"))
    seen: list[tuple[str, int]] = []
    list(collect_results(attach(root, writable=False), progress=lambda what, done: seen.append((what, done))))
    assert seen == [("collecting results", n) for n in range(1, 9)]


def test_another_document_name_is_read_from_data(built: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    root, _jobs = built
    records = _records(root, document="energy.json")
    assert records["results"].problems == ("data/energy.json is missing",)
    assert records["results"].as_dict()["document"] == "data/energy.json"


def test_nothing_is_written(built: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    root, _jobs = built
    before = sorted((str(p), p.lstat().st_mtime_ns) for p in root.rglob("*"))
    list(collect_results(attach(root, writable=False)))
    assert sorted((str(p), p.lstat().st_mtime_ns) for p in root.rglob("*")) == before
    assert os.access(root, os.R_OK)


def test_scalar_members_flatten_objects_and_leave_arrays() -> None:
    nested = {"a": {"b": {"c": 1}, "d": None}, "e": [1], "f": "x"}
    assert dict(scalar_members(nested, "r")) == {"r.a.b.c": 1, "r.a.d": None, "r.f": "x"}
