"""``hwref-v1`` record references: where a journal frame lives and what its checksum begins with.

``w<writer-hex32>-s<segment>-o<offset>-l<length>-h<checksum128-hex>``; numbers are lowercase base 36
without leading zeroes. Per DECISIONS D12 ``offset`` is where the frame's 8-byte length prefix starts and
``length`` is the length of the JSON payload alone, so the whole frame is ``8 + length + 32 + 8`` bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import _base36
from ._errors import InvalidNameError
from ._names import validate_uuid

SEGMENT_BITS = 32
SEGMENT_MAX_DIGITS = 7
OFFSET_BITS = 64
MAX_REF_BYTES = 106
FRAME_OVERHEAD = 8 + 32 + 8
_SEGMENT_LIMIT = 36**SEGMENT_MAX_DIGITS
_CHECKSUM_RE = re.compile(r"[0-9a-f]{32}\Z")

_REF_RE = re.compile(
    r"w(?P<writer>[0-9a-f]{32})-s(?P<segment>[0-9a-z]+)-o(?P<offset>[0-9a-z]+)"
    r"-l(?P<length>[0-9a-z]+)-h(?P<checksum>[0-9a-f]{32})\Z"
)


@dataclass(frozen=True, slots=True)
class RecordRef:
    """A parsed ``hwref-v1`` reference.

    Invariant: ``str(RecordRef.parse(text)) == text`` for every accepted ``text``.
    """

    writer: str  # canonical hyphenated writer UUID, the journal directory name
    segment: int
    offset: int
    length: int
    checksum128: str
    # Invariant: None, or the text __str__ formats from the fields above (set once: a reader formats
    # each reference it meets several times, and the fields never change).
    _text: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validate_uuid(self.writer, "record reference writer")
        if not 0 <= self.segment < 1 << SEGMENT_BITS:
            raise InvalidNameError(
                "record reference", self.segment, "segment must be an unsigned 32-bit number"
            )
        if self.segment >= _SEGMENT_LIMIT:  # more than 7 base-36 digits
            raise InvalidNameError("record reference", self.segment, "segment exceeds 7 base-36 digits")
        for name in ("offset", "length"):
            value = getattr(self, name)
            if not 0 <= value < 1 << OFFSET_BITS:
                raise InvalidNameError("record reference", value, f"{name} must be an unsigned 64-bit number")
        if not isinstance(self.checksum128, str) or not _CHECKSUM_RE.match(self.checksum128):
            raise InvalidNameError(
                "record reference", self.checksum128, "checksum must be 32 lowercase hex digits"
            )

    def __str__(self) -> str:
        text = self._text
        if text is None:
            # The writer is validated canonical (lowercase 8-4-4-4-12), so dropping the hyphens is
            # exactly uuid.UUID(writer).hex, without building a UUID.
            text = (
                f"w{self.writer.replace('-', '')}-s{_base36.encode(self.segment)}"
                f"-o{_base36.encode(self.offset)}-l{_base36.encode(self.length)}-h{self.checksum128}"
            )
            object.__setattr__(self, "_text", text)  # frozen, so through object
        return text

    @classmethod
    def unchecked(cls, writer: str, segment: int, offset: int, length: int, checksum128: str) -> RecordRef:
        """A reference from values already known valid (a writer's own, or a name the fast marker pattern
        matched), built without re-validating them: half the cost of a reference, paid per transition."""
        ref = object.__new__(cls)
        setter = object.__setattr__
        setter(ref, "writer", writer)
        setter(ref, "segment", segment)
        setter(ref, "offset", offset)
        setter(ref, "length", length)
        setter(ref, "checksum128", checksum128)
        setter(ref, "_text", None)
        return ref

    @property
    def frame_size(self) -> int:
        """Bytes the whole frame occupies: length prefix, payload, checksum and trailer."""
        return FRAME_OVERHEAD + self.length

    @classmethod
    def parse(cls, text: str) -> RecordRef:
        """Parse a canonical ``hwref-v1`` reference; anything else raises :class:`InvalidNameError`."""
        match = _REF_RE.match(text) if isinstance(text, str) else None
        if match is None:
            raise InvalidNameError(
                "record reference", text, "must be w<32 hex>-s<base36>-o<base36>-l<base36>-h<32 hex>"
            )
        what = "record reference"
        return cls(
            writer=_hyphenated(match["writer"]),
            segment=_base36.decode(match["segment"], bits=SEGMENT_BITS, what=what),
            offset=_base36.decode(match["offset"], bits=OFFSET_BITS, what=what),
            length=_base36.decode(match["length"], bits=OFFSET_BITS, what=what),
            checksum128=match["checksum"],
        )


def _hyphenated(hex32: str) -> str:
    """The canonical 8-4-4-4-12 form of 32 lowercase hex digits (what ``uuid.UUID(hex=...)`` prints)."""
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"
