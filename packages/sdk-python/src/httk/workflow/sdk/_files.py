"""How the SDK writes files: compact JSON, atomic replacement, and synchronization when durable.

Every file the SDK writes becomes visible only through a rename, so a reader sees the old document or the
new one, never a torn one. With ``durable`` the bytes are synchronized before that rename and the
directory after it -- the specification's durability table for job state, observed declarations and
(via :mod:`._outcome`) published outcomes. Nothing else is synchronized: directories the SDK creates are
named in their parent, and the parent is synchronized, before anything inside them becomes authoritative.

Cost: one ``open``/``write``/``close``/``rename`` per document, plus two ``fsync`` calls when durable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    # What the SDK's file functions take: strings on the attempt's own path (pathlib's import would cost
    # every runner a third of an interpreter start), any path-like object from a caller.
    StrPath: TypeAlias = "str | os.PathLike[str]"

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def _plain(value: object) -> object:
    """Let the encoder write any read-only mapping (such as ``Attempt.children`` items) as an object."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a value of type {type(value).__name__} cannot be written as JSON")


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_plain)


def compact_json(document: object) -> bytes:
    """One line of compact UTF-8 JSON with a trailing newline, as docs/outcome-documents.md specifies.

    The escaping is exactly ``json.dumps(..., ensure_ascii=False)``'s. The caller has checked the value
    with :func:`._checks.json_problem`; a lone surrogate still raises ``UnicodeEncodeError`` here.
    """
    return _ENCODER.encode(document).encode("utf-8") + b"\n"


def plain_json(value: object) -> Any:
    """``value`` as JSON decodes it back: mappings become dicts, tuples lists (checked values only)."""
    return json.loads(_ENCODER.encode(value))


def nonce() -> str:
    """A name component no other process or call will choose: the process id and 48 random bits."""
    return f"{os.getpid()}.{os.urandom(6).hex()}"


def write_new(path: StrPath, data: bytes, *, sync: bool = False, mode: int = 0o644) -> None:
    """Create ``path`` exclusively (``mode``, less the umask) and write ``data``; ``sync`` fsyncs it."""
    fd = os.open(path, _CREATE, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: StrPath, *, directory: bool = False) -> None:
    """Synchronize a file's contents, or a directory's names, to storage."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(root: StrPath, relative: str, *, durable: bool) -> str:
    """Create the missing directories of ``root/relative`` (``root`` exists); return the full path.

    With ``durable`` the parent of every directory created is synchronized, so the new name survives.
    """
    current = os.fspath(root)
    for part in relative.split("/"):
        parent, current = current, os.path.join(current, part)
        try:
            os.mkdir(current)
        except FileExistsError:
            continue
        if durable:
            fsync_path(parent, directory=True)
    return current


def replace_atomically(path: StrPath, data: bytes, *, durable: bool) -> None:
    """Replace ``path`` with ``data`` through a temporary name in the same directory.

    Order: write the temporary file, synchronize it (durable), rename it over ``path``, synchronize the
    directory (durable). On any failure the temporary file is removed and the error propagates. The file
    is created 0666 less the umask, as the Bash API's redirection creates the same documents.
    """
    folder, name = os.path.split(os.fspath(path))
    temporary = os.path.join(folder, f".{name}.tmp.{nonce()}")
    try:
        write_new(temporary, data, sync=durable, mode=0o666)
        os.rename(temporary, path)
    except BaseException:
        remove_quietly(temporary)
        raise
    if durable:
        fsync_path(folder or ".", directory=True)


def remove_quietly(path: StrPath) -> None:
    """Unlink ``path`` if it can be: what is left of a failed write, which nothing will read."""
    try:
        os.unlink(path)
    except OSError:
        return
