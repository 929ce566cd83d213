"""The journal frame byte format: encoding, naming and the ordered damage checks of decode_frame."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from httk.workflow.engine.core._segments import (
    MAX_FRAME_PAYLOAD,
    SEGMENT_HEADER,
    checksum128,
    decode_frame,
    encode_frame,
    encode_record,
    parse_segment_name,
    segment_name,
)
from httk.workflow.protocol import InvalidNameError, JournalDamageError, JournalError, RecordRef
from hypothesis import given, settings
from hypothesis import strategies as st

WRITER = "01234567-89ab-cdef-0123-456789abcdef"

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=8)


def framed(record: dict[str, Any], offset: int = 12) -> tuple[bytes, RecordRef]:
    payload = encode_record(record)
    frame, digest = encode_frame(payload)
    return frame, RecordRef(WRITER, 0, offset, len(payload), checksum128(digest))


def frame_of_payload(payload: bytes) -> tuple[bytes, RecordRef]:
    frame, digest = encode_frame(payload)
    return frame, RecordRef(WRITER, 0, 12, len(payload), checksum128(digest))


def damage_code(frame: bytes, ref: RecordRef) -> str:
    with pytest.raises(JournalDamageError) as caught:
        decode_frame(frame, ref)
    return caught.value.code


def test_segment_header_is_the_twelve_specified_bytes():
    assert bytes.fromhex("48 54 54 4b 2d 48 57 4a 2d 56 31 0a") == SEGMENT_HEADER
    assert len(SEGMENT_HEADER) == 12


@given(json_objects)
def test_every_json_object_round_trips(record):
    frame, ref = framed(record)
    assert decode_frame(frame, ref) == record
    assert len(frame) == ref.frame_size


@settings(max_examples=50, deadline=None)
@given(json_objects, st.integers(min_value=1, max_value=255))
def test_every_single_byte_flip_is_reported_with_its_code(record, mask):
    frame, ref = framed(record)
    payload_end = 8 + ref.length
    for position in range(len(frame)):
        damaged = bytearray(frame)
        damaged[position] ^= mask
        if position < 8:
            expected = "length_mismatch"
        elif position < payload_end + 32:  # the payload or the stored checksum
            expected = "checksum_mismatch"
        else:
            expected = "trailer_mismatch"
        assert damage_code(bytes(damaged), ref) == expected, position


def test_frame_layout_is_length_payload_checksum_length():
    payload = b'{"a":1}'
    frame, digest = encode_frame(payload)
    length = (7).to_bytes(8, "big")
    assert frame == length + payload + hashlib.sha256(length + payload).digest() + length
    assert digest == hashlib.sha256(length + payload).digest()
    assert checksum128(digest) == digest[:16].hex()


def test_encode_record_is_compact_utf8_without_bom_or_escapes():
    payload = encode_record({"kind": "ready", "note": "å ✓", "list": [1, 2.5, None]})
    assert payload == '{"kind":"ready","note":"å ✓","list":[1,2.5,null]}'.encode()
    assert not payload.startswith(b"\xef\xbb\xbf")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_encode_record_refuses_non_finite_numbers(value):
    with pytest.raises(JournalError, match="JSON"):
        encode_record({"x": [value]})


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object(), "\ud800"])
def test_encode_record_refuses_what_json_cannot_hold(value):
    with pytest.raises(JournalError):
        encode_record({"x": value})


def test_payload_limit_is_inclusive_at_sixteen_mebibytes():
    overhead = len(encode_record({"a": ""}))
    assert len(encode_record({"a": "x" * (MAX_FRAME_PAYLOAD - overhead)})) == MAX_FRAME_PAYLOAD
    with pytest.raises(JournalError, match="exceeds"):
        encode_record({"a": "x" * (MAX_FRAME_PAYLOAD - overhead + 1)})
    with pytest.raises(JournalError, match="exceeds"):
        encode_frame(b" " * (MAX_FRAME_PAYLOAD + 1))


@pytest.mark.parametrize(
    ("number", "name"), [(0, "0.hwj"), (35, "z.hwj"), (36, "10.hwj"), (2**32 - 1, "1z141z3.hwj")]
)
def test_segment_names_are_base36_without_leading_zeroes(number, name):
    assert segment_name(number) == name
    assert parse_segment_name(name) == number


@pytest.mark.parametrize("number", [-1, 2**32])
def test_segment_numbers_are_unsigned_32_bit(number):
    with pytest.raises(InvalidNameError):
        segment_name(number)


@pytest.mark.parametrize(
    "name", ["00.hwj", "01.hwj", "A.hwj", ".hwj", "1", "1.HWJ", "1.hwj.tmp", "1z141z4.hwj"]
)
def test_non_canonical_segment_names_are_refused(name):
    with pytest.raises(InvalidNameError):
        parse_segment_name(name)


def test_checks_run_in_the_specified_order():
    frame, ref = framed({"kind": "ready"})
    everything_wrong = bytearray(frame)
    everything_wrong[8] ^= 1  # payload: checksum
    everything_wrong[-1] ^= 1  # trailer
    longer = RecordRef(WRITER, 0, 12, ref.length + 1, "0" * 32)
    assert damage_code(bytes(everything_wrong) + b"\0", longer) == "length_mismatch"
    assert damage_code(bytes(everything_wrong), ref) == "checksum_mismatch"
    wrong_trailer = frame[:-1] + bytes([frame[-1] ^ 1])
    other_reference = RecordRef(WRITER, 0, 12, ref.length, "0" * 32)
    assert damage_code(wrong_trailer, other_reference) == "reference_mismatch"
    assert damage_code(wrong_trailer, ref) == "trailer_mismatch"


def test_an_intact_frame_of_the_same_length_is_a_reference_mismatch():
    _, ref = framed({"kind": "ready"})
    other, _ = framed({"kind": "error"})
    assert damage_code(other, ref) == "reference_mismatch"


def test_a_short_buffer_is_a_short_read():
    frame, ref = framed({"kind": "ready"})
    assert damage_code(frame[:-1], ref) == "short_read"


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[1, 2]",
        b'"text"',
        b"\xff\xfe",
        '\ufeff{"a":1}'.encode(),
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'{"a":1,"a":2}',
        b"[" * 100_000,
    ],
)
def test_checksummed_payloads_that_are_not_one_json_object_are_undecodable(payload):
    frame, ref = frame_of_payload(payload)
    assert damage_code(frame, ref) == "undecodable_frame"


def test_damage_errors_carry_reference_and_path(tmp_path):
    frame, ref = framed({"kind": "ready"})
    with pytest.raises(JournalDamageError) as caught:
        decode_frame(frame[:-1] + b"\0", ref, path=tmp_path / "0.hwj")
    assert caught.value.ref == str(ref)
    assert caught.value.path == str(tmp_path / "0.hwj")
    assert str(tmp_path) in str(caught.value)


def test_decoded_records_equal_json_loads_of_the_payload():
    record = {"b": [1, {"c": None}], "a": "ü"}
    frame, ref = framed(record)
    assert decode_frame(frame, ref) == json.loads(frame[8 : 8 + ref.length])
