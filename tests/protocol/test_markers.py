"""State-marker basenames: ``<job-key>.p<priority>.g<generation>.<record-ref|init>``."""

from __future__ import annotations

from typing import Any

import pytest
from httk.workflow.protocol import (
    GENERATION_BITS,
    INIT_REF,
    JOB_KEY_MAX_BYTES,
    MAX_MARKER_BYTES,
    MAX_REF_BYTES,
    TAG_MAX_BYTES,
    InvalidNameError,
    JobKey,
    MarkerName,
    RecordRef,
    encode_base36,
    validate_priority,
)
from httk.workflow.protocol._markers import _fast_parse, fast_match
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(deadline=None, max_examples=200)
UUID = "01234567-89ab-cdef-0123-456789abcdef"
KEY = f"silicon-relax--{UUID}"
REF = f"w{UUID.replace('-', '')}-s0-oc-l2s-h{'0123456789abcdef' * 2}"
U64_MAX = 2**64 - 1

tags = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,47}", fullmatch=True).filter(lambda t: "--" not in t)
# Dots and single hyphens in tags, including tags that imitate marker fields such as "x.p500.g1".
dotted_tags = st.lists(
    st.from_regex(r"[a-z0-9][a-z0-9_]{0,5}", fullmatch=True) | st.sampled_from(["p500", "g0", "init", "g1"]),
    min_size=1,
    max_size=6,
).flatmap(
    lambda parts: st.lists(st.sampled_from(".-"), min_size=len(parts) - 1, max_size=len(parts) - 1).map(
        lambda seps: parts[0] + "".join(s + p for s, p in zip(seps, parts[1:], strict=True))
    )
)
job_keys = st.builds(JobKey, st.uuids().map(str), st.none() | tags | dotted_tags)
priorities = st.integers(0, 999)
record_refs = st.builds(
    RecordRef,
    writer=st.uuids().map(str),
    segment=st.integers(0, 2**32 - 1),
    offset=st.integers(0, U64_MAX),
    length=st.integers(0, U64_MAX),
    checksum128=st.from_regex(r"[0-9a-f]{32}", fullmatch=True),
)
init_markers = st.builds(MarkerName.initial, job_keys, priorities)
later_markers = st.builds(MarkerName, job_keys, priorities, st.integers(1, U64_MAX), record_refs)


def _untyped(value: object) -> Any:
    return value


def worst_case_marker() -> str:
    """A 48-byte tag, priority 999, generation 2**64 - 1 and the longest possible reference."""
    tag = "z.y-x_w" * 6 + "v" * 6
    ref = RecordRef("ffffffff-ffff-ffff-ffff-ffffffffffff", 2**32 - 1, U64_MAX, U64_MAX, "f" * 32)
    return f"{tag}--{UUID}.p999.g{encode_base36(U64_MAX)}.{ref}"


# ------------------------------------------------------------------------------------------ priorities


@pytest.mark.parametrize("value", [0, 1, 500, 999])
def test_priorities_in_range_are_accepted(value: int) -> None:
    assert validate_priority(value) == value


@pytest.mark.parametrize("value", [-1, 1000, 10**6, True, False, 1.0, 500.0, "500", None])
def test_priorities_out_of_range_or_not_integers_are_refused(value: object) -> None:
    with pytest.raises(InvalidNameError, match="0 through 999"):
        validate_priority(value)


# --------------------------------------------------------------------------------------- round trips


def test_initial_marker_without_tag() -> None:
    marker = MarkerName.initial(JobKey(UUID), 500)
    assert str(marker) == f"{UUID}.p500.g0.init"
    assert MarkerName.parse(str(marker)) == marker
    assert marker.ref is None
    assert marker.ref_text == INIT_REF == "init"
    assert marker.job_id == UUID


def test_initial_marker_with_tag() -> None:
    marker = MarkerName.parse(f"{KEY}.p007.g0.init")
    assert marker == MarkerName.initial(JobKey(UUID, "silicon-relax"), 7)
    assert str(marker) == f"{KEY}.p007.g0.init"


def test_later_marker_with_tag() -> None:
    text = f"{KEY}.p500.g4.{REF}"
    marker = MarkerName.parse(text)
    assert marker.key == JobKey(UUID, "silicon-relax")
    assert marker.priority == 500
    assert marker.generation == 4
    assert marker.ref == RecordRef.parse(REF)
    assert marker.ref_text == REF
    assert str(marker) == text


@pytest.mark.parametrize(
    "tag", ["a.b", "si.relax-1", "x-y.z", "a.", "a-", "x.p500.g1", "init.p000.g0", "a.p500.g0.init"]
)
@pytest.mark.parametrize("tail", [".p000.g0.init", f".p999.gzz.{REF}"])
def test_tags_with_dots_and_hyphens_round_trip(tag: str, tail: str) -> None:
    text = f"{tag}--{UUID}{tail}"
    marker = MarkerName.parse(text)
    assert marker.key.tag == tag
    assert marker.job_id == UUID
    assert str(marker) == text


@FAST
@given(init_markers | later_markers)
def test_round_trip(marker: MarkerName) -> None:
    text = str(marker)
    assert text.isascii()
    assert len(text) <= MAX_MARKER_BYTES
    parsed = MarkerName.parse(text)
    assert parsed == marker
    assert str(parsed) == text
    assert text.startswith(f"{marker.key}.p{marker.priority:03d}.g")
    assert text.endswith("." + marker.ref_text)


@FAST
@given(init_markers | later_markers)
def test_the_formatted_name_is_cached_without_changing_what_the_marker_is(marker: MarkerName) -> None:
    fresh = MarkerName(marker.key, marker.priority, marker.generation, marker.ref)
    text = str(marker)
    assert str(marker) is text  # formatted once
    assert fresh == marker and hash(fresh) == hash(marker) and repr(fresh) == repr(marker)
    assert str(fresh) == text and str(MarkerName.parse(text)) == text
    assert "_text" not in repr(marker)


@FAST
@given(later_markers, record_refs, st.none() | priorities)
def test_successor(marker: MarkerName, ref: RecordRef, priority: int | None) -> None:
    if marker.generation == U64_MAX:
        with pytest.raises(InvalidNameError, match="64-bit"):
            marker.successor(ref, priority)
        return
    nxt = marker.successor(ref, priority)
    assert nxt.key == marker.key
    assert nxt.generation == marker.generation + 1
    assert nxt.priority == (marker.priority if priority is None else priority)
    assert nxt.ref == ref
    assert MarkerName.parse(str(nxt)) == nxt


def test_successor_of_init_is_generation_one() -> None:
    ref = RecordRef.parse(REF)
    marker = MarkerName.initial(JobKey(UUID), 500).successor(ref)
    assert str(marker) == f"{UUID}.p500.g1.{REF}"


def test_successor_of_the_last_generation_is_refused() -> None:
    ref = RecordRef.parse(REF)
    with pytest.raises(InvalidNameError):
        MarkerName(JobKey(UUID), 500, U64_MAX, ref).successor(ref)


# ------------------------------------------------------------------------------- the 213-byte bound


def test_worst_case_marker_is_exactly_213_bytes_and_parses() -> None:
    text = worst_case_marker()
    assert len(text.encode("ascii")) == MAX_MARKER_BYTES == 213
    marker = MarkerName.parse(text)
    assert marker.key.tag is not None and len(marker.key.tag) == TAG_MAX_BYTES
    assert marker.priority == 999
    assert marker.generation == U64_MAX
    assert marker.ref is not None
    assert len(str(marker.ref)) == MAX_REF_BYTES
    assert str(marker) == text


def test_spec_arithmetic_of_the_213_byte_bound() -> None:
    # 86 job-key + 5 ".p999" + 15 (".g" + 13 generation digits) + 1 "." + 106 maximum hwref-v1 = 213
    generation = ".g" + encode_base36(2**GENERATION_BITS - 1)
    assert JOB_KEY_MAX_BYTES == 48 + 2 + 36 == 86
    assert len(".p999") == 5
    assert len(generation) == 15
    assert MAX_REF_BYTES == 33 + 9 + 15 + 15 + 34 == 106
    assert JOB_KEY_MAX_BYTES + 5 + len(generation) + 1 + MAX_REF_BYTES == MAX_MARKER_BYTES == 213


def test_worst_case_fields_cannot_grow() -> None:
    text = worst_case_marker()
    tag, rest = text.split("--", 1)
    with pytest.raises(InvalidNameError):
        MarkerName.parse(f"{tag}a--{rest}")  # 49-byte tag, 214 bytes
    with pytest.raises(InvalidNameError):
        MarkerName.parse(text.replace(".p999.", ".p9999.", 1))


# ---------------------------------------------------------------------------------------- refusals


def test_construction_validates() -> None:
    ref = RecordRef.parse(REF)
    key = JobKey(UUID)
    for args in [
        (key, 500, 0, ref),  # g0 with a real reference
        (key, 500, 1, None),  # g1 with init
        (key, 500, 2**64, ref),
        (key, 500, -1, None),
        (key, 1000, 0, None),
        (key, -1, 0, None),
        (key, True, 0, None),
    ]:
        with pytest.raises(InvalidNameError):
            MarkerName(*_untyped(args))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "init",
        UUID,
        f"{KEY}.p50.g0.init",  # two-digit priority
        f"{KEY}.p5.g0.init",
        f"{KEY}.p5000.g0.init",  # four-digit priority
        f"{KEY}.p0500.g1.{REF}",
        f"{KEY}.p-01.g0.init",
        f"{KEY}.pabc.g0.init",
        f"{KEY}.P500.g0.init",
        f"{KEY}.p500.g0.{REF}",  # g0 with a real reference
        f"{KEY}.p500.g1.init",  # g1 with init
        f"{KEY}.p500.gzz.init",
        f"{KEY}.p500.g00.init",
        f"{KEY}.p500.g01.{REF}",
        f"{KEY}.p500.gA.{REF}",
        f"{KEY}.p500.g.init",
        f"{KEY}.p500.g-1.{REF}",
        f"{KEY}.p500.g3w5e11264sgsg.{REF}",  # generation 2**64
        f"{KEY}.p500.G1.{REF}",
        f"{KEY}.p500.g0.init.",  # extra dots
        f"{KEY}.p500.g0.init.init",
        f"{KEY}.p500.g0..init",
        f"{KEY}.p500..g0.init",
        f"{KEY}..p500.g0.init",
        f".{KEY}.p500.g0.init",
        f"{KEY}.p500.g1.{REF}.",
        f"{KEY}.p500.g1.{REF}.{REF}",
        f"{KEY}.p500.g1.{REF}.x",
        f"{KEY}.p500.init",  # missing fields
        f"{KEY}.g0.init",
        f"{KEY}.p500.g0",
        f"{KEY}.p500.g0.",
        f"{KEY}p500.g0.init",
        f"{KEY}.p500g0.init",
        f"{KEY}.p500.g0init",
        f"{KEY}.p500.g0.INIT",  # wrong reference shapes
        f"{KEY}.p500.g0.Init",
        f"{KEY}.p500.g0.init2",
        f"{KEY}.p500.g0.nit",
        f"{KEY}.p500.g1.{REF.upper()}",
        f"{KEY}.p500.g1.{REF[:-1]}",
        f"{KEY}.p500.g1.{REF}0",
        f"{KEY}.p500.g1.w{UUID}-s0-oc-l2s-h{'0' * 32}",  # hyphenated writer
        f"{KEY}.p500.g1.{REF.replace('-s0-', '-s00-')}",
        f"{KEY}.p500.g1.{REF.replace('-s0-', '-s1z141z4-')}",  # segment 2**32
        f"{KEY}.p500.g1.{REF.replace('-s0-', '-s10000000-')}",  # eight-digit segment
        f"{KEY}.p500.g1.{REF.replace('-oc-', '-o0c-')}",
        f"{KEY}.p500.g1.w-s0-oc-l2s-h",
        f"{UUID.upper()}.p500.g0.init",  # bad job keys
        f"silicon-relax-{UUID}.p500.g0.init",
        f"silicon_relax{UUID}.p500.g0.init",
        f"a--b--{UUID}.p500.g0.init",
        f"-a--{UUID}.p500.g0.init",
        f"{'a' * 49}--{UUID}.p500.g0.init",
        f"{KEY}.p500.g0.init\n",
        f" {KEY}.p500.g0.init",
        f"{KEY}.p500.g0.init ",
        f"{KEY}/x.p500.g0.init",
        f"caf\u00e9--{UUID}.p500.g0.init",
        f"{KEY}.p500.g0.init\udcff",
        f"{KEY}.p500.g0.init\ud800",
        "\ud800",
        "x" * 214,
    ],
)
def test_malformed_markers_are_refused(text: str) -> None:
    with pytest.raises(InvalidNameError):
        MarkerName.parse(text)


@pytest.mark.parametrize("value", [None, 5, f"{UUID}.p500.g0.init".encode()])
def test_non_strings_are_refused(value: object) -> None:
    with pytest.raises(InvalidNameError):
        MarkerName.parse(_untyped(value))


# --------------------------------------------------------------------------------- arbitrary input


def _check_parse_or_refuse(text: str) -> None:
    try:
        marker = MarkerName.parse(text)
    except InvalidNameError:
        return
    assert str(marker) == text
    assert len(text) <= MAX_MARKER_BYTES
    assert (marker.generation == 0) == (marker.ref is None)


pieces = st.sampled_from(
    [".", "-", "--", "p", "g", "p500", "p50", "p5000", "g0", "g1", "g01", "gzz", "init", UUID, "x", REF, KEY]
)


@FAST
@given(
    st.text(st.characters() | st.sampled_from(["\ud800", "."]), max_size=220)
    | st.lists(pieces, max_size=12).map("".join)
)
def test_arbitrary_text_parses_and_round_trips_or_is_refused(text: str) -> None:
    _check_parse_or_refuse(text)


@FAST
@given(init_markers | later_markers, st.data())
def test_mutated_markers_parse_and_round_trip_or_are_refused(marker: MarkerName, data: st.DataObject) -> None:
    text = str(marker)
    index = data.draw(st.integers(0, len(text)))
    replacement = data.draw(st.sampled_from(["", ".", "-", "--", "0", "9", "a", "A", "init", "\u00e9"]))
    width = data.draw(st.integers(0, 3))
    _check_parse_or_refuse(text[:index] + replacement + text[index + width :])


# ------------------------------------------------------------------------------ the fast path


def _agree(text: str) -> None:
    """The one-pattern fast path and the full grammar accept the same names and build the same values."""
    try:
        expected: MarkerName | None = MarkerName._parse_fully(text)
    except InvalidNameError:
        expected = None
    match = fast_match(text)
    if expected is None:
        assert match is None, text
        return
    if match is not None:
        fast = _fast_parse(match)
        assert (fast, fast.ref, fast.key, str(fast)) == (expected, expected.ref, expected.key, text)
    assert MarkerName.parse(text) == expected  # through the memo, or the fast path, or the full parser


@FAST
@given(init_markers | later_markers, st.data())
def test_the_fast_marker_pattern_agrees_with_the_parser(marker: MarkerName, data: st.DataObject) -> None:
    text = str(marker)
    _agree(text)
    index = data.draw(st.integers(0, len(text)))
    replacement = data.draw(st.sampled_from(["", ".", "-", "--", "0", "9", "a", "A", "init", "\u00e9", "g0"]))
    _agree(text[:index] + replacement + text[index + data.draw(st.integers(0, 3)) :])


def test_the_fast_path_covers_the_worst_case_shapes_it_claims() -> None:
    ref = RecordRef(UUID, 36**6 - 1, 36**12 - 1, 36**12 - 1, "f" * 32)
    common = f"{'t' * 48}--{UUID}.p999.g{'z' * 12}.{ref}"
    assert fast_match(common) is not None
    _agree(common)
    _agree(worst_case_marker())  # 13 generation digits: the full parser's alone
    assert fast_match(worst_case_marker()) is None


def test_a_memoized_name_is_the_value_parsing_gives() -> None:
    marker = MarkerName(JobKey(UUID, "memo"), 500, 3, RecordRef.parse(REF))
    text = str(marker)  # formatting remembers it
    assert MarkerName.parse(text) is marker
