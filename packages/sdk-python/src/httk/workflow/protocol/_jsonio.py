"""Reading and writing the protocol's JSON documents as untrusted input.

Every protocol document (job.json, format.json, context.json, outcome.json, a request, a spawn set) is
read through :func:`read_json_object` or :func:`parse_json_object`. They guarantee that what they return
is a ``dict`` decoded from at most ``max_bytes`` bytes of strict UTF-8 JSON (RFC 8259) with

- no byte-order mark, no ``NaN``/``Infinity`` constants and no number that overflows a double,
- no duplicate key in any object (the first and last spelling of a member can never disagree),
- no lone UTF-16 surrogate in any string (so every value can be written back as UTF-8),
- at most :data:`MAX_NESTING_DEPTH` nested arrays and objects,

and that the file was a regular file reached without following a symbolic link in its last component
(``O_NOFOLLOW``; ``O_NONBLOCK`` so that a FIFO planted under a protocol name cannot block the reader).
Every failure, including an ``OSError``, becomes an :class:`InvalidDocumentError` naming the path and the
defect; the original ``OSError`` stays reachable as ``__cause__`` (a caller that must tell a missing file
from a broken one checks ``isinstance(exc.__cause__, FileNotFoundError)``).

Cost: the decoder is CPython's C scanner with three small Python hooks (objects, floats, constants). The
nesting and surrogate checks walk the decoded value only when a cheap test on the text says they might
fail: more ``[``/``{`` than the depth limit, or a ``\\uD800``-``\\uDFFF`` escape. A typical job.json pays
for neither.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._errors import ForeignOwnerError, InvalidDocumentError, UnsafePathError

MAX_DOCUMENT_BYTES = 1 << 20
"""Default size limit of one protocol document (1 MiB)."""

MAX_NESTING_DEPTH = 64
"""Deepest allowed nesting of arrays and objects; the top-level object is depth 1."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"
_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_PRETTY = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=2)


class _RefusedError(Exception):
    """Raised from inside a decoder hook; translated into InvalidDocumentError by the caller."""


def _object_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RefusedError(f"has a duplicate object key {key!r}")
            seen.add(key)
    return obj


def _float_hook(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _RefusedError(f"has a number too large for a double: {text[:40]}")
    return value


def _constant_hook(text: str) -> Any:
    raise _RefusedError(f"uses the non-JSON constant {text}")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object_hook, parse_float=_float_hook, parse_constant=_constant_hook
)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def read_document_bytes(
    path: Path | str, document: str, max_bytes: int = MAX_DOCUMENT_BYTES, *, owner: int | None = None
) -> bytes:
    """The bytes of a regular, non-symlink file of at most ``max_bytes`` (errors as in read_json_object).

    With ``owner`` (a uid) a file another account owns is refused with :class:`ForeignOwnerError`,
    judged on the opened file itself, so no rename between a check and the read can slip one in.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(
                document, "", "is a symbolic link; protocol documents are never read through one", path
            ) from exc
        raise InvalidDocumentError(document, "", f"cannot be opened: {exc.strerror or exc}", path) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(document, "", f"is {_kind(st.st_mode)}, not a regular file", path)
        if owner is not None and st.st_uid != owner:
            raise ForeignOwnerError(document, "", f"is owned by uid {st.st_uid}, not by this account", path)
        if st.st_size > max_bytes:
            raise InvalidDocumentError(
                document, "", f"is {st.st_size} bytes, over the limit of {max_bytes} bytes", path
            )
        limit = max_bytes + 1
        chunks: list[bytes] = []
        total = 0
        request = min(limit, st.st_size + 1)
        while total < limit:
            chunk = os.read(fd, request)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            request = min(limit - total, _READ_CHUNK)
    except OSError as exc:
        raise InvalidDocumentError(document, "", f"cannot be read: {exc.strerror or exc}", path) from exc
    finally:
        os.close(fd)
    if total > max_bytes:
        raise InvalidDocumentError(document, "", f"grew over the limit of {max_bytes} bytes", path)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_json_object(
    path: Path | str, *, document: str, max_bytes: int = MAX_DOCUMENT_BYTES
) -> dict[str, Any]:
    """Read one protocol document from a regular file, refusing symlinks, oversize and non-strict JSON.

    Parameters
    ----------
    path
        The file to read; its last component must not be a symbolic link.
    document
        What the file is (``"job.json"``), used in error messages.
    max_bytes
        The largest accepted file size.

    Raises
    ------
    UnsafePathError
        The path is a symbolic link or not a regular file.
    InvalidDocumentError
        The file cannot be read, is too large, or is not a strict JSON object.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "doc.json"
    >>> _ = p.write_bytes(b'{"format_version": 1}')
    >>> read_json_object(p, document="doc.json")
    {'format_version': 1}
    """
    data = read_document_bytes(path, document, max_bytes)
    return parse_json_object(data, document=document, path=path, max_bytes=max_bytes)


def parse_json_object(
    data: bytes,
    *,
    document: str,
    path: Path | str | None = None,
    max_bytes: int = MAX_DOCUMENT_BYTES,
) -> dict[str, Any]:
    """Decode ``data`` as a strict UTF-8 JSON object, with the checks of :func:`read_json_object`.

    Examples
    --------
    >>> parse_json_object(b'{"a": [1, 2.5, "x"]}', document="example")
    {'a': [1, 2.5, 'x']}
    >>> parse_json_object(b'{"a": 1, "a": 2}', document="example")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    httk.workflow.protocol._errors.InvalidDocumentError: invalid example: has a duplicate object key 'a'
    """
    size = len(data)
    if size > max_bytes:
        raise InvalidDocumentError(
            document, "", f"is {size} bytes, over the limit of {max_bytes} bytes", path
        )
    if data[:3] == _BOM:
        raise InvalidDocumentError(
            document, "", "starts with a byte-order mark; JSON here is plain UTF-8", path
        )
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDocumentError(
            document, "", f"is not valid UTF-8 at byte {exc.start}: {exc.reason}", path
        ) from None
    try:
        value = _DECODER.decode(text)
    except _RefusedError as exc:
        raise InvalidDocumentError(document, "", str(exc), path) from None
    except RecursionError:
        raise InvalidDocumentError(
            document, "", f"nests arrays and objects deeper than {MAX_NESTING_DEPTH} levels", path
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidDocumentError(
            document, "", f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", path
        ) from None
    except ValueError as exc:  # an integer beyond the interpreter's digit limit
        raise InvalidDocumentError(document, "", f"has an unrepresentable number: {exc}", path) from None
    if not isinstance(value, dict):
        raise InvalidDocumentError(
            document, "", f"must be a JSON object at the top level, not {_json_type(value)}", path
        )
    if text.count("[") + text.count("{") > MAX_NESTING_DEPTH and _too_deep(value, MAX_NESTING_DEPTH):
        raise InvalidDocumentError(
            document, "", f"nests arrays and objects deeper than {MAX_NESTING_DEPTH} levels", path
        )
    if _SURROGATE_ESCAPE_RE.search(text) and _has_lone_surrogate(value):
        raise InvalidDocumentError(document, "", "has a string with an unpaired UTF-16 surrogate", path)
    return value


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _too_deep(value: object, limit: int) -> bool:
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children: Iterable[object] = node.values() if isinstance(node, dict) else ()
        if isinstance(node, list):
            children = node
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


def _has_lone_surrogate(value: object) -> bool:
    stack: list[object] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE_RE.search(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def dump_compact(obj: object) -> bytes:
    """Serialize ``obj`` compactly as UTF-8 JSON (no spaces, no ASCII escaping, no NaN).

    This is the form of machine-facing documents and of every size limit the protocol states
    (``inputs``, ``declarations``). Raises ``ValueError`` for NaN, infinities, circular structures and
    unpaired surrogates, ``TypeError`` for values JSON cannot represent.

    Examples
    --------
    >>> dump_compact({"a": [1, "é"]})
    b'{"a":[1,"\\xc3\\xa9"]}'
    """
    return _COMPACT.encode(obj).encode("utf-8")


def dump_pretty(obj: object) -> bytes:
    """Serialize ``obj`` for human-facing files (job.json, format.json): indent 2, trailing newline.

    The bytes are exactly ``json.dumps(obj, indent=2, ensure_ascii=False)`` and a newline: the layout the
    Bash API reads context.json by. They are written by :func:`_layout`, which encodes strings with the
    C encoder; the standard pretty-printer, a generator per container in pure Python, cost a manager a
    tenth of a millisecond per attempt. Anything the writer does not handle itself (a non-string key, a
    number JSON cannot hold, a cycle) goes to the standard encoder, which also words the errors.

    Examples
    --------
    >>> print(dump_pretty({"format_version": 1}).decode(), end="")
    {
      "format_version": 1
    }
    """
    parts: list[str] = []
    try:
        _layout(obj, parts, "\n")
    except (_UnusualValueError, RecursionError):
        return _PRETTY.encode(obj).encode("utf-8") + b"\n"
    parts.append("\n")
    return "".join(parts).encode("utf-8")


class _UnusualValueError(Exception):
    """A value :func:`_layout` leaves to the standard encoder."""


_encode_text = json.encoder.encode_basestring  # the C function where CPython has it (ensure_ascii=False)


def _layout(value: object, out: list[str], newline: str) -> None:
    """Append ``value`` as indent-2 JSON; ``newline`` is a newline and the indentation of its line."""
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, member in value.items():
            if not isinstance(key, str):
                raise _UnusualValueError
            out.append(separator)
            out.append(_encode_text(key))
            out.append(": ")
            _member(member, out, inner)
            separator = "," + inner
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for member in value:
            out.append(separator)
            _member(member, out, inner)
            separator = "," + inner
        out.append(newline + "]")
    else:
        _member(value, out, newline)


def _member(value: object, out: list[str], newline: str) -> None:
    """One value: scalars here (most members are), containers through :func:`_layout`."""
    if isinstance(value, str):
        out.append(_encode_text(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float) and math.isfinite(value):
        out.append(float.__repr__(value))
    elif isinstance(value, dict | list | tuple):
        _layout(value, out, newline)
    else:
        raise _UnusualValueError


def has_format(document: Mapping[str, object], name: str) -> bool:
    """Whether ``document`` is format ``name`` at ``format_version`` 1 (the integer: ``true`` is no 1)."""
    version = document.get("format_version")
    return document.get("format") == name and type(version) is int and version == 1
