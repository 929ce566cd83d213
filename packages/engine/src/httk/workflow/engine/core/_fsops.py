"""The one seam through which the engine touches protocol state on the filesystem.

Every create, write, rename, mkdir, unlink and rmdir of protocol state goes through a function here, and
each of them reports itself to :func:`_mutated` afterwards. That is what makes crashes enumerable: a test
sets ``HTTK_WORKFLOW_CRASH_AFTER=k`` and the process exits abruptly (``os._exit``, no cleanup, no
``finally``) right after its k-th mutation, and ``HTTK_WORKFLOW_MUTATION_TRACE=FILE`` records one line
per mutation so a test can first count them and then crash after each one in turn.

The reads the protocol depends on go through here too: listings of state directories (:func:`scandir`),
marker probes (:func:`lexists`, :func:`is_file`) and journal segment opens (:func:`open_read`). Both
sides consult the fault plan (:mod:`._faults`, ``HTTK_WORKFLOW_FAULT=k:fault``), which can make mutation
k fail with ENOSPC or EIO (its write, fsync or rename), interrupt it (EINTR, retried here as libc
callers must), report a rename that happened as failed, or leave its new name invisible or the listings
it changed stale for a moment.

Durability follows the specification's table: with ``durable=True`` file contents are synchronized
before the name that makes them authoritative is published, and the directory holding a new or removed
name is synchronized after the namespace operation. ``fsync`` calls are not counted as mutations: a
process that dies after a write and before its fsync is indistinguishable, to a later process, from one
that died after the fsync.

Cost: one ``os.environ`` lookup at import; nothing per call beyond an integer increment.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from . import _faults, _fstree
from ._fstree import copy_bytes, remove_all, remove_expected

T = TypeVar("T")

# Module attributes, looked up at each call: a test may stand a torn write or a failing rename in place.
write_all = _fstree.write_all
_rename_noreplace = _fstree.rename_noreplace

CRASH_EXIT_STATUS = 86
"""Exit status of a process stopped by crash injection (distinct from every status we use otherwise)."""

_crash_after = int(os.environ.get("HTTK_WORKFLOW_CRASH_AFTER", "0") or 0)
_trace_path = os.environ.get("HTTK_WORKFLOW_MUTATION_TRACE") or None
_count = 0
_last = "create"  # the kind of the latest mutation: an fsync after it makes that one durable


def mutation_count() -> int:
    """How many mutations this process has performed through the seam."""
    return _count


def _mutated(what: str, path: Path | str) -> None:
    global _count, _last
    _count += 1
    _last = what
    if _trace_path is not None:
        fd = os.open(_trace_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{_count}\t{what}\t{path}\n".encode())
        finally:
            os.close(fd)
    if _crash_after and _count >= _crash_after:
        os._exit(CRASH_EXIT_STATUS)


def _call(what: str, op: Callable[[], T], *paths: Path | str) -> T:
    """The system call of the next mutation, through the fault plan; an interrupted call is retried."""
    while True:
        try:
            _faults.before(_count + 1, what, *paths)
            return op()
        except InterruptedError:
            continue


def _write(fd: int, data: bytes, what: str, path: Path | str) -> None:
    """Write all of ``data`` as the next mutation; an injected failure writes part of it first."""
    while True:
        try:
            fault = _faults.before(_count + 1, what, path)
            break
        except InterruptedError:
            continue
    if fault is not None:
        write_all(fd, data[: len(data) // 2])  # a device that fills up takes some of the bytes
        raise _faults.error(fault, path)
    write_all(fd, data)


def _sync(fd: int, path: Path | str) -> None:
    """fsync ``fd``, which makes the latest mutation durable (or fails as the plan says)."""
    failure = _faults.fsync_failure(_count, _last, path)
    if failure is not None:
        raise failure
    os.fsync(fd)


def fsync_dir(path: Path | str) -> None:
    """Synchronize a directory so that the names it holds survive a storage crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _sync(fd, path)
    finally:
        os.close(fd)


def fsync_file(path: Path | str) -> None:
    """Synchronize a file's contents (one a replay wrote through the seam and must make durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _sync(fd, path)
    finally:
        os.close(fd)


_SYNC_THREADS = 8
_sync_pool: object | None = None  # a ThreadPoolExecutor, made on the first batch that needs one


class OwedSyncs:
    """Directory synchronizations a batch owes and makes together, once, before what depends on them.

    A durable :func:`make_dir` or :func:`write_file_atomic` given one (``owed=``) synchronizes the
    file's contents as ever but leaves its directory to the batch: :func:`fsync_dirs` then synchronizes
    every owed directory with the others, concurrently. Whoever passes one must not let anything that
    depends on those names happen before that (a launch: no runner is released before it).
    """

    def __init__(self) -> None:
        self.owed: list[tuple[int, str, str]] = []  # (mutation number, its kind, the directory)
        self.plain: set[str] = set()  # directories owed for no mutation of their own (a rename's source)

    def owe(self, directory: Path | str) -> None:
        """The directory of the latest mutation, which it leaves unsynchronized."""
        self.owed.append((_count, _last, os.fspath(directory)))

    def owe_renames(self, parents: Iterable[str], renames: Mapping[int, Path | str]) -> None:
        """A batch of renames' directories (``renames`` as :func:`fsync_dirs` takes it)."""
        self.plain.update(parents)
        self.owed.extend((index, "rename", os.fspath(directory)) for index, directory in renames.items())

    @property
    def directories(self) -> set[str]:
        return {*self.plain, *(directory for _index, _what, directory in self.owed)}


def fsync_dirs(
    paths: Collection[Path | str],
    renames: Mapping[int, Path | str] | None = None,
    owed: OwedSyncs | None = None,
) -> None:
    """Synchronize several directories, concurrently when there are several.

    Storage serves concurrent flushes together (one device cache flush answers all that wait for it),
    so a batch of renames costs about one flush however many directories it touched; one after another
    they would cost one each. Returns once every directory is synchronized; the first error is raised.
    ``renames`` maps the number of each rename whose durability these fsyncs complete (made with
    ``durable=False``) to the directory of its new name: an fsync fault planned at any of them fails
    this batch, as it would have failed that rename's own fsync. The directories ``owed`` are
    synchronized too, and answer for their mutations' fsync faults likewise.
    """
    for index, directory in (renames or {}).items():
        failure = _faults.fsync_failure(index, "rename", directory)
        if failure is not None:
            raise failure
    if owed is not None:
        for index, what, directory in owed.owed:
            failure = _faults.fsync_failure(index, what, directory)
            if failure is not None:
                raise failure
        paths = sorted({*(os.fspath(path) for path in paths), *owed.directories})
    if len(paths) <= 1:
        for path in paths:
            fsync_dir(path)
        return
    global _sync_pool
    if _sync_pool is None:
        from concurrent.futures import ThreadPoolExecutor  # durable batches only: not for every start-up

        _sync_pool = ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix="httk-fsync")
    for future in [_sync_pool.submit(fsync_dir, path) for path in paths]:  # type: ignore[attr-defined]
        future.result()


def create_file(
    path: Path | str, data: bytes, *, durable: bool, mode: int = 0o644, exact_mode: bool = False
) -> None:
    """Create ``path`` exclusively (``O_EXCL``) with ``data``; fails with FileExistsError if present.

    The name is visible before the contents are complete, so use this only for names nobody reads
    until a later rename publishes them (staging entries) or whose readers tolerate a short file.
    With ``exact_mode`` the file gets ``mode`` whatever the umask (a script that must stay private).
    """
    fd = _call(
        "create", lambda: os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode), path
    )
    try:
        _mutated("create", path)
        _faults.after(_count, "create", path)
        if exact_mode:
            os.fchmod(fd, mode)
        if data:
            _write(fd, data, "write", path)
            _mutated("write", path)
        if durable:
            _sync(fd, path)
    finally:
        os.close(fd)


def create_streamed(
    path: Path | str, chunks: Iterable[bytes], *, durable: bool, mode: int = 0o644, mtime: float | None = None
) -> None:
    """Create ``path`` exclusively from ``chunks`` as :func:`create_file` does from bytes, never holding
    the whole file (a received one may be of any size); ``mode`` whatever the umask, and ``mtime``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = _call("create", lambda: os.open(path, flags, 0o600), path)
    try:
        _mutated("create", path)
        _faults.after(_count, "create", path)
        pieces = iter(chunks)
        _write(fd, next(pieces, b""), "write", path)
        for piece in pieces:
            write_all(fd, piece)
        _mutated("write", path)
        os.fchmod(fd, mode)
        if mtime is not None:
            os.utime(fd, (mtime, mtime))
        if durable:
            _sync(fd, path)
    finally:
        os.close(fd)


def sync_tree(path: Path | str) -> None:
    """Synchronize every file and directory of the tree ``path``, which another program wrote (rsync),
    before a rename publishes it; a link is left to the validation that refuses it."""
    for directory, _dirnames, filenames in os.walk(path, topdown=False):
        for name in filenames:
            if not os.path.islink(entry := os.path.join(directory, name)):
                fsync_file(entry)
        fsync_dir(directory)


def link_file(source: Path | str, path: Path | str) -> None:
    """Create ``path`` as another name (a hard link) of the file ``source``, never following a link;
    fails with FileExistsError if present, and with EXDEV when they are on different filesystems.

    Counted as a create: to a crash or a fault plan it is one more name appearing."""
    _call("create", lambda: os.link(source, path, follow_symlinks=False), path)
    _mutated("create", path)
    _faults.after(_count, "create", path)


def create_for_append(path: Path | str, *, dir_fd: int | None = None, flags: int = 0) -> int:
    """Create ``path`` exclusively and return a descriptor appending to it (not synchronized).

    For captured output a process writes through the descriptor; its name is scratch until the attempt
    is retired, so nothing is synchronized. Fails with FileExistsError if present, never following a link.
    ``path`` is relative to ``dir_fd`` when one is given; ``flags`` are added to the open's.
    """
    opening = flags | os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
    fd = _call("create", lambda: os.open(path, opening, 0o644, dir_fd=dir_fd), path)
    _mutated("create", path)
    _faults.after(_count, "create", path)
    return fd


def open_for_append(path: Path | str, *, dir_fd: int | None = None, flags: int = 0) -> int:
    """A descriptor appending to ``path``, which is created through the seam when it is missing.

    For evidence that grows over many processes (a job log, a manager log, captured output): only its
    creation is a mutation, its appends are :func:`append`'s. An existing name is opened as it is,
    never following a link; ``dir_fd`` and ``flags`` as :func:`create_for_append` takes them.
    """
    try:
        return create_for_append(path, dir_fd=dir_fd, flags=flags)
    except FileExistsError:
        return os.open(path, flags | os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def append(fd: int, pieces: Iterable[bytes], path: Path | str) -> None:
    """Append ``pieces`` to the evidence (a job log, not protocol state) open at ``fd``, as one mutation,
    not synchronized; an injected failure, as a full device, takes part of the first piece, then stops."""
    first = True
    for piece in pieces:
        if first:
            _write(fd, piece, "append", path)
            first = False
        else:
            write_all(fd, piece)
    if not first:
        _mutated("append", path)


def copy_file(source: Path | str, target: Path | str) -> None:
    """Copy the regular file ``source`` to the new name ``target`` with its mode and times, not
    synchronized, never following a link at either end (the scratch copy an isolated workdir gets)."""
    in_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(in_fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out_fd = _call("create", lambda: os.open(target, flags, 0o600), target)
        try:
            _mutated("create", target)
            _faults.after(_count, "create", target)
            _write(out_fd, b"", "write", target)  # the plan's say on the copy's bytes, before any
            copy_bytes(in_fd, out_fd)
            _mutated("write", target)
            os.fchmod(out_fd, info.st_mode & 0o7777)
        finally:
            os.close(out_fd)
    finally:
        os.close(in_fd)
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


def write_file_atomic(
    path: Path | str, data: bytes, *, durable: bool, mode: int = 0o644, owed: OwedSyncs | None = None
) -> None:
    """Replace ``path`` with ``data`` through an exclusively created temporary name and a rename.

    Readers see the old contents or the new, never a torn file. With ``owed`` a durable write leaves
    the directory's synchronization to that batch (:class:`OwedSyncs`).
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp.{os.getpid()}.{os.urandom(4).hex()}")
    create_file(tmp, data, durable=durable, mode=mode)
    try:
        _call("rename", lambda: os.replace(tmp, target), tmp, target)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _mutated("rename", target)
    if durable:
        _sync_dir_of(target.parent, owed)
    _faults.after(_count, "rename", tmp, target)


def _unlink_quietly(path: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)


def make_dir(
    path: Path | str,
    *,
    durable: bool,
    exist_ok: bool = False,
    owed: OwedSyncs | None = None,
    mode: int | None = None,
) -> bool:
    """Create one directory; return whether it was created (``False`` only when ``exist_ok``). With
    ``owed`` a durable one leaves its parent's synchronization to that batch (:class:`OwedSyncs`). A
    ``mode`` is given exactly, whatever the umask (a private directory); an existing one keeps its own."""
    try:
        _call("mkdir", lambda: os.mkdir(path, 0o777 if mode is None else mode), path)
    except FileExistsError:
        if not exist_ok or not os.path.isdir(path):
            raise
        return False
    _mutated("mkdir", path)
    if mode is not None:
        os.chmod(path, mode)
    if durable:
        _sync_dir_of(Path(path).parent, owed)
    _faults.after(_count, "mkdir", path)
    return True


def _sync_dir_of(directory: Path | str, owed: OwedSyncs | None) -> None:
    if owed is None:
        fsync_dir(directory)
    else:
        owed.owe(directory)


def make_dirs(path: Path | str, *, durable: bool, mode: int | None = None) -> None:
    """Create ``path`` and its missing parents; with ``durable``, synchronize each new entry's parent.
    A ``mode`` is ``path``'s own, as :func:`make_dir` gives it; its parents get the default."""
    if os.path.isdir(path):  # the common case, decided without building a Path
        return
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        make_dir(directory, durable=durable, exist_ok=True, mode=mode if directory is target else None)


def rename(src: Path | str, dst: Path | str, *, durable: bool, noreplace: bool = True) -> None:
    """Rename ``src`` to ``dst`` in one namespace operation; refuse to replace unless ``noreplace=False``.

    With ``durable`` both parent directories are synchronized afterwards, so neither the new name nor the
    disappearance of the old one can be lost.
    """
    _call("rename", lambda: _rename_noreplace(src, dst) if noreplace else os.rename(src, dst), src, dst)
    _mutated("rename", dst)
    if durable:
        sync_parents(src, dst)
    _faults.after(_count, "rename", src, dst)


def sync_parents(src: Path | str, dst: Path | str) -> None:
    """Synchronize the directories a rename changed, so neither name's change can be lost."""
    dst_parent = os.path.dirname(dst)
    src_parent = os.path.dirname(src)
    fsync_dir(dst_parent)
    if src_parent != dst_parent:
        fsync_dir(src_parent)


def unlink(path: Path | str, *, durable: bool, missing_ok: bool = False) -> bool:
    """Remove one file; return whether it was there."""
    try:
        _call("unlink", lambda: os.unlink(path), path)
    except FileNotFoundError:
        if not missing_ok:
            raise
        return False
    _mutated("unlink", path)
    if durable:
        fsync_dir(Path(path).parent)
    _faults.after(_count, "unlink", path)
    return True


def remove_dir(path: Path | str, *, durable: bool) -> bool:
    """Remove one empty directory; return ``False`` when it is absent or not empty (never an error)."""
    try:
        _call("rmdir", lambda: os.rmdir(path), path)
    except (FileNotFoundError, OSError) as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
    _mutated("rmdir", path)
    if durable:
        fsync_dir(Path(path).parent)
    _faults.after(_count, "rmdir", path)
    return True


def remove_tree(path: Path | str, *, expected: Sequence[str] = ()) -> None:
    """Remove a whole directory tree that no protocol reader needs any more (an attempt's control dir).

    ``expected`` names the entries the tree usually holds, relative to ``path`` and children before
    their parents (``"outcome.ready/outcome.json"`` before ``"outcome.ready"``). They are removed by
    name first, without listing a directory, and the tree is then removed as a whole only if anything
    else was left: a manager retires one control directory per attempt, and walking it costs three
    times the system calls of removing what it is known to hold. A name is unlinked or rmdir'ed, never
    followed, so a symbolic link planted under one of them is removed as a link.

    Counted as one mutation: a crash part-way leaves scratch that a later collection removes again.
    """
    if not remove_expected(path, expected):
        remove_all(path)
    _mutated("rmtree", path)


class AppendHandle:
    """An exclusively created file that only this process appends to (a journal segment)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self.size = os.fstat(fd).st_size
        # Under a fault plan, the numbers of the appends no fsync has covered yet: the next one (a group
        # commit's, :meth:`sync`) makes all of them durable, so a fault planned at any of them fails it.
        self._unsynced: list[int] = []

    def append(self, data: bytes, *, durable: bool) -> int:
        """Append ``data`` in full; return the offset at which it starts."""
        offset = self.size
        try:
            _write(self._fd, data, "append", self.path)
        finally:
            self.size = os.fstat(self._fd).st_size  # what is there, a failed write's part included
        _mutated("append", self.path)
        if _faults.planned():
            self._unsynced.append(_count)
        if durable:
            self.sync()
        return offset

    def sync(self) -> None:
        """Synchronize everything appended so far (one ``fsync`` for any number of appends)."""
        pending, self._unsynced = self._unsynced, []
        for index in pending:
            failure = _faults.fsync_failure(index, "append", self.path)
            if failure is not None:
                raise failure
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def create_append_file(path: Path | str, header: bytes, *, durable: bool) -> AppendHandle:
    """Create ``path`` exclusively, write ``header`` and return a handle that appends to it.

    The file is never reopened for append by anyone: a later process creates its own.
    """
    target = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
    fd = _call("create", lambda: os.open(target, flags, 0o644), target)
    _mutated("create", target)
    _faults.after(_count, "create", target)
    handle = AppendHandle(target, fd)
    try:
        if header:
            _write(fd, header, "write", target)
            handle.size = len(header)
            _mutated("write", target)
        if durable:
            _sync(fd, target)
            fsync_dir(target.parent)
    except BaseException:
        handle.close()
        raise
    return handle


# -- the reads the protocol depends on -------------------------------------------------------------------
class _Listing:
    """A listing the fault plan changed: a stale snapshot, or the real entries less the late names."""

    def __init__(self, entries: Iterable[os.DirEntry[str]]) -> None:
        self._entries = iter(entries)

    def __iter__(self) -> _Listing:
        return self

    def __next__(self) -> os.DirEntry[str]:
        return next(self._entries)

    def close(self) -> None:
        self._entries = iter(())

    def __enter__(self) -> _Listing:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def scandir(path: Path | str) -> os._ScandirIterator[str] | _Listing:
    """List a directory the protocol reads (``os.scandir``: an iterator, closable, a context manager)."""
    if not _faults.active():
        return os.scandir(path)
    stale = _faults.stale_listing(path)
    if stale is not None:
        return _Listing(stale)
    if _faults.hidden(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))
    with os.scandir(path) as listing:
        return _Listing([entry for entry in listing if not _faults.hidden(entry.path)])


def lexists(path: Path | str) -> bool:
    """Whether a name exists (a link counts as itself), as a marker probe sees it."""
    return os.path.lexists(path) and not (_faults.active() and _faults.hidden(path))


def is_file(path: Path | str) -> bool:
    """Whether ``path`` is (or links to) a regular file, as a marker probe sees it."""
    return os.path.isfile(path) and not (_faults.active() and _faults.hidden(path))


def open_read(path: Path | str) -> int:
    """Open a file the protocol reads back (a journal segment) for reading, never through a symbolic
    link (``ELOOP``) and never blocking on a FIFO planted in its place: the caller checks what it got."""
    if _faults.active() and _faults.hidden(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)


@contextmanager
def trace_to(path: Path | str) -> Iterator[None]:
    """Record this process's mutations into ``path`` for the duration (in-process tests)."""
    global _trace_path
    previous = _trace_path
    _trace_path = str(path)
    try:
        yield
    finally:
        _trace_path = previous
