from __future__ import annotations

import os
from pathlib import Path

from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._jobs import index_of
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job


def test_a_moved_marker_is_noted_once_an_index_exists(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    [result] = submit_jobs(ws, [JobSpec(minimal_job(), "p/q")])
    index = index_of(ws)
    moved = move_marker(ws, result.marker, Frame(Kind.READY, {}), Trigger.REGISTER).current
    assert moved is not None
    assert index.cached(result.job_id) == moved
    assert index.full_scans == 0


def test_rule_1_a_hit_is_confirmed_before_it_is_used(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    [result] = submit_jobs(ws, [JobSpec(minimal_job(), "p")])
    index_of(ws).note(result.marker)
    other = attach(workspace_path)  # another actor moves the marker behind this process's back
    moved = move_marker(other, result.marker, Frame(Kind.READY, {}), Trigger.REGISTER).current
    assert index_of(ws).cached(result.job_id) is None  # the stale hit is refused, not reported
    assert index_of(ws).locate(result.job_id) == moved


def test_rule_2_a_miss_is_answered_only_after_a_complete_scan(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    index = index_of(ws)
    [result] = submit_jobs(attach(workspace_path), [JobSpec(minimal_job(), "deep/er/p")])
    assert index.cached(result.job_id) is None  # never seen by this process
    assert index.locate(result.job_id) == result.marker
    assert index.full_scans == 1
    assert index.locate("00000000-0000-4000-8000-000000000000") is None
    assert index.full_scans == 2


def test_the_placement_hint_is_tried_first_without_a_scan(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    [result] = submit_jobs(ws, [JobSpec(minimal_job(), "hint/here")])
    found = index_of(ws).locate(result.job_id, job_key=result.job_key, placement="hint/here")
    assert found == result.marker
    assert index_of(ws).full_scans == 0


def test_rule_3_nothing_is_written_to_disk(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    submit_jobs(ws, [JobSpec(minimal_job(), "p")])
    before = sorted(os.walk(workspace_path))
    index_of(ws).scan()
    assert sorted(os.walk(workspace_path)) == before
