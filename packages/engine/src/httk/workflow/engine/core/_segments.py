"""Journal segments: the byte format of segments and frames, and reading a frame by its reference.

``spec/01``, "Packed transition journal"; D12. A segment is the 12-byte header ``HTTK-HWJ-V1\\n``
followed by frames, each laid out as::

    8-byte big-endian payload length | payload (compact UTF-8 JSON object)
    | 32-byte SHA-256 over the length bytes and the payload | the same 8-byte length again

What this module guarantees: :func:`decode_frame` accepts a buffer only when every one of those parts
agrees with itself and with the ``hwref-v1`` reference that named it, and otherwise raises
:class:`JournalDamageError` with the spec's problem code, checked in a fixed order so that the same
damage always yields the same code. It never raises anything else on bad bytes and never returns a
record other than the one the reference was computed from. :meth:`JournalReader.read` returns a record
only through that check, and never writes anything.

Why this way: the length prefix tells a reader how much to read before it can check anything; the
checksum covers the length too, so a damaged length cannot masquerade as a shorter valid frame; the
trailer repeats the length so that a scan walking a segment forwards can tell whether the framing
around a damaged payload is still trustworthy.

Why the reader waits, and for what: on a network filesystem a marker rename can become visible to this
client before the segment extension it references does. So an absent segment, a file shorter than its
header, or a frame not yet fully present is *transient*: the reader closes the segment, sleeps on the
:func:`backoff_schedule` of the workspace's visibility deadline, reopens and tries again, and only once
the deadline has passed reports missing_segment or short_read. Damage visible on bytes that are present
— wrong header bytes, a length prefix that disagrees with the reference, a wrong checksum, a wrong
trailer, a payload that is not a JSON object, an unparseable reference — cannot be cured by waiting
(segments are append-only) and is reported at once.

Cost: one SHA-256 pass over the payload to encode and one to decode, plus JSON (de)serialization; a
read costs per attempt one ``open``, two ``pread`` calls and one ``close``, and a healthy read is one
attempt. A damaged-by-absence read costs the full visibility deadline by design.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.protocol import (
    SEGMENT_BITS,
    InvalidNameError,
    JournalDamageError,
    JournalError,
    RecordRef,
    decode_base36,
    encode_base36,
)

from . import _fsops
from ._clock import SYSTEM_CLOCK, Clock, backoff_schedule

SEGMENT_HEADER = b"HTTK-HWJ-V1\n"
"""The 12 bytes every core journal segment begins with."""

SEGMENT_SUFFIX = ".hwj"
LENGTH_BYTES = 8
CHECKSUM_BYTES = 32
TRAILER_BYTES = LENGTH_BYTES

MAX_FRAME_PAYLOAD = 16 * 1024 * 1024
"""The largest payload this implementation writes (and hence the largest a valid reference names)."""

KEPT_SEGMENTS = 16
"""How many segments a ``keep_open`` reader keeps open at once (the latest read)."""

CHECKSUM128_BYTES = 16  # the prefix of the SHA-256 digest a reference carries

# One encoder for every frame: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_record(record: Mapping[str, Any]) -> bytes:
    """Serialize one journal record as compact UTF-8 JSON (no BOM, no ASCII escaping).

    Refuses with :class:`JournalError` a record JSON cannot represent exactly: NaN or an infinity,
    a value of a type JSON lacks, a string that is not valid Unicode, or a payload over
    :data:`MAX_FRAME_PAYLOAD` bytes.

    Examples
    --------
    >>> encode_record({"kind": "ready", "priority": 500, "note": "å"})
    b'{"kind":"ready","priority":500,"note":"\\xc3\\xa5"}'
    """
    try:
        document = record if isinstance(record, dict) else dict(record)
        payload = _ENCODER.encode(document).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise JournalError(f"journal record cannot be encoded as JSON: {exc}") from exc
    _check_payload_size(len(payload))
    return payload


def _check_payload_size(size: int) -> None:
    if size > MAX_FRAME_PAYLOAD:
        raise JournalError(f"journal record of {size} bytes exceeds the {MAX_FRAME_PAYLOAD}-byte frame limit")


def encode_frame(payload: bytes) -> tuple[bytes, bytes]:
    """Frame ``payload``; return the frame bytes and the full 32-byte SHA-256 digest they carry.

    Examples
    --------
    >>> frame, digest = encode_frame(b"{}")
    >>> len(frame), frame[:8] == frame[-8:], frame[10:42] == digest
    (50, True, True)
    """
    _check_payload_size(len(payload))
    length = len(payload).to_bytes(LENGTH_BYTES, "big")
    digest = hashlib.sha256(length + payload).digest()
    return length + payload + digest + length, digest


def checksum128(digest: bytes) -> str:
    """The ``-h`` member of a reference: the first 128 bits of a frame's digest in lowercase hex."""
    return digest[:CHECKSUM128_BYTES].hex()


def segment_name(number: int) -> str:
    """The file name of segment ``number``: lowercase base 36 without leading zeroes, then ``.hwj``.

    Examples
    --------
    >>> segment_name(0), segment_name(36)
    ('0.hwj', '10.hwj')
    """
    if not 0 <= number < 1 << SEGMENT_BITS:
        raise InvalidNameError("journal segment number", number, "must be an unsigned 32-bit number")
    return encode_base36(number) + SEGMENT_SUFFIX


def parse_segment_name(name: str) -> int:
    """The segment number a canonical segment file name carries; anything else is InvalidNameError.

    Examples
    --------
    >>> parse_segment_name("10.hwj")
    36
    """
    if not name.endswith(SEGMENT_SUFFIX):
        raise InvalidNameError("journal segment name", name, f"must end with {SEGMENT_SUFFIX}")
    return decode_base36(name[: -len(SEGMENT_SUFFIX)], bits=SEGMENT_BITS, what="journal segment name")


def segment_path(journal_dir: Path, writer: str, number: int) -> Path:
    """Where segment ``number`` of ``writer`` (hyphenated UUID, D12) lives below ``journal_dir``."""
    return journal_dir / writer / segment_name(number)


def decode_frame(buffer: bytes, ref: RecordRef, *, path: Path | str | None = None) -> dict[str, Any]:
    """Check a complete frame against the reference that named it and return its record.

    ``buffer`` holds the ``ref.frame_size`` bytes found at ``ref.offset``. The checks run in this
    order, each raising :class:`JournalDamageError` with its code: the length prefix against
    ``ref.length`` (length_mismatch), the stored checksum against the bytes (checksum_mismatch), the
    digest prefix against ``ref.checksum128`` (reference_mismatch), the trailer against the prefix
    (trailer_mismatch), and the payload as a UTF-8 JSON object (undecodable_frame). A buffer shorter
    than the frame is a short_read.

    Examples
    --------
    >>> payload = encode_record({"kind": "ready"})
    >>> frame, digest = encode_frame(payload)
    >>> ref = RecordRef("01234567-89ab-cdef-0123-456789abcdef", 0, 12, len(payload), checksum128(digest))
    >>> decode_frame(frame, ref)
    {'kind': 'ready'}
    """
    # The reference is formatted only to name it in an error: a healthy read never needs its text.
    end_payload = LENGTH_BYTES + ref.length
    if len(buffer) < ref.frame_size:
        raise JournalDamageError("short_read", str(ref), f"{len(buffer)} of {ref.frame_size} bytes", path)
    prefix = buffer[:LENGTH_BYTES]
    check_length_prefix(prefix, ref, path=path)
    digest = hashlib.sha256(buffer[:end_payload]).digest()
    if digest != buffer[end_payload : end_payload + CHECKSUM_BYTES]:
        raise JournalDamageError(
            "checksum_mismatch", str(ref), "stored SHA-256 does not match the bytes", path
        )
    if checksum128(digest) != ref.checksum128:
        raise JournalDamageError(
            "reference_mismatch", str(ref), "frame checksum differs from the reference", path
        )
    if buffer[end_payload + CHECKSUM_BYTES : ref.frame_size] != prefix:
        raise JournalDamageError("trailer_mismatch", str(ref), "trailer differs from the length prefix", path)
    return decode_payload(buffer[LENGTH_BYTES:end_payload], ref, path=path)


def check_length_prefix(prefix: bytes, ref: RecordRef, *, path: Path | str | None = None) -> None:
    """Raise length_mismatch unless the 8-byte ``prefix`` states the payload length ``ref`` names.

    A reader can apply this as soon as the prefix is present: a prefix naming another length belongs
    to a different frame however much of the rest arrives later.
    """
    stated = int.from_bytes(prefix, "big")
    if stated != ref.length:
        raise JournalDamageError(
            "length_mismatch", str(ref), f"frame states {stated} payload bytes, reference {ref.length}", path
        )


def decode_payload(payload: bytes, ref: RecordRef | str, *, path: Path | str | None = None) -> dict[str, Any]:
    """Decode a checksummed payload as the one JSON object a writer produced, or undecodable_frame.

    Stricter than :func:`json.loads` on purpose: a byte-order mark, NaN/Infinity literals and
    duplicate member names are refused, since :func:`encode_record` never writes them. ``ref`` names
    the frame in an error.
    """
    try:
        value = json.loads(
            payload.decode("utf-8"), parse_constant=_refuse_constant, object_pairs_hook=_unique_members
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise JournalDamageError("undecodable_frame", str(ref), f"payload is not JSON: {exc}", path) from exc
    if not isinstance(value, dict):
        raise JournalDamageError("undecodable_frame", str(ref), "payload is not a JSON object", path)
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate member name")
    return result


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

    def __init__(
        self,
        journal_dir: Path,
        *,
        visibility_deadline: float,
        clock: Clock = SYSTEM_CLOCK,
        keep_open: bool = False,
    ) -> None:
        self._journal_dir = Path(journal_dir)
        self._visibility_deadline = visibility_deadline
        self._clock = clock
        # Two path joins per read were a tenth of fsck's time. Bounded by the segments this reader
        # touched, which a whole-workspace walk keeps to the segments the journal holds.
        self._segments: dict[tuple[str, int], Path] = {}
        # With keep_open, the segments read lately stay open (their headers checked once): an open, a
        # stat, a header read and a close per frame were a sixth of fsck's time. Only for a bounded walk
        # that closes the reader: a long-lived holder of a segment another process collects keeps its
        # space allocated, and on NFS leaves a silly-renamed .nfs file in the journal until it closes.
        self._keep_open = keep_open
        self._open: OrderedDict[Path, int] = OrderedDict()

    def close(self) -> None:
        """Close the segments this reader keeps open (none unless made with ``keep_open``)."""
        while self._open:
            os.close(self._open.popitem()[1])

    def read(self, ref: RecordRef | str) -> dict[str, Any]:
        """Return the record ``ref`` names, retrying transient absence up to the visibility deadline."""
        ref = _parse_ref(ref)
        path = self._segment(ref.writer, ref.segment)
        _check_plausible(ref, path)
        kept = self._open.get(path) if self._open else None
        if kept is not None:
            self._open.move_to_end(path)
            found = self._read_kept(ref, path, kept)
            if not isinstance(found, _NotYetVisible):
                return found
            # spec/01: what looks absent or short is read again through a fresh open, never waited out
            # on a descriptor that may predate the bytes.
            del self._open[path]
            os.close(kept)
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
            fd = _fsops.open_read(path)
        except FileNotFoundError:
            return _NotYetVisible("missing_segment", "segment does not exist")
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link is not a segment, whatever it points at
                raise JournalDamageError("missing_segment", str(ref), "is a symbolic link", path) from exc
            raise JournalError(f"{path}: cannot open journal segment: {exc}") from exc
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):  # a FIFO opened without blocking, a directory, a device
                kind = "a directory" if stat.S_ISDIR(mode) else "a special file"
                raise JournalDamageError("missing_segment", str(ref), f"is {kind}, not a segment file", path)
            header = _pread_fully(fd, len(SEGMENT_HEADER), 0)
            buffer = _pread_fully(fd, ref.frame_size, ref.offset)
            outcome = _judge(ref, path, header, buffer)
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"{path}: cannot read journal segment: {exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        if self._keep_open and not isinstance(outcome, _NotYetVisible):
            self._keep(path, fd)
        else:
            os.close(fd)
        return outcome

    def _keep(self, path: Path, fd: int) -> None:
        self._open[path] = fd
        if len(self._open) > KEPT_SEGMENTS:
            os.close(self._open.popitem(last=False)[1])

    def _read_kept(self, ref: RecordRef, path: Path, fd: int) -> dict[str, Any] | _NotYetVisible:
        """The frame through a segment kept open, whose header was checked when it was opened."""
        try:
            buffer = _pread_fully(fd, ref.frame_size, ref.offset)
        except OSError as exc:
            raise JournalError(f"{path}: cannot read journal segment: {exc}") from exc
        return _judge_frame(ref, path, buffer)


def _judge(ref: RecordRef, path: Path, header: bytes, buffer: bytes) -> dict[str, Any] | _NotYetVisible:
    """Classify what one attempt read: present-but-wrong bytes are lasting, missing bytes transient."""
    if header != SEGMENT_HEADER[: len(header)]:
        raise JournalDamageError("invalid_header", str(ref), "segment does not begin with HTTK-HWJ-V1", path)
    if len(header) < len(SEGMENT_HEADER):
        return _NotYetVisible("short_read", f"segment holds {len(header)} header bytes")
    return _judge_frame(ref, path, buffer)


def _judge_frame(ref: RecordRef, path: Path, buffer: bytes) -> dict[str, Any] | _NotYetVisible:
    """Classify the frame bytes one attempt read, the segment's header being good."""
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
