"""Journal writer, forward segment scan, and the reader's transient-versus-lasting damage table.

Every test uses real files below tmp_path and a ManualClock, so nothing here sleeps.
"""

from __future__ import annotations

import errno
import itertools
import os
import uuid
from pathlib import Path

import pytest
from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._journal import JournalStatistics, JournalWriter, ScannedFrame, scan_segment
from httk.workflow.engine.core._segments import (
    SEGMENT_HEADER,
    JournalReader,
    checksum128,
    encode_frame,
    encode_record,
    segment_name,
)
from httk.workflow.protocol import InvalidNameError, JournalDamageError, JournalError, RecordRef

DEADLINE = 2.0


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    path.mkdir()
    return path


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def writer_in(journal: Path, *, segment_bytes: int = 1 << 20, durable: bool = False) -> JournalWriter:
    return JournalWriter(journal, segment_bytes=segment_bytes, durable=durable)


def reader_of(journal: Path, clock: ManualClock) -> JournalReader:
    return JournalReader(journal, visibility_deadline=DEADLINE, clock=clock)


def segment_of(journal: Path, ref: RecordRef) -> Path:
    return journal / ref.writer / segment_name(ref.segment)


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def record(n: int, size: int = 0) -> dict[str, object]:
    return {"kind": "ready", "n": n, "pad": "x" * size}


# --- writer -------------------------------------------------------------------------------------


def test_writer_creates_nothing_until_its_first_append(journal):
    writer = writer_in(journal)
    before = _fsops.mutation_count()
    assert list(journal.iterdir()) == []
    assert writer.statistics() == JournalStatistics(writer.writer_id, 0, 0, 0)
    writer.close()
    assert _fsops.mutation_count() == before
    assert list(journal.iterdir()) == []


def test_first_append_creates_writer_directory_and_segment_zero(journal, tmp_path):
    writer = writer_in(journal)
    with _fsops.trace_to(tmp_path / "trace"):
        ref = writer.append(record(1))
    writer.close()
    directory = journal / writer.writer_id
    assert sorted(p.name for p in journal.iterdir()) == [writer.writer_id]
    assert [p.name for p in directory.iterdir()] == ["0.hwj"]
    segment = directory / "0.hwj"
    kinds = [line.split("\t")[1:] for line in (tmp_path / "trace").read_text().splitlines()]
    assert kinds == [
        ["mkdir", f"{directory}"],
        ["create", f"{segment}"],
        ["write", f"{segment}"],
        ["append", f"{segment}"],
    ]
    assert segment.read_bytes().startswith(SEGMENT_HEADER)
    assert (ref.writer, ref.segment, ref.offset) == (writer.writer_id, 0, len(SEGMENT_HEADER))


def test_writer_ids_are_fresh_canonical_uuids(journal):
    first, second = writer_in(journal), writer_in(journal)
    assert first.writer_id != second.writer_id
    assert str(uuid.UUID(first.writer_id)) == first.writer_id


@pytest.mark.parametrize("durable", [False, True])
def test_refs_resolve_to_their_records(journal, clock, durable, monkeypatch):
    fsyncs: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    with writer_in(journal, durable=durable) as writer:
        refs = [writer.append(record(n, n * 10)) for n in range(20)]
        assert writer.statistics().frames_written == 20
    reader = reader_of(journal, clock)
    assert [reader.read(ref) for ref in refs] == [record(n, n * 10) for n in range(20)]
    assert [reader.read(str(ref)) for ref in refs] == [record(n, n * 10) for n in range(20)]
    assert clock.sleeps == []
    # Durable: every append synchronizes the segment before returning; otherwise nothing does.
    assert (len(fsyncs) >= 20) if durable else (fsyncs == [])


def test_offsets_are_contiguous_after_the_header(journal):
    with writer_in(journal) as writer:
        refs = [writer.append(record(n)) for n in range(5)]
        size = writer.statistics().segment_size
    assert refs[0].offset == len(SEGMENT_HEADER)
    for earlier, later in itertools.pairwise(refs):
        assert later.offset == earlier.offset + earlier.frame_size
    assert size == refs[-1].offset + refs[-1].frame_size == segment_of(journal, refs[0]).stat().st_size


def test_segments_rotate_before_exceeding_segment_bytes(journal, clock, tmp_path):
    writer = writer_in(journal, segment_bytes=4096)
    with _fsops.trace_to(tmp_path / "trace"):
        refs = [writer.append(record(n, 300)) for n in range(40)]
    stats = writer.statistics()
    writer.close()
    segments = sorted({ref.segment for ref in refs})
    assert segments == list(range(len(segments))) and len(segments) > 3
    assert stats.segment == segments[-1] and stats.frames_written == 40
    for number in segments:
        assert segment_of(journal, refs[0]).with_name(segment_name(number)).stat().st_size <= 4096
    for earlier, later in itertools.pairwise(refs):
        if later.segment != earlier.segment:
            # Invariant: rotation happens only when the next frame would not have fit.
            assert earlier.offset + earlier.frame_size + later.frame_size > 4096
            assert later.offset == len(SEGMENT_HEADER)
    reader = reader_of(journal, clock)
    assert [reader.read(ref)["n"] for ref in refs] == list(range(40))
    # Each segment is created once, and appended to only until the next one is created.
    events = [line.split("\t")[1:] for line in (tmp_path / "trace").read_text().splitlines()]
    created = [path for kind, path in events if kind == "create"]
    assert len(created) == len(set(created)) == len(segments)
    current = None
    for kind, path in events:
        if kind == "create":
            current = path
        elif kind == "append":
            assert path == current


def test_a_frame_larger_than_segment_bytes_goes_alone_into_a_fresh_segment(journal, clock):
    with writer_in(journal, segment_bytes=4096) as writer:
        small = writer.append(record(1))
        big = writer.append(record(2, 6000))
        after = writer.append(record(3))
    assert (small.segment, big.segment, after.segment) == (0, 1, 2)
    assert big.offset == after.offset == len(SEGMENT_HEADER)
    assert reader_of(journal, clock).read(big) == record(2, 6000)


def test_an_oversized_first_frame_stays_in_segment_zero(journal):
    with writer_in(journal, segment_bytes=4096) as writer:
        big = writer.append(record(1, 6000))
        after = writer.append(record(2))
    assert (big.segment, after.segment) == (0, 1)


def test_an_existing_writer_directory_is_refused(journal):
    writer_id = str(uuid.uuid4())
    (journal / writer_id).mkdir()
    writer = JournalWriter(journal, segment_bytes=4096, durable=False, writer_id=writer_id)
    with pytest.raises(JournalError, match="never reused") as caught:
        writer.append(record(1))
    assert str(journal / writer_id) in str(caught.value)
    assert list((journal / writer_id).iterdir()) == []


def test_a_missing_journal_directory_is_an_error_naming_it(tmp_path):
    writer = JournalWriter(tmp_path / "absent", segment_bytes=4096, durable=False)
    with pytest.raises(JournalError, match="absent"):
        writer.append(record(1))


def test_two_writers_are_independent(journal, clock):
    first, second = writer_in(journal), writer_in(journal)
    refs = [(first.append(record(n)), second.append(record(5 + n))) for n in range(5)]
    first.close()
    second.close()
    assert {p.name for p in journal.iterdir()} == {first.writer_id, second.writer_id}
    reader = reader_of(journal, clock)
    for n, (a, b) in enumerate(refs):
        assert (a.writer, b.writer) == (first.writer_id, second.writer_id)
        assert a.offset == b.offset  # each writes its own segment 0 from the header on
        assert (reader.read(a), reader.read(b)) == (record(n), record(5 + n))


def test_writer_arguments_are_validated(journal):
    with pytest.raises(JournalError, match="4096"):
        JournalWriter(journal, segment_bytes=4095, durable=False)
    with pytest.raises(InvalidNameError):
        JournalWriter(
            journal, segment_bytes=4096, durable=False, writer_id="0123456789ABCDEF0123456789ABCDEF"
        )


def test_a_closed_writer_refuses_to_append(journal):
    writer = writer_in(journal)
    writer.append(record(1))
    writer.close()
    writer.close()
    with pytest.raises(JournalError, match="closed"):
        writer.append(record(2))
    assert "closed" in repr(writer) and writer.writer_id in repr(writer)


def test_an_unencodable_record_writes_nothing(journal):
    writer = writer_in(journal)
    with pytest.raises(JournalError):
        writer.append({"x": float("nan")})
    assert list(journal.iterdir()) == []


def test_a_failed_append_abandons_its_segment(journal, clock, monkeypatch):
    writer = writer_in(journal)
    first = writer.append(record(1))
    real_write_all = _fsops.write_all

    def torn_write(fd: int, data: bytes) -> None:
        monkeypatch.setattr(_fsops, "write_all", real_write_all)
        real_write_all(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_fsops, "write_all", torn_write)
    with pytest.raises(JournalError, match=r"0\.hwj"):
        writer.append(record(2))
    # Invariant: nothing is written after a torn frame; the next frame opens segment 1.
    third = writer.append(record(3))
    writer.close()
    assert third.segment == 1 and third.offset == len(SEGMENT_HEADER)
    reader = reader_of(journal, clock)
    assert (reader.read(first), reader.read(third)) == (record(1), record(3))
    assert [frame.ref for frame in scan_segment(segment_of(journal, first))] == [first]


def test_a_failed_segment_creation_is_skipped_not_reused(journal, clock, monkeypatch):
    writer = writer_in(journal)
    real_create = _fsops.create_append_file

    def failing_create(path: Path, header: bytes, *, durable: bool) -> _fsops.AppendHandle:
        monkeypatch.setattr(_fsops, "create_append_file", real_create)
        Path(path).write_bytes(header[:3])  # the name exists, its header is torn
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(_fsops, "create_append_file", failing_create)
    with pytest.raises(JournalError, match=r"cannot create journal segment"):
        writer.append(record(1))
    ref = writer.append(record(2))
    writer.close()
    assert (ref.segment, ref.offset) == (1, len(SEGMENT_HEADER))
    assert reader_of(journal, clock).read(ref) == record(2)


# --- scan_segment -------------------------------------------------------------------------------


def test_scan_yields_every_frame_with_the_ref_the_writer_returned(journal):
    with writer_in(journal) as writer:
        refs = [writer.append(record(n)) for n in range(6)]
    scanned = list(scan_segment(segment_of(journal, refs[0])))
    assert scanned == [ScannedFrame(ref.offset, ref, record(n), None) for n, ref in enumerate(refs)]


def test_torn_unreferenced_tail_is_ignored_by_reader_and_scan(journal, clock):
    with writer_in(journal) as writer:
        refs = [writer.append(record(n)) for n in range(3)]
    segment = segment_of(journal, refs[0])
    torn, _ = encode_frame(encode_record(record(99)))
    with segment.open("ab") as stream:
        stream.write(torn[: len(torn) - 5])
    reader = reader_of(journal, clock)
    assert [reader.read(ref) for ref in refs] == [record(n) for n in range(3)]
    assert clock.sleeps == []
    assert [frame.ref for frame in scan_segment(segment)] == refs
    with segment.open("ab") as stream:  # even a tail cut inside its length prefix
        stream.truncate(refs[-1].offset + refs[-1].frame_size + 3)
    assert [frame.ref for frame in scan_segment(segment)] == refs


def test_scan_continues_past_a_damaged_frame_whose_trailer_agrees(journal):
    with writer_in(journal) as writer:
        refs = [writer.append(record(n)) for n in range(3)]
    segment = segment_of(journal, refs[0])
    flip_byte(segment, refs[1].offset + 10)  # payload byte of the middle frame
    scanned = list(scan_segment(segment))
    assert [(f.offset, f.problem) for f in scanned] == [
        (refs[0].offset, None),
        (refs[1].offset, "checksum_mismatch"),
        (refs[2].offset, None),
    ]
    assert scanned[1].record is None and scanned[2].record == record(2)


def test_scan_stops_after_a_frame_whose_framing_is_lost(journal):
    with writer_in(journal) as writer:
        refs = [writer.append(record(n)) for n in range(3)]
    segment = segment_of(journal, refs[0])
    flip_byte(segment, refs[1].offset + refs[1].frame_size - 1)  # trailer of the middle frame
    assert [f.problem for f in scan_segment(segment)] == [None, "trailer_mismatch"]


def test_scan_reports_an_impossible_length_prefix_and_stops(journal):
    with writer_in(journal) as writer:
        refs = [writer.append(record(n)) for n in range(2)]
    segment = segment_of(journal, refs[0])
    flip_byte(segment, refs[1].offset)  # top byte of the length prefix
    assert list(scan_segment(segment))[1:] == [ScannedFrame(refs[1].offset, None, None, "length_mismatch")]


def test_scan_of_a_segment_without_a_complete_header(journal):
    segment = journal / str(uuid.uuid4()) / "0.hwj"
    segment.parent.mkdir()
    segment.write_bytes(SEGMENT_HEADER[:5])
    assert list(scan_segment(segment)) == []
    segment.write_bytes(b"HTTK-HWJ-V2\n")
    with pytest.raises(JournalDamageError) as caught:
        list(scan_segment(segment))
    assert caught.value.code == "invalid_header" and caught.value.path == str(segment)


def test_scan_refuses_a_path_that_is_not_a_segment(journal):
    with pytest.raises(JournalError, match="not a journal segment"):
        list(scan_segment(journal / "not-a-writer" / "0.hwj"))
    with pytest.raises(JournalError, match="cannot read"):
        list(scan_segment(journal / str(uuid.uuid4()) / "0.hwj"))


# --- reader: the damage table -------------------------------------------------------------------


@pytest.fixture
def written(journal: Path) -> tuple[Path, list[RecordRef]]:
    with writer_in(journal) as writer:
        refs = [writer.append(record(n, 20)) for n in range(3)]
    return segment_of(journal, refs[0]), refs


def damage(journal: Path, clock: ManualClock, ref: RecordRef | str) -> JournalDamageError:
    with pytest.raises(JournalDamageError) as caught:
        reader_of(journal, clock).read(ref)
    return caught.value


def assert_waited_out(clock: ManualClock) -> None:
    assert sum(clock.sleeps) == pytest.approx(DEADLINE)
    assert len(clock.sleeps) > 1


def test_truncated_tail_is_a_short_read_after_the_deadline(journal, clock, written):
    segment, refs = written
    os.truncate(segment, refs[-1].offset + refs[-1].frame_size - 1)
    error = damage(journal, clock, refs[-1])
    assert (error.code, error.path, error.ref) == ("short_read", str(segment), str(refs[-1]))
    assert_waited_out(clock)


def test_a_segment_shorter_than_its_header_is_a_short_read(journal, clock, written):
    segment, refs = written
    os.truncate(segment, 5)
    assert damage(journal, clock, refs[0]).code == "short_read"
    assert_waited_out(clock)


@pytest.mark.parametrize("missing", ["segment", "writer directory"])
def test_missing_segment_after_the_deadline(journal, clock, written, missing):
    _, refs = written
    ref = refs[0]
    if missing == "segment":
        ref = RecordRef(ref.writer, 7, ref.offset, ref.length, ref.checksum128)
    else:
        ref = RecordRef(str(uuid.uuid4()), 0, ref.offset, ref.length, ref.checksum128)
    error = damage(journal, clock, ref)
    assert error.code == "missing_segment" and error.path == str(segment_of(journal, ref))
    assert_waited_out(clock)


@pytest.mark.parametrize(
    ("where", "code"),
    [
        (lambda ref: ref.offset + 7, "length_mismatch"),  # the stored length prefix itself
        (lambda ref: ref.offset + 8, "checksum_mismatch"),  # first payload byte
        (lambda ref: ref.offset + 8 + ref.length + 3, "checksum_mismatch"),  # stored checksum
        (lambda ref: ref.offset + ref.frame_size - 1, "trailer_mismatch"),
        (lambda ref: 0, "invalid_header"),
        (lambda ref: 11, "invalid_header"),
    ],
    ids=["length-prefix", "payload", "checksum", "trailer", "header-first", "header-last"],
)
def test_lasting_damage_is_reported_at_once(journal, clock, written, where, code):
    segment, refs = written
    flip_byte(segment, where(refs[1]))
    error = damage(journal, clock, refs[1])
    assert (error.code, error.path) == (code, str(segment))
    assert clock.sleeps == []


@pytest.mark.parametrize("delta", [-1, 1, 1000])
@pytest.mark.parametrize("which", [0, 2])  # a middle frame, and the last one (nothing follows it)
def test_wrong_length_in_ref_is_a_length_mismatch_at_once(journal, clock, written, delta, which):
    _, refs = written
    ref = refs[which]
    wrong = RecordRef(ref.writer, ref.segment, ref.offset, ref.length + delta, ref.checksum128)
    assert damage(journal, clock, wrong).code == "length_mismatch"
    assert clock.sleeps == []


def test_wrong_checksum128_in_ref_is_a_reference_mismatch(journal, clock, written):
    _, refs = written
    ref = refs[1]
    wrong = RecordRef(ref.writer, ref.segment, ref.offset, ref.length, "f" * 32)
    assert damage(journal, clock, wrong).code == "reference_mismatch"
    assert clock.sleeps == []


def test_a_wrong_header_shorter_than_twelve_bytes_is_invalid_at_once(journal, clock, written):
    segment, refs = written
    segment.write_bytes(b"HTTX")
    assert damage(journal, clock, refs[0]).code == "invalid_header"
    assert clock.sleeps == []


def test_checksummed_non_json_is_undecodable(journal, clock):
    writer_id = str(uuid.uuid4())
    segment = journal / writer_id / "0.hwj"
    segment.parent.mkdir()
    frame, digest = encode_frame(b"\x00 not json \xff")
    segment.write_bytes(SEGMENT_HEADER + frame)
    ref = RecordRef(writer_id, 0, len(SEGMENT_HEADER), len(frame) - 48, checksum128(digest))
    error = damage(journal, clock, str(ref))
    assert (error.code, error.path) == ("undecodable_frame", str(segment))
    assert clock.sleeps == []


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "",
        "init",
        "w0123456789abcdef0123456789abcdef-s00-o0-l0-h0123456789abcdef0123456789abcdef",
        "W0123456789ABCDEF0123456789ABCDEF-s0-oc-l2-h0123456789abcdef0123456789abcdef",
    ],
)
def test_garbage_ref_string_is_an_invalid_record_ref(journal, clock, text):
    error = damage(journal, clock, text)
    assert (error.code, error.ref) == ("invalid_record_ref", text)
    assert clock.sleeps == []


@pytest.mark.parametrize(
    ("offset", "length"), [(0, 10), (11, 10), (12, 16 * 1024 * 1024 + 1), (12, 2**64 - 1)]
)
def test_refs_no_writer_can_produce_are_refused_at_once(journal, clock, written, offset, length):
    _, refs = written
    ref = RecordRef(refs[0].writer, 0, offset, length, refs[0].checksum128)
    assert damage(journal, clock, ref).code == "invalid_record_ref"
    assert clock.sleeps == []


def test_a_frame_completed_during_backoff_is_read(journal, clock, written):
    segment, refs = written
    complete = segment.read_bytes()
    cut = refs[-1].offset + refs[-1].length // 2
    os.truncate(segment, cut)

    def finish_on_third_sleep(c: ManualClock) -> None:
        if len(c.sleeps) == 3:
            with segment.open("ab") as stream:
                stream.write(complete[cut:])

    clock.on_sleep.append(finish_on_third_sleep)
    assert reader_of(journal, clock).read(refs[-1]) == record(2, 20)
    assert len(clock.sleeps) == 3


def test_a_segment_appearing_during_backoff_is_read(journal, clock, written):
    segment, refs = written
    complete = segment.read_bytes()
    segment.unlink()

    def publish_on_second_sleep(c: ManualClock) -> None:
        if len(c.sleeps) == 2:
            segment.write_bytes(complete)

    clock.on_sleep.append(publish_on_second_sleep)
    assert reader_of(journal, clock).read(refs[0]) == record(0, 20)
    assert len(clock.sleeps) == 2


def test_one_reader_sees_a_segment_go_and_come_back(journal, clock, written):
    """The reader remembers where a segment lives, never whether it is there."""
    segment, refs = written
    reader = reader_of(journal, clock)
    assert [reader.read(ref) for ref in refs] == [record(n, 20) for n in range(3)]
    complete = segment.read_bytes()
    segment.unlink()
    with pytest.raises(JournalDamageError) as caught:
        reader.read(refs[1])
    assert (caught.value.code, caught.value.path) == ("missing_segment", str(segment))
    segment.write_bytes(complete)
    assert reader.read(str(refs[2])) == record(2, 20)


def test_a_length_prefix_visible_during_backoff_still_ends_the_wait_on_damage(journal, clock, written):
    segment, refs = written
    ref = refs[-1]
    os.truncate(segment, ref.offset)
    wrong_prefix = (ref.length + 1).to_bytes(8, "big")

    def append_wrong_prefix(c: ManualClock) -> None:
        if len(c.sleeps) == 1:
            with segment.open("ab") as stream:
                stream.write(wrong_prefix)

    clock.on_sleep.append(append_wrong_prefix)
    assert damage(journal, clock, ref).code == "length_mismatch"
    assert len(clock.sleeps) == 1
