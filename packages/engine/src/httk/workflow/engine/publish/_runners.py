"""Runners: the workspace runner store, and resolving and staging a job's runner without following links.

**The store.** ``.httk-workflow/runners/<name>`` holds one file or one tree. Publication stages a copy in
the workspace's tmp area, digests the staged copy (a file's SHA-256, or the canonical tree digest of
DECISIONS D11), and renames it into place. Publishing identical content again changes nothing; different
content under an existing name needs ``replace`` because live jobs pin the stored digest, and such jobs
then fail with ``runner_mismatch`` — loudly, never by running other code.

**Resolution and staging.** A payload runner is executed in place (the job digest pins it). A shared
runner (``workspace`` or ``installed``, including the ``pkg:<module>/<resource>`` form limited to an
allowlist) is copied below the attempt-control directory and ``runner.sha256`` is checked against that
staged copy, which is what runs (for a file, against the very bytes written to it, hashed as they are
written; for a tree, against the canonical digest of the copy). Every path component is opened with
``O_NOFOLLOW`` relative to its already opened parent; empty, ``.``, ``..`` and absolute paths are refused
before anything is opened. Failures are :class:`RunnerFailure` objects carrying the protocol failure the
manager records: ``runner_unavailable`` or ``runner_mismatch``.

**Reach, read-only** (``job why``, ``precheck``). :class:`RunnerReach` resolves a runner the way staging
does — every component opened without following a symbolic link, the same refusals and messages — but
never copies it: a payload runner must be an executable regular file, a shared one must exist below its
root and its bytes (or canonical tree) must have the digest the job pins. A plain installed reference is
resolved only against search paths given to the caller; without one it is indeterminate, because the
search path belongs to the manager's machine, and so is a ``pkg:`` module not installed here.
:func:`manager_refusal` is the other half: whether one manager's allowlist and search paths, read from
its manifest, can reach the runner at all. A manager on another host cannot be checked for a plain
installed runner from here, and is then given the benefit of the doubt.

Cost of reach: one open per path component; a shared runner is digested once per (root, path) per
:class:`RunnerReach` (a campaign of many jobs usually pins one runner).
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import re
import stat
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._liveness import hostname
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol import RunnerStoreError, WorkflowError
from httk.workflow.protocol._digest import sha256_file, tree_digest

from ._submit import copy_checked_tree, refuse_unsafe_tree

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
def resolve_runner(
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


def module_allowed(module: str, allowlist: Iterable[str]) -> bool:
    """Whether a ``pkg:`` runner's module is on a runner module allowlist: an entry or a subpackage of one.

    An entry admits its subpackages because it already reaches their files: ``pkg:httk.workflow/vasp/x``
    resolves below ``httk/workflow/`` exactly as ``pkg:httk.workflow.vasp/x`` does. So the default,
    ``httk.workflow``, admits every packaged workflow of the namespace (``httk.workflow.vasp``,
    ``httk.workflow.v1``) and nothing outside it. The test is by whole components: ``httk.workflowx``
    is not below ``httk.workflow``.
    """
    return any(module == allowed or module.startswith(allowed + ".") for allowed in allowlist)


def _package_roots(relative: str, pkg_modules: frozenset[str]) -> list[tuple[Path, str]]:
    """The directories of an allowed package, found without importing it or any package above it."""
    module, _, resource = relative[len(PKG_PREFIX) :].partition("/")
    if not module_allowed(module, pkg_modules):
        raise _unavailable(
            f"pkg: module {module!r} is not in this manager's runner module allowlist "
            f"({', '.join(sorted(pkg_modules)) or 'empty'})",
            relative,
        )
    locations = package_locations(module)
    if not locations:
        raise _unavailable(f"pkg: module {module!r} is not an installed package directory", relative)
    return [(Path(location), resource) for location in locations]


def package_locations(module: str) -> list[str]:
    """Where an installed package's files are, found without running any package's ``__init__``.

    The top-level package comes from its spec (finding one imports nothing); each subpackage is then
    looked for in its parent's directories as the import system would: the first regular package (a
    directory with ``__init__.py``) wins, else every directory of that name is a namespace portion.
    ``importlib.util.find_spec`` would import every parent instead. Empty when not installed.
    """
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for part in rest:
        portions: list[str] = []
        for location in locations:
            candidate = os.path.join(location, part)
            if os.path.isfile(os.path.join(candidate, "__init__.py")):
                portions = [candidate]
                break
            if os.path.isdir(candidate):
                portions.append(candidate)
        locations = portions
    return locations


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
    parts = relative_components(relative, member)
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


def relative_components(relative: str, member: str, code: str = "runner_unavailable") -> list[str]:
    """The components of a normalized relative path; else :class:`RunnerFailure` naming ``member``."""
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
    """Copy the opened directory to ``target``, depth first from an explicit stack: a runner tree may be
    deeper than the interpreter's recursion limit. One descriptor is open per level below ``dir_fd``
    (which stays the caller's), each entry opened relative to its opened parent without following."""
    stack = [(dir_fd, target, where, _copy_files(dir_fd, target, where, top=top))]
    try:
        while stack:
            parent, parent_target, parent_where, subdirectories = stack[-1]
            name = next(subdirectories, None)
            if name is None:
                stack.pop()
                if parent != dir_fd:
                    os.close(parent)
                continue
            child_where = f"{parent_where}/{name}"
            child = _open_entry(parent, name, child_where)
            if not stat.S_ISDIR(os.fstat(child).st_mode):  # replaced since it was listed
                os.close(child)
                raise _unavailable(f"the runner tree changed while being copied at {child_where}", where)
            _fsops.make_dir(parent_target / name, durable=False)
            stack.append(
                (
                    child,
                    parent_target / name,
                    child_where,
                    _copy_files(child, parent_target / name, child_where),
                )
            )
    finally:
        for fd, _target, _where, _subdirectories in stack:
            if fd != dir_fd:
                os.close(fd)


def _copy_files(dir_fd: int, target: Path, where: str, *, top: bool = False) -> Iterator[str]:
    """Copy the regular files of one opened directory; the names of its subdirectories, sorted."""
    subdirectories: list[str] = []
    for name in sorted(_names(dir_fd)):
        fd = _open_entry(dir_fd, name, f"{where}/{name}")
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                subdirectories.append(name)
            elif stat.S_ISREG(mode):
                file_mode = _ENTRY_MODE if top and name == TREE_ENTRY else stat.S_IMODE(mode) & 0o755
                _fsops.create_file(target / name, _read_all(fd), durable=False, mode=file_mode)
            else:
                raise _unavailable(f"the runner tree holds a special file at {where}/{name}", where)
        finally:
            os.close(fd)
    return iter(subdirectories)


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


_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")


@dataclass(frozen=True, slots=True)
class PublishedRunner:
    name: str
    sha256: str
    kind: str  # "file" or "tree"
    changed: bool

    def reference(self) -> dict[str, Any]:
        """The ``runner`` members to put into job.json (with ``backend`` and ``arguments`` as needed)."""
        return {"source": "workspace", "path": self.name, "sha256": self.sha256}


def runner_digest(path: Path) -> str:
    """The digest that ``runner.sha256`` pins: file bytes, or the canonical tree digest."""
    return tree_digest(path) if path.is_dir() else sha256_file(path)


def publish_runner(
    workspace: Workspace,
    name: str,
    source: Path,
    *,
    replace: bool = False,
    expected_sha256: str | None = None,
) -> PublishedRunner:
    """Store ``source`` (a file or a directory) under ``name`` in the workspace runner store.

    With ``expected_sha256`` a copy of other content is refused before it is stored (the source changed
    since its digest was taken).
    """
    workspace.require_writable()
    source = Path(source)
    kind = check_runner_source(name, source)
    mode = os.lstat(source).st_mode
    durable = workspace.durable
    _fsops.make_dirs(workspace.runners_dir, durable=durable)
    staged = workspace.tmp_dir / f"runner.{uuid.uuid4().hex}"
    try:
        if kind == "tree":
            _fsops.make_dir(staged, durable=False)
            copy_checked_tree(source, staged, durable=durable)
        else:
            _fsops.create_file(staged, source.read_bytes(), durable=durable, mode=stat.S_IMODE(mode) | 0o500)
        digest = runner_digest(staged)
        if expected_sha256 is not None and digest != expected_sha256:
            raise RunnerStoreError(
                f"{source}: the runner changed while it was being published (digest {digest}, expected "
                f"{expected_sha256}); nothing was stored"
            )
        target = workspace.runners_dir / name
        if os.path.lexists(target):
            existing = runner_digest(target)
            if existing == digest:
                return PublishedRunner(name, digest, kind, changed=False)
            if not replace:
                raise RunnerStoreError(
                    f"runner {name!r} is already stored with digest {existing}; jobs pin that digest, so "
                    "replacing it needs --replace (jobs pinned to the old content will then fail with "
                    "runner_mismatch)"
                )
            _retire(workspace, target)
        _fsops.rename(staged, target, durable=durable)
        return PublishedRunner(name, digest, kind, changed=True)
    finally:
        if os.path.lexists(staged):
            _fsops.remove_tree(staged)  # a file where the staged tree was is unlinked as itself


def check_runner_source(name: str, source: Path) -> str:
    """Refuse a store name or a runner source :func:`publish_runner` would refuse; ``file`` or ``tree``."""
    if not _NAME_RE.match(name):
        raise RunnerStoreError(
            f"invalid runner name {name!r}: use 1-128 letters, digits, '.', '_' and '-', "
            "not starting with '.' or '-'"
        )
    if not os.path.lexists(source):
        raise RunnerStoreError(f"{source}: no such runner file or directory")
    mode = os.lstat(source).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise RunnerStoreError(f"{source}: a runner must be a regular file or a directory (not a symlink)")
    if stat.S_ISREG(mode):
        return "file"
    refuse_unsafe_tree(source)
    if not (source / TREE_ENTRY).is_file():
        raise RunnerStoreError(
            f"{source}: a runner tree is entered at its top-level 'run' file, which is missing"
        )
    return "tree"


def stored_digest(workspace: Workspace, name: str) -> str | None:
    """The digest of the runner stored under ``name``, or ``None`` when the store has none."""
    target = workspace.runners_dir / name
    return runner_digest(target) if os.path.lexists(target) else None


def _retire(workspace: Workspace, target: Path) -> None:
    """Move a replaced runner out of the store into tmp (collected later), never deleting in place."""
    _fsops.rename(
        target, workspace.tmp_dir / f"replaced-runner.{uuid.uuid4().hex}", durable=workspace.durable
    )


@dataclass(frozen=True, slots=True)
class Reach:
    """Whether a runner can be reached from here: ``reachable`` is ``None`` when that cannot be judged
    here (another machine's search path or modules decide), ``False`` with the failure ``code`` a manager
    would record when it cannot run."""

    reachable: bool | None
    text: str
    code: str | None = None


@dataclass
class RunnerReach:
    """Runner reach of one invocation, with the digests of shared runners cached by location."""

    workspace: Workspace
    search_path: tuple[Path, ...] = ()
    _digests: dict[str, str | RunnerFailure] = field(default_factory=dict)

    def check(self, runner: Mapping[str, Any], payload: Path) -> Reach:
        """Whether a job's runner can be reached, without staging it (see the module docstring)."""
        source = runner.get("source", "payload")
        path = str(runner.get("path", ""))
        where = f"{source} runner {path!r}"
        try:
            if source == "payload":
                _payload_runner(payload, path)
                return Reach(True, f"{where} is an executable file in the payload")
            roots = self._roots(source, path)
            if roots is None:
                return Reach(
                    None,
                    f"{where} resolves against the manager's runner search path; "
                    "give --runner-search-path to check it here",
                )
            found = self._digest(roots, source, path)
        except RunnerFailure as exc:
            return Reach(False, f"{exc.code}: {exc.message}", exc.code)
        except _NotInstalledHereError as exc:
            return Reach(None, str(exc))
        except OSError as exc:
            return Reach(False, f"{where} cannot be read: {exc}", "runner_unavailable")
        expected = runner.get("sha256")
        if found != expected:
            text = f"runner_mismatch: {where} has digest {found}, but the job pins {expected}"
            return Reach(False, text, "runner_mismatch")
        return Reach(True, f"{where} is present with the pinned digest")

    def _roots(self, source: str, path: str) -> list[tuple[Path, str]] | None:
        if source == "workspace":
            return [(self.workspace.runners_dir, path)]
        if source != "installed":
            raise RunnerFailure("runner_unavailable", f"unknown runner.source {source!r}", {"path": path})
        if path.startswith(PKG_PREFIX):
            module = _pkg_module(path)
            try:
                return _package_roots(path, frozenset({module}))
            except RunnerFailure:
                raise _NotInstalledHereError(
                    f"installed runner {path!r}: module {module!r} is not installed here; "
                    "the manager's machine decides"
                ) from None
        if not self.search_path:
            return None
        return [(root, path) for root in self.search_path]

    def _digest(self, roots: list[tuple[Path, str]], source: str, path: str) -> str:
        fd, location = _open_first(roots, source, path)
        os.close(fd)
        cached = self._digests.get(location)
        if cached is None:
            try:
                cached = runner_digest(Path(location))
            except OSError as exc:
                cached = RunnerFailure("runner_unavailable", f"{location} cannot be read: {exc}")
            self._digests[location] = cached
        if isinstance(cached, RunnerFailure):
            raise cached
        return cached


class _NotInstalledHereError(Exception):
    """A ``pkg:`` runner's module is not importable by this process (it may be on the manager's)."""


def _pkg_module(path: str) -> str:
    return path[len(PKG_PREFIX) :].partition("/")[0]


def manager_refusal(runner: Mapping[str, Any], manifest: Mapping[str, Any]) -> str | None:
    """Why the manager of ``manifest`` cannot reach the runner (allowlist, search paths), or ``None``."""
    if runner.get("source", "payload") != "installed":
        return None  # payload and workspace runners live in the workspace every manager attaches
    path = str(runner.get("path", ""))
    if path.startswith(PKG_PREFIX):
        allowed = [str(module) for module in manifest.get("runner_modules") or ()]
        module = _pkg_module(path)
        if module_allowed(module, allowed):
            return None
        listed = ", ".join(sorted(allowed)) or "empty"
        return f"runner module {module!r} is not in its runner module allowlist ({listed})"
    search = [str(root) for root in manifest.get("runner_search_paths") or ()]
    if not search:
        return f"installed runner {path!r} needs a runner search path, and it has none"
    if manifest.get("host") != hostname():
        return None  # its search paths are on its own machine: not checkable from here
    if not _found_below(search, path):
        return f"installed runner {path!r} is not below its runner search paths ({', '.join(search)})"
    return None


def _found_below(search: Sequence[str], path: str) -> bool:
    try:
        fd, _ = _open_first([(Path(root), path) for root in search], "installed", path)
    except RunnerFailure:
        return False
    os.close(fd)
    return True
