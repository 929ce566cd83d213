"""One process incarnation's journal writer, and a forward scan of a segment for repair.

What :class:`JournalWriter` guarantees:

* it writes only below its own fresh directory ``journal/<writer-uuid>/`` (D12), which it creates
  exclusively on its first append, so two incarnations — a zombie and its replacement — can never
  share a file; a writer that finds its directory already present refuses to write;
* every segment it writes to it created itself with exclusive creation, and it never reopens one;
* :meth:`JournalWriter.append` returns only after the whole frame is written (and, when durable,
  synchronized), because the caller renames a marker onto the returned reference right after;
* the frames of a segment follow the header back to back, so :func:`scan_segment` can walk them.

Why lazily: opening a writer must not create anything, so that a process which ends up writing
nothing (an empty garbage collection, a read-only command) leaves no writer directory behind.

Cost: per append one ``write`` (plus one ``fsync`` when durable) on an already open descriptor;
per rotation one exclusive create. Each instance holds one file descriptor.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from httk.workflow.protocol import (
    SEGMENT_BITS,
    InvalidNameError,
    JournalDamageError,
    JournalError,
    RecordRef,
    validate_uuid,
)

from . import _fsops
from ._segments import (
    CHECKSUM_BYTES,
    LENGTH_BYTES,
    MAX_FRAME_PAYLOAD,
    SEGMENT_HEADER,
    checksum128,
    decode_frame,
    encode_frame,
    encode_record,
    parse_segment_name,
    segment_path,
)

MIN_SEGMENT_BYTES = 4096
"""The smallest rotation size policy allows (``journal_segment_bytes`` is at least 4096)."""

RECENT_FRAMES = 4096
"""How many of its latest payloads a writer keeps for :meth:`JournalWriter.recent` (about 2 MB)."""

MIN_FRAME_PAYLOAD = 2
"""The shortest payload a writer produces: a record is a JSON object, at least ``{}``."""


@dataclass(frozen=True, slots=True)
class JournalStatistics:
    """What a writer has done so far: its identity, current segment and how full it is."""

    writer_id: str
    segment: int  # the segment the next frame goes to (0 before the first append)
    segment_size: int  # bytes in that segment, header included (0 while it does not exist)
    frames_written: int  # by this instance, across all its segments


class JournalWriter:
    """Appends frames to this incarnation's own segments and returns their ``hwref-v1`` references.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> with JournalWriter(root, segment_bytes=1 << 20, durable=False) as writer:
    ...     ref = writer.append({"kind": "ready"})
    >>> (ref.segment, ref.offset)
    (0, 12)
    """

    def __init__(
        self, journal_dir: Path, *, segment_bytes: int, durable: bool, writer_id: str | None = None
    ) -> None:
        if segment_bytes < MIN_SEGMENT_BYTES:
            raise JournalError(f"{journal_dir}: segment_bytes {segment_bytes} is below {MIN_SEGMENT_BYTES}")
        self._journal_dir = Path(journal_dir)
        self._writer_id = str(uuid.uuid4()) if writer_id is None else validate_uuid(writer_id, "writer id")
        self._segment_bytes = segment_bytes
        self._durable = durable
        self._lock = threading.Lock()  # one process may append from several threads
        self._started = False  # whether the writer directory has been created
        self._made_directory = False  # created by a try that then failed (its parent not synchronized)
        # Invariant: a segment holds only whole frames written back to back after its header. Once an
        # append (or a segment creation) fails part-way the segment may end in a torn frame, so its
        # handle is dropped: with ``_started`` and no handle, the next append rotates to a fresh
        # segment instead of writing after bytes nobody can frame.
        self._handle: _fsops.AppendHandle | None = None
        self._segment = 0
        self._frames_in_segment = 0
        self._frames_written = 0
        self._closed = False
        self._unsynced = False  # frames appended with sync=False since the last fsync of the segment
        # The latest payloads by reference. A frame never changes once written, so its payload is what a
        # read of the reference returns; a manager reads back, when it claims a job, the ready frame it
        # appended when it registered it.
        self._recent: OrderedDict[RecordRef, bytes] = OrderedDict()

    @property
    def writer_id(self) -> str:
        """The hyphenated UUID naming this writer's directory and the ``w`` member of its references."""
        return self._writer_id

    @property
    def directory(self) -> Path:
        """The writer directory (it exists only after the first append)."""
        return self._journal_dir / self._writer_id

    def append(self, record: Mapping[str, Any], *, sync: bool = True) -> RecordRef:
        """Write ``record`` as one frame and return its reference once it is complete (and synced).

        With ``sync=False`` a durable writer leaves the frame unsynchronized until :meth:`sync`, so that
        the frames of several transitions share one ``fsync`` (group commit); nobody may rename a marker
        onto the reference before that.

        Raises :class:`JournalError` for a record that cannot be encoded, a closed writer, an
        existing writer directory, or a failed write; the error names the path.
        """
        payload = encode_record(record)
        frame, digest = encode_frame(payload)
        with self._lock:
            if self._closed:
                raise JournalError(f"{self.directory}: journal writer is closed")
            handle = self._handle_for(len(frame))
            offset = self._write(handle, frame, sync=sync)
            self._frames_in_segment += 1
            self._frames_written += 1
            segment = self._segment
            # The writer id was validated once, and the other members are this writer's own numbers.
            ref = RecordRef.unchecked(self._writer_id, segment, offset, len(payload), checksum128(digest))
            self._recent[ref] = payload
            if len(self._recent) > RECENT_FRAMES:
                self._recent.popitem(last=False)
        return ref

    def recent(self, ref: RecordRef) -> dict[str, Any] | None:
        """The record of ``ref`` when this writer appended it lately (no read), else ``None``."""
        with self._lock:
            payload = self._recent.get(ref)
        if payload is None:
            return None
        document: dict[str, Any] = json.loads(payload)  # our own encoding: no strict checks needed
        return document

    def _handle_for(self, frame_size: int) -> _fsops.AppendHandle:
        """The segment the next frame goes to, creating or rotating as needed."""
        if not self._started:
            self._create_directory()
            self._started = True
            self._handle = self._create_segment(self._segment)
        elif self._handle is None or self._must_rotate(self._handle, frame_size):
            self._handle = self._rotate()
        return self._handle

    def _must_rotate(self, handle: _fsops.AppendHandle, frame_size: int) -> bool:
        # A frame larger than segment_bytes still has to go somewhere: it goes alone into a fresh
        # segment, which is why an empty segment never rotates.
        return self._frames_in_segment > 0 and handle.size + frame_size > self._segment_bytes

    def _rotate(self) -> _fsops.AppendHandle:
        if self._handle is not None:
            self._sync_segment()  # frames of a batch left in the old segment are synchronized first
            self._handle.close()
            self._handle = None
        if self._segment + 1 >= 1 << SEGMENT_BITS:
            raise JournalError(f"{self.directory}: writer has used every 32-bit segment number")
        self._segment += 1
        self._frames_in_segment = 0
        return self._create_segment(self._segment)

    def _create_directory(self) -> None:
        try:
            _fsops.make_dir(self.directory, durable=self._durable)
        except FileExistsError as exc:
            if self._made_directory:  # an earlier try made it and then failed to synchronize it
                if self._durable:
                    _fsops.fsync_dir(self._journal_dir)
                return
            raise JournalError(
                f"{self.directory}: writer directory already exists; it is never reused"
            ) from exc
        except OSError as exc:
            # The name is a fresh UUID: if it is there now, this call made it before failing (an fsync).
            self._made_directory = os.path.isdir(self.directory)
            raise JournalError(f"{self.directory}: cannot create writer directory: {exc}") from exc

    def _create_segment(self, number: int) -> _fsops.AppendHandle:
        path = segment_path(self._journal_dir, self._writer_id, number)
        try:
            return _fsops.create_append_file(path, SEGMENT_HEADER, durable=self._durable)
        except OSError as exc:
            # The name may exist with a partial header; the next append rotates past it.
            raise JournalError(f"{path}: cannot create journal segment: {exc}") from exc

    def _write(self, handle: _fsops.AppendHandle, frame: bytes, *, sync: bool) -> int:
        try:
            offset = handle.append(frame, durable=self._durable and sync)
        except OSError as exc:
            handle.close()
            self._handle = None
            raise JournalError(f"{handle.path}: cannot append journal frame: {exc}") from exc
        self._unsynced = self._durable and not sync
        return offset

    def sync(self) -> None:
        """Synchronize every frame appended with ``sync=False`` (nothing when there is none)."""
        with self._lock:
            self._sync_segment()

    def _sync_segment(self) -> None:
        if not self._unsynced or self._handle is None:
            return
        try:
            self._handle.sync()
        except OSError as exc:
            path = self._handle.path
            self._handle.close()
            self._handle = None
            raise JournalError(f"{path}: cannot synchronize journal frames: {exc}") from exc
        self._unsynced = False

    def statistics(self) -> JournalStatistics:
        """A snapshot of the writer's identity, current segment and counts."""
        with self._lock:
            size = 0 if self._handle is None else self._handle.size
            return JournalStatistics(self._writer_id, self._segment, size, self._frames_written)

    def close(self) -> None:
        """Close the open segment; later appends raise :class:`JournalError`. Idempotent."""
        with self._lock:
            self._closed = True
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<JournalWriter {stats.writer_id} segment={stats.segment} size={stats.segment_size} "
            f"frames={stats.frames_written}{' closed' if self._closed else ''}>"
        )


@dataclass(frozen=True, slots=True)
class ScannedFrame:
    """One frame found by :func:`scan_segment`.

    Exactly one of ``record`` and ``problem`` is set. ``ref`` is the reference a writer would have
    returned for the frame; it is ``None`` only when the frame is too damaged to be named at all.
    """

    offset: int
    ref: RecordRef | None
    record: dict[str, Any] | None
    problem: str | None


def scan_segment(path: Path) -> Iterator[ScannedFrame]:
    """Walk the segment at ``path`` (``<journal>/<writer-uuid>/<n>.hwj``) from its header, frame by frame.

    Yields every complete frame with its reference and record, or with its problem code when it does
    not verify. Stops quietly at an incomplete final frame: a torn tail was never referenced (a
    writer synchronizes a frame before any marker names it). Scanning continues past a damaged frame
    only while its trailer still agrees with its length prefix, because only then is the position of
    the next frame known. A segment shorter than its header yields nothing; a wrong header raises
    :class:`JournalDamageError` (invalid_header).

    Only journal repair reads a journal this way (spec: history is never reconstructed forwards).
    """
    writer, number = _segment_identity(path)
    try:
        with path.open("rb") as stream:
            yield from _scan_stream(stream, path, writer, number)
    except OSError as exc:
        raise JournalError(f"{path}: cannot read journal segment: {exc}") from exc


def _segment_identity(path: Path) -> tuple[str, int]:
    try:
        return validate_uuid(path.parent.name, "journal writer directory"), parse_segment_name(path.name)
    except InvalidNameError as exc:
        raise JournalError(f"{path}: not a journal segment path: {exc}") from exc


def _scan_stream(stream: BinaryIO, path: Path, writer: str, number: int) -> Iterator[ScannedFrame]:
    header = stream.read(len(SEGMENT_HEADER))
    if header != SEGMENT_HEADER[: len(header)]:
        raise JournalDamageError("invalid_header", f"{writer}/{path.name}", "wrong segment header", path)
    if len(header) < len(SEGMENT_HEADER):
        return
    offset = len(SEGMENT_HEADER)
    while True:
        prefix = stream.read(LENGTH_BYTES)
        if len(prefix) < LENGTH_BYTES:
            return
        length = int.from_bytes(prefix, "big")
        if not MIN_FRAME_PAYLOAD <= length <= MAX_FRAME_PAYLOAD:
            # No writer of ours produced this prefix (the least JSON object is "{}"), so it is damage
            # rather than a torn tail, and nothing after it can be framed: zeros past a segment's end (a
            # sparse file) would otherwise read as billions of empty frames.
            yield ScannedFrame(offset, None, None, "length_mismatch")
            return
        rest = stream.read(length + CHECKSUM_BYTES + LENGTH_BYTES)
        if len(rest) < length + CHECKSUM_BYTES + LENGTH_BYTES:
            return
        buffer = prefix + rest
        stored = rest[length : length + CHECKSUM_BYTES]
        ref = RecordRef(writer, number, offset, length, checksum128(stored))
        scanned = _decode_scanned(buffer, ref, path)
        yield scanned
        if scanned.problem is not None and buffer[-LENGTH_BYTES:] != prefix:
            return
        offset += len(buffer)


def _decode_scanned(buffer: bytes, ref: RecordRef, path: Path) -> ScannedFrame:
    # The reference is built from the frame's own stored checksum, so only the frame's internal
    # consistency is tested here: checksum, trailer and payload.
    try:
        return ScannedFrame(ref.offset, ref, decode_frame(buffer, ref, path=path), None)
    except JournalDamageError as exc:
        return ScannedFrame(ref.offset, ref, None, exc.code)
