"""Every filesystem change the importer makes itself, through one seam the crash tests stop.

The engine's own changes (placing a payload, publishing its marker) go through the engine's seam
(``HTTK_WORKFLOW_CRASH_AFTER``). This package cannot reach that private module, so it keeps one of its
own with the same contract: each mutation counts one, ``HTTK_WORKFLOW_V1_CRASH_AFTER=k`` ends the
process with ``os._exit(86)`` right after the k-th, ``HTTK_WORKFLOW_V1_MUTATION_TRACE=FILE`` appends one
line per mutation. A crash test enumerates every k of both seams (``tests/v1/test_import_crash.py``).

With ``durable`` a created file, directory or symbolic link is synchronized with its parent before the
mutation counts as done, so the order the importer relies on (a copy whole before its rename) survives
a storage crash too.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

CRASH_VARIABLE = "HTTK_WORKFLOW_V1_CRASH_AFTER"
TRACE_VARIABLE = "HTTK_WORKFLOW_V1_MUTATION_TRACE"
CRASH_EXIT_STATUS = 86

_count = 0


def _done(what: str, path: Path) -> None:
    """Count one mutation; trace it; stop here when the crash point says so."""
    global _count  # noqa: PLW0603 -- one counter per process, read by the crash tests
    _count += 1
    trace = os.environ.get(TRACE_VARIABLE)
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"{_count} {what} {path}\n")
    if os.environ.get(CRASH_VARIABLE) == str(_count):
        os._exit(CRASH_EXIT_STATUS)


def fsync_path(path: Path) -> None:
    """Synchronize one file or directory (not following a symbolic link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """Synchronize every file and directory below ``root``, deepest first, then ``root`` itself."""
    for directory, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                fsync_path(path)
        fsync_path(Path(directory))


def make_dirs(path: Path, *, durable: bool) -> None:
    """``mkdir -p``, one mutation when anything was created."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    if not missing:
        return
    path.mkdir(parents=True, exist_ok=True)
    if durable:
        for created in reversed(missing):
            fsync_path(created.parent)
    _done("mkdir", path)


def write_file(path: Path, data: bytes, *, durable: bool) -> None:
    """Write a file that nobody reads before a later rename publishes the directory holding it (an
    import writes one per job: no buffered file object)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    _done("write", path)


def symlink(target: str, path: Path, *, durable: bool) -> None:
    """Create the symbolic link ``path -> target``; ``FileExistsError`` when the name is taken."""
    os.symlink(target, path)
    if durable:
        fsync_path(path.parent)
    _done("symlink", path)


def unlink(path: Path, *, durable: bool) -> None:
    """Remove a file or symbolic link that may already be gone."""
    try:
        path.unlink()
    except FileNotFoundError:
        return
    if durable:
        fsync_path(path.parent)
    _done("unlink", path)


def rename(source: Path, target: Path, *, durable: bool) -> None:
    """Rename within one directory tree nobody else references yet (a staging copy)."""
    os.rename(source, target)
    if durable:
        fsync_path(target.parent)
    _done("rename", target)


def copy_trees(base: Path, sources: Sequence[str], target: Path, *, durable: bool) -> None:
    """``cp -a --parents`` of directories given relative to ``base`` into ``target``, in one process.

    Each ``base/<source>`` becomes ``target/<source>`` (one mutation: the copies). GNU cp keeps modes,
    times and symbolic links as they are; a copy that fails raises ``OSError`` with cp's message and
    leaves a partial copy below ``target`` that nobody references. The cp process is killed should
    this process die first (``setpriv --pdeathsig``, where util-linux has it): a crashed import leaves
    no copy running into the staging a later import removes.
    """
    result = subprocess.run(
        [*_orphan_guard(), "cp", "-a", "--parents", "--target-directory", str(target), "--", *sources],
        cwd=base,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise OSError(f"cp -a into {target} failed: {result.stderr.strip()}")
    if durable:
        fsync_tree(target)
    _done("copy", target)


@functools.cache
def _orphan_guard() -> tuple[str, ...]:
    return ("setpriv", "--pdeathsig", "KILL") if shutil.which("setpriv") else ()


def remove_tree(path: Path) -> None:
    """Remove an unreferenced staging directory (whatever it still holds)."""
    if not os.path.lexists(path):
        return
    shutil.rmtree(path, ignore_errors=True)
    _done("rmtree", path)
