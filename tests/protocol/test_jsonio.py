"""Strict reading of protocol JSON documents and the two writers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from httk.workflow.protocol._errors import InvalidDocumentError, UnsafePathError
from httk.workflow.protocol._jsonio import (
    MAX_DOCUMENT_BYTES,
    MAX_NESTING_DEPTH,
    dump_compact,
    dump_pretty,
    parse_json_object,
    read_json_object,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def _parse(data: bytes, **kwargs: object) -> dict[str, object]:
    return parse_json_object(data, document="doc.json", **kwargs)  # type: ignore[arg-type]


def _refused(data: bytes, fragment: str) -> InvalidDocumentError:
    with pytest.raises(InvalidDocumentError) as info:
        _parse(data)
    assert fragment in info.value.rule
    assert info.value.document == "doc.json"
    return info.value


def test_reads_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b'{"a": [1, 2.5, "\xc3\xa9", null, true], "b": {}}\n')
    assert read_json_object(path, document="doc.json") == {"a": [1, 2.5, "é", None, True], "b": {}}


def test_symlink_is_refused_naming_the_path(tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_bytes(b"{}")
    link = tmp_path / "doc.json"
    link.symlink_to(target)
    with pytest.raises(UnsafePathError) as info:
        read_json_object(link, document="doc.json")
    assert info.value.path == str(link)
    assert "symbolic link" in info.value.rule


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "doc.json"
    os.mkfifo(fifo)
    with pytest.raises(UnsafePathError) as info:
        read_json_object(fifo, document="doc.json")
    assert "FIFO" in info.value.rule
    assert info.value.path == str(fifo)


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafePathError, match="directory"):
        read_json_object(tmp_path, document="doc.json")


def test_missing_file_is_an_invalid_document_with_the_oserror_as_cause(tmp_path: Path) -> None:
    with pytest.raises(InvalidDocumentError) as info:
        read_json_object(tmp_path / "absent.json", document="doc.json")
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert info.value.path == str(tmp_path / "absent.json")


def test_oversize_file_names_size_and_limit(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b'{"a": "' + b"x" * 100 + b'"}')
    with pytest.raises(InvalidDocumentError) as info:
        read_json_object(path, document="doc.json", max_bytes=64)
    assert "109 bytes" in info.value.rule
    assert "limit of 64 bytes" in info.value.rule


def test_file_exactly_at_the_limit_is_read(tmp_path: Path) -> None:
    body = b'{"a":"' + b"x" * 56 + b'"}'
    assert len(body) == 64
    path = tmp_path / "doc.json"
    path.write_bytes(body)
    assert read_json_object(path, document="doc.json", max_bytes=64) == {"a": "x" * 56}


def test_default_limit_is_one_mebibyte() -> None:
    assert MAX_DOCUMENT_BYTES == 1 << 20
    at_limit = b"{}" + b" " * (MAX_DOCUMENT_BYTES - 2)
    assert _parse(at_limit) == {}
    with pytest.raises(InvalidDocumentError, match="over the limit"):
        _parse(at_limit + b" ")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b'\xef\xbb\xbf{"a": 1}', "byte-order mark"),
        (b'{"a": "\xff"}', "not valid UTF-8"),
        (b'{"a": "\xed\xa0\x80"}', "not valid UTF-8"),  # an encoded surrogate
        (b'{"a": NaN}', "NaN"),
        (b'{"a": Infinity}', "Infinity"),
        (b'{"a": -Infinity}', "-Infinity"),
        (b'{"a": 1e400}', "too large for a double"),
        (b'{"a": 1, "a": 2}', "duplicate object key 'a'"),
        (b'{"outer": {"k": 1, "k": 1}}', "duplicate object key 'k'"),
        (b'{"a": [{"x": 0, "x": 0}]}', "duplicate object key 'x'"),
        (b"[1, 2]", "not an array"),
        (b'"text"', "not a string"),
        (b"null", "not null"),
        (b"3", "not a number"),
        (b"true", "not a boolean"),
        (b"", "not valid JSON"),
        (b'{"a": 1} x', "not valid JSON"),
        (b'{"a": 1,}', "not valid JSON"),
        (b"{'a': 1}", "not valid JSON"),
        (b'{"a": "line\nbreak"}', "not valid JSON"),  # raw control character in a string
        (b'{"a": "\\ud800"}', "unpaired UTF-16 surrogate"),
        (b'{"\\udc00": 1}', "unpaired UTF-16 surrogate"),
        (b'{"a": "\\udc00\\ud800"}', "unpaired UTF-16 surrogate"),  # reversed pair
        (b'{"a": ' + b"9" * 5000 + b"}", "unrepresentable number"),
    ],
)
def test_non_strict_json_is_refused(data: bytes, fragment: str) -> None:
    _refused(data, fragment)


def test_surrogate_pair_escape_is_accepted() -> None:
    assert _parse(b'{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}') == {"a": "\U0001f600", "b": "\\ud800"}


def _nested(depth: int) -> bytes:
    """An object whose innermost container sits at ``depth`` (the top-level object is depth 1)."""
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    return f'{{"a": {inner or 0}}}'.encode()


def test_nesting_up_to_the_limit_is_accepted() -> None:
    assert MAX_NESTING_DEPTH == 64
    _parse(_nested(MAX_NESTING_DEPTH))


def test_nesting_beyond_the_limit_is_refused() -> None:
    _refused(_nested(MAX_NESTING_DEPTH + 1), "deeper than 64")


def test_very_deep_nesting_is_an_invalid_document_not_a_recursion_error() -> None:
    _refused(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "deeper than 64")


def test_many_shallow_containers_are_not_mistaken_for_depth() -> None:
    body = json.dumps({"a": [[i] for i in range(1000)], "s": "[[[[{{{{" * 50}).encode()
    assert len(_parse(body)["a"]) == 1000  # type: ignore[arg-type]


def test_bytes_limit_applies_to_parse() -> None:
    with pytest.raises(InvalidDocumentError, match="over the limit of 4 bytes"):
        _parse(b'{"a":1}', max_bytes=4)


def test_error_names_the_path() -> None:
    with pytest.raises(InvalidDocumentError) as info:
        _parse(b"[]", path="/w/job.json")
    assert info.value.path == "/w/job.json"
    assert "/w/job.json" in str(info.value)


def test_dump_compact_is_compact_utf8() -> None:
    assert dump_compact({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()


def test_dump_compact_refuses_nan() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        dump_compact({"a": float("nan")})


def test_dump_pretty_indents_and_ends_with_newline() -> None:
    assert dump_pretty({"a": [1], "é": {}}) == '{\n  "a": [\n    1\n  ],\n  "é": {}\n}\n'.encode()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(deadline=None, max_examples=300)
@given(json_values)
def test_dump_pretty_is_byte_for_byte_the_standard_indent_2_layout(value: object) -> None:
    expected = json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"
    assert dump_pretty(value) == expected


@pytest.mark.parametrize(
    "value",
    [{"t": (1, [2])}, {1: "int key"}, {"x": float("inf")}, [float("nan")], {"s": "\ud800"}],
    ids=["tuple in a dict", "non-string key", "infinity", "nan", "lone surrogate"],
)
def test_dump_pretty_leaves_unusual_values_to_the_standard_encoder(value: object) -> None:
    try:
        expected = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False).encode()
    except ValueError as exc:  # UnicodeEncodeError is one
        with pytest.raises(type(exc)):
            dump_pretty(value)
        return
    assert dump_pretty(value) == expected + b"\n"


def test_dump_pretty_refuses_a_cycle_as_the_standard_encoder_does() -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular"):
        dump_pretty({"loop": looped})


def test_dumped_documents_read_back(tmp_path: Path) -> None:
    doc = {"format": "x", "n": [1, 2.5, None, True, "é\u2028"], "o": {"k": "v"}}
    for dump in (dump_compact, dump_pretty):
        path = tmp_path / "doc.json"
        path.write_bytes(dump(doc))
        assert read_json_object(path, document="doc.json") == doc
