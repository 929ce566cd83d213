"""Hypothesis strategies for protocol documents: any JSON value, a valid document mutated, hostile bytes.

Two suites share them. ``tests/engine/test_schema_agreement.py`` runs :func:`mutated` documents through
the engine's checks and the schemas and requires them to agree; ``tests/hostile/`` feeds
:func:`hostile_bytes` to every reader of a protocol document and requires a clear refusal or a clean
acceptance, never anything else.

A mutation removes, replaces, adds to or *nudges* one or two members of a valid document (an integer
across its bound, a string emptied, cased, extended or given a newline), so most mutants are one defect
away from valid, where the checks are subtle. The hostile encodings then break the bytes themselves:
truncation, a flipped byte, invalid UTF-8, a byte-order mark, a duplicate key, a non-finite constant, a
lone surrogate, nesting past the limit, a number past every limit, a value that is not an object.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import strategies as st

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 2**64 + 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value, small."""


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _nudged(value: Any, draw: st.DrawFn) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + draw(st.sampled_from([-1, 1, -value - 1, 2**63, 2**64]))
    if isinstance(value, str):
        return draw(
            st.sampled_from(["", value + "\n", value.upper(), value + "x", value[:-1], "a/../b", "/x"])
        )
    return draw(JSON)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with one or two of its members removed, replaced, added to or nudged."""
    document = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 2))):
        paths = list(_paths(document))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = document
        for key in path[:-1]:
            parent = parent[key]
        key, operation = path[-1], draw(st.sampled_from(["remove", "replace", "add", "nudge"]))
        if operation == "remove":
            del parent[key]
        elif operation == "replace":
            parent[key] = draw(JSON)
        elif operation == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(JSON)
        else:
            parent[key] = _nudged(parent[key], draw)
    return document


def compact(document: object) -> bytes:
    """The compact UTF-8 JSON form the engine writes (``ensure_ascii`` off, so invalid text shows)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


DEEP = b'{"deep":' + b"[" * 70 + b"]" * 70 + b"}"
"""An object nested past the readers' depth limit of 64."""

HOSTILE_TEXTS: tuple[bytes, ...] = (
    b"",
    b"null",
    b"[]",
    b'"a string"',
    b"42",
    b"{",
    b'{"a":NaN}',
    b'{"a":Infinity}',
    b'{"a":-Infinity}',
    b'{"a":1e999}',
    b'{"a":' + b"9" * 5000 + b"}",
    b'{"a":"\\ud800"}',
    b'{"a":"\\udc00\\ud800"}',
    b'{"a":1,"a":2}',
    b"\xef\xbb\xbf{}",
    b"\xff\xfe{\x00}\x00",
    b'{"a":"\xc3\x28"}',
    b'{"a":"\xed\xa0\x80"}',
    b"{}\x00",
    b"{} {}",
    DEEP,
    b"[" * 5_000,
    b'{"a":' * 5_000,
)
"""Bytes every strict reader of a JSON object must refuse (or, for a few, read as an empty object)."""


@st.composite
def broken_encoding(draw: st.DrawFn, document: dict[str, Any]) -> bytes:
    """A document's bytes broken one way: truncated, a byte changed, invalid UTF-8 or a BOM, a member
    duplicated, a constant, a lone surrogate or deep nesting spliced in."""
    data = compact(document) if draw(st.booleans()) else json.dumps(document, indent=2).encode()
    how = draw(
        st.sampled_from(
            ["truncate", "flip", "insert", "bom", "duplicate", "constant", "surrogate", "deep", "trail"]
        )
    )
    if how == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "trail":
        return data + draw(st.sampled_from([b"\x00", b"{}", b" x", b"\n\n"]))
    if how in ("flip", "insert"):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        byte = draw(st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\x00", b'"', b"}", b"\\", b"\n"]))
        return data[:at] + byte + data[at + (how == "flip") :]
    key = draw(st.sampled_from(sorted(document))) if document else "x"
    splice = {
        "duplicate": json.dumps({key: document.get(key)})[1:-1].encode(),
        "constant": json.dumps(key).encode() + b":" + draw(st.sampled_from([b"NaN", b"Infinity", b"1e400"])),
        "surrogate": json.dumps(key).encode() + b':"\\udfff"',
        "deep": json.dumps(key).encode() + b":" + b"[" * 70 + b"]" * 70,
    }[how]
    return data[:1] + splice + (b"," if len(data) > 2 else b"") + data[1:]


def hostile_bytes(bases: Sequence[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    """The bytes of a document a reader of ``bases``' type may meet: valid, mutated, broken, or junk."""
    base = st.sampled_from(list(bases))
    return st.one_of(
        base.map(compact),
        base.flatmap(mutated).map(compact),
        base.flatmap(mutated).flatmap(broken_encoding),
        base.flatmap(broken_encoding),
        st.sampled_from(HOSTILE_TEXTS),
        JSON.map(compact),
        st.binary(max_size=64),
    )
