"""``workspace status``, ``job list`` and ``workspace managers`` in the engine: counts, pages, liveness."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._liveness import list_managers
from httk.workflow.engine.core._states import CORE_KINDS, Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init
from httk.workflow.engine.manager._manager import ManagerIdentity, ManagerRecord
from httk.workflow.engine.ops._inspect import count_markers, job_row, list_jobs, workspace_status
from httk.workflow.engine.ops._select import Position
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import InvalidNameError

from tests.conftest import minimal_job
from tests.runners import age_heartbeats

# placement -> (how many jobs, how far each goes: submitted, ready or failed)
LAYOUT = {"a/x": (4, "ready"), "a/y": (3, "submitted"), "b": (5, "failed"), "a/x/deep": (2, "ready")}


def move(ws: Workspace, marker: MarkerLocation, kind: Kind, trigger: Trigger) -> MarkerLocation:
    current = move_marker(ws, marker, Frame(kind, {"reason": trigger.value}), trigger).current
    assert current is not None
    return current


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = init(tmp_path / "ws", durable=False)
    for placement, (count, end) in LAYOUT.items():
        specs = [JobSpec(minimal_job(tag=f"{end}-{n}" if n else end), placement) for n in range(count)]
        for result in submit_jobs(workspace, specs):
            marker = result.marker
            if end in ("ready", "failed"):
                marker = move(workspace, marker, Kind.READY, Trigger.REGISTER)
            if end == "failed":
                marker = move(workspace, marker, Kind.CLAIMED, Trigger.CLAIM)
                move(workspace, marker, Kind.FAILED, Trigger.PREPARE_FAILURE)
    workspace.close()
    yield attach(workspace.root, writable=False)


# -- status ------------------------------------------------------------------------------------------
def test_status_counts_every_kind(ws: Workspace) -> None:
    report = workspace_status(ws)
    assert list(report.kinds) == [kind.value for kind in CORE_KINDS]
    assert (report.kinds["submitted"], report.kinds["ready"], report.kinds["failed"]) == (3, 6, 5)
    assert report.total == 14 and report.anomalies == 0
    assert report.as_dict()["managers"] == {"live": 0, "not_live": 0}
    assert "by_placement" not in report.as_dict()


def test_status_by_placement_groups_by_leading_components(ws: Workspace) -> None:
    assert workspace_status(ws, by_placement=1).by_placement == {
        "a": {"submitted": 3, "ready": 6},
        "b": {"failed": 5},
    }
    assert workspace_status(ws, by_placement=2).by_placement == {
        "a/x": {"ready": 6},
        "a/y": {"submitted": 3},
        "b": {"failed": 5},
    }
    assert workspace_status(ws, by_placement=3).by_placement["a/x/deep"] == {"ready": 2}
    with pytest.raises(InvalidNameError):
        workspace_status(ws, by_placement=0)


def test_status_counts_what_is_not_a_marker_as_anomalies(ws: Workspace) -> None:
    ready = ws.state_dir(Kind.READY)
    (ready / "a" / "x" / "junk").write_text("")
    (ready / "top-level-file").write_text("")
    assert workspace_status(ws).anomalies == 2
    assert workspace_status(ws).kinds["ready"] == 6


def test_counting_agrees_with_the_walkers_on_a_big_directory(tmp_path: Path) -> None:
    workspace = init(tmp_path / "ws", durable=False)
    submit_jobs(workspace, [JobSpec(minimal_job(), "flat") for _ in range(300)])
    counts, anomalies = count_markers(workspace, Kind.SUBMITTED)
    assert (counts, anomalies) == ({"": 300}, 0)


# -- job list ----------------------------------------------------------------------------------------
def test_pages_concatenate_to_the_whole_listing(ws: Workspace) -> None:
    whole = list_jobs(ws)
    assert whole.next_after is None and len(whole.jobs) == 14
    kinds = [m.kind for m in whole.jobs]
    assert kinds == sorted(kinds, key=CORE_KINDS.index)

    pages: list[MarkerLocation] = []
    after: str | None = None
    while True:
        page = list_jobs(ws, limit=4, after=after)
        pages.extend(page.jobs)
        if page.next_after is None:
            break
        assert len(page.jobs) == 4
        after = str(page.next_after)
    assert pages == whole.jobs
    exact = list_jobs(ws, limit=14)
    assert exact.next_after is None  # the walk looked ahead: no empty last page


def test_listing_by_kind_placement_and_tag(ws: Workspace) -> None:
    ready = list_jobs(ws, kinds=["ready"])
    assert {m.kind for m in ready.jobs} == {Kind.READY} and len(ready.jobs) == 6
    deep = list_jobs(ws, placement="a/x")
    assert {m.placement for m in deep.jobs} == {"a/x", "a/x/deep"}
    assert [m.placement for m in deep.jobs] == ["a/x"] * 4 + ["a/x/deep"] * 2
    tagged = list_jobs(ws, tag_contains="failed-")
    assert len(tagged.jobs) == 4 and all(m.name.key.tag.startswith("failed-") for m in tagged.jobs)  # type: ignore[union-attr]
    both = list_jobs(ws, kinds=["failed", "submitted"])
    assert [m.kind.value for m in both.jobs] == ["submitted"] * 3 + ["failed"] * 5


def test_a_cursor_of_an_unselected_kind_or_outside_the_placement_is_refused(ws: Workspace) -> None:
    first = list_jobs(ws, kinds=["ready"], limit=1)
    assert first.next_after is not None
    with pytest.raises(InvalidNameError, match="not among the selected kinds"):
        list_jobs(ws, kinds=["failed"], after=first.next_after)
    with pytest.raises(InvalidNameError, match="outside --placement b"):
        list_jobs(ws, kinds=["ready"], placement="b", after=first.next_after)
    with pytest.raises(InvalidNameError):
        list_jobs(ws, after="garbage")
    with pytest.raises(InvalidNameError):
        list_jobs(ws, kinds=["nonsense"])
    with pytest.raises(InvalidNameError):
        list_jobs(ws, limit=0)
    with pytest.raises(InvalidNameError):
        list_jobs(ws, tag_contains="")


def test_a_cursor_continues_into_the_following_kinds(ws: Workspace) -> None:
    whole = list_jobs(ws).jobs
    last_submitted = max(i for i, m in enumerate(whole) if m.kind is Kind.SUBMITTED)
    rest = list_jobs(ws, after=Position.of(whole[last_submitted])).jobs
    assert rest == whole[last_submitted + 1 :]


def test_a_row_says_what_the_marker_path_says(ws: Workspace) -> None:
    [marker] = list_jobs(ws, kinds=["ready"], limit=1).jobs
    row = job_row(ws, marker)
    assert row["marker"].startswith(".httk-workflow/state/ready/a/x/")
    assert row["cursor"] == f"ready/{marker.placement}/{marker.job_key}"
    assert (row["generation"], row["priority"]) == (1, 500)


# -- managers ----------------------------------------------------------------------------------------
def _register(
    ws: Workspace, manager_id: str, *, lease_seconds: float, label: str | None = None
) -> ManagerRecord:
    identity = ManagerIdentity(
        manager_id=manager_id, pools=("default",), capabilities=(), lease_seconds=lease_seconds, label=label
    )
    record = ManagerRecord(ws, identity, "w")
    record.create()
    return record


def test_managers_are_live_stale_or_exited(tmp_path: Path) -> None:
    writable = init(tmp_path / "ws", durable=False)
    _register(writable, "old-one", lease_seconds=60.0)
    assert age_heartbeats(writable) == ["old-one"]
    _register(writable, "live-one", lease_seconds=60.0, label="gpu-node")
    gone = _register(writable, "gone-one", lease_seconds=60.0)
    dead = subprocess.Popen(["true"])
    dead.wait()
    rewrite_pid(gone, dead.pid)
    (writable.managers_dir / "no-manifest").mkdir()

    views = {view.manager_id: view for view in list_managers(attach(writable.root, writable=False))}

    assert {name: view.state for name, view in views.items()} == {
        "live-one": "live",
        "old-one": "stale",
        "gone-one": "exited",
        "no-manifest": "stale",
    }
    assert views["live-one"].as_dict()["label"] == "gpu-node"
    assert views["no-manifest"].as_dict()["manifest_problem"] == "no manager.json"
    assert list_managers(attach(writable.root, writable=False))[0].manager_id == "live-one"
    assert workspace_status(attach(writable.root, writable=False)).as_dict()["managers"] == {
        "live": 1,
        "not_live": 3,
    }


def test_a_heartbeat_older_than_its_lease_is_stale(tmp_path: Path) -> None:
    clock = ManualClock()
    writable = init(tmp_path / "ws", durable=False, clock=clock)
    _register(writable, "m", lease_seconds=10.0)
    reader = attach(writable.root, writable=False, clock=clock)
    assert list_managers(reader)[0].live
    assert not list_managers(reader, now=clock.now() + timedelta(seconds=11))[0].live


def rewrite_pid(record: ManagerRecord, pid: int) -> None:
    import json

    path = record.directory / "manager.json"
    manifest = json.loads(path.read_text())
    manifest["pid"] = pid
    path.write_text(json.dumps(manifest))
