"""GC on a live workspace with a heartbeating manager removes nothing it must keep.

Two managers moved jobs into every state kind: one died long ago (its heartbeat is years old), the other
heartbeats now. Everything on disk is forty days old, terminal jobs carry an older and a newest
attempt-control directory, quiescent ones transaction trash, and every retention limit is zero: the most
aggressive policy there is. The collection must still keep the live manager's directory and every one of
its segments, every non-terminal marker, payload and chain segment of either manager, each terminal job's
current segment and newest attempt-control directory — and must remove what is really garbage.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from httk.workflow.engine.core._states import TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach
from httk.workflow.engine.maintenance._gc import collect_garbage

from tests.engine.maintenance.test_gc import (
    AGGRESSIVE,
    attached,
    attempt_dir,
    every_kind,
    make_old_tree,
    publish_record,
    set_retention,
    silence,
    small_segment_workspace,
)
from tests.jobkinds import chain, new_state

QUIESCENT = {Kind.READY, Kind.WAITING, Kind.PAUSED, *TERMINAL_KINDS}


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    yield from attached(small_segment_workspace(tmp_path), attach)


def segments(ws: Workspace, writer: str = "*") -> set[Path]:
    return set(ws.journal_dir.glob(f"{writer}/*.hwj"))


def segment_of(ws: Workspace, ref: str) -> Path:
    from httk.workflow.engine.core._segments import segment_path
    from httk.workflow.protocol import RecordRef

    parsed = RecordRef.parse(ref)
    return segment_path(ws.journal_dir, parsed.writer, parsed.segment)


def chain_segments(ws: Workspace, marker: MarkerLocation) -> set[Path]:
    refs = [marker.name.ref_text, *(frame["previous_record_ref"] for frame in chain(ws, marker))]
    return {segment_of(ws, ref) for ref in refs if ref not in (None, "init")}


def payload_of(ws: Workspace, marker: MarkerLocation) -> Path:
    return ws.payload_path(marker.placement, marker.job_key)


def decorate(ws: Workspace, jobs: dict[Kind, MarkerLocation]) -> dict[str, set[Path]]:
    """Give terminal jobs an older and a newest attempt dir and quiescent ones trash; say what is which."""
    found: dict[str, set[Path]] = {"newest": set(), "older": set(), "trash": set()}
    for kind, marker in jobs.items():
        if kind in TERMINAL_KINDS:
            found["older"].add(attempt_dir(ws, marker, str(uuid.uuid4()), 1))
            found["newest"].add(attempt_dir(ws, marker, str(uuid.uuid4()), 2))
        if kind in QUIESCENT and kind not in TERMINAL_KINDS:
            trash = (
                attempt_dir(ws, marker, str(uuid.uuid4()), 1) / "outcome.ready/transaction/trash/op/removed"
            )
            trash.mkdir(parents=True)
            (trash / "data").write_text("old")
            found["trash"].add(trash.parent.parent)
    return found


def test_gc_on_a_live_workspace_removes_nothing_it_must_keep(ws: Workspace) -> None:
    dead, live = new_state(ws.root), new_state(ws.root)
    publish_record(dead)
    dead_jobs = every_kind(dead, "dead")
    silence(ws, dead.manager_id)
    publish_record(live)
    live_jobs = every_kind(live, "live")
    claimed = ws.requests_dir / "claimed" / live.manager_id
    claimed.mkdir()
    (claimed / "held.json").write_text(json.dumps({"held": "by a live manager"}))
    decorated = [decorate(ws, dead_jobs), decorate(ws, live_jobs)]
    make_old_tree(ws.root)  # forty days, heartbeat files too: only the live heartbeat's content is fresh
    set_retention(ws, **AGGRESSIVE)

    markers = [*dead_jobs.values(), *live_jobs.values()]
    active = [marker for marker in markers if marker.kind not in TERMINAL_KINDS]
    must_keep = {
        ws.managers_dir / live.manager_id / "manager.json",
        ws.managers_dir / live.manager_id / "heartbeat.json",
        claimed / "held.json",
        *segments(ws, live.writer_id),
        *(marker.path(ws) for marker in active),
        *(payload_of(ws, marker) / "job.json" for marker in markers),
        *(segment for marker in active for segment in chain_segments(ws, marker)),
        *(segment_of(ws, marker.name.ref_text) for marker in markers if marker.name.ref is not None),
        *(path for found in decorated for path in found["newest"]),
    }
    dead_segments = segments(ws, dead.writer_id)

    report = collect_garbage(ws)

    assert sorted(str(path) for path in must_keep if not path.exists()) == []
    for marker in active:
        assert len(chain(ws, marker)) == marker.name.generation  # every frame still reads
    assert not any(path.exists() for found in decorated for path in found["older"] | found["trash"])
    assert segments(ws, dead.writer_id) < dead_segments  # some of the dead writer's history went
    assert report.categories["attempt_control"].removed == 2 * len(TERMINAL_KINDS)
    assert report.categories["journal_segment"].removed == len(dead_segments - segments(ws, dead.writer_id))
    assert report.categories["manager_directory"].removed == 0  # the dead writer still holds chains
    again = collect_garbage(attach(ws.root))
    assert again.removed == 0 and again.frame_ref is None
