"""Lowercase base 36 without leading zeroes: the number encoding of marker names and record references."""

from __future__ import annotations

import re

import pytest
from httk.workflow.protocol import InvalidNameError, decode_base36, encode_base36
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(deadline=None, max_examples=200)
CANONICAL = re.compile(r"0|[1-9a-z][0-9a-z]*")
U64 = st.integers(min_value=0, max_value=2**64 - 1)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (1, "1"),
        (9, "9"),
        (10, "a"),
        (35, "z"),
        (36, "10"),
        (36**2, "100"),
        (2**32 - 1, "1z141z3"),
        (2**32, "1z141z4"),
        (2**64 - 1, "3w5e11264sgsf"),
    ],
)
def test_known_values(value: int, text: str) -> None:
    assert encode_base36(value) == text
    assert decode_base36(text, bits=65) == value


def test_largest_64_bit_value_has_13_digits() -> None:
    assert len(encode_base36(2**64 - 1)) == 13
    assert decode_base36("3w5e11264sgsf") == 2**64 - 1


@FAST
@given(U64)
def test_round_trip(value: int) -> None:
    text = encode_base36(value)
    assert CANONICAL.fullmatch(text)
    assert decode_base36(text) == value
    assert int(text, 36) == value


@FAST
@given(st.integers(min_value=0, max_value=2**80), st.integers(min_value=1, max_value=80))
def test_bits_bound_is_exact(value: int, bits: int) -> None:
    text = encode_base36(value)
    if value < 2**bits:
        assert decode_base36(text, bits=bits) == value
    else:
        with pytest.raises(InvalidNameError, match=f"exceeds an unsigned {bits}-bit integer"):
            decode_base36(text, bits=bits)


@pytest.mark.parametrize("value", [-1, -36, -(2**64)])
def test_negative_numbers_are_refused(value: int) -> None:
    with pytest.raises(InvalidNameError, match="negative"):
        encode_base36(value)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("", "empty"),
        ("00", "leading zero"),
        ("01", "leading zero"),
        ("0z", "leading zero"),
        ("000000000000a", "leading zero"),
        ("A", "outside"),
        ("1A", "outside"),
        ("Z", "outside"),
        ("-1", "outside"),
        ("+1", "outside"),
        (" 1", "outside"),
        ("1 ", "outside"),
        ("1\n", "outside"),
        ("1_0", "outside"),
        ("1.0", "outside"),
        ("\u0663", "outside"),  # ARABIC-INDIC DIGIT THREE, which int() would accept
        ("\uff5a", "outside"),  # FULLWIDTH LATIN SMALL LETTER Z
        ("3w5e11264sgsg", "64-bit"),  # 2**64
        ("10000000000000", "64-bit"),  # 14 digits
    ],
)
def test_malformed_text_is_refused(text: str, rule: str) -> None:
    with pytest.raises(InvalidNameError, match=rule) as info:
        decode_base36(text)
    assert info.value.value == text


@pytest.mark.parametrize(("text", "bits"), [("1z141z4", 32), ("10000000", 32), ("10", 5)])
def test_out_of_range_for_smaller_widths(text: str, bits: int) -> None:
    with pytest.raises(InvalidNameError):
        decode_base36(text, bits=bits)


def test_error_names_what_was_decoded() -> None:
    with pytest.raises(InvalidNameError, match="invalid marker generation '01'") as info:
        decode_base36("01", what="marker generation")
    assert info.value.what == "marker generation"


@FAST
@given(st.text(st.characters(), max_size=16) | st.text("0123456789abcdefzA -", max_size=16))
def test_arbitrary_text_decodes_canonically_or_is_refused(text: str) -> None:
    try:
        value = decode_base36(text)
    except InvalidNameError:
        return
    assert encode_base36(value) == text
    assert 0 <= value < 2**64
