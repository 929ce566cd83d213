"""``hwref-v1`` record references: w<writer-hex32>-s<segment>-o<offset>-l<length>-h<checksum128-hex>."""

from __future__ import annotations

import pickle
import re
import uuid
from typing import Any

import pytest
from httk.workflow.protocol import (
    FRAME_OVERHEAD,
    MAX_REF_BYTES,
    SEGMENT_MAX_DIGITS,
    InvalidNameError,
    RecordRef,
    encode_base36,
    validate_uuid,
)
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(deadline=None, max_examples=200)
WRITER = "01234567-89ab-cdef-0123-456789abcdef"
WRITER_HEX = WRITER.replace("-", "")
SUM = "0123456789abcdef" * 2
EXAMPLE = f"w{WRITER_HEX}-s0-oc-l2s-h{SUM}"
# The spec's grammar, written out independently of the implementation.
GRAMMAR = re.compile(
    r"w[0-9a-f]{32}-s(0|[1-9a-z][0-9a-z]{0,6})-o(0|[1-9a-z][0-9a-z]{0,12})"
    r"-l(0|[1-9a-z][0-9a-z]{0,12})-h[0-9a-f]{32}"
)
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1

record_refs = st.builds(
    RecordRef,
    writer=st.uuids().map(str),
    segment=st.integers(0, U32_MAX),
    offset=st.integers(0, U64_MAX),
    length=st.integers(0, U64_MAX),
    checksum128=st.from_regex(r"[0-9a-f]{32}", fullmatch=True),
)


def _untyped(value: object) -> Any:
    return value


def longest_ref() -> RecordRef:
    return RecordRef(
        writer="ffffffff-ffff-ffff-ffff-ffffffffffff",
        segment=U32_MAX,
        offset=U64_MAX,
        length=U64_MAX,
        checksum128="f" * 32,
    )


def test_example_reference() -> None:
    ref = RecordRef.parse(EXAMPLE)
    assert ref == RecordRef(WRITER, 0, 12, 100, SUM)
    assert ref.writer == WRITER
    assert str(ref) == EXAMPLE


def test_writer_is_the_hyphenated_journal_directory_name() -> None:
    # D12: the writer directory is the writer UUID in canonical hyphenated form.
    ref = RecordRef.parse(EXAMPLE)
    assert validate_uuid(ref.writer) == ref.writer
    assert uuid.UUID(ref.writer).hex == WRITER_HEX


def test_frame_size_follows_d12() -> None:
    # D12: -o is where the 8-byte length prefix starts, -l the JSON payload alone; the frame is
    # 8 + length + 32 + 8 bytes.
    ref = RecordRef(WRITER, 0, 12, 100, SUM)
    assert FRAME_OVERHEAD == 48
    assert ref.frame_size == 8 + 100 + 32 + 8


def test_longest_reference_is_exactly_106_bytes() -> None:
    ref = longest_ref()
    text = str(ref)
    assert len(encode_base36(U32_MAX)) == SEGMENT_MAX_DIGITS == 7
    assert len(encode_base36(U64_MAX)) == 13
    assert len(text) == MAX_REF_BYTES == 106
    assert text.isascii()
    assert RecordRef.parse(text) == ref


def test_reference_budget_arithmetic_of_the_spec() -> None:
    text = str(longest_ref())
    fields = re.fullmatch(r"(w[^-]*)(-s[^-]*)(-o[^-]*)(-l[^-]*)(-h[^-]*)", text)
    assert fields is not None
    # w + writer, -s + segment, -o + offset, -l + length, -h + checksum128
    assert [len(field) for field in fields.groups()] == [33, 9, 15, 15, 34]
    assert 33 + 9 + 15 + 15 + 34 == 106 == MAX_REF_BYTES


@FAST
@given(record_refs)
def test_round_trip(ref: RecordRef) -> None:
    text = str(ref)
    assert GRAMMAR.fullmatch(text)
    assert len(text) <= MAX_REF_BYTES
    assert "." not in text
    parsed = RecordRef.parse(text)
    assert parsed == ref
    assert str(parsed) == text


@FAST
@given(record_refs)
def test_the_formatted_text_is_cached_without_changing_what_the_reference_is(ref: RecordRef) -> None:
    """The cache is set on first use only; equality, hashing, repr and pickling ignore it."""
    fresh = RecordRef(ref.writer, ref.segment, ref.offset, ref.length, ref.checksum128)
    assert fresh == ref and hash(fresh) == hash(ref) and repr(fresh) == repr(ref)
    text = str(ref)
    assert text.startswith(f"w{uuid.UUID(ref.writer).hex}-s")  # what the writer text was built from
    assert str(ref) is text  # formatted once
    assert fresh == ref and hash(fresh) == hash(ref) and repr(fresh) == repr(ref)
    assert str(fresh) == text and str(pickle.loads(pickle.dumps(ref))) == text
    assert "_text" not in repr(ref)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("segment", 0),
        ("segment", U32_MAX),
        ("offset", 0),
        ("offset", U64_MAX),
        ("length", 0),
        ("length", U64_MAX),
    ],
)
def test_boundaries_are_accepted(field: str, value: int) -> None:
    fields: dict[str, Any] = {"writer": WRITER, "segment": 1, "offset": 12, "length": 1, "checksum128": SUM}
    fields[field] = value
    ref = RecordRef(**fields)
    assert RecordRef.parse(str(ref)) == ref


@pytest.mark.parametrize(
    "fields",
    [
        {"segment": -1},
        {"segment": 2**32},
        {"offset": -1},
        {"offset": 2**64},
        {"length": -1},
        {"length": 2**64},
        {"checksum128": SUM.upper()},
        {"checksum128": SUM[:-1]},
        {"checksum128": SUM + "0"},
        {"checksum128": "g" * 32},
        {"checksum128": None},
        {"writer": WRITER.upper()},
        {"writer": WRITER_HEX},
        {"writer": "not-a-uuid"},
        {"writer": ""},
        {"writer": None},
    ],
)
def test_construction_validates(fields: dict[str, object]) -> None:
    base: dict[str, object] = {"writer": WRITER, "segment": 0, "offset": 12, "length": 1, "checksum128": SUM}
    with pytest.raises(InvalidNameError):
        RecordRef(**_untyped(base | fields))


def _ref(writer: str = WRITER_HEX, s: str = "0", o: str = "c", n: str = "2s", h: str = SUM) -> str:
    return f"w{writer}-s{s}-o{o}-l{n}-h{h}"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "init",
        _ref(writer=WRITER_HEX.upper()),
        _ref(writer=WRITER_HEX[:-1]),
        _ref(writer=WRITER_HEX + "0"),
        _ref(writer=WRITER),
        _ref(writer="g" * 32),
        _ref(s=""),
        _ref(s="00"),
        _ref(s="01"),
        _ref(s="A"),
        _ref(s="1z141z4"),  # 2**32
        _ref(s="10000000"),  # eight digits
        _ref(s="-1"),
        _ref(o=""),
        _ref(o="0c"),
        _ref(o="C"),
        _ref(o="3w5e11264sgsg"),  # 2**64
        _ref(o="10000000000000"),  # fourteen digits
        _ref(n=""),
        _ref(n="02s"),
        _ref(n="2S"),
        _ref(n="3w5e11264sgsg"),
        _ref(h=SUM.upper()),
        _ref(h=SUM[:-1]),
        _ref(h=SUM + "0"),
        _ref(h="g" * 32),
        _ref(h=""),
        f"W{WRITER_HEX}-s0-oc-l2s-h{SUM}",
        f"w{WRITER_HEX}-o0-sc-l2s-h{SUM}",
        f"w{WRITER_HEX}-s0-l2s-oc-h{SUM}",
        f"w{WRITER_HEX}-s0-oc-h{SUM}",
        f"w{WRITER_HEX}-s0-oc-l2s",
        f"w{WRITER_HEX}_s0_oc_l2s_h{SUM}",
        f"w{WRITER_HEX}--s0-oc-l2s-h{SUM}",
        f"w{WRITER_HEX}-s0-oc-l2s-h{SUM}-x",
        EXAMPLE + "\n",
        EXAMPLE + " ",
        " " + EXAMPLE,
        EXAMPLE + ".init",
        "x" + EXAMPLE,
        EXAMPLE.upper(),
    ],
)
def test_malformed_references_are_refused(text: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        RecordRef.parse(text)
    assert info.value.what == "record reference"


@pytest.mark.parametrize("value", [None, 5, EXAMPLE.encode()])
def test_non_strings_are_refused(value: object) -> None:
    with pytest.raises(InvalidNameError):
        RecordRef.parse(_untyped(value))


def _check_parse_or_refuse(text: str) -> None:
    try:
        ref = RecordRef.parse(text)
    except InvalidNameError:
        return
    assert str(ref) == text
    assert GRAMMAR.fullmatch(text)


@FAST
@given(
    st.text(st.characters() | st.sampled_from(["\ud800", "-"]), max_size=120)
    | st.from_regex(r"w[0-9a-f]{32}(-[sola][0-9a-zA-Z]{0,14}){0,5}-h.*")
)
def test_arbitrary_text_parses_and_round_trips_or_is_refused(text: str) -> None:
    _check_parse_or_refuse(text)


@FAST
@given(record_refs, st.data())
def test_mutated_references_parse_and_round_trip_or_are_refused(ref: RecordRef, data: st.DataObject) -> None:
    text = str(ref)
    index = data.draw(st.integers(0, len(text)))
    replacement = data.draw(st.sampled_from(["", "0", "00", "a", "A", "-", ".", "z", "zz", "\u00e9"]))
    width = data.draw(st.integers(0, 2))
    _check_parse_or_refuse(text[:index] + replacement + text[index + width :])
