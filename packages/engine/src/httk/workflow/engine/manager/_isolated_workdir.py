"""Populating a new isolated workdir from a transactional job's committed ``data/``.

What it guarantees: the workdir starts as a copy of ``data/`` that shares no inode with it (a copy, or a
reflink a filesystem makes for ``copy_file_range``; never a hard link), so writes through the workdir
can never reach committed data before a transaction (spec "Isolated workdir"). Files keep their
permission bits and modification time; directories get the default mode so the runner can write there.

Why no mutation seam and no fsync: these are application files in a directory nobody reads until the
attempt's context.json (written afterwards, through the seam) says the attempt is prepared. A crash
part-way leaves a half-filled ``run.<attempt-id>/`` of an attempt that never started; the next attempt
gets a new one.

Cost: one ``scandir`` per directory and one copy of every byte of ``data/`` per attempt (a reflink on
filesystems that offer one); memory O(directory width).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from httk.workflow.engine.publish._transaction_manifest import TransactionError

_COPY_FALLBACK_ERRNOS = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM})
_COPY_CHUNK = 1 << 20


def populate_isolated_workdir(data_dir: Path, workdir: Path) -> int:
    """Copy committed ``data/`` into a new, empty isolated workdir; return how many files were copied.

    Every file is a new inode (``copy_file_range``, which a filesystem may serve as a reflink, else a
    plain copy) with the source's permission bits and modification time; never a hard link, so writes
    through the workdir cannot reach committed ``data/``. Directories get the default mode so the
    runner can write in them. An absent ``data/`` copies nothing. Not synchronized: the attempt is
    prepared only when its context.json exists, and a power cut before the runner starts loses the
    attempt, not data. Symbolic links and special files in ``data/`` are refused with
    :class:`TransactionError` (no transaction can create them).
    """
    try:
        mode = os.lstat(data_dir).st_mode
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(mode):
        raise TransactionError("committed data/ is not a directory", path=data_dir)
    copied = 0
    stack = [(data_dir, workdir)]
    while stack:
        source_dir, target_dir = stack.pop()
        with os.scandir(source_dir) as entries:
            children = sorted(entries, key=lambda entry: entry.name)
        for entry in children:
            target = target_dir / entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                os.mkdir(target)
                stack.append((Path(entry.path), target))
            elif stat.S_ISREG(mode):
                _copy_file(Path(entry.path), target)
                copied += 1
            else:
                what = "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
                raise TransactionError(
                    f"committed data holds {what}, which an isolated workdir does not copy", path=entry.path
                )
    return copied


def _copy_file(source: Path, target: Path) -> None:
    in_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(in_fd)
        out_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _copy_bytes(in_fd, out_fd)
            os.fchmod(out_fd, stat.S_IMODE(st.st_mode))
        finally:
            os.close(out_fd)
    finally:
        os.close(in_fd)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def _copy_bytes(in_fd: int, out_fd: int) -> None:
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is not None:
        try:
            while copy_range(in_fd, out_fd, _COPY_CHUNK):
                pass
            return
        except OSError as exc:
            if exc.errno not in _COPY_FALLBACK_ERRNOS:
                raise
    # Both offsets stand where copy_file_range stopped, so the plain copy continues from there.
    while chunk := os.read(in_fd, _COPY_CHUNK):
        view = memoryview(chunk)
        while view:
            view = view[os.write(out_fd, view) :]
