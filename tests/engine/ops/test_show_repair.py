"""History after ``workspace fsck --repair``: ``job log``, ``job why`` and journal collection walk across the
generations a repair jumped over, and say so.

A repair chains its ``fsck_repair`` frame to the newest readable frame strictly older than the damaged
marker (``engine/_fsck_repair.py``), so generations fall by more than one there. The job here was claimed
and launched (generations 1-3) by a manager that died; the claimed and running frames are damaged, the
repair adopts the ready frame (generation 1) and publishes generation 4, and the job is then retried to
generation 5 the ordinary way.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.cli._app import app
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame, kept_members, previous_link
from httk.workflow.engine.core._segments import SEGMENT_HEADER, segment_name
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, probe_marker
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.maintenance._gc import collect_garbage
from httk.workflow.engine.ops._history import job_history
from httk.workflow.engine.ops._why_report import attempt_history
from httk.workflow.protocol import RecordRef
from typer.testing import CliRunner

from tests.engine.maintenance.test_fsck import flip, segment_of
from tests.engine.maintenance.test_gc import make_old, set_retention, small_segment_workspace
from tests.jobkinds import frame_of, job_in, new_state

NOTE = "generations 2..3 were lost to damage (checksum_mismatch) and repaired by workspace fsck"


@dataclass(frozen=True)
class Repaired:
    root: Path
    recovered: str  # the generation-1 frame the repair adopted
    marker: MarkerLocation  # the job now, at generation 5


def reader(root: Path) -> Workspace:
    return attach(root, writable=False, clock=ManualClock())


def damage(root: Path, ref: str) -> None:
    """Flip the first stored checksum byte of the frame ``ref`` names."""
    parsed = RecordRef.parse(ref)
    flip(segment_of(root, parsed), parsed.offset + 8 + parsed.length)


@pytest.fixture
def repaired(tmp_path: Path) -> Repaired:
    root = small_segment_workspace(tmp_path)
    state = new_state(root)  # it publishes no heartbeat: a manager that died
    running = job_in(state, Kind.RUNNING)
    claimed_ref = frame_of(state, running)["previous_record_ref"]
    recovered = state.workspace.reader.read(claimed_ref)["previous_record_ref"]
    damage(root, running.name.ref_text)
    damage(root, claimed_ref)

    report = fsck(attach(root, clock=ManualClock()), repair=True)

    assert [(p.code, p.action) for p in report.problems] == [("checksum_mismatch", "repaired")]
    now = probe_marker(reader(root), running.placement, running.job_key)
    assert now is not None and (now.kind, now.name.generation) == (Kind.RUNNING, 4)
    members = {**kept_members(frame_of(state, now)), "reason": "retry"}
    retried = state.move(now, Frame(Kind.READY, members), Trigger.RETRY)
    assert retried.current is not None
    state.workspace.close()
    return Repaired(root, recovered, retried.current)


def test_the_repair_link_jumps_only_to_the_frame_its_record_names(repaired: Repaired) -> None:
    ws = reader(repaired.root)
    repair_ref = ws.reader.read(repaired.marker.name.ref_text)["previous_record_ref"]
    repair = ws.reader.read(repair_ref)
    assert previous_link(repair) == (repaired.recovered, range(1, 3))
    elsewhere = {**repair, "fsck_repair": {**repair["fsck_repair"], "recovered_record_ref": "another"}}
    assert previous_link(elsewhere) == (repaired.recovered, range(3, 4))
    assert previous_link({**repair, "reason": "retry"}) == (repaired.recovered, range(3, 4))


def test_log_walks_across_a_repair_and_notes_the_lost_generations(repaired: Repaired) -> None:
    entries = job_history(reader(repaired.root), repaired.marker)

    assert not [entry for entry in entries if "problem" in entry]
    assert [(e["generation"], e["from"], e["kind"], e["reason"]) for e in entries] == [
        (1, "submitted", "ready", "registered"),
        (4, "running", "running", "fsck_repair"),  # a repair keeps the kind it found
        (5, "running", "ready", "retry"),
    ]
    repair = entries[1]
    assert repair["lost_generations"] == {"first": 2, "last": 3} and repair["note"] == NOTE
    assert repair["fsck_repair"]["recovered_record_ref"] == repaired.recovered == entries[0]["record_ref"]
    assert all("note" not in entry for entry in (entries[0], entries[2]))


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_a_limited_log_still_notes_the_gap_behind_its_oldest_line(repaired: Repaired, limit: int) -> None:
    entries = job_history(reader(repaired.root), repaired.marker, limit=limit)
    assert [entry["generation"] for entry in entries] == [1, 4, 5][-limit:]
    assert [entry.get("note") for entry in entries] == [None, NOTE, None][-limit:]
    assert [entry["from"] for entry in entries] == ["submitted", "running", "running"][-limit:]


def test_following_from_the_damaged_marker_reads_the_recovered_frame_for_the_note(repaired: Repaired) -> None:
    """What ``follow`` asks once the marker it watched (generation 3) moved on."""
    entries = job_history(reader(repaired.root), repaired.marker, after_generation=3, previous_kind="running")
    assert [(e["generation"], e.get("note")) for e in entries] == [(4, NOTE), (5, None)]


def test_a_repair_frame_whose_record_names_another_frame_is_still_a_mismatch(repaired: Repaired) -> None:
    """The jump is accepted only behind a repair naming exactly the frame it links to."""
    ws = reader(repaired.root)
    repair_ref = ws.reader.read(repaired.marker.name.ref_text)["previous_record_ref"]
    segment = segment_of(repaired.root, RecordRef.parse(repair_ref))
    data = segment.read_bytes()
    assert data.count(b'"recovered_record_ref":"w') == 1
    # The checksum covers the record, so a forged record is an unreadable frame, never a silent jump.
    segment.write_bytes(data.replace(b'"recovered_record_ref":"w', b'"recovered_record_ref":"x'))
    entries = job_history(ws, repaired.marker)
    assert entries[0]["problem"]["code"] == "checksum_mismatch" and entries[0]["generation"] == 4


def test_why_counts_a_repaired_history_as_incomplete(repaired: Repaired) -> None:
    ws = reader(repaired.root)
    frame = ws.reader.read(repaired.marker.name.ref_text)
    history = attempt_history(ws, repaired.marker, frame, None)
    assert (history.complete, history.unclean) == (False, 1)
    assert "incomplete" in history.line()


def test_collection_protects_a_repaired_chain_and_removes_what_it_need_not_keep(repaired: Repaired) -> None:
    root = repaired.root
    unused = root / ".httk-workflow" / "journal" / str(uuid.uuid4()) / segment_name(0)
    unused.parent.mkdir()
    unused.write_bytes(SEGMENT_HEADER)
    for segment in (root / ".httk-workflow" / "journal").glob("*/*.hwj"):
        make_old(segment, 10)
    ws = attach(root)  # the system clock: segment ages are real
    set_retention(ws, journal_days=1)

    report = collect_garbage(ws)

    assert "journal_segment" not in report.skipped, report.skipped
    assert not unused.exists()
    assert segment_of(root, RecordRef.parse(repaired.recovered)).exists()
    entries = job_history(reader(root), repaired.marker)
    assert [entry["generation"] for entry in entries] == [1, 4, 5] and entries[1]["note"] == NOTE


def test_job_log_on_the_command_line_shows_the_note(repaired: Repaired) -> None:
    key, root = repaired.marker.job_key, str(repaired.root)
    result = CliRunner().invoke(app, ["job", "log", root, key, "--json"])
    assert result.exit_code == 0, result.stderr
    entries: list[dict[str, Any]] = json.loads(result.stdout)
    assert [entry["generation"] for entry in entries] == [1, 4, 5]
    assert not [entry for entry in entries if "problem" in entry]
    assert entries[1]["note"] == NOTE and entries[1]["lost_generations"] == {"first": 2, "last": 3}

    text = CliRunner().invoke(app, ["job", "log", root, key])
    lines = text.stdout.splitlines()
    assert text.exit_code == 0 and len(lines) == 4
    assert lines[1].endswith(f"note: {NOTE}") and "running -> running" in lines[2]
    assert "UNREADABLE" not in text.stdout
