"""What every hostile-input test checks: the tree did not change, and the refusal names what it refused.

:func:`snapshot` records a directory tree without following anything (names as bytes, so a name that is
not UTF-8 is recorded too): each entry's type, permission bits, size, link count, modification time and,
for a regular file, a digest of its bytes; for a symbolic link, its target. Two snapshots are equal
exactly when nobody created, removed, renamed, rewrote or re-linked anything below the root.

:func:`assert_clear_refusal` is the verdict on one refusal: the text names the document it refused and,
when the refused bytes were a JSON object the schema refuses, one of the members the schema finds at
fault (the engine names the first defect it meets; the schema lists every one, so the engine's must be
among them).

The profiles of hypothesis are registered in ``tests/conftest.py``: ``./dev test`` runs the derandomized
``ci`` profile (a fixed sequence of examples), ``./dev fuzz`` the ``fuzz`` profile (10,000 examples per
document type, a seed printed so a failure can be replayed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from httk.workflow.models import validator

DOCUMENTS = Path(__file__).resolve().parents[1] / "models" / "documents"

Entry = tuple[str, int, int, int, int, str]
"""An entry of a snapshot: type, permission bits, size, links, mtime in ns, digest or link target."""


def _entry(path: bytes, info: os.stat_result) -> Entry:
    mode = info.st_mode
    detail = ""
    if stat.S_ISREG(mode):
        detail = _digest(path, info.st_size)
        kind = "file"
    elif stat.S_ISLNK(mode):
        detail = os.fsdecode(os.readlink(path))
        kind = "symlink"
    elif stat.S_ISDIR(mode):
        kind = "dir"
    else:
        kind = {stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFCHR: "chr", stat.S_IFBLK: "blk"}.get(
            stat.S_IFMT(mode), "other"
        )
    # A directory's size and mtime follow its entries, which the snapshot already holds one by one.
    size, mtime = (0, 0) if kind == "dir" else (info.st_size, info.st_mtime_ns)
    return kind, stat.S_IMODE(mode), size, info.st_nlink if kind != "dir" else 0, mtime, detail


def _digest(path: bytes, size: int) -> str:
    if size > 64 << 20:  # a sparse giant: its size and mtime stand for its bytes
        return f"large:{size}"
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def snapshot(root: Path) -> dict[bytes, Entry]:
    """Every entry below ``root`` (``root`` itself included, whatever it is), keyed by its relative path
    in bytes."""
    base = os.fsencode(root)
    info = os.lstat(base)
    found: dict[bytes, Entry] = {b".": _entry(base, info)}
    stack = [base] if stat.S_ISDIR(info.st_mode) else []
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as listing:
            for item in listing:
                info = item.stat(follow_symlinks=False)
                found[os.path.relpath(item.path, base)] = _entry(item.path, info)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(item.path)
    return found


def changes(before: dict[bytes, Entry], after: dict[bytes, Entry]) -> list[str]:
    """What differs between two snapshots, one line per path (empty when nothing changed)."""
    lines = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old != new:
            lines.append(f"{path!r}: {old} -> {new}")
    return lines


@contextmanager
def unchanged(*roots: Path) -> Iterator[None]:
    """Assert that nothing below any of ``roots`` changed while the block ran (an error leaving it too)."""
    before = [snapshot(root) for root in roots]
    try:
        yield
    finally:
        for root, old in zip(roots, before, strict=True):
            diff = changes(old, snapshot(root))
            assert not diff, f"{root} changed:\n" + "\n".join(diff[:20])


def document(name: str) -> dict[str, Any]:
    """A committed example document of ``tests/models/documents``."""
    loaded: dict[str, Any] = json.loads((DOCUMENTS / name).read_text())
    return loaded


def decoded_object(data: bytes) -> dict[str, Any] | None:
    """``data`` as a JSON object when a strict reader can decode it as one, else ``None``."""
    from httk.workflow.protocol import InvalidDocumentError
    from httk.workflow.protocol._jsonio import parse_json_object

    try:
        return parse_json_object(data, document="probe")
    except InvalidDocumentError:
        return None


_QUOTED = re.compile(r"'([^']*)'")


def culprits(schema: str, document: object) -> set[str]:
    """Every member name the schema finds at fault in ``document``: the path of each error, the member
    a ``required`` error misses, the members an ``additionalProperties`` error does not allow."""
    names: set[str] = set()
    pending = list(validator(schema).iter_errors(document))
    while pending:
        error = pending.pop()
        names.update(part for part in error.absolute_path if isinstance(part, str))
        if error.validator in ("required", "additionalProperties", "dependentRequired", "propertyNames"):
            names.update(_QUOTED.findall(error.message))
        pending.extend(error.context or ())
    return {name for name in names if name}


def names_word(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` as a whole member name (not inside a longer one)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", text) is not None


def assert_clear_refusal(
    text: str, *, document: str, schema: str | None = None, data: bytes | None = None
) -> None:
    """The refusal ``text`` names ``document`` and, for a JSON object the schema refuses, a member at
    fault."""
    assert document in text, f"the refusal does not name {document}: {text}"
    if schema is None or data is None:
        return
    parsed = decoded_object(data)
    if parsed is None:
        return  # not an object at all: the document as a whole is at fault
    at_fault = culprits(schema, parsed)
    if at_fault:
        assert any(names_word(text, name) for name in at_fault), (
            f"the refusal names none of the members the schema finds at fault {sorted(at_fault)}: {text}"
        )
