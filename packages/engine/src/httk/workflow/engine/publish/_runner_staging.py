"""Resolving and staging a job's runner without following a symbolic link anywhere below its root.

A payload runner is executed in place (the job digest pins it). A shared runner (``workspace`` or
``installed``, including the ``pkg:<module>/<resource>`` form limited to an allowlist) is copied below the
attempt-control directory and ``runner.sha256`` is checked against that staged copy, which is what runs
(for a file, against the very bytes written to it, hashed as they are written; for a tree, against the
canonical digest of the copy).
Every path component is opened with ``O_NOFOLLOW`` relative to its already opened parent; empty, ``.``,
``..`` and absolute paths are refused before anything is opened. Failures are :class:`RunnerFailure`
objects carrying the protocol failure the manager records: ``runner_unavailable`` or ``runner_mismatch``.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol import WorkflowError

from ._runner_store import runner_digest

STAGED_RUNNER = "runner"
TREE_ENTRY = "run"
PKG_PREFIX = "pkg:"
DEFAULT_PKG_MODULES = frozenset({"httk.workflow"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR_FLAGS = _DIR_FLAGS | os.O_NOFOLLOW
_NOFOLLOW_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_ENTRY_MODE = 0o755
_READ_CHUNK = 1 << 20


class RunnerFailure(WorkflowError):  # noqa: N818 -- a job failure the manager records, not our error
    """The attempt cannot run; carries the protocol failure object the manager records.

    ``code`` is ``runner_unavailable`` (unresolvable, not a regular file, a tree without ``run``),
    ``runner_mismatch`` (the staged copy's digest is not ``runner.sha256``), ``protocol_error`` with
    ``details.reason`` ``workdir_unavailable`` (the persistent workdir path holds a symbolic link or a
    non-directory) or ``process_failure`` (the executor could not start the gate).
    """

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(f"{code}: {message}")

    @property
    def failure(self) -> dict[str, Any]:
        """The failure object (``schemas/failure.schema.json``) for the failed state frame (a copy)."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}


class _NotFoundError(Exception):
    """A component of a runner path does not exist below one root (try the next search root)."""


# -- runner resolution -----------------------------------------------------------------------------
def _resolve_runner(
    runner: Mapping[str, Any],
    *,
    job_dir: Path,
    control: Path,
    workspace: Workspace,
    search_path: Sequence[Path],
    pkg_modules: frozenset[str],
) -> Path:
    """The executable entry point: a payload runner in place, or the verified staged copy."""
    source = runner.get("source", "payload")
    relative = runner["path"]
    if source == "payload":
        return _payload_runner(job_dir, relative)
    if source == "workspace":
        roots: list[tuple[Path, str]] = [(workspace.runners_dir, relative)]
    elif source != "installed":
        raise ValueError(f"unknown runner.source {source!r}")
    elif relative.startswith(PKG_PREFIX):
        roots = _package_roots(relative, pkg_modules)
    else:
        roots = [(Path(root), relative) for root in search_path]
    fd, where = _open_first(roots, source, relative)
    try:
        staged, written_digest = _stage(fd, control / STAGED_RUNNER, where)
    finally:
        os.close(fd)
    actual = runner_digest(staged) if written_digest is None else written_digest
    _verify(actual, runner["sha256"], source, relative)
    return staged if written_digest is not None else _entry_point(staged, where)


def _payload_runner(job_dir: Path, relative: str) -> Path:
    fd, _ = _open_first([(job_dir, relative)], "payload", relative)
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        raise _unavailable(f"the payload runner {relative!r} is not a regular file", relative)
    if not mode & 0o111:
        raise _unavailable(f"the payload runner {relative!r} is not executable", relative)
    return job_dir / relative


def _package_roots(relative: str, pkg_modules: frozenset[str]) -> list[tuple[Path, str]]:
    """The directories of an allowed package; ``find_spec`` imports its parents, never the package itself."""
    module, _, resource = relative[len(PKG_PREFIX) :].partition("/")
    if module not in pkg_modules:
        raise _unavailable(
            f"pkg: module {module!r} is not in this manager's runner module allowlist "
            f"({', '.join(sorted(pkg_modules)) or 'empty'})",
            relative,
        )
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise _unavailable(f"pkg: module {module!r} is not an installed package directory", relative)
    return [(Path(location), resource) for location in locations]


def _open_first(roots: Sequence[tuple[Path, str]], source: str, relative: str) -> tuple[int, str]:
    """Open the runner below the first root that has it: a descriptor and the path it was found at."""
    for root, path in roots:
        try:
            return _open_beneath(root, path, "runner.path"), str(root / path)
        except _NotFoundError:
            continue
    searched = ", ".join(str(root) for root, _ in roots) or "no configured root"
    raise _unavailable(f"{source} runner {relative!r} was not found (searched {searched})", relative)


def _open_beneath(root: Path, relative: str, member: str) -> int:
    """Open ``root/relative`` without following a symlink below ``root``; raise _NotFoundError if absent."""
    parts = _components(relative, member)
    try:
        fd = os.open(root, _DIR_FLAGS)  # the root is configured, not job input: it may be a symlink
    except (FileNotFoundError, NotADirectoryError):
        raise _NotFoundError(str(root)) from None
    try:
        for index, part in enumerate(parts):
            flags = _NOFOLLOW_DIR_FLAGS if index < len(parts) - 1 else _NOFOLLOW_FLAGS
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
    except FileNotFoundError:
        os.close(fd)
        raise _NotFoundError(relative) from None
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EACCES):
            raise
        raise _unavailable(
            f"{member} {relative!r} below {root} passes through a symbolic link or a non-directory, "
            f"or is unreadable ({os.strerror(exc.errno)})",
            relative,
        ) from None
    return fd


def _components(relative: str, member: str, code: str = "runner_unavailable") -> list[str]:
    parts = relative.split("/")
    if relative.startswith("/") or "\0" in relative or any(p in ("", ".", "..") for p in parts):
        raise RunnerFailure(
            code,
            f"{member} {relative!r} must be a normalized relative path below its root",
            {"path": relative},
        )
    return parts


def _unavailable(message: str, relative: str) -> RunnerFailure:
    return RunnerFailure("runner_unavailable", message, {"path": relative})


# -- staging and verification ----------------------------------------------------------------------
def _stage(fd: int, target: Path, where: str) -> tuple[Path, str | None]:
    """Copy the opened runner file or tree to ``target`` (not synchronized: see the module header).

    For a file, also the SHA-256 of exactly the bytes written to the copy, so verifying it needs no
    second read; for a tree ``None``: its canonical digest is taken from the staged copy afterwards.
    """
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        _fsops.make_dir(target, durable=False)
        _copy_tree(fd, target, where, top=True)
        return target, None
    if stat.S_ISREG(mode):
        data = _read_all(fd)
        _fsops.create_file(target, data, durable=False, mode=_ENTRY_MODE)
        return target, hashlib.sha256(data).hexdigest()
    raise _unavailable(f"the runner at {where} is not a regular file or directory", where)


def _copy_tree(dir_fd: int, target: Path, where: str, *, top: bool) -> None:
    for name in sorted(_names(dir_fd)):
        fd = _open_entry(dir_fd, name, f"{where}/{name}")
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                _fsops.make_dir(target / name, durable=False)
                _copy_tree(fd, target / name, f"{where}/{name}", top=False)
            elif stat.S_ISREG(mode):
                file_mode = _ENTRY_MODE if top and name == TREE_ENTRY else stat.S_IMODE(mode) & 0o755
                _fsops.create_file(target / name, _read_all(fd), durable=False, mode=file_mode)
            else:
                raise _unavailable(f"the runner tree holds a special file at {where}/{name}", where)
        finally:
            os.close(fd)


def _names(dir_fd: int) -> Iterator[str]:
    with os.scandir(dir_fd) as entries:
        yield from (entry.name for entry in entries)


def _open_entry(dir_fd: int, name: str, where: str) -> int:
    try:
        return os.open(name, _NOFOLLOW_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EACCES):
            raise
        what = "a symbolic link" if exc.errno == errno.ELOOP else "an unreadable entry"
        raise _unavailable(f"the runner tree holds {what} at {where}", where) from None


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, _READ_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _verify(actual: str, expected: str, source: str, relative: str) -> None:
    if actual != expected:
        raise RunnerFailure(
            "runner_mismatch",
            f"the staged copy of {source} runner {relative!r} has digest {actual}, "
            f"but the job pins {expected}",
            {"path": relative, "source": source, "expected_sha256": expected, "actual_sha256": actual},
        )


def _entry_point(staged: Path, where: str) -> Path:
    if not staged.is_dir():
        return staged
    entry = staged / TREE_ENTRY
    if not entry.is_file():  # the staged copy holds no symlinks: _copy_tree refused them
        raise _unavailable(f"the runner tree at {where} has no top-level {TREE_ENTRY!r} file", where)
    return entry
