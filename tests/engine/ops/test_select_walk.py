"""The cursor-stable walker: listing order, resuming after a cursor, pruning, filtering."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._scan import Anomaly, AnomalyReason
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, init
from httk.workflow.engine.ops._select import Position, sort_key, walk_sorted
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import InvalidNameError, MarkerName

from tests.conftest import minimal_job

PLACEMENTS = ["a", "a/b", "a-b", "a/b/c", "b", "a/a"]


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = init(tmp_path / "ws", durable=False)
    yield workspace
    workspace.close()


def populate(ws: Workspace, per_placement: int = 4) -> list[MarkerLocation]:
    specs = []
    for placement in PLACEMENTS:
        for index in range(per_placement):
            job = minimal_job(tag=f"t{index % 3}")
            if index == 0:
                del job["tag"]
            specs.append(JobSpec(job, placement))
    return [result.marker for result in submit_jobs(ws, specs)]


def markers(
    items: Iterator[MarkerLocation | Anomaly] | list[MarkerLocation | Anomaly],
) -> list[MarkerLocation]:
    return [item for item in items if isinstance(item, MarkerLocation)]


def test_the_listing_order_is_sorted_with_a_directorys_markers_before_its_subdirectories(
    ws: Workspace,
) -> None:
    submitted = populate(ws)

    walked = markers(walk_sorted(ws, Kind.SUBMITTED))

    assert sorted(walked, key=sort_key) == walked
    assert sorted(m.job_key for m in walked) == sorted(m.job_key for m in submitted)
    placements = [m.placement for m in walked]
    # component-wise: "a", then below "a" ("a/a", "a/b", "a/b/c"), then "a-b", then "b"
    order = ["a", "a/a", "a/b", "a/b/c", "a-b", "b"]
    assert sorted(set(placements), key=order.index) == list(dict.fromkeys(placements))
    assert list(dict.fromkeys(placements)) == order


def test_two_walks_agree_whatever_order_the_directories_were_filled(tmp_path: Path) -> None:
    first = init(tmp_path / "one", durable=False)
    second = init(tmp_path / "two", durable=False)
    jobs = [JobSpec(minimal_job(), placement) for placement in PLACEMENTS for _ in range(5)]
    submit_jobs(first, jobs)
    shuffled = list(jobs)
    random.Random(7).shuffle(shuffled)
    submit_jobs(second, shuffled)

    def keys(ws: Workspace) -> list[str]:
        return [m.job_key for m in markers(walk_sorted(ws, Kind.SUBMITTED))]

    assert keys(first) == keys(second)


def test_resuming_after_every_position_yields_exactly_the_rest(ws: Workspace) -> None:
    populate(ws, per_placement=3)
    everything = markers(walk_sorted(ws, Kind.SUBMITTED))

    for index, marker in enumerate(everything):
        rest = markers(walk_sorted(ws, Kind.SUBMITTED, after=Position.of(marker)))
        assert rest == everything[index + 1 :]


def test_a_cursor_whose_job_or_directory_vanished_still_resumes_in_place(ws: Workspace) -> None:
    populate(ws, per_placement=2)
    everything = markers(walk_sorted(ws, Kind.SUBMITTED))
    gone = everything[3]
    os.unlink(gone.path(ws))

    rest = markers(walk_sorted(ws, Kind.SUBMITTED, after=Position.of(gone)))
    assert rest == everything[4:]
    phantom = Position(Kind.SUBMITTED, "a/ab", "0" * 8 + "-0000-0000-0000-" + "0" * 12)
    after_phantom = markers(walk_sorted(ws, Kind.SUBMITTED, after=phantom))
    assert after_phantom[0].placement == "a/b"


def test_a_placement_is_pruned_before_descent(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    populate(ws, per_placement=2)
    opened: list[str] = []
    real_scandir = os.scandir

    def spying(path: str) -> object:
        opened.append(os.path.relpath(path, ws.state_dir(Kind.SUBMITTED)))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spying)
    found = markers(walk_sorted(ws, Kind.SUBMITTED, placement="a/b"))

    assert {m.placement for m in found} == {"a/b", "a/b/c"}
    assert opened == ["a/b", "a/b/c"]


def test_the_key_filter_sees_stems_before_anything_is_parsed(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(ws, per_placement=3)
    parsed: list[str] = []
    real_parse = MarkerName.parse

    def counting(text: str) -> MarkerName:
        parsed.append(text)
        return real_parse(text)

    monkeypatch.setattr(MarkerName, "parse", staticmethod(counting))
    found = markers(walk_sorted(ws, Kind.SUBMITTED, key_filter=lambda stem: stem.startswith("t1--")))

    assert found and all(m.name.key.tag == "t1" for m in found)
    assert len(parsed) == len(found)


def test_entries_that_are_not_markers_are_anomalies(ws: Workspace) -> None:
    populate(ws, per_placement=1)
    state = ws.state_dir(Kind.SUBMITTED)
    (state / "stray-at-the-top").write_text("")
    (state / "a" / "not-a-marker").write_text("")
    (state / "a" / ".httk-workflow").mkdir()
    os.symlink(state / "a", state / "b" / "link")

    reasons = sorted(item.reason for item in walk_sorted(ws, Kind.SUBMITTED) if isinstance(item, Anomaly))

    assert reasons == sorted(
        [
            AnomalyReason.NO_PLACEMENT,
            AnomalyReason.UNPARSEABLE_NAME,
            AnomalyReason.RESERVED_PLACEMENT,
            AnomalyReason.SYMLINK,
        ]
    )


def test_moves_within_a_kind_keep_a_jobs_position(ws: Workspace) -> None:
    [first, second, third] = [
        r.marker for r in submit_jobs(ws, [JobSpec(minimal_job(), "p") for _ in range(3)])
    ]
    ordered = markers(walk_sorted(ws, Kind.SUBMITTED))
    ready = [move_marker(ws, m, Frame(Kind.READY, {}), Trigger.REGISTER).current for m in ordered]
    assert all(m is not None for m in ready)
    cursor = Position.of(markers(walk_sorted(ws, Kind.READY))[0])
    move = ready[0]
    assert move is not None
    # a priority change renames the marker; its job stays first, so the cursor after it is unchanged
    moved = move_marker(ws, move, Frame(Kind.READY, {}, 1), Trigger.SET_PRIORITY).current
    assert moved is not None and moved.name.priority == 1
    rest = markers(walk_sorted(ws, Kind.READY, after=cursor))
    assert [m.job_key for m in rest] == [m.job_key for m in ordered[1:]]
    assert {first.job_key, second.job_key, third.job_key} == {m.job_key for m in ordered}


# -- cursors -------------------------------------------------------------------------------------------
def test_a_position_round_trips_and_refuses_what_it_cannot_have_produced() -> None:
    key = f"tag--{uuid.uuid4()}"
    text = f"ready/project-a/00/{key}"
    assert str(Position.parse(text)) == text
    for bad in (
        f"nonsense/p/{key}",
        f"relocating/p/{key}",
        f"ready/{key}",
        "ready/p/not-a-key",
        f"ready//{key}",
        f"ready/../{key}",
    ):
        with pytest.raises(InvalidNameError):
            Position.parse(bad)
