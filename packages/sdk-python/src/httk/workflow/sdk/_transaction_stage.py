"""Staging a transaction's payload inside an outcome draft: private copies, digests, synchronization.

What :class:`Stager` guarantees: every put's source is copied to ``transaction/payload/<path>`` as a new
inode (never a link: writes through the caller's file must not reach committed data later), holding only
directories and regular files; a file's SHA-256 is computed while it is copied, a tree's canonical digest
(DECISIONS D11) over the staged copy by the protocol package's own implementation, so the manager's check
agrees by construction. With ``durable`` every staged file is synchronized before it is closed and every
directory, deepest first, before :func:`stage_transaction <._transaction.stage_transaction>` returns.

Why a separate module: it is imported only when an outcome carries a transaction, so a runner that never
uses one pays nothing for it.

Cost: one read and one write of every staged byte, one more read of a staged tree for its digest.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from ._files import fsync_path, write_new
from ._sha256 import sha256_hex
from ._transaction import PAYLOAD_DIR, TransactionError, _Pending

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._files import StrPath

_CHUNK = 1 << 20
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


class Stager:
    """Copies sources into ``payload/``, remembering every directory to synchronize."""

    def __init__(self, root: str, durable: bool) -> None:
        self.root = root
        self.durable = durable
        self.dirs: list[str] = []

    def make_dir(self, path: str) -> None:
        os.mkdir(path)
        self.dirs.append(path)

    def discard(self) -> None:
        """Remove a partial ``transaction/``, only if this stager created it (best effort)."""
        if self.dirs:
            import shutil  # only on failure: shutil pulls in the compression modules

            shutil.rmtree(self.dirs[0], ignore_errors=True)

    def stage(self, op: _Pending) -> dict[str, Any]:
        document: dict[str, Any] = {"id": op.id, "op": op.op}
        if op.content is not None:
            source = f"{PAYLOAD_DIR}/{op.path}"
            target = self._parent_dirs(op.path)
            if op.op == "put-file":
                digest = self._copy_file(op.content, target, op.id)
            else:
                assert isinstance(op.content, str)
                self._copy_tree(op.content, target, op.id)
                from httk.workflow.protocol._digest import tree_digest  # only when a tree is staged

                digest = tree_digest(target)
            document.update(source=source, path=op.path, sha256=digest)
        else:
            document["path"] = op.path
        if op.parents:
            document["parents"] = True
        if op.missing_ok:
            document["missing_ok"] = True
        if op.require_absent:
            document["require_absent"] = True
        if op.expected_sha256 is not None:
            document["expected_sha256"] = op.expected_sha256
        return document

    def _parent_dirs(self, relative: str) -> str:
        current = os.path.join(self.root, PAYLOAD_DIR)
        *parents, name = relative.split("/")
        for part in parents:
            current = os.path.join(current, part)
            if not os.path.isdir(current):
                self.make_dir(current)
        return os.path.join(current, name)

    def _copy_file(self, content: bytes | str, target: str, op_id: str, *, follow: bool = True) -> str:
        if isinstance(content, bytes):
            write_new(target, content, sync=self.durable)
            return sha256_hex(content)
        try:
            in_fd = os.open(content, _READ_FLAGS if follow else _READ_FLAGS | os.O_NOFOLLOW)
        except OSError as exc:
            raise TransactionError(
                f"source cannot be read: {exc.strerror}", operation=op_id, path=content
            ) from exc
        try:
            if not stat.S_ISREG(os.fstat(in_fd).st_mode):
                raise TransactionError("source is no longer a regular file", operation=op_id, path=content)
            return _copy_hashing(in_fd, target, os.fstat(in_fd).st_mode, sync=self.durable)
        finally:
            os.close(in_fd)

    def _copy_tree(self, source: str, target: str, op_id: str) -> None:
        # Invariant: the staged tree holds only directories and regular files, each a new inode.
        self.make_dir(target)
        stack: list[tuple[str, str]] = [(source, target)]
        while stack:
            source_dir, target_dir = stack.pop()
            with os.scandir(source_dir) as entries:
                children: Sequence[os.DirEntry[str]] = sorted(entries, key=lambda entry: entry.name)
            for entry in children:
                mode = entry.stat(follow_symlinks=False).st_mode
                child = os.path.join(target_dir, entry.name)
                if stat.S_ISDIR(mode):
                    self.make_dir(child)
                    stack.append((entry.path, child))
                elif stat.S_ISREG(mode):
                    self._copy_file(entry.path, child, op_id, follow=False)
                else:
                    what = "a symbolic link" if stat.S_ISLNK(mode) else "a device, socket or FIFO"
                    raise TransactionError(
                        f"source tree holds {what}; a transaction carries only files and directories",
                        operation=op_id,
                        path=entry.path,
                    )

    def synchronize(self, draft_dir: StrPath) -> None:
        for directory in reversed(self.dirs):  # the deepest first, transaction/ itself last
            fsync_path(directory, directory=True)
        fsync_path(draft_dir, directory=True)


def _copy_hashing(in_fd: int, target: str, mode: int, *, sync: bool) -> str:
    import hashlib  # a file of any size: OpenSSL's digest (see ._sha256)

    hasher = hashlib.sha256()
    out_fd = os.open(target, _CREATE, 0o600)
    try:
        while chunk := os.read(in_fd, _CHUNK):
            hasher.update(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(out_fd, view) :]
        os.fchmod(out_fd, stat.S_IMODE(mode) & 0o777)
        if sync:
            os.fsync(out_fd)
    finally:
        os.close(out_fd)
    return hasher.hexdigest()


def uuid4() -> str:
    """A random (version 4) UUID in canonical form, without importing ``uuid``."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
