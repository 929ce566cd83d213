"""Hostile journal bytes, hostile frames and hostile marker names, generated.

A segment is checksummed, so the guarantee is strong: reading a reference returns the very record the
reference was computed from, or a :class:`JournalDamageError` with one of the specification's problem
codes — whatever bytes sit in the segment, and whatever text the reference is. The forward scan of
journal repair yields frames or problem codes and raises only ``invalid_header`` or its I/O error.

A frame that verifies can still be hostile (a writer that is not ours, a bug): a marker naming one must
leave the read-side tools — ``workspace fsck``, the manager's census, ``job why`` — with a report, never
a traceback.

A marker name is the state itself: the fast check every count uses must agree with the full parser on
every name, the parser must round-trip what it accepts, and a state directory holding any name must be
walked without an error.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._journal import JournalWriter, scan_segment
from httk.workflow.engine.core._scan import Anomaly, walk_markers
from httk.workflow.engine.core._segments import JournalReader
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, attach, init, is_marker_name
from httk.workflow.engine.maintenance._fsck_check import check
from httk.workflow.engine.manager._state import ManagerConfig, take_census
from httk.workflow.engine.ops._why import diagnose
from httk.workflow.protocol import InvalidNameError, JournalDamageError, MarkerName
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import minimal_job
from tests.hostile.fuzzkit import document, unchanged
from tests.strategies import mutated

RECORDS = [{"kind": "ready", "n": n, "text": "å" * n} for n in range(4)]


def _segment(base: Path) -> tuple[Path, list[str]]:
    base.mkdir()
    with JournalWriter(base, segment_bytes=1 << 20, durable=False) as writer:
        refs = [str(writer.append(record)) for record in RECORDS]
    return writer.directory / "0.hwj", refs


@st.composite
def _damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """A segment's bytes with a few bytes changed, a cut, a junk tail, or replaced wholesale."""
    how = draw(st.sampled_from(["flip", "cut", "tail", "junk", "splice"]))
    if how == "junk":
        return draw(st.binary(max_size=200))
    if how == "cut":
        return data[: draw(st.integers(0, len(data)))]
    if how == "tail":
        return data + draw(st.binary(min_size=1, max_size=64))
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(out) - 1))
        if how == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        else:
            out[at : at + 8] = draw(st.binary(min_size=8, max_size=8))
    return bytes(out)


def _hostile_ref(refs: list[str]) -> st.SearchStrategy[str]:
    real = st.sampled_from(refs)
    edited = st.tuples(real, st.integers(0, 106), st.sampled_from(["0", "z", "-", "", "ff", "\n"])).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + 1 :]
    )
    return st.one_of(real, edited, st.text(max_size=40))


def test_a_hostile_segment_yields_the_referenced_record_or_a_problem_code(tmp_path: Path) -> None:
    path, refs = _segment(tmp_path / "journal")
    original = path.read_bytes()
    record_of = dict(zip(refs, RECORDS, strict=True))

    @given(_damaged(original), _hostile_ref(refs))
    def run(data: bytes, ref: str) -> None:
        path.write_bytes(data)
        reader = JournalReader(tmp_path / "journal", visibility_deadline=1.0, clock=ManualClock())
        with unchanged(tmp_path):
            try:
                record = reader.read(ref)
            except JournalDamageError as exc:
                assert exc.code in JournalDamageError.CODES
                return
        assert record == record_of[ref], (ref, record)  # a checksummed reference names one record

    run()


def test_the_forward_scan_of_a_hostile_segment_reports_problems(tmp_path: Path) -> None:
    path, _refs = _segment(tmp_path / "journal")
    original = path.read_bytes()

    @given(_damaged(original))
    def run(data: bytes) -> None:
        path.write_bytes(data)
        with unchanged(tmp_path):
            try:
                found = list(scan_segment(path))
            except JournalDamageError as exc:
                assert exc.code == "invalid_header"
                return
        for frame in found:
            assert (frame.record is None) != (frame.problem is None), frame
            assert frame.problem is None or frame.problem in JournalDamageError.CODES
            if frame.record is not None:
                assert frame.record in RECORDS  # what verifies is what a writer wrote

    run()


FRAMES = [document(name) for name in ("state-frame.running.json", "state-frame.waiting.json")]


def test_a_marker_naming_a_hostile_frame_is_reported_not_a_traceback(tmp_path: Path) -> None:
    """The frame verifies, its members are anything: fsck, the census and job why still answer."""
    workspace = init(tmp_path / "ws", durable=False)
    job = minimal_job()
    key = f"{job['tag']}--{job['id']}"
    frames = st.sampled_from(FRAMES).flatmap(mutated)

    @given(frames, st.sampled_from([Kind.READY, Kind.RUNNING, Kind.WAITING, Kind.COMMITTING]))
    def run(frame: dict[str, Any], kind: Kind) -> None:
        record = {**frame, "job_id": job["id"], "job_key": key, "workspace_id": workspace.workspace_id}
        with JournalWriter(workspace.journal_dir, segment_bytes=1 << 20, durable=False) as writer:
            ref = writer.append(record)
        directory = workspace.state_dir(kind.value) / "p"
        directory.mkdir(parents=True, exist_ok=True)
        marker = directory / str(MarkerName.parse(f"{key}.p500.g1.{ref}"))
        marker.touch()
        try:
            reader = attach(workspace.root, writable=False)
            with unchanged(workspace.root):
                report = check(reader)
                take_census(reader, ManagerConfig())
                location = MarkerLocation(kind, "p", MarkerName.parse(marker.name))
                diagnose(reader, location)
            assert report.problems, "a job without a payload is a problem fsck reports"
        finally:
            marker.unlink()
            shutil.rmtree(workspace.journal_dir / writer.writer_id)

    run()


VALID_NAMES = [
    f"{uuid.UUID(int=7)}.p500.g0.init",
    f"si--{uuid.UUID(int=8)}.p000.g1z.w{'a' * 32}-s0-oc-l10-h{'b' * 32}",
]


@st.composite
def _hostile_name(draw: st.DrawFn) -> str:
    """A marker name edited a character at a time, arbitrary text, or a name decoded from any bytes."""
    how = draw(st.sampled_from(["edit", "text", "bytes"]))
    if how == "text":
        return draw(
            st.text(min_size=1, max_size=220).filter(lambda text: "/" not in text and "\0" not in text)
        )
    if how == "bytes":
        return os.fsdecode(
            draw(st.binary(min_size=1, max_size=64)).replace(b"/", b"").replace(b"\0", b"") or b"x"
        )
    name = draw(st.sampled_from(VALID_NAMES))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(name)))
        piece = draw(st.sampled_from(["", ".", "-", "0", "Z", "\n", "é", "\udcff", "--", "g", "p9999"]))
        name = name[:at] + piece + name[at + draw(st.integers(0, 2)) :]
    return name


def test_the_fast_marker_check_agrees_with_the_parser_on_every_name() -> None:
    @given(_hostile_name())
    def run(name: str) -> None:
        try:
            parsed = MarkerName.parse(name)
        except InvalidNameError:
            assert not is_marker_name(name), name
            return
        assert is_marker_name(name), name
        assert str(parsed) == name  # one spelling per marker

    run()


def test_a_state_directory_holding_any_name_is_walked_without_an_error(tmp_path: Path) -> None:
    workspace = init(tmp_path / "ws", durable=False)
    placement = workspace.state_dir("ready") / "p"
    placement.mkdir(parents=True)

    @given(st.lists(_hostile_name(), min_size=1, max_size=5, unique=True))
    def run(names: list[str]) -> None:
        created = []
        try:
            for name in names:
                path = os.path.join(os.fsencode(placement), os.fsencode(name))
                try:
                    with open(path, "xb"):
                        created.append(path)
                except OSError:
                    continue  # a name this filesystem cannot hold (too long, "." or "..") is not planted
            with unchanged(workspace.root):
                found = list(walk_markers(attach(workspace.root, writable=False), Kind.READY))
            assert len(found) == len(created)
            for item in found:
                name = item.path.name if isinstance(item, Anomaly) else str(item.name)
                assert isinstance(item, Anomaly) != is_marker_name(name), item
        finally:
            for path in created:
                os.unlink(path)

    run()
