"""The writable set of a confined attempt: what may be granted, why a path may not, what is declared.

*What no runner may write* (spec/01 "Security and hostile input"): the workspace's ``.httk-workflow/``
(the state tree, the journal, the runner store), any job's ``job.json``, committed ``data/`` of a
transactional job. :class:`Boundary` judges every path against that, by its real path: a path in the
workspace outside this job's payload is granted only when it is declared, and only below another job's
payload (a v1 subtask's directory in its parent's tree); a declared path that holds other jobs (a
placement directory) is refused; a writable path that holds what may not be written is granted *around*
it (each entry beside the way down, never the directories on the way).

*Declarations*: ``runner.writable_paths``, a job input and a workspace setting (a refused entry is
logged once and recorded: a site's setting must not fail every job); and a packaged runner's, through
the entry point group :data:`DECLARATIONS_GROUP`: the entry named after the runner
(``<module>/<resource>`` of ``pkg:<module>/<resource>``), else after its module, is a callable
``(job, payload, workspace) -> Iterable[str | PathLike]`` the manager calls once per confined attempt.
A packaged declaration that raises, or names a path no runner may write, fails the attempt before it
starts (``protocol_error``, naming the path and why): a runner package that asks for job.json is
broken, and running it without what it asked for would only fail later, less clearly. A declared path
that does not exist is not granted (and recorded): Landlock binds rules to what exists.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from httk.workflow.engine.core._states import CORE_KINDS
from httk.workflow.engine.core._workspace import CONTROL_DIR, Workspace
from httk.workflow.engine.publish._runners import RunnerFailure
from httk.workflow.protocol import WorkflowError
from httk.workflow.protocol._jsonio import parse_json_object, read_document_bytes

DECLARATIONS_GROUP = "httk.workflow.writable_paths"
WRITABLE_SETTING = "runner.writable_paths"


@dataclass(frozen=True, slots=True)
class Attempt:
    """Where one attempt lives: what its writable set is made of."""

    workspace: Workspace
    job: Mapping[str, Any]
    payload: Path
    control_dir: Path
    workdir: Path
    settings: Mapping[str, Any]


@dataclass
class WritableSet:
    """Writable paths (real, in the order granted), the rules each needs, and the refused declarations."""

    rules: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)  # path -> [(rule path, tree)]
    refused: list[dict[str, str]] = field(default_factory=list)
    tmpdir: str | None = None  # the attempt's private TMPDIR, when the usual one holds the workspace

    @property
    def writable(self) -> list[str]:
        return list(self.rules)

    @property
    def grants(self) -> list[tuple[str, bool]]:
        return [grant for rules in self.rules.values() for grant in rules]

    def merge(self, other: WritableSet) -> None:
        """Add ``other``'s paths, except one this plan grants already (HOME and the passwd home, say)."""
        for path, rules in other.rules.items():
            self.rules.setdefault(path, rules)
        self.refused.extend(other.refused)


def real_path(path: Path | str) -> str | None:
    """The real path of what exists at ``path`` (``None`` for nothing there)."""
    found = resolved(path)
    return None if found is None else found[0]


def resolved(path: Path | str) -> tuple[str, int] | None:
    """The real path of what exists at ``path`` and its mode, or ``None`` for nothing there.

    Resolved by the kernel: the name of an ``O_PATH`` descriptor in ``/proc/self/fd``, four system calls
    where ``os.path.realpath`` makes one ``lstat`` per component in Python (a confined launch resolves
    about six paths). Without ``/proc`` it is ``realpath`` and ``stat``.
    """
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = ""
    finally:
        os.close(fd)
    if real.startswith("/") and not real.endswith(" (deleted)"):
        return real, mode
    try:
        real = os.path.realpath(path, strict=True)
        return real, os.stat(real).st_mode
    except OSError:
        return None


def load_declarer(runner: str) -> Callable[..., Iterable[Any]] | None:
    """The declaration of the packaged runner ``<module>/<resource>``: the entry point named so, else
    the one named ``<module>`` (for every runner of the module). One that cannot be loaded fails every
    attempt of that runner, saying why (:func:`declared_by_runner`)."""
    entries = {entry.name: entry for entry in metadata.entry_points(group=DECLARATIONS_GROUP)}
    for name in (runner, runner.split("/", 1)[0]):
        entry = entries.get(name)
        if entry is not None:
            try:
                loaded = entry.load()
                if not callable(loaded):
                    raise TypeError(f"{entry.value} is a {type(loaded).__name__}, not a callable")
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                return _broken(f"its entry point {entry.value!r} cannot be used ({why})")
            return cast(Callable[..., Iterable[Any]], loaded)
    return None


def _broken(problem: str) -> Callable[..., Iterable[Any]]:
    def declare(job: Mapping[str, Any], payload: Path, workspace: Path) -> Iterable[Any]:
        raise LookupError(problem)

    return declare


def declared_by_runner(
    runner: str, function: Callable[..., Iterable[Any]] | None, attempt: Attempt
) -> list[tuple[str, object]]:
    """What the packaged ``runner`` declares for this attempt (:func:`refuse_bad_declaration` fails the
    attempt when its declaration named what no runner may write); raises :class:`RunnerFailure` when
    the declaration cannot be made."""
    if function is None:
        return []
    origin = _packaged(runner)
    try:
        declared = function(attempt.job, attempt.payload, attempt.workspace.root)
        if isinstance(declared, str | bytes | os.PathLike) or not isinstance(declared, Iterable):
            raise TypeError(f"it returned {type(declared).__name__}, not an iterable of paths")
        return [(origin, path) for path in declared]
    except Exception as exc:  # a plug-in's failure confines more, never less: the attempt does not start
        raise RunnerFailure(
            "protocol_error",
            f"the packaged runner pkg:{runner} could not declare its writable paths: "
            f"{type(exc).__name__}: {exc}",
            {"reason": "writable_paths_failed", "runner": f"pkg:{runner}"},
        ) from exc


def _packaged(runner: str) -> str:
    return f"runner pkg:{runner}"


MISSING = "does not exist"


def refuse_bad_declaration(runner: str, plan: WritableSet) -> None:
    """A packaged runner that declares a path no runner may write does not start: a clear failure naming
    the path and why, not a runner that fails later for want of it. (A path that does not exist is only
    not granted: what it names may come with a later step.)"""
    origin = _packaged(runner)
    bad = [entry for entry in plan.refused if entry["origin"] == origin and entry["reason"] != MISSING]
    if bad:
        named = "; ".join(f"{entry['path']} {entry['reason']}" for entry in bad)
        raise RunnerFailure(
            "protocol_error",
            f"the packaged runner pkg:{runner} declares paths no runner may write: {named}",
            {"reason": "writable_path_refused", "runner": f"pkg:{runner}", "refused": bad},
        )


def listed(attempt: Attempt) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for origin, source in (
        ("job input", attempt.job.get("inputs") or {}),
        ("workspace setting", attempt.settings),
    ):
        value = source.get(WRITABLE_SETTING)
        if value is None:
            continue
        entries = value if isinstance(value, list) else [value]
        found.extend((f"{WRITABLE_SETTING} ({origin})", entry) for entry in entries)
    return found


@dataclass
class Boundary:
    """The workspace's line: what is never writable, and what is writable only inside this payload.

    Paths are compared as the real (resolved) path strings they are, which is what the kernel's rules
    bind to and much cheaper than comparing ``Path`` parents for every entry around a workspace.
    """

    attempt: Attempt | None
    transactional: bool
    root: str  # the workspace's real path

    def __post_init__(self) -> None:
        never = [(os.path.join(self.root, CONTROL_DIR), "the workspace's control directory")]
        self.payload = _NO_PATH  # no job: every path in the workspace lies outside its payload
        if self.attempt is not None:
            self.payload = real_path(self.attempt.payload) or os.path.realpath(self.attempt.payload)
            never.append((os.path.join(self.payload, "job.json"), "job.json"))
        if self.transactional:
            never.append((os.path.join(self.payload, "data"), "committed data/ of a transactional job"))
        self.never = never

    @classmethod
    def of_workspace(cls, root: str) -> Boundary:
        """The line of the workspace at the real path ``root`` for paths of no job (the broad paths)."""
        return cls(None, False, root)

    def declared(self, plan: WritableSet, origin: str, entry: object) -> None:
        named = self._path_of(entry)
        if named is None:
            plan.refused.append({"path": str(entry), "origin": origin, "reason": "is not a path"})
        else:
            self.grant(plan, origin, named, declared=True)

    def _path_of(self, entry: object) -> Path | None:
        if not isinstance(entry, str | os.PathLike) or not str(entry) or "\0" in str(entry):
            return None
        text = os.fspath(entry)
        if not isinstance(text, str):
            return None
        if text.startswith("~/") or text == "~":
            return Path(os.path.expanduser(text))
        if os.path.isabs(text):
            return Path(text)
        return None if self.attempt is None else self.attempt.payload / text

    def grant(self, plan: WritableSet, origin: str, path: Path, *, declared: bool) -> None:
        """Add ``path`` to ``plan`` (around the workspace when it holds it), or record why not."""

        def refuse(reason: str) -> None:
            plan.refused.append({"path": str(path), "origin": origin, "reason": reason})

        found = resolved(path)
        if found is None:
            if declared:
                refuse(MISSING)
            return
        real, mode = found
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            refuse("is neither a directory, a regular file nor a device")
            return
        for protected, what in self.never:
            if within(real, protected):
                refuse(f"lies in {what}, which no runner may write")
                return
        problem = self._in_workspace(real, declared) if within(real, self.root) else None
        if problem is not None:
            refuse(problem)
            return
        if real in plan.rules:
            return  # named twice (HOME and the account's home, say)
        avoid = [p for p, _ in self.never if within(p, real) and p != real]
        if not within(real, self.payload) and within(self.root, real):
            avoid = [self.root]  # a broad path holding the workspace: only around it
        plan.rules[real] = around(real, avoid) if avoid else [(real, stat.S_ISDIR(mode))]

    def _in_workspace(self, real: str, declared: bool) -> str | None:
        """Why a path in the workspace may not be granted, if it may not. Outside this job's payload only
        a declared path may be, and only below another job's payload (a v1 subtask's directory in its
        parent's tree, say); a declared path never holds other jobs, nor lies in another job's job.json or
        in committed data/ of a transactional job (a payload may lie in another's: every level counts)."""
        own = within(real, self.payload)
        if not declared:
            return None if own else "lies in the workspace outside this job's payload"
        relative = os.path.relpath(real, self.root)
        state = os.path.join(self.root, CONTROL_DIR, "state")
        if any(os.path.isdir(os.path.join(state, kind.value, relative)) for kind in CORE_KINDS):
            return "holds the payloads of other jobs (their job.json)"
        others = [a for a in _ancestors(real, self.root) if a != self.payload and _is_payload(a)]
        if not own and not others:
            return "lies in the workspace outside every job's payload (where other jobs' payloads are made)"
        for payload in others:
            if real == payload:
                return "is another job's payload directory, which holds its job.json"
            if within(real, os.path.join(payload, "job.json")):
                return "lies in another job's job.json, which no runner may write"
            if within(real, os.path.join(payload, "data")) and _transactional(payload):
                return "lies in committed data/ of a transactional job, which no runner may write"
        return None


def _ancestors(real: str, root: str) -> list[str]:
    """``real`` and the directories above it, up to (not including) ``root``."""
    found = []
    while real != root and within(real, root):
        found.append(real)
        real = os.path.dirname(real)
    return found


def _is_payload(directory: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(os.path.join(directory, "job.json")).st_mode)
    except OSError:
        return False


def _transactional(payload: str) -> bool:
    """Whether the job of ``payload`` keeps transactional data; one whose job.json cannot be read as a
    small JSON object counts as transactional (refusing is the safe answer)."""
    path = os.path.join(payload, "job.json")
    try:
        document = parse_json_object(read_document_bytes(path, "job.json"), document="job.json", path=path)
    except (OSError, WorkflowError):
        return True
    data = document.get("data")
    return not isinstance(data, dict) or data.get("mode") == "transactional"


_NO_PATH = "\0"
"""A path no real path is or lies below (none holds a NUL byte)."""


def within(path: str, ancestor: str) -> bool:
    """Whether the real path ``path`` is ``ancestor`` or lies below it."""
    return path == ancestor or path.startswith(ancestor if ancestor.endswith("/") else ancestor + "/")


def around(directory: str, avoid: list[str]) -> list[tuple[str, bool]]:
    """Every entry below ``directory`` except the way to each path of ``avoid``: those entries whole,
    and the directories on the way entry by entry. Symbolic links are left out (they may lead back)."""
    grants: list[tuple[str, bool]] = []
    try:
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return grants
    for entry in entries:
        child = entry.path
        below = [a for a in avoid if within(a, child)]
        if entry.is_symlink():
            continue
        if not below:
            if entry.is_dir(follow_symlinks=False):
                grants.append((child, True))
            elif entry.is_file(follow_symlinks=False):
                grants.append((child, False))
        elif child not in below and entry.is_dir(follow_symlinks=False):
            grants.extend(around(child, below))
    return grants
