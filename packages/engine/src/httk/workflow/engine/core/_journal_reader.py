"""Resolve an ``hwref-v1`` reference to its journal record, waiting out network-filesystem lag.

What it guarantees: :meth:`JournalReader.read` returns the record only when the frame verifies against
the reference (see :func:`decode_frame`), and otherwise raises :class:`JournalDamageError` with the
spec's problem code. It never writes anything.

Why it waits, and for what: on a network filesystem a marker rename can become visible to this client
before the segment extension it references does. So an absent segment, a file shorter than its header,
or a frame not yet fully present is *transient*: the reader closes the segment, sleeps on the
:func:`backoff_schedule` of the workspace's visibility deadline, reopens and tries again, and only once
the deadline has passed reports missing_segment or short_read. Damage visible on bytes that are present
— wrong header bytes, a length prefix that disagrees with the reference, a wrong checksum, a wrong
trailer, a payload that is not a JSON object, an unparseable reference — cannot be cured by waiting
(segments are append-only) and is reported at once.

Cost: per attempt one ``open``, two ``pread`` calls and one ``close``; a healthy read is one attempt.
A damaged-by-absence read costs the full visibility deadline by design.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.protocol import InvalidNameError, JournalDamageError, JournalError, RecordRef

from ._clock import SYSTEM_CLOCK, Clock, backoff_schedule
from ._segments import (
    LENGTH_BYTES,
    MAX_FRAME_PAYLOAD,
    SEGMENT_HEADER,
    check_length_prefix,
    decode_frame,
    segment_path,
)


@dataclass(frozen=True, slots=True)
class _NotYetVisible:
    """A transient failure: what would be reported if the deadline passed now."""

    code: str  # missing_segment or short_read
    detail: str


class JournalReader:
    """Reads journal records of one workspace by reference.

    Examples
    --------
    >>> import tempfile
    >>> from httk.workflow.engine.core._journal import JournalWriter
    >>> root = Path(tempfile.mkdtemp())
    >>> with JournalWriter(root, segment_bytes=1 << 20, durable=False) as writer:
    ...     ref = writer.append({"kind": "ready"})
    >>> JournalReader(root, visibility_deadline=5.0).read(str(ref))
    {'kind': 'ready'}
    """

    def __init__(self, journal_dir: Path, *, visibility_deadline: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self._journal_dir = Path(journal_dir)
        self._visibility_deadline = visibility_deadline
        self._clock = clock
        # Two path joins per read were a tenth of fsck's time. Bounded by the segments this reader
        # touched, which a whole-workspace walk keeps to the segments the journal holds.
        self._segments: dict[tuple[str, int], Path] = {}

    def read(self, ref: RecordRef | str) -> dict[str, Any]:
        """Return the record ``ref`` names, retrying transient absence up to the visibility deadline."""
        ref = _parse_ref(ref)
        path = self._segment(ref.writer, ref.segment)
        _check_plausible(ref, path)
        for delay in backoff_schedule(self._visibility_deadline):
            outcome = self._attempt(ref, path)
            if not isinstance(outcome, _NotYetVisible):
                return outcome
            self._clock.sleep(delay)
        outcome = self._attempt(ref, path)
        if isinstance(outcome, _NotYetVisible):
            raise JournalDamageError(
                outcome.code, str(ref), f"{outcome.detail} after {self._visibility_deadline:g} s", path
            )
        return outcome

    def _segment(self, writer: str, number: int) -> Path:
        key = (writer, number)
        path = self._segments.get(key)
        if path is None:
            path = self._segments[key] = segment_path(self._journal_dir, writer, number)
        return path

    def _attempt(self, ref: RecordRef, path: Path) -> dict[str, Any] | _NotYetVisible:
        """One fresh open of the segment: the record, a transient failure, or a raised lasting one."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return _NotYetVisible("missing_segment", "segment does not exist")
        except OSError as exc:
            raise JournalError(f"{path}: cannot open journal segment: {exc}") from exc
        try:
            header = _pread_fully(fd, len(SEGMENT_HEADER), 0)
            buffer = _pread_fully(fd, ref.frame_size, ref.offset)
        except OSError as exc:
            raise JournalError(f"{path}: cannot read journal segment: {exc}") from exc
        finally:
            os.close(fd)
        return _judge(ref, path, header, buffer)


def _judge(ref: RecordRef, path: Path, header: bytes, buffer: bytes) -> dict[str, Any] | _NotYetVisible:
    """Classify what one attempt read: present-but-wrong bytes are lasting, missing bytes transient."""
    if header != SEGMENT_HEADER[: len(header)]:
        raise JournalDamageError("invalid_header", str(ref), "segment does not begin with HTTK-HWJ-V1", path)
    if len(header) < len(SEGMENT_HEADER):
        return _NotYetVisible("short_read", f"segment holds {len(header)} header bytes")
    # A length prefix that is present and names another length is a different frame, whatever
    # follows it; waiting for the rest would only delay the same answer.
    if len(buffer) >= LENGTH_BYTES:
        check_length_prefix(buffer[:LENGTH_BYTES], ref, path=path)
    if len(buffer) < ref.frame_size:
        return _NotYetVisible("short_read", f"{len(buffer)} of {ref.frame_size} frame bytes present")
    return decode_frame(buffer, ref, path=path)


def _parse_ref(ref: RecordRef | str) -> RecordRef:
    if isinstance(ref, RecordRef):
        return ref
    try:
        return RecordRef.parse(ref)
    except InvalidNameError as exc:
        raise JournalDamageError("invalid_record_ref", str(ref), exc.rule) from exc


def _check_plausible(ref: RecordRef, path: Path) -> None:
    """Refuse a reference no writer can have produced, before reading (or waiting) for it."""
    if ref.offset < len(SEGMENT_HEADER):
        raise JournalDamageError(
            "invalid_record_ref", str(ref), "offset lies inside the segment header", path
        )
    if ref.length > MAX_FRAME_PAYLOAD:
        raise JournalDamageError(
            "invalid_record_ref", str(ref), f"length exceeds the {MAX_FRAME_PAYLOAD}-byte frame limit", path
        )


def _pread_fully(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes at ``offset``; fewer only at end of file (pread may return short counts)."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)
