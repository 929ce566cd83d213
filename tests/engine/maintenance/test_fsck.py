"""``workspace fsck``: every way a marker can stop resolving to its frame, its code, and its repair.

The workspace holds a job in every state kind, each moved there by the real transitions
(``tests/jobkinds.py``) under its own journal writer, and one *target*: a waiting job whose last move (a
set_priority) was written by a second writer, so that damaging that writer's segment leaves the job's
older frames readable. Each damage case breaks the target one way; the check must name it with its stable
code and change nothing, and the repair must re-point exactly that marker at the right older frame and
leave every other file as it was.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame, kept_members
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._segments import checksum128, encode_frame, segment_path
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init, probe_marker
from httk.workflow.engine.maintenance import _fsck_check
from httk.workflow.engine.maintenance._fsck import COUNTING_LEFTOVERS, fsck
from httk.workflow.engine.maintenance._fsck_check import FsckReport, check
from httk.workflow.protocol import MarkerName, RecordRef

from tests.inspectkit import set_format_member, snapshot
from tests.jobkinds import ALL_KINDS, assert_frames_valid, frame_of, job_in, new_state

TARGET_PLACEMENT = "target/00"
TARGET_PRIORITY = 7


@dataclass(frozen=True)
class Built:
    root: Path
    markers: dict[Kind, MarkerLocation]  # one job per kind, at p/<kind>
    target: MarkerLocation  # waiting, its last frame in a writer of its own
    older: str  # the reference of the target's previous frame (another writer)

    def reader(self, clock: ManualClock | None = None) -> Workspace:
        return attach(self.root, writable=False, clock=clock or ManualClock())

    def writer(self) -> Workspace:
        return attach(self.root, clock=ManualClock())


def build(root: Path) -> Built:
    init(root, durable=False)
    markers = {}
    for kind in ALL_KINDS:
        markers[kind] = job_in(new_state(root), kind, placement=f"p/{kind.value}")
    first = new_state(root)
    waiting = job_in(first, Kind.WAITING, placement=TARGET_PLACEMENT)
    second = new_state(root)
    members = {**kept_members(frame_of(second, waiting)), "reason": "set_priority"}
    result = second.move(waiting, Frame(Kind.WAITING, members, TARGET_PRIORITY), Trigger.SET_PRIORITY)
    assert result.current is not None
    return Built(root, markers, result.current, waiting.name.ref_text)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("fsck") / "ws")


@pytest.fixture
def built(template: Built, tmp_path: Path) -> Built:
    """A private copy of the template workspace, to damage."""
    shutil.copytree(template.root, tmp_path / "ws", symlinks=True)
    return Built(tmp_path / "ws", template.markers, template.target, template.older)


# -- damage --------------------------------------------------------------------------------------------
def segment_of(root: Path, ref: RecordRef) -> Path:
    return segment_path(root / ".httk-workflow" / "journal", ref.writer, ref.segment)


def patch(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as stream:
        stream.seek(offset)
        stream.write(data)


def flip(path: Path, offset: int) -> None:
    with path.open("r+b") as stream:
        stream.seek(offset)
        byte = stream.read(1)
        stream.seek(offset)
        stream.write(bytes([byte[0] ^ 0xFF]))


def flip_checksum(root: Path, marker: MarkerLocation) -> None:
    """Flip the first byte of the stored checksum of the frame ``marker`` names."""
    ref = marker.name.ref
    assert ref is not None
    flip(segment_of(root, ref), ref.offset + 8 + ref.length)


def rename_marker(root: Path, marker: MarkerLocation, name: str, kind: Kind | None = None) -> Path:
    """Rename the marker by hand (``name`` is the new basename); return the new path."""
    source = root / ".httk-workflow" / "state" / marker.kind.value / marker.placement / str(marker.name)
    directory = root / ".httk-workflow" / "state" / (kind or marker.kind).value / marker.placement
    directory.mkdir(parents=True, exist_ok=True)
    os.rename(source, directory / name)
    return directory / name


def _renamed_ref(marker: MarkerLocation, ref: RecordRef) -> str:
    return str(MarkerName(marker.name.key, marker.name.priority, marker.name.generation, ref))


def _target_ref(built: Built) -> RecordRef:
    ref = built.target.name.ref
    assert ref is not None
    return ref


def truncate(built: Built) -> None:
    ref = _target_ref(built)
    os.truncate(segment_of(built.root, ref), ref.offset + 20)


def checksum(built: Built) -> None:
    flip_checksum(built.root, built.target)


def delete_segment(built: Built) -> None:
    segment_of(built.root, _target_ref(built)).unlink()


def length_prefix(built: Built) -> None:
    ref = _target_ref(built)
    patch(segment_of(built.root, ref), ref.offset, (ref.length + 1).to_bytes(8, "big"))


def trailer(built: Built) -> None:
    ref = _target_ref(built)
    patch(segment_of(built.root, ref), ref.offset + 8 + ref.length + 32, (ref.length + 1).to_bytes(8, "big"))


def header(built: Built) -> None:
    patch(segment_of(built.root, _target_ref(built)), 0, b"XTTK")


def other_checksum(built: Built) -> None:
    ref = _target_ref(built)
    wrong = RecordRef(ref.writer, ref.segment, ref.offset, ref.length, "0" * 32)
    rename_marker(built.root, built.target, _renamed_ref(built.target, wrong))


def not_json(built: Built) -> None:
    """Append a well-framed frame whose payload is not JSON and point the marker at it."""
    ref = _target_ref(built)
    segment = segment_of(built.root, ref)
    payload = b"{not json"
    frame, digest = encode_frame(payload)
    offset = segment.stat().st_size
    with segment.open("ab") as stream:
        stream.write(frame)
    bad = RecordRef(ref.writer, ref.segment, offset, len(payload), checksum128(digest))
    rename_marker(built.root, built.target, _renamed_ref(built.target, bad))


def unparseable_ref(built: Built) -> None:
    name = built.target.name
    rename_marker(built.root, built.target, f"{name.key}.p{name.priority:03d}.g{name.generation}.wnot-a-ref")


def offset_in_header(built: Built) -> None:
    ref = _target_ref(built)
    wrong = RecordRef(ref.writer, ref.segment, 4, ref.length, ref.checksum128)
    rename_marker(built.root, built.target, _renamed_ref(built.target, wrong))


def other_kind(built: Built) -> None:
    rename_marker(built.root, built.target, str(built.target.name), Kind.READY)


def wrong_generation(built: Built) -> None:
    name = built.target.name
    rename_marker(
        built.root, built.target, str(MarkerName(name.key, name.priority, name.generation + 2, name.ref))
    )


@dataclass(frozen=True)
class Case:
    damage: Callable[[Built], None]
    code: str
    kind: Kind = Kind.WAITING  # the kind the repaired marker keeps
    generation_shift: int = 0  # how far the damage moved the marker's generation
    adopts_own_frame: bool = False  # the marker's own (readable, misplaced) frame is the newest older one


CASES = {
    "truncated segment": Case(truncate, "short_read"),
    "flipped checksum": Case(checksum, "checksum_mismatch"),
    "deleted segment": Case(delete_segment, "missing_segment"),
    "length prefix": Case(length_prefix, "length_mismatch"),
    "trailer": Case(trailer, "trailer_mismatch"),
    "segment header": Case(header, "invalid_header"),
    "reference checksum": Case(other_checksum, "reference_mismatch"),
    "payload not JSON": Case(not_json, "undecodable_frame"),
    "reference does not parse": Case(unparseable_ref, "invalid_record_ref"),
    "offset inside the header": Case(offset_in_header, "invalid_record_ref"),
    "moved to another kind": Case(other_kind, "identity_mismatch", kind=Kind.READY),
    "renamed to a wrong generation": Case(
        wrong_generation, "identity_mismatch", generation_shift=2, adopts_own_frame=True
    ),
}


# -- what changed --------------------------------------------------------------------------------------
def files(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every non-directory below ``root``, by relative path."""
    return {path: (size, mtime) for path, kind, size, mtime in snapshot(root) if kind == "f"}


def directories(root: Path) -> set[str]:
    return {path for path, kind, _size, _mtime in snapshot(root) if kind == "d"}


def current(built: Built) -> MarkerLocation:
    found = probe_marker(built.reader(), TARGET_PLACEMENT, built.target.job_key)
    assert found is not None
    return found


def relative(built: Built, marker: MarkerLocation) -> str:
    return os.path.relpath(marker.path(built.reader()), built.root)


def only_problem(report: FsckReport) -> dict[str, Any]:
    assert len(report.problems) == 1, [problem.as_dict() for problem in report.problems]
    return report.problems[0].as_dict()


# -- the check -----------------------------------------------------------------------------------------
def test_a_workspace_with_a_job_in_every_kind_is_clean_and_nothing_is_written(built: Built) -> None:
    before = snapshot(built.root)
    report = fsck(built.reader())
    assert report.clean and report.problems == []
    assert report.markers["waiting"] == 2 and sum(report.markers.values()) == len(ALL_KINDS) + 1
    assert report.as_dict()["clean"] is True
    assert report.leftovers is not None
    assert set(report.leftovers) == {
        "total",
        "removed_jobs",
        "tmp_entries",
        "retired_requests",
        "placement_directories",
    }
    assert report.leftovers["removed_jobs"] == 0
    assert snapshot(built.root) == before


@pytest.mark.parametrize("case", list(CASES))
def test_each_damage_is_reported_with_its_code_and_nothing_is_written(built: Built, case: str) -> None:
    CASES[case].damage(built)
    before = snapshot(built.root)
    report = check(built.reader())
    problem = only_problem(report)
    assert problem["code"] == CASES[case].code
    assert problem["job_key"] == built.target.job_key and problem["action"] == "reported"
    assert problem["generation"] == built.target.name.generation + CASES[case].generation_shift
    assert not report.clean
    assert snapshot(built.root) == before


@pytest.mark.parametrize("case", list(CASES))
def test_repair_re_points_the_marker_at_the_newest_older_frame_and_touches_nothing_else(
    built: Built, case: str
) -> None:
    expected = CASES[case]
    expected.damage(built)
    [damaged] = [problem.location for problem in check(built.reader()).problems]
    files_before, directories_before = files(built.root), directories(built.root)

    report = fsck(built.writer(), repair=True)

    problem = only_problem(report)
    assert (problem["code"], problem["action"]) == (expected.code, "repaired"), problem
    assert report.clean
    repaired = current(built)
    generation = built.target.name.generation + expected.generation_shift + 1
    assert (repaired.kind, repaired.name.generation) == (expected.kind, generation)
    assert repaired.name.priority == TARGET_PRIORITY
    assert problem["repaired_marker"] == relative(built, repaired)
    frame = built.reader().reader.read(repaired.name.ref_text)
    adopted_ref = built.target.name.ref_text if expected.adopts_own_frame else built.older
    adopted = built.reader().reader.read(adopted_ref)
    assert frame["reason"] == "fsck_repair" and frame["previous_record_ref"] == adopted_ref
    assert frame["fsck_repair"]["recovered_record_ref"] == adopted_ref == problem["recovered_record_ref"]
    assert frame["fsck_repair"]["problem"] == expected.code
    assert frame["fsck_repair"]["damaged_record_ref"] == damaged.name.rpartition(".")[2]
    assert frame["kind"] == expected.kind.value and frame["state_generation"] == generation
    for member in ("step", "activation_id", "join", "attempt_ordinal", "total_attempts"):
        assert frame.get(member) == adopted.get(member), member
    assert_frames_valid([frame])
    # Exactly one file moved (the marker) and one writer directory was added; nothing else changed.
    files_after, directories_after = files(built.root), directories(built.root)
    [writer] = directories_after - directories_before
    assert writer.startswith(".httk-workflow/journal/")
    old = os.path.relpath(damaged, built.root)
    added = {path for path in files_after if path not in files_before and not path.startswith(writer)}
    assert added == {relative(built, repaired)}
    assert set(files_before) - set(files_after) == {old}
    assert all(files_after[path] == files_before[path] for path in files_before if path != old)
    assert check(built.reader()).clean


def test_a_late_frame_that_becomes_visible_within_the_deadline_is_no_problem(built: Built) -> None:
    segment = segment_of(built.root, _target_ref(built))
    hidden = segment.with_name("hidden")
    os.rename(segment, hidden)
    clock = ManualClock()

    def appear(now: ManualClock) -> None:
        if sum(now.sleeps) > 1.0 and hidden.exists():
            os.rename(hidden, segment)

    clock.on_sleep.append(appear)
    report = check(built.reader(clock))
    assert report.clean, [problem.as_dict() for problem in report.problems]
    assert 1.0 < sum(clock.sleeps) < built.reader().policy.visibility_deadline_seconds


def test_late_frames_are_waited_out_together_within_one_deadline(built: Built) -> None:
    delete_segment(built)
    running = built.markers[Kind.RUNNING].name.ref
    assert running is not None
    segment_of(built.root, running).unlink()
    clock = ManualClock()
    report = check(built.reader(clock))
    assert sorted(problem.code for problem in report.problems) == ["missing_segment"] * 2
    assert sum(clock.sleeps) == pytest.approx(built.reader().policy.visibility_deadline_seconds)


def test_a_missing_payload_of_a_kind_with_live_work_is_reported_and_never_touched(built: Built) -> None:
    for kind in (Kind.RUNNING, Kind.READY, Kind.SUCCEEDED):
        marker = built.markers[kind]
        shutil.rmtree(built.root / marker.placement / marker.job_key)
    checksum(built)  # the target's frame too: a damaged marker without a payload is left alone
    shutil.rmtree(built.root / TARGET_PLACEMENT / built.target.job_key)
    before = snapshot(built.root)

    later = ManualClock(datetime.now(UTC) + timedelta(minutes=10))  # gc counts markers past the deadline
    report = fsck(attach(built.root, clock=later), repair=True, quarantine_unrepairable=True)

    found = sorted((p.code, p.as_dict()["kind"], p.action) for p in report.problems)
    assert found == [
        ("checksum_mismatch", "waiting", "left"),
        ("payload_missing", "running", "left"),
        ("payload_missing", "waiting", "left"),
    ]
    assert not report.clean
    # A ready or terminal job without its payload is gc's to collect, not damage: counted, not reported.
    assert report.leftovers is not None and report.leftovers["removed_jobs"] == 2
    assert snapshot(built.root) == before


def test_an_init_marker_outside_submitted_is_an_identity_mismatch(built: Built) -> None:
    submitted = built.markers[Kind.SUBMITTED]
    rename_marker(built.root, submitted, str(submitted.name), Kind.READY)
    problem = only_problem(check(built.reader()))
    assert (problem["code"], problem["kind"], problem["generation"]) == ("identity_mismatch", "ready", 0)
    assert "init" in problem["detail"]


def test_entries_that_are_not_markers_are_reported_with_the_walkers_reason(built: Built) -> None:
    state = built.root / ".httk-workflow" / "state"
    (state / "ready" / "p" / "ready" / "notes.txt").write_text("x")
    (state / "failed" / "stray").write_text("")
    (state / "paused" / "p" / "link").symlink_to("elsewhere")
    report = check(built.reader())
    assert sorted((p.code, p.path) for p in report.problems) == [
        ("no_placement", ".httk-workflow/state/failed/stray"),
        ("symlink", ".httk-workflow/state/paused/p/link"),
        ("unparseable_name", ".httk-workflow/state/ready/p/ready/notes.txt"),
    ]


def test_the_check_reads_a_workspace_this_version_may_not_change(built: Built) -> None:
    checksum(built)
    set_format_member(built.root, "extensions", ["relocation-v1"])
    before = snapshot(built.root)
    report = check(built.reader())
    assert [problem.code for problem in report.problems] == ["checksum_mismatch"]
    assert snapshot(built.root) == before


def test_a_job_with_two_markers_is_reported_once_naming_both_and_never_repaired(built: Built) -> None:
    """A stale copy of an older marker (a partial snapshot restore, a hand copy) beside the current one."""
    failed = built.markers[Kind.FAILED]
    chain = []
    frame: Mapping[str, Any] = frame_of(new_state(built.root), failed)
    while frame.get("kind") != "ready":  # the job's ready frame, on its own chain
        ref = frame["previous_record_ref"]
        frame = built.reader().reader.read(ref)
        chain.append(ref)
    ready_name = MarkerName.parse(f"{failed.job_key}.p{failed.name.priority:03d}.g1.{chain[-1]}")
    stale = built.root / ".httk-workflow" / "state" / "ready" / failed.placement / str(ready_name)
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.touch()
    checksum(built)  # another job's damage: repaired as usual beside the duplicate
    before = snapshot(built.root)

    report = check(built.reader())
    duplicates = [p.as_dict() for p in report.problems if p.code == "duplicate_marker"]
    assert len(duplicates) == 1 and duplicates[0]["job_key"] == failed.job_key
    assert sorted(duplicates[0]["markers"]) == sorted(
        [
            f".httk-workflow/state/failed/{failed.placement}/{failed.name}",
            f".httk-workflow/state/ready/{failed.placement}/{ready_name}",
        ]
    )
    assert snapshot(built.root) == before

    report = fsck(built.writer(), repair=True)
    actions = sorted((p.code, p.action) for p in report.problems)
    assert actions == [("checksum_mismatch", "repaired"), ("duplicate_marker", "left")]
    assert stale.exists() and failed.path(built.reader()).exists() and not report.clean


def test_a_job_seen_twice_because_it_moved_during_the_walk_is_no_duplicate(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk lists kind after kind: a job renamed into a kind not yet walked is met twice, unharmed."""
    ws = built.reader()
    ready = built.markers[Kind.READY]
    real_walk = walk_markers

    def walk_with_a_move(workspace: Workspace, kind: Kind) -> Any:
        yield from real_walk(workspace, kind)
        if kind is Kind.READY:  # after ready was listed, the job is claimed into a kind walked later
            state = new_state(built.root)
            frame = frame_of(state, ready)
            state.move(
                ready, Frame(Kind.CLAIMED, {**kept_members(frame), "reason": "claimed"}), Trigger.CLAIM
            )

    monkeypatch.setattr(_fsck_check, "walk_markers", walk_with_a_move)
    report = check(ws)
    assert report.markers["ready"] == 1 and report.markers["claimed"] == 2  # the job counted in both
    assert [p.code for p in report.problems] == []


def test_an_entry_of_state_that_is_no_state_kind_is_reported_and_not_entered(built: Built) -> None:
    state = built.root / ".httk-workflow" / "state"
    (state / "archive" / "p").mkdir(parents=True)
    (state / "archive" / "p" / "old.marker").touch()
    (state / "README").write_text("hands off")
    report = check(built.reader())
    assert sorted((p.code, p.path) for p in report.problems) == [
        ("unknown_state_kind", ".httk-workflow/state/README"),
        ("unknown_state_kind", ".httk-workflow/state/archive"),
    ]
    assert not report.clean


def test_the_check_reports_its_progress_entry_by_entry(built: Built) -> None:
    heard: list[tuple[str, int]] = []
    report = fsck(built.reader(), progress=lambda what, done: heard.append((what, done)))
    checked = [done for what, done in heard if what == _fsck_check.CHECKING]
    assert checked == list(range(1, sum(report.markers.values()) + 1))  # every entry, in order
    counting = [done for what, done in heard if what == COUNTING_LEFTOVERS]
    assert counting and counting == sorted(counting)
    assert [what for what, _done in heard] == [_fsck_check.CHECKING] * len(checked) + [
        COUNTING_LEFTOVERS
    ] * len(counting)
