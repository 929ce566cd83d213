"""SHA-256 digests the protocol pins: file bytes, job.json bytes, and the canonical tree digest (D11).

The canonical tree digest is SHA-256 over the tree's entries in bytewise order of their relative POSIX
paths. A directory contributes ``b"D\\0" + path + b"\\0"``, a regular file ``b"F\\0" + path + b"\\0"``
followed by its bytes. Paths are the raw filename bytes joined by ``/``. The root directory itself is not
an entry, so an empty directory digests to SHA-256 of nothing. Symbolic links, FIFOs, sockets and devices
anywhere in the tree are refused with :class:`UnsafePathError` naming their relative path.

With ``exclude_payload_private`` (the payload digest), the top-level ``.httk-job``, ``.httk-transfer``
(a detached bundle's metadata, which describes the payload and so cannot be part of its digest) and
every top-level ``.httk-attempt.*`` are left out entirely, whatever their file type: they are runner-,
manager- and transfer-owned areas. The same names deeper in the tree are ordinary entries.

Why not "sort each directory and recurse": global bytewise order interleaves a directory's contents
with its siblings. ``a/b`` sorts after ``a-b`` and ``a.b`` ('/' is 0x2f, after '-' 0x2d and '.' 0x2e)
while ``a`` itself sorts before them. So each directory is scheduled as two events among its siblings:
its own entry under the key ``name`` and its contents under ``name + "/"``. Since no name contains
``/``, a directory's contents are contiguous in the global order and the walk streams the digest without
collecting every path first.

Invariant: entries are fed to the hash in strictly increasing bytewise order of their relative paths.

Files and directories are opened relative to their already opened parent with ``O_NOFOLLOW`` (and files
with ``O_NONBLOCK``, then checked with ``fstat``), so an entry swapped for a symlink or FIFO between
listing and opening is refused too. I/O errors other than these are not properties of the tree and are
raised unchanged as ``OSError``.

Cost: one open per directory and file, one ``fstat`` per file, reading every byte once in 1 MiB chunks;
memory O(depth x directory width). Open descriptors: one per directory level.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import UnsafePathError

if TYPE_CHECKING:
    from hashlib import _Hash

CHUNK_BYTES = 1 << 20
PAYLOAD_PRIVATE_DIR = ".httk-job"
ATTEMPT_DIR_PREFIX = ".httk-attempt."
TRANSFER_DIR = ".httk-transfer"

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC

_FILE, _DIR_ENTRY, _DIR_CONTENTS = 0, 1, 2
_PRIVATE_NAMES = frozenset({PAYLOAD_PRIVATE_DIR, TRANSFER_DIR})


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``.

    Examples
    --------
    >>> sha256_bytes(b"")[:16]
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(data).hexdigest()


def job_digest(job_json_bytes: bytes) -> str:
    """The immutable job digest: hex SHA-256 of job.json exactly as stored, never renormalized.

    Examples
    --------
    >>> job_digest(b"{}\\n") == sha256_bytes(b"{}\\n")
    True
    """
    return hashlib.sha256(job_json_bytes).hexdigest()


def sha256_file(path: Path | str) -> str:
    """Hex SHA-256 of a regular file's bytes, read in chunks without following a final symlink.

    Raises
    ------
    UnsafePathError
        ``path`` is a symbolic link or not a regular file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "runner"
    >>> _ = p.write_bytes(b"")
    >>> sha256_file(p) == sha256_bytes(b"")
    True
    """
    hasher = hashlib.sha256()
    fd = _open_file(path, None, "file", "", path)
    try:
        _feed(hasher, fd, bytearray(CHUNK_BYTES))
    finally:
        os.close(fd)
    return hasher.hexdigest()


def tree_digest(
    root: Path | str, *, exclude_payload_private: bool = False, skip: Collection[str] = ()
) -> str:
    """Hex canonical tree digest (D11) of the directory ``root``.

    Parameters
    ----------
    root
        The directory to digest; it must not itself be a symbolic link. It contributes no entry.
    exclude_payload_private
        Leave out the top-level ``.httk-job``, ``.httk-transfer`` and ``.httk-attempt.*`` (the payload
        digest).
    skip
        Relative paths (``/``-separated, below ``root``) left out with everything below them: what a
        detached transfer left behind.

    Raises
    ------
    UnsafePathError
        ``root`` or an entry below it is a symbolic link or a special file; ``member`` is the relative path.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "x").write_bytes(b"1")
    >>> tree_digest(root) == sha256_bytes(b"F\\0x\\0" + b"1")
    True
    """
    hasher = hashlib.sha256()
    buffer = bytearray(CHUNK_BYTES)
    root_text = os.fspath(root)
    skipped = frozenset(os.fsencode(path) for path in skip)
    stack: list[tuple[int, Iterator[tuple[bytes, int, str]]]] = []
    root_fd = _open_dir(root, None, root_text, "")
    try:
        stack.append((root_fd, _events(root_fd, b"", root_text, exclude_payload_private, skipped)))
        while stack:
            dir_fd, events = stack[-1]
            event = next(events, None)
            if event is None:
                stack.pop()
                os.close(dir_fd)
                continue
            key, kind, name = event
            if kind == _DIR_ENTRY:
                hasher.update(b"D\0" + key + b"\0")
            elif kind == _FILE:
                hasher.update(b"F\0" + key + b"\0")
                fd = _open_file(name, dir_fd, "tree", _display(key), _join(root_text, key))
                try:
                    _feed(hasher, fd, buffer)
                finally:
                    os.close(fd)
            else:
                rel = key[:-1]
                child = _open_dir(name, dir_fd, _join(root_text, rel), _display(rel))
                stack.append((child, _events(child, key, root_text, False, skipped)))
    finally:
        for dir_fd, _ in stack:
            os.close(dir_fd)
    return hasher.hexdigest()


def _events(
    dir_fd: int, prefix: bytes, root_text: str, exclude: bool, skipped: frozenset[bytes]
) -> Iterator[tuple[bytes, int, str]]:
    """The sorted events of one directory: (relative-path key, kind, name to open)."""
    events: list[tuple[bytes, int, str]] = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            name = entry.name
            if exclude and (name in _PRIVATE_NAMES or name.startswith(ATTEMPT_DIR_PREFIX)):
                continue
            rel = prefix + os.fsencode(name)
            if rel in skipped:
                continue
            if entry.is_dir(follow_symlinks=False):
                events.append((rel, _DIR_ENTRY, name))
                events.append((rel + b"/", _DIR_CONTENTS, name))
            elif entry.is_file(follow_symlinks=False):
                events.append((rel, _FILE, name))
            else:
                what = "a symbolic link" if entry.is_symlink() else "a special file"
                raise UnsafePathError(
                    "tree",
                    _display(rel),
                    f"is {what}; a digested tree holds only files and directories",
                    _join(root_text, rel),
                )
    events.sort()
    return iter(events)


def _open_dir(name: Path | str, dir_fd: int | None, where: str, member: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        # Linux reports a symlink opened with O_DIRECTORY | O_NOFOLLOW as ENOTDIR, others as ELOOP.
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:
            is_link = stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
        except OSError:
            is_link = exc.errno == errno.ELOOP
        rule = "is a symbolic link" if is_link else "is not a directory"
        raise UnsafePathError("tree", member, rule, where) from exc


def _open_file(name: Path | str, dir_fd: int | None, document: str, member: str, where: Path | str) -> int:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(document, member, "is a symbolic link", where) from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnsafePathError(document, member, "is not a regular file", where)
    return fd


def _feed(hasher: _Hash, fd: int, buffer: bytearray) -> None:
    view = memoryview(buffer)
    with open(fd, "rb", buffering=0, closefd=False) as stream:
        while count := stream.readinto(view):
            hasher.update(view[:count])


def _display(rel: bytes) -> str:
    return os.fsdecode(rel)


def _join(root_text: str, rel: bytes) -> str:
    return f"{root_text.rstrip('/')}/{os.fsdecode(rel)}" if rel else root_text
