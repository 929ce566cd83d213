"""``workspace fsck --repair`` beyond one damaged marker: what it must leave alone, what it can never
restore, which frame it adopts when transitions raced, and every crash point of a repair.

Jobs are moved by the real transitions (``tests/jobkinds.py``); a live manager is a real manager record
whose heartbeat is fresh (written just now by :class:`ManagerRecord`), and a dead one is the same record
aged into the past (``tests/runners.py``), so no test sleeps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame, kept_members, record_of
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init, probe_marker
from httk.workflow.engine.maintenance._fsck import adopt, fsck, repair_problems
from httk.workflow.engine.maintenance._fsck_check import FsckReport, check
from httk.workflow.engine.manager._manager import ManagerIdentity, ManagerRecord
from httk.workflow.engine.manager._recovery import release_stale_claim
from httk.workflow.engine.manager._state import ManagerState, Owner
from httk.workflow.protocol import RecordRef

from tests.crashkit import crash_at_every_point
from tests.engine.maintenance.test_fsck import files, flip_checksum
from tests.inspectkit import snapshot
from tests.jobkinds import chain, frame_of, job_in, new_state
from tests.runners import age_heartbeats


def reader(root: Path) -> Workspace:
    return attach(root, writable=False, clock=ManualClock())


def repair(root: Path, *, quarantine: bool = False) -> FsckReport:
    return fsck(attach(root, clock=ManualClock()), repair=True, quarantine_unrepairable=quarantine)


def actions(report: FsckReport) -> list[tuple[str, str]]:
    return [(problem.code, problem.action) for problem in report.problems]


def now_at(root: Path, marker: MarkerLocation) -> MarkerLocation:
    found = probe_marker(reader(root), marker.placement, marker.job_key)
    assert found is not None
    return found


def heartbeat(state: ManagerState) -> ManagerRecord:
    """Publish ``state``'s manager record with a fresh heartbeat: a live manager, as recoverers see it."""
    identity = ManagerIdentity(state.manager_id, ("default",), (), lease_seconds=60.0)
    record = ManagerRecord(state.workspace, identity, state.writer_id)
    record.create()
    return record


# -- live owners -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [Kind.CLAIMED, Kind.RUNNING, Kind.COMMITTING, Kind.CANCELLING])
def test_a_marker_whose_manager_heartbeats_is_left_alone_until_its_lease_expires(
    tmp_path: Path, kind: Kind
) -> None:
    root = tmp_path / "ws"
    init(root, durable=False)
    owner = new_state(root)
    marker = job_in(owner, kind)
    heartbeat(owner)
    heartbeat(new_state(root))  # a live manager that owns nothing here changes nothing
    flip_checksum(root, marker)
    before = snapshot(root)

    report = repair(root)

    assert actions(report) == [("checksum_mismatch", "live_owner")]
    assert report.problems[0].details["owner"] == owner.manager_id
    assert not report.clean
    assert snapshot(root) == before  # not even a journal writer directory

    age_heartbeats(owner.workspace)
    assert actions(repair(root)) == [("checksum_mismatch", "repaired")]
    repaired = now_at(root, marker)
    assert (repaired.kind, repaired.name.generation) == (kind, marker.name.generation + 1)


def test_the_owner_of_a_claim_whose_frame_is_gone_is_found_by_the_writer_of_its_reference(
    tmp_path: Path,
) -> None:
    """The claimed frame named the owner and is unreadable; the older ready frame owns nothing."""
    root = tmp_path / "ws"
    init(root, durable=False)
    registrar = new_state(root)
    ready = job_in(registrar, Kind.READY)
    owner = new_state(root)
    claimed = owner.move(ready, Frame(Kind.CLAIMED, {**kept_members(frame_of(owner, ready))}), Trigger.CLAIM)
    assert claimed.current is not None
    heartbeat(owner)
    flip_checksum(root, claimed.current)
    assert actions(repair(root)) == [("checksum_mismatch", "live_owner")]


def test_a_repaired_claim_does_not_name_the_live_manager_that_only_queued_it(tmp_path: Path) -> None:
    """The live manager released an earlier stale claim to ready; a second claimer died."""
    root = tmp_path / "ws"
    init(root, durable=False)
    registrar = new_state(root)
    stale = job_in(registrar, Kind.CLAIMED)
    release_stale_claim(registrar, stale, frame_of(registrar, stale), Owner(False, None))
    ready = now_at(root, stale)
    assert frame_of(registrar, ready)["manager_id"] == registrar.manager_id
    heartbeat(registrar)
    claimer = new_state(root)  # it dies: it never publishes a heartbeat
    claimed = claimer.move(
        ready, Frame(Kind.CLAIMED, {**kept_members(frame_of(claimer, ready))}), Trigger.CLAIM
    )
    assert claimed.current is not None
    flip_checksum(root, claimed.current)

    assert actions(repair(root)) == [("checksum_mismatch", "repaired")]

    repaired = now_at(root, ready)
    frame = reader(root).reader.read(repaired.name.ref_text)
    assert (repaired.kind, frame["reason"]) == (Kind.CLAIMED, "fsck_repair")
    assert "manager_id" not in frame and frame["step"] == frame_of(registrar, ready)["step"]


# -- what is adopted ---------------------------------------------------------------------------------
def test_frames_at_or_beyond_the_markers_generation_are_never_adopted(tmp_path: Path) -> None:
    """A lost race leaves a frame at the marker's generation, an uncommitted move one above it."""
    root = tmp_path / "ws"
    init(root, durable=False)
    state = new_state(root)
    registered = job_in(state, Kind.READY)
    moved = state.move(registered, Frame(Kind.READY, {"reason": "set_priority"}, 3), Trigger.SET_PRIORITY)
    marker = moved.current
    assert marker is not None
    racer = attach(root)
    for base, generation in ((registered, 2), (marker, 3)):
        frame = record_of(racer, base, Frame(Kind.READY, {"reason": "set_priority", "priority": 9}))
        assert frame["state_generation"] == generation
        racer.journal().append(frame)
    flip_checksum(root, marker)

    report = repair(root)

    assert actions(report) == [("checksum_mismatch", "repaired")]
    assert report.problems[0].details["recovered_record_ref"] == registered.name.ref_text
    repaired = now_at(root, marker)
    assert (repaired.name.generation, repaired.name.priority) == (3, 3)
    assert [frame["reason"] for frame in chain(reader(root), repaired)] == ["fsck_repair", "registered"]


def _frame(generation: int, previous: str | None = None, created_at: str = "2026-01-01") -> dict[str, Any]:
    return {"state_generation": generation, "previous_record_ref": previous, "created_at": created_at}


def _ref(offset: int) -> RecordRef:
    return RecordRef("01234567-89ab-cdef-0123-456789abcdef", 0, offset, 10, "0" * 32)


def test_among_raced_frames_the_one_a_later_frame_chains_to_is_adopted() -> None:
    winner, loser, later = _ref(100), _ref(200), _ref(300)
    frames = [
        (winner, _frame(2, created_at="2026-01-01")),
        (loser, _frame(2, created_at="2026-01-02")),  # newer, but nothing chains to it
        (later, _frame(3, previous=str(winner))),
        (_ref(12), _frame(1)),
    ]
    assert adopt(frames, 3) == frames[0]
    assert adopt(frames, 4) == frames[2]
    assert adopt(frames[:2], 3) == frames[1]  # no survivor to tell: the newest, deterministically
    assert adopt(frames, 1) is None


# -- what can never be restored ----------------------------------------------------------------------
def unrepairable_workspace(root: Path) -> tuple[MarkerLocation, Path]:
    """A job damaged before its second transition, and a stray file where markers live."""
    init(root, durable=False)
    marker = job_in(new_state(root), Kind.READY)
    flip_checksum(root, marker)
    stray = root / ".httk-workflow" / "state" / "ready" / "p" / "stray"
    stray.write_text("")
    return marker, stray


def test_an_unrepairable_marker_is_reported_and_moved_only_when_asked(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    marker, stray = unrepairable_workspace(root)
    before = snapshot(root)
    report = repair(root)
    assert sorted(actions(report)) == [
        ("checksum_mismatch", "unrepairable"),
        ("unparseable_name", "unrepairable"),
    ]
    assert snapshot(root) == before

    report = repair(root, quarantine=True)

    assert sorted(actions(report)) == [
        ("checksum_mismatch", "quarantined"),
        ("unparseable_name", "quarantined"),
    ]
    assert not report.clean  # a quarantined job still needs an operator
    assert probe_marker(reader(root), "p", marker.job_key) is None and not stray.exists()
    records = sorted((root / ".httk-workflow" / "quarantine").glob("*.quarantine"))
    audit = {json.loads(path.read_text())["original_path"]: json.loads(path.read_text()) for path in records}
    damaged = f".httk-workflow/state/ready/p/{marker.name}"
    assert set(audit) == {damaged, ".httk-workflow/state/ready/p/stray"}
    assert audit[damaged]["problem"] == "checksum_mismatch" and audit[damaged]["job_key"] == marker.job_key
    assert audit[damaged]["format"] == "httk-workflow-quarantine"
    for record in audit.values():
        entry = root / ".httk-workflow" / "quarantine" / record["entry"]
        assert entry.is_file() and entry.read_bytes() == b""
    assert check(reader(root)).clean


def test_what_another_actor_moved_after_the_check_is_reported_as_moved_and_left_alone(
    tmp_path: Path,
) -> None:
    repaired_meanwhile, stray_meanwhile = tmp_path / "a", tmp_path / "b"
    marker = repairable_workspace(repaired_meanwhile)
    stale = check(reader(repaired_meanwhile))
    assert repair(repaired_meanwhile).clean  # another fsck got there first
    winner = now_at(repaired_meanwhile, marker)
    repair_problems(attach(repaired_meanwhile, clock=ManualClock()), stale, quarantine_unrepairable=False)
    assert actions(stale) == [("checksum_mismatch", "moved")]
    assert now_at(repaired_meanwhile, marker) == winner

    _marker, stray = unrepairable_workspace(stray_meanwhile)
    stale = check(reader(stray_meanwhile))
    stray.unlink()
    repair_problems(attach(stray_meanwhile, clock=ManualClock()), stale, quarantine_unrepairable=True)
    assert sorted(actions(stale)) == [("checksum_mismatch", "quarantined"), ("unparseable_name", "moved")]


# -- crashes -----------------------------------------------------------------------------------------
REPAIR_CODE = """
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.core._workspace import attach
fsck(attach({root!r}), repair=True, quarantine_unrepairable=True)
"""


def repairable_workspace(root: Path) -> MarkerLocation:
    init(root, durable=False)
    state = new_state(root)
    marker = job_in(state, Kind.PAUSED)
    flip_checksum(root, marker)
    return marker


def outcome(root: Path, marker: MarkerLocation) -> dict[str, Any]:
    """What a finished repair leaves: the marker and its chain or the quarantined entries; a clean check."""
    found = probe_marker(reader(root), marker.placement, marker.job_key)
    # A crash inside write_file_atomic may leave its hidden temporary name behind: scratch, not an entry.
    quarantine = [path for path in (root / ".httk-workflow" / "quarantine").iterdir() if path.name[0] != "."]
    summary: dict[str, Any] = {"clean": check(reader(root)).clean, "quarantined": len(quarantine)}
    if found is not None:
        frames = chain(reader(root), found)
        summary["marker"] = (found.kind, found.name.generation, found.name.priority)
        summary["chain"] = [(frame["state_generation"], frame["reason"]) for frame in frames]
    return summary


@pytest.mark.parametrize("scenario", ["repair", "quarantine"])
def test_every_crash_point_of_a_repair_converges_when_it_runs_again(tmp_path: Path, scenario: str) -> None:
    def make(root: Path) -> MarkerLocation:
        if scenario == "repair":
            return repairable_workspace(root)
        return unrepairable_workspace(root)[0]

    template = tmp_path / "template"
    marker = make(template)
    expected, failures = crash_at_every_point(
        template,
        tmp_path,
        REPAIR_CODE,
        lambda root: repair(root, quarantine=True),
        lambda root: outcome(root, marker),
    )
    assert expected["clean"]
    assert not failures, "\n".join(failures)
    if scenario == "repair":
        assert expected["chain"][0][1] == "fsck_repair" and expected["quarantined"] == 0
    else:
        assert "marker" not in expected and expected["quarantined"] == 4  # two entries, two records


def test_a_repaired_workspace_is_unchanged_by_another_repair(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    repairable_workspace(root)
    assert repair(root).clean
    before = files(root)
    report = repair(root)
    assert report.clean and report.problems == []
    assert files(root) == before
