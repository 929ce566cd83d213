"""The system calls behind some of the seam's operations, which are not numbered themselves.

:mod:`._fsops` numbers each of its operations as one mutation, whatever number of system calls it
makes; what those calls are, for the operations that walk a tree, copy bytes or rename without
replacing, is here. Nothing in this module consults the fault plan or counts, so nothing but the seam
calls it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from contextlib import suppress
from pathlib import Path

COPY_CHUNK = 1 << 20
_RENAME_NOREPLACE = 1
_renameat2: object | None = None  # the libc function, False when unavailable, None before the first probe
TREE_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_COPY_FALLBACK_ERRNOS = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM})


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def copy_bytes(in_fd: int, out_fd: int) -> None:
    """Copy what is left of ``in_fd`` to ``out_fd``, in the kernel where the filesystems allow it."""
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is not None:
        try:
            while copy_range(in_fd, out_fd, COPY_CHUNK):
                pass
            return
        except OSError as exc:
            if exc.errno not in _COPY_FALLBACK_ERRNOS:
                raise
    # Both offsets stand where copy_file_range stopped, so the plain copy continues from there.
    while chunk := os.read(in_fd, COPY_CHUNK):
        write_all(out_fd, chunk)


def remove_all(path: Path | str) -> None:
    """``shutil.rmtree(path, ignore_errors=True)`` from an explicit stack, children before parents.

    Python 3.11's ``rmtree`` recurses, and a tree a runner left may be deeper than the interpreter's
    recursion limit. Each directory is opened relative to its opened parent without following a link
    (one descriptor per level), a link is unlinked as a link, and what cannot be removed is left.
    """
    try:
        top = os.open(path, TREE_DIR_FLAGS)
    except OSError:
        with suppress(OSError):
            os.unlink(path)  # a file or a link where the directory was
        return
    stack: list[tuple[int, Iterator[str], str]] = [(top, iter(_listed(top)), "")]
    while stack:
        fd, names, own_name = stack[-1]
        name = next(names, None)
        if name is None:
            stack.pop()
            os.close(fd)
            if stack:  # now empty, unless something could not be removed
                with suppress(OSError):
                    os.rmdir(own_name, dir_fd=stack[-1][0])
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:
            with suppress(OSError):
                child = os.open(name, TREE_DIR_FLAGS, dir_fd=fd)
                stack.append((child, iter(_listed(child)), name))
        except OSError:
            continue
    with suppress(OSError):
        os.rmdir(path)


def _listed(dir_fd: int) -> list[str]:
    try:
        return os.listdir(dir_fd)
    except OSError:
        return []


def remove_expected(path: Path | str, expected: Sequence[str]) -> bool:
    """Remove ``expected`` and then ``path`` itself by name; False when a walk is still needed."""
    if not expected:
        return False
    try:
        dir_fd = os.open(path, TREE_DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not all(_remove_beneath(dir_fd, name) for name in expected):
            return False
    finally:
        os.close(dir_fd)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _remove_beneath(dir_fd: int, relative: str) -> bool:
    """Unlink (or rmdir) ``relative`` below ``dir_fd``, opening each parent without following a link.

    True when it is gone; False when the caller must walk instead (not empty, or a parent that is a
    link or not a directory, which a walk handles without following it).
    """
    parent, _, name = relative.rpartition("/")
    fd = dir_fd
    try:
        if parent:
            try:
                fd = os.open(parent, TREE_DIR_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                return True
            except OSError:
                return False
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return True
        except IsADirectoryError:
            try:
                os.rmdir(name, dir_fd=fd)
            except FileNotFoundError:
                return True
            except OSError:
                return False
        except OSError:
            return False
        return True
    finally:
        if fd != dir_fd:
            os.close(fd)


def _libc_renameat2() -> object | None:
    global _renameat2
    if _renameat2 is None:
        try:
            import ctypes
            import ctypes.util

            # The process's own symbols include the C library's: find_library would run ldconfig.
            libc = ctypes.CDLL(None, use_errno=True)
            function = libc.renameat2
            function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            function.restype = ctypes.c_int
            _renameat2 = function
        except (OSError, AttributeError):
            _renameat2 = False
    return _renameat2 or None


def rename_noreplace(src: Path | str, dst: Path | str) -> None:
    """Rename ``src`` to ``dst`` unless ``dst`` exists (``renameat2(RENAME_NOREPLACE)``)."""
    function = _renameat2 or (_libc_renameat2() if _renameat2 is None else None)
    if function is not None:
        at_fdcwd = -100
        result = function(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), _RENAME_NOREPLACE)  # type: ignore[operator]
        if result == 0:
            return
        import ctypes

        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err), str(src), None, str(dst))
    # No kernel support: refuse a visible destination, then rename. The verified-transition algorithm
    # that calls this resolves the remaining window by what it finds afterwards.
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)
