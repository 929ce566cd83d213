"""Landlock through its kernel ABI: the probe, rulesets and rules, and starting a process inside one.

The system calls are made through ``ctypes`` (``include/uapi/linux/landlock.h`` gives the structures and
numbers); :mod:`._confine` decides what a ruleset grants. A ruleset is entered by a short-lived thread
that then starts the gate (:meth:`Confinement.within`): ``prctl(PR_SET_NO_NEW_PRIVS)`` and
``landlock_restrict_self`` are attributes of the calling thread, which every process it starts inherits,
so the gate is confined from its first instruction and the manager's own thread never is.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

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


class RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64),)


class PathBeneathAttr(ctypes.Structure):
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


def open_rule(kernel: Landlock, path: str, tree: bool) -> PathBeneathAttr | None:
    """A rule for what is at ``path`` now, holding an ``O_PATH`` descriptor of it; ``None`` for nothing."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None  # gone since it was listed (another process's scratch in /tmp): nothing to allow
    mode = os.fstat(fd).st_mode  # what is there now: it may have been replaced since it was listed
    if stat.S_ISDIR(mode):
        return PathBeneathAttr(kernel.tree_rights if tree else kernel.file_rights, fd)
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
        return PathBeneathAttr(kernel.file_rights, fd)
    os.close(fd)
    return None  # a symbolic link or a special file: nothing to write through


class OpenedRules:
    """Rules opened once and added to many rulesets (the broad paths), until :meth:`close`."""

    def __init__(self, kernel: Landlock, grants: list[tuple[str, bool]]) -> None:
        self.rules: list[tuple[str, PathBeneathAttr, Any]] = []  # (path, rule, a reference to it)
        try:
            for path, tree in grants:
                rule = open_rule(kernel, path, tree)
                if rule is not None:
                    self.rules.append((path, rule, ctypes.byref(rule)))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for _path, rule, _ref in self.rules:
            os.close(rule.parent_fd)
        self.rules = []


class Ruleset:
    """A ruleset being built in the manager; its descriptor is close-on-exec, so no runner inherits it."""

    def __init__(self, kernel: Landlock) -> None:
        self.kernel = kernel
        self.number = _SYSCALLS[platform.machine()]
        attr = RulesetAttr(kernel.tree_rights)
        size = ctypes.c_size_t(ctypes.sizeof(attr))
        self.fd = _check(
            _libc().syscall(self.number, ctypes.byref(attr), size, ctypes.c_uint32(0)), "ruleset"
        )

    def allow(self, path: str, tree: bool) -> None:
        rule = open_rule(self.kernel, path, tree)
        if rule is not None:
            try:
                self.add(rule, path)
            finally:
                os.close(rule.parent_fd)

    def add(self, rule: PathBeneathAttr, path: str) -> None:
        self.add_all([(path, rule, ctypes.byref(rule))])

    def add_all(self, rules: list[tuple[str, PathBeneathAttr, Any]]) -> None:
        syscall, number = _libc().syscall, ctypes.c_long(self.number + 1)
        fd, beneath, flags = ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.c_uint32(0)
        for path, _rule, reference in rules:
            _check(syscall(number, fd, beneath, reference, flags), f"a rule for {path}")

    def enter(self) -> None:
        """Restrict the calling thread, and every process it starts from now on: no new privileges, then
        the ruleset. Both are attributes of the thread, so the rest of the manager stays unconfined."""
        libc = _libc()
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        restricted = libc.syscall(self.number + 2, ctypes.c_int(self.fd), ctypes.c_uint32(0))
        _check(restricted, "landlock_restrict_self")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# -- entering it -----------------------------------------------------------------------------------
class ConfinementError(OSError):
    """The ruleset could not be entered: the runner is not started."""


@dataclass
class Confinement:
    """What one attempt's runner is confined by: the frame's record, and the ruleset that applies it."""

    record: dict[str, Any]
    _ruleset: Ruleset | None = None
    environment: dict[str, str] = field(default_factory=dict)  # what the runner's environment must change

    @property
    def enforced(self) -> bool:
        return self._ruleset is not None

    def within(self, start: Callable[[], T]) -> T:
        """``start()`` (the gate's ``Popen``) in a thread of its own that entered the ruleset first.

        The process it starts inherits the thread's Landlock domain from its first instruction. Why not
        a hook between fork and exec: a hook forces ``subprocess`` to ``fork`` the whole manager instead
        of ``vfork``, which cost every launch 13 ms; the thread costs a tenth of a millisecond, and it
        ends with the spawn, so nothing else ever runs confined in the manager.
        """
        if self._ruleset is None:
            return start()
        ruleset = self._ruleset
        started: list[T] = []
        failed: list[BaseException] = []

        def confined() -> None:
            try:
                ruleset.enter()
            except OSError as exc:
                failed.append(ConfinementError(exc.errno, str(exc)))
                return
            try:
                started.append(start())
            except BaseException as exc:  # handed to the caller's thread, as if raised there
                failed.append(exc)

        thread = threading.Thread(target=confined, name="httk-confined-launch", daemon=True)
        thread.start()
        thread.join()
        if failed:
            raise failed[0]
        return started[0]

    def close(self) -> None:
        """Let go of the ruleset once the runner's process exists (it holds its own reference)."""
        if self._ruleset is not None:
            self._ruleset.close()
