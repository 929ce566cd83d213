"""Runner confinement: a Landlock ruleset that the gated runner enters between fork and exec.

What it guarantees (spec/01 "Security and hostile input": a runner must not write job.json, the state
tree or the journal, nor committed ``data/`` of a transactional job). Where the kernel has Landlock, the
gate process — and so the runner it becomes and every process that runner starts — may create, write,
truncate, rename into, link into and remove entries only below the *writable set*:

- the attempt's workdir and attempt-control directory; the job's ``.httk-job/`` and ``logs/`` (created
  before launch so a rule can name them); ``data/`` of a job that is not transactional;
- ``$TMPDIR``, ``/tmp``, ``/dev/shm``; ``/dev/null``, ``/dev/zero``, ``/dev/full`` and the terminal
  devices (``/dev/tty``, ``/dev/ptmx``, ``/dev/pts/``); the account's home directory;
- every path of the ``runner.writable_paths`` job input and workspace setting (a list of paths, absolute,
  ``~/...``, or relative to the payload), and every path a packaged runner declares (below).

Never: the workspace's ``.httk-workflow/`` (state tree, journal, runner store, managers, requests,
format.json), the job's ``job.json``, committed ``data/`` of a transactional job, nor anything else in
the workspace outside this job's payload. A writable path that contains the workspace (a workspace below
the home directory or ``/tmp``) is granted *around* it: in each directory on the way down to the
workspace, every entry that exists at launch except the one leading to it, so nothing new can be created
directly in those directories. A declared path inside what is never writable, or that does not exist, is
refused; the refusal is logged once and recorded. A forbidden write fails with ``EACCES`` (``EXDEV`` for a
rename or link across the boundary); reading and executing are never restricted.

**A packaged runner declares paths** through the entry point group :data:`DECLARATIONS_GROUP`: the entry
named after the runner's module (the ``<module>`` of ``pkg:<module>/<resource>``) is a callable
``(job: Mapping[str, Any], payload: Path) -> Iterable[str | PathLike]`` returning paths as
``runner.writable_paths`` does. It runs in the manager, once per confined attempt of such a runner.

**Turning it off.** ``ManagerConfig.confine`` (``--no-confine``) for a manager; ``runner.confine: false``
as a job input or workspace setting (the input wins) for jobs. Only JSON ``false`` turns it off.

**Where Landlock is missing** (another kernel, Landlock disabled at boot, an architecture without its
system call numbers here) runners run unconfined; the manager says so once when it starts. Every running
frame records what applied (``confinement``: enforced with the ABI and the writable set, or why not).

Why Landlock and this way: it needs no privilege, binds root as well, cannot be lifted by the confined
process, and is inherited across fork and exec. The ruleset is built in the manager — each path opened
``O_PATH`` and added as one rule — so the child only makes two system calls, ``prctl(PR_SET_NO_NEW_PRIVS)``
and ``landlock_restrict_self``, in the hook ``subprocess`` runs between fork and exec. No-new-privileges
means set-user-id programs do not gain their owner's rights inside a confined attempt. ABI 1 cannot
permit a rename across directories at all, and before ABI 3 ``truncate(2)`` is not covered.

Cost per confined attempt: one ``open`` and one ``landlock_add_rule`` per granted path (about fifteen,
plus the siblings along the way to a workspace inside a writable path, one listing per directory on that
way), one ruleset descriptor, and a ``fork`` where ``subprocess`` would otherwise use ``vfork``; measured
by ``benchmarks/throughput.py`` against the same run unconfined.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
import platform
import pwd
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._workspace import CONTROL_DIR, Workspace

log = logging.getLogger("httk.workflow.manager")

DECLARATIONS_GROUP = "httk.workflow.writable_paths"
CONFINE_SETTING = "runner.confine"
WRITABLE_SETTING = "runner.writable_paths"

# -- the kernel's ABI (include/uapi/linux/landlock.h) ----------------------------------------------
_SYSCALLS = {"x86_64": 444, "i386": 444, "i686": 444, "aarch64": 444, "riscv64": 444, "ppc64le": 444}
_SYSCALLS |= {"ppc64": 444, "s390x": 444, "loongarch64": 444, "armv7l": 444, "armv8l": 444}
"""landlock_create_ruleset's number per machine; add_rule and restrict_self follow it (the numbering
that every architecture shares since Linux 5.13). A machine missing here runs unconfined."""
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_TREE_ABI1 = _WRITE_FILE | sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char..sym
_REFER = 1 << 13  # ABI 2: rename and link across directories
_TRUNCATE = 1 << 14  # ABI 3


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64),)


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header: 12 bytes
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@dataclass(frozen=True, slots=True)
class Landlock:
    """What this kernel offers: its Landlock ABI version, or why there is none."""

    abi: int | None
    reason: str | None = None

    @property
    def tree_rights(self) -> int:
        """Every write right this ABI can restrict (what a ruleset handles and a directory rule grants)."""
        rights = _TREE_ABI1
        if (self.abi or 0) >= 2:
            rights |= _REFER
        if (self.abi or 0) >= 3:
            rights |= _TRUNCATE
        return rights

    @property
    def file_rights(self) -> int:
        """The write rights a rule on a single file may grant."""
        return _WRITE_FILE | (_TRUNCATE if (self.abi or 0) >= 3 else 0)


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


@functools.cache
def landlock() -> Landlock:
    """Probe this kernel once: the ABI ``landlock_create_ruleset`` reports, or why it is unavailable."""
    if platform.system() != "Linux":
        return Landlock(None, f"Landlock is a Linux facility and this is {platform.system()}")
    number = _SYSCALLS.get(platform.machine())
    if number is None:
        return Landlock(None, f"no Landlock system call numbers are known for {platform.machine()}")
    version = _libc().syscall(number, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if version < 0:
        code = ctypes.get_errno()
        why = {
            errno.ENOSYS: "the kernel has no Landlock",
            errno.EOPNOTSUPP: "Landlock is disabled in this kernel (the lsm= boot parameter)",
        }.get(code, f"landlock_create_ruleset failed: {os.strerror(code)}")
        return Landlock(None, why)
    return Landlock(int(version))


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


class _Ruleset:
    """A ruleset being built in the manager; its descriptor is close-on-exec, so no runner inherits it."""

    def __init__(self, kernel: Landlock) -> None:
        self.kernel = kernel
        self.number = _SYSCALLS[platform.machine()]
        attr = _RulesetAttr(kernel.tree_rights)
        size = ctypes.c_size_t(ctypes.sizeof(attr))
        self.fd = _check(
            _libc().syscall(self.number, ctypes.byref(attr), size, ctypes.c_uint32(0)), "ruleset"
        )

    def allow(self, path: Path, tree: bool) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return  # gone since it was listed (another process's scratch in /tmp): nothing to allow
        try:
            mode = os.fstat(fd).st_mode  # what is there now: it may have been replaced since it was listed
            if stat.S_ISDIR(mode):
                rights = self.kernel.tree_rights if tree else self.kernel.file_rights
            elif stat.S_ISREG(mode) or stat.S_ISCHR(mode):
                rights = self.kernel.file_rights
            else:
                return  # a symbolic link or a special file: nothing to write through
            rule = _PathBeneathAttr(rights, fd)
            args = (
                ctypes.c_int(self.fd),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            )
            _check(_libc().syscall(self.number + 1, *args), f"a rule for {path}")
        finally:
            os.close(fd)

    def enter(self) -> Callable[[], None]:
        """The hook run in the child between fork and exec: no new privileges, then the ruleset."""
        prctl, syscall = _libc().prctl, _libc().syscall
        no_new_privs = (ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), *[ctypes.c_ulong(0)] * 3)
        restrict = (ctypes.c_long(self.number + 2), ctypes.c_int(self.fd), ctypes.c_uint32(0))

        def restrict_self() -> None:  # in the child: everything it uses was made above
            _check(prctl(*no_new_privs), "prctl(PR_SET_NO_NEW_PRIVS)")
            _check(syscall(*restrict), "landlock_restrict_self")

        return restrict_self

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# -- one attempt's confinement ---------------------------------------------------------------------
@dataclass
class Confinement:
    """What one attempt's runner is confined by: the frame's record, and the hook that applies it."""

    record: dict[str, Any]
    _ruleset: _Ruleset | None = None

    @property
    def enforced(self) -> bool:
        return self._ruleset is not None

    def preexec(self) -> Callable[[], None] | None:
        return None if self._ruleset is None else self._ruleset.enter()

    def close(self) -> None:
        """Let go of the ruleset once the runner's process exists (it holds its own reference)."""
        if self._ruleset is not None:
            self._ruleset.close()


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
class _Plan:
    grants: list[tuple[Path, bool]] = field(default_factory=list)  # (real path, a tree or one file)
    writable: list[str] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)


class Confiner:
    """A manager's confinement: whether it confines at all, and the runners' declared paths."""

    def __init__(self, enabled: bool, kernel: Callable[[], Landlock] = landlock) -> None:
        self.enabled = enabled
        self.kernel = kernel() if enabled else Landlock(None, "turned off for this manager (--no-confine)")
        self._declarers: dict[str, Callable[..., Iterable[Any]] | None] = {}
        self._reported: set[tuple[str, str]] = set()  # refusals logged already: (path, origin)

    def notice(self) -> str | None:
        """The one message a manager gives at start when it cannot confine although asked to."""
        if self.enabled and self.kernel.abi is None:
            return f"runner confinement is unavailable ({self.kernel.reason}): runners run unconfined"
        return None

    def describe(self) -> str:
        if self.kernel.abi is not None:
            return f"landlock ABI {self.kernel.abi}"
        return "off" if not self.enabled else "unavailable"

    def confine(self, attempt: Attempt) -> Confinement:
        """Create ``.httk-job/`` and ``logs/``, and build the attempt's ruleset (or say why there is none)."""
        if not self.enabled:
            return Confinement({"enforced": False, "reason": "manager", "detail": "--no-confine"})
        if _turned_off(attempt):
            return Confinement({"enforced": False, "reason": "job", "detail": f"{CONFINE_SETTING}: false"})
        if self.kernel.abi is None:
            return Confinement(
                {"enforced": False, "reason": "unavailable", "detail": str(self.kernel.reason)}
            )
        plan = self._plan(attempt)
        ruleset = _Ruleset(self.kernel)
        try:
            for path, tree in plan.grants:
                ruleset.allow(path, tree)
        except BaseException:
            ruleset.close()
            raise
        record: dict[str, Any] = {
            "enforced": True,
            "mechanism": "landlock",
            "abi": self.kernel.abi,
            "writable": plan.writable,
        }
        if plan.refused:
            record["refused"] = plan.refused
            self._report(plan.refused)
        return Confinement(record, ruleset)

    def _report(self, refused: list[dict[str, str]]) -> None:
        for entry in refused:
            key = (entry["path"], entry["origin"])
            if key not in self._reported:
                self._reported.add(key)
                log.warning(
                    "not writable for runners: %s (%s) %s", entry["path"], entry["origin"], entry["reason"]
                )

    # -- the writable set --------------------------------------------------------------------------
    def _plan(self, attempt: Attempt) -> _Plan:
        durable = attempt.workspace.durable
        for name in (".httk-job", "logs"):
            _fsops.make_dir(attempt.payload / name, durable=durable, exist_ok=True)
        own: list[tuple[str, Path]] = [
            ("workdir", attempt.workdir),
            ("attempt control", attempt.control_dir),
            (".httk-job", attempt.payload / ".httk-job"),
            ("logs", attempt.payload / "logs"),
        ]
        transactional = (attempt.job.get("data") or {}).get("mode") == "transactional"
        if not transactional and os.path.isdir(attempt.payload / "data"):
            own.append(("data", attempt.payload / "data"))
        broad = [(name, Path(name)) for name in ("/tmp", "/dev/shm", *_DEVICES)]
        if os.environ.get("TMPDIR"):
            broad.append(("TMPDIR", Path(os.environ["TMPDIR"])))
        broad.extend(("home", home) for home in _homes())
        declared = [*_declared(attempt, self._declarer_for(attempt)), *_listed(attempt)]
        return _Boundary(attempt, transactional).plan(own, broad, declared)

    def _declarer_for(self, attempt: Attempt) -> tuple[str, Callable[..., Iterable[Any]] | None]:
        runner = attempt.job.get("runner") or {}
        path = str(runner.get("path", ""))
        if runner.get("source") != "installed" or not path.startswith("pkg:"):
            return "", None
        module = path[len("pkg:") :].split("/", 1)[0]
        if module not in self._declarers:
            self._declarers[module] = _load_declarer(module)
        return module, self._declarers[module]


_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")


def _turned_off(attempt: Attempt) -> bool:
    inputs = attempt.job.get("inputs") or {}
    value = inputs[CONFINE_SETTING] if CONFINE_SETTING in inputs else attempt.settings.get(CONFINE_SETTING)
    return value is False


def _homes() -> list[Path]:
    homes = []
    with contextlib.suppress(KeyError):  # an account without a passwd entry still has $HOME
        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    if os.environ.get("HOME"):
        homes.append(Path(os.environ["HOME"]))
    return homes


def _load_declarer(module: str) -> Callable[..., Iterable[Any]] | None:
    for entry in metadata.entry_points(group=DECLARATIONS_GROUP):
        if entry.name == module:
            loaded = entry.load()
            return loaded if callable(loaded) else None
    return None


def _declared(
    attempt: Attempt, declarer: tuple[str, Callable[..., Iterable[Any]] | None]
) -> list[tuple[str, object]]:
    module, function = declarer
    if function is None:
        return []
    origin = f"runner {module}"
    try:
        return [(origin, path) for path in function(attempt.job, attempt.payload)]
    except Exception as exc:  # a plug-in's failure confines more, never less
        return [(origin, f"<the declaration failed: {type(exc).__name__}: {exc}>")]


def _listed(attempt: Attempt) -> list[tuple[str, object]]:
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
class _Boundary:
    """The workspace's line: what is never writable, and what is writable only inside this payload."""

    attempt: Attempt
    transactional: bool

    def __post_init__(self) -> None:
        self.root = Path(os.path.realpath(self.attempt.workspace.root))
        self.payload = Path(os.path.realpath(self.attempt.payload))
        never = [
            (self.root / CONTROL_DIR, "the workspace's control directory"),
            (self.payload / "job.json", "job.json"),
        ]
        if self.transactional:
            never.append((self.payload / "data", "committed data/ of a transactional job"))
        self.never = never

    def plan(
        self, own: list[tuple[str, Path]], broad: list[tuple[str, Path]], declared: list[tuple[str, object]]
    ) -> _Plan:
        plan = _Plan()
        for origin, path in [*own, *broad]:
            self._grant(plan, origin, path, declared=False)
        for origin, entry in declared:
            named = self._path_of(entry)
            if named is None:
                plan.refused.append({"path": str(entry), "origin": origin, "reason": "is not a path"})
            else:
                self._grant(plan, origin, named, declared=True)
        return plan

    def _path_of(self, entry: object) -> Path | None:
        if not isinstance(entry, str | os.PathLike) or not str(entry) or "\0" in str(entry):
            return None
        text = os.fspath(entry)
        if not isinstance(text, str):
            return None
        if text.startswith("~/") or text == "~":
            return Path(os.path.expanduser(text))
        return Path(text) if os.path.isabs(text) else self.attempt.payload / text

    def _grant(self, plan: _Plan, origin: str, path: Path, *, declared: bool) -> None:
        def refuse(reason: str) -> None:
            plan.refused.append({"path": str(path), "origin": origin, "reason": reason})

        try:
            real = Path(os.path.realpath(path, strict=True))
            mode = os.stat(real).st_mode
        except OSError:
            if declared:
                refuse("does not exist")
            return
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            refuse("is neither a directory, a regular file nor a device")
            return
        for protected, what in self.never:
            if _within(real, protected):
                refuse(f"lies in {what}, which no runner may write")
                return
        if _within(real, self.root) and not _within(real, self.payload):
            refuse("lies in the workspace outside this job's payload")
            return
        avoid = [p for p, _ in self.never if _within(p, real) and p != real]
        if not _within(real, self.payload) and _within(self.root, real):
            avoid = [self.root]  # a broad path holding the workspace: only around it
        if str(real) in plan.writable:
            return  # named twice (HOME and the account's home, say)
        plan.writable.append(str(real))
        plan.grants.extend(_around(real, avoid) if avoid else [(real, stat.S_ISDIR(mode))])


def _within(path: Path, ancestor: Path) -> bool:
    return path == ancestor or ancestor in path.parents


def _around(directory: Path, avoid: list[Path]) -> list[tuple[Path, bool]]:
    """Every entry below ``directory`` except the way to each path of ``avoid``: those entries whole,
    and the directories on the way entry by entry. Symbolic links are left out (they may lead back)."""
    grants: list[tuple[Path, bool]] = []
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return grants
    for entry in entries:
        child = Path(entry.path)
        below = [a for a in avoid if _within(a, child)]
        if entry.is_symlink():
            continue
        if not below:
            if entry.is_dir(follow_symlinks=False):
                grants.append((child, True))
            elif entry.is_file(follow_symlinks=False):
                grants.append((child, False))
        elif child not in below and entry.is_dir(follow_symlinks=False):
            grants.extend(_around(child, below))
    return grants
