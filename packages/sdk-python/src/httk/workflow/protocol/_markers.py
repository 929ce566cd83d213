"""State-marker basenames: ``<job-key>.p<priority>.g<generation>.<record-ref>``.

The submitted marker of a fresh job uses ``g0.init``. Priority is always three zero-padded digits,
generation is base 36 of an unsigned 64-bit number. The worst-case basename is 213 bytes
(86 job key + 5 priority + 15 generation + 1 dot + 106 reference) and no field may grow within format
version 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import _base36
from ._errors import InvalidNameError
from ._hwref import RecordRef, _hyphenated
from ._names import JobKey

MAX_MARKER_BYTES = 213
INIT_REF = "init"
PRIORITY_MIN, PRIORITY_MAX = 0, 999
GENERATION_BITS = 64

_MARKER_RE = re.compile(r"(?P<key>.+)\.p(?P<priority>[0-9]{3})\.g(?P<generation>[0-9a-z]+)\.(?P<ref>[^.]+)\Z")

# Invariant: every name this pattern accepts, with a tag free of "--" and "init" exactly at generation 0,
# is one the full grammar accepts, and :func:`_fast_parse` builds the same value from it: numbers short
# enough that no bound can be exceeded (12 base-36 digits < 2**64, 6 < 2**32), no leading zeroes, at most
# 209 bytes. Names it rejects go to the full parser (test_the_fast_marker_pattern_agrees_with_the_parser).
_FAST_MARKER = re.compile(
    r"(?:(?P<tag>[a-z0-9][a-z0-9._-]{0,47})--)?"
    r"(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"\.p(?P<priority>[0-9]{3})\.g(?P<generation>0|[1-9a-z][0-9a-z]{0,11})\."
    r"(?P<ref>init|w(?P<writer>[0-9a-f]{32})-s(?P<segment>0|[1-9a-z][0-9a-z]{0,5})"
    r"-o(?P<offset>0|[1-9a-z][0-9a-z]{0,11})-l(?P<length>0|[1-9a-z][0-9a-z]{0,11})-h(?P<checksum>[0-9a-f]{32}))"
)
"""The common shape of a marker basename, matched whole (``fullmatch``) in one step."""

_MEMO_SIZE = 8192
# The names this process parsed or formatted lately: a manager lists its own running markers at every
# scan, and a marker name is immutable, so each is parsed once. Cleared whole when full (bounded memory
# for walks of millions of names, which gain nothing from it).
_memo: dict[str, MarkerName] = {}


def _remember(text: str, name: MarkerName) -> None:
    if len(_memo) >= _MEMO_SIZE:
        _memo.clear()
    _memo[text] = name


def fast_match(name: str) -> re.Match[str] | None:
    """The fast pattern's match of ``name`` when it is a valid marker of the common shape, else
    ``None`` (which means only "ask the full parser")."""
    match = _FAST_MARKER.fullmatch(name)
    if match is None or (match["ref"] == INIT_REF) != (match["generation"] == "0"):
        return None
    tag = match["tag"]
    return None if tag is not None and "--" in tag else match


def validate_priority(value: object) -> int:
    """Accept an integer priority from 0 (highest) through 999."""
    if isinstance(value, bool) or not isinstance(value, int) or not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidNameError("priority", value, "must be an integer from 0 through 999")
    return value


@dataclass(frozen=True, slots=True)
class MarkerName:
    """A parsed marker basename.

    Invariant: ``ref`` is ``None`` exactly when ``generation == 0`` (the ``init`` submission marker);
    every later generation names a journal frame.
    """

    key: JobKey
    priority: int
    generation: int
    ref: RecordRef | None
    # Invariant: None, or the basename __str__ formats from the fields above (set once).
    _text: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validate_priority(self.priority)
        if not 0 <= self.generation < 1 << GENERATION_BITS:
            raise InvalidNameError("marker", self.generation, "generation must be an unsigned 64-bit number")
        if (self.ref is None) != (self.generation == 0):
            raise InvalidNameError(
                "marker", self.generation, "generation 0 and only it uses the 'init' reference"
            )

    @property
    def job_id(self) -> str:
        return self.key.job_id

    @property
    def ref_text(self) -> str:
        return INIT_REF if self.ref is None else str(self.ref)

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = f"{self.key}.p{self.priority:03d}.g{_base36.encode(self.generation)}.{self.ref_text}"
            object.__setattr__(self, "_text", text)  # frozen, so through object
            _remember(text, self)
        return text

    @classmethod
    def initial(cls, key: JobKey, priority: int) -> MarkerName:
        """The ``g0.init`` marker that submission publishes."""
        return cls(key, priority, 0, None)

    def successor(self, ref: RecordRef, priority: int | None = None) -> MarkerName:
        """The marker of the next generation, naming ``ref`` and keeping the priority unless given."""
        return MarkerName(self.key, self.priority if priority is None else priority, self.generation + 1, ref)

    @classmethod
    def parse(cls, text: str) -> MarkerName:
        """Parse a marker basename, refusing every form the grammar does not produce.

        Examples
        --------
        >>> str(MarkerName.parse("01234567-89ab-cdef-0123-456789abcdef.p500.g0.init"))
        '01234567-89ab-cdef-0123-456789abcdef.p500.g0.init'
        """
        found = _memo.get(text) if isinstance(text, str) else None
        if found is not None:
            return found
        match = fast_match(text) if isinstance(text, str) else None
        if match is not None:
            found = _fast_parse(match)
            _remember(text, found)
            return found
        return cls._parse_fully(text)

    @classmethod
    def _parse_fully(cls, text: str) -> MarkerName:
        if not isinstance(text, str):
            raise InvalidNameError("marker", text, "must be a string")
        try:
            size = len(text.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:
            raise InvalidNameError("marker", text, "has a character no filename can hold") from None
        if size > MAX_MARKER_BYTES:
            raise InvalidNameError("marker", text, f"exceeds {MAX_MARKER_BYTES} bytes")
        match = _MARKER_RE.match(text)
        if match is None:
            raise InvalidNameError("marker", text, "must be <job-key>.p<000-999>.g<base36>.<record-ref|init>")
        key = JobKey.parse(match["key"])
        generation = _base36.decode(match["generation"], bits=GENERATION_BITS, what="marker generation")
        ref_text = match["ref"]
        ref = None if ref_text == INIT_REF else RecordRef.parse(ref_text)
        if ref is None and generation != 0:
            raise InvalidNameError("marker", text, "only generation 0 may use the 'init' reference")
        if ref is not None and generation == 0:
            raise InvalidNameError("marker", text, "generation 0 must use the 'init' reference")
        return cls(key, int(match["priority"]), generation, ref)


def _fast_parse(match: re.Match[str]) -> MarkerName:
    """The marker a :func:`fast_match` match names, built from its groups without re-validating them."""
    ref = None
    if match["writer"] is not None:
        ref = RecordRef.unchecked(
            _hyphenated(match["writer"]),
            int(match["segment"], 36),
            int(match["offset"], 36),
            int(match["length"], 36),
            match["checksum"],
        )
    name = object.__new__(MarkerName)
    setter = object.__setattr__
    setter(name, "key", JobKey.unchecked(match["uuid"], match["tag"]))
    setter(name, "priority", int(match["priority"]))
    setter(name, "generation", int(match["generation"], 36))
    setter(name, "ref", ref)
    setter(name, "_text", match.string)
    return name
