"""The fault plan of the filesystem seam: which failure to inject at which protocol mutation.

Every protocol mutation goes through :mod:`._fsops` and is numbered there, in the order this process
performs them (the numbering crash injection uses). A test sets ``HTTK_WORKFLOW_FAULT=<k>:<fault>`` and
the seam injects ``<fault>`` once, at mutation ``k``, where the fault can happen to that kind of
operation (:data:`APPLIES`); mutation ``k`` of a run without the fault is the same operation, so a
matrix can walk every mutation of a scenario with every fault. The faults, and what they stand for:

=========================  =====================================================================
``write-enospc``           a create, write, append or mkdir fails with ENOSPC (a write first puts
``write-eio``              half of its bytes down, as a full or failing device does); EIO likewise
``fsync-enospc``           the fsync that makes mutation ``k`` durable fails (durable workspaces)
``fsync-eio``              with ENOSPC, or EIO; what was written may or may not be on storage
``rename-enospc``          a rename fails with ENOSPC (a directory that must grow), or EIO,
``rename-eio``             and nothing is renamed
``rename-reports-failure`` a rename happens, then reports EIO (a network filesystem's retried
                           request that found its own work done)
``eintr``                  the system call is interrupted (EINTR) once; the seam retries it
``late-name``              the new name of mutation ``k`` (a rename's destination, a created file or
                           directory) stays invisible to this process's reads for
                           :data:`LATE_SECONDS`, as on a filesystem with lazy metadata visibility
``stale-listing``          listings of the directories mutation ``k`` changed keep showing them as
                           they were before it, for :data:`LATE_SECONDS`
=========================  =====================================================================

The reads the protocol depends on — listings, marker probes, journal segment opens — go through the
seam too (:func:`._fsops.scandir`, :func:`._fsops.lexists`, :func:`._fsops.open_read`) and consult
:func:`hidden` and :func:`stale_listing`. Without a plan every hook is one test of a module-level flag.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

FAULT_VARIABLE = "HTTK_WORKFLOW_FAULT"

LATE_SECONDS = 1.0
"""How long a late name stays invisible and a stale listing stale: well inside the default visibility
deadline, which is what a reader must wait out before it calls anything damaged."""


class Fault(StrEnum):
    WRITE_ENOSPC = "write-enospc"
    WRITE_EIO = "write-eio"
    FSYNC_ENOSPC = "fsync-enospc"
    FSYNC_EIO = "fsync-eio"
    RENAME_ENOSPC = "rename-enospc"
    RENAME_EIO = "rename-eio"
    RENAME_REPORTS_FAILURE = "rename-reports-failure"
    EINTR = "eintr"
    LATE_NAME = "late-name"
    STALE_LISTING = "stale-listing"


MUTATIONS = frozenset({"create", "write", "append", "mkdir", "rename", "unlink", "rmdir", "rmtree"})
"""The operations the seam numbers (``_fsops._mutated``)."""

_ALLOCATING = frozenset({"create", "write", "append", "mkdir"})
APPLIES: dict[Fault, frozenset[str]] = {
    Fault.WRITE_ENOSPC: _ALLOCATING,
    Fault.WRITE_EIO: _ALLOCATING,
    Fault.FSYNC_ENOSPC: MUTATIONS - {"rmtree"},
    Fault.FSYNC_EIO: MUTATIONS - {"rmtree"},
    Fault.RENAME_ENOSPC: frozenset({"rename"}),
    Fault.RENAME_EIO: frozenset({"rename"}),
    Fault.RENAME_REPORTS_FAILURE: frozenset({"rename"}),
    Fault.EINTR: MUTATIONS - {"rmtree"},
    Fault.LATE_NAME: frozenset({"create", "rename", "mkdir"}),
    Fault.STALE_LISTING: frozenset({"create", "rename", "mkdir", "unlink", "rmdir"}),
}
"""The operations each fault can happen to; a fault planned at another kind of mutation never fires."""

ERRNO = {
    Fault.WRITE_ENOSPC: errno.ENOSPC,
    Fault.WRITE_EIO: errno.EIO,
    Fault.FSYNC_ENOSPC: errno.ENOSPC,
    Fault.FSYNC_EIO: errno.EIO,
    Fault.RENAME_ENOSPC: errno.ENOSPC,
    Fault.RENAME_EIO: errno.EIO,
    Fault.RENAME_REPORTS_FAILURE: errno.EIO,
}
FSYNC_FAULTS = frozenset({Fault.FSYNC_ENOSPC, Fault.FSYNC_EIO})


@dataclass
class Plan:
    """One fault at one mutation, and what it left for the reads that follow."""

    at: int
    fault: Fault
    fired: bool = False
    hidden: dict[str, float] = field(default_factory=dict)  # path -> until (monotonic)
    stale: dict[str, tuple[float, list[os.DirEntry[str]]]] = field(default_factory=dict)
    snapshots: dict[str, list[os.DirEntry[str]]] = field(default_factory=dict)  # taken before mutation k


def parse(text: str) -> Plan:
    """``<k>:<fault>``, as ``HTTK_WORKFLOW_FAULT`` holds it."""
    number, _, name = text.partition(":")
    try:
        at, fault = int(number), Fault(name)
    except ValueError:
        raise ValueError(f"{FAULT_VARIABLE} must be <mutation number>:<fault>, not {text!r}") from None
    if at < 1:
        raise ValueError(f"{FAULT_VARIABLE}: mutations are numbered from 1, not {at}")
    return Plan(at, fault)


@dataclass
class _Installed:
    plan: Plan | None


_installed = _Installed(parse(os.environ[FAULT_VARIABLE]) if os.environ.get(FAULT_VARIABLE) else None)


def install(plan: Plan | None) -> None:
    """Replace the plan (in-process tests); ``None`` removes it."""
    _installed.plan = plan


def planned() -> bool:
    """Whether a fault is planned and has not fired yet (what a deferred fsync must remember for)."""
    plan = _installed.plan
    return plan is not None and not plan.fired


def _due(index: int, what: str) -> Fault | None:
    plan = _installed.plan
    if plan is None or plan.fired or plan.at != index or what not in APPLIES[plan.fault]:
        return None
    return plan.fault


def before(index: int, what: str, *paths: Path | str) -> Fault | None:
    """Called before the system call of mutation ``index``: raise the error it must fail with, note a
    listing that must stay stale, or return the fault the caller enacts itself (a partial write)."""
    fault = _due(index, what)
    if fault is None or fault in FSYNC_FAULTS or fault in (Fault.LATE_NAME, Fault.RENAME_REPORTS_FAILURE):
        return None
    plan = _installed.plan
    assert plan is not None
    if fault is Fault.STALE_LISTING:
        for directory in {os.path.dirname(os.fspath(path)) for path in paths}:
            plan.snapshots[directory] = _snapshot(directory)
        return None
    plan.fired = True
    if fault is Fault.EINTR:
        raise InterruptedError(errno.EINTR, os.strerror(errno.EINTR), os.fspath(paths[0]))
    if what in ("write", "append"):
        return fault  # the caller writes part of its data, then raises
    raise error(fault, paths[0])


def after(index: int, what: str, *paths: Path | str) -> None:
    """Called once mutation ``index`` happened: hide its new name, make listings stale, or report a
    failure of what succeeded. ``paths`` end with the new name (a rename's destination)."""
    fault = _due(index, what)
    if fault not in (Fault.LATE_NAME, Fault.STALE_LISTING, Fault.RENAME_REPORTS_FAILURE):
        return
    plan = _installed.plan
    assert plan is not None
    plan.fired = True
    until = time.monotonic() + LATE_SECONDS
    if fault is Fault.LATE_NAME:
        plan.hidden[os.fspath(paths[-1])] = until
    elif fault is Fault.STALE_LISTING:
        for directory, entries in plan.snapshots.items():
            plan.stale[directory] = (until, entries)
    else:
        raise error(fault, paths[-1])


def fsync_failure(index: int, what: str, path: Path | str) -> OSError | None:
    """The error the fsync after mutation ``index`` fails with, if the plan says so."""
    fault = _due(index, what)
    if fault not in FSYNC_FAULTS:
        return None
    plan = _installed.plan
    assert plan is not None and fault is not None
    plan.fired = True
    return error(fault, path)


def error(fault: Fault, path: Path | str) -> OSError:
    """The injected error of ``fault`` at ``path``."""
    code = ERRNO[fault]
    return OSError(code, f"{os.strerror(code)} (injected: {fault.value})", os.fspath(path))


def _snapshot(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return list(listing)
    except OSError:
        return []


# -- what reads see ------------------------------------------------------------------------------------
def active() -> bool:
    """Whether any read may be affected (a late name or a stale listing is pending)."""
    plan = _installed.plan
    return plan is not None and bool(plan.hidden or plan.stale)


def hidden(path: Path | str) -> bool:
    """Whether ``path`` is a name a reader must not see yet."""
    plan = _installed.plan
    if plan is None or not plan.hidden:
        return False
    key = os.fspath(path)
    until = plan.hidden.get(key)
    if until is None:
        return False
    if time.monotonic() < until:
        return True
    del plan.hidden[key]
    return False


def stale_listing(directory: Path | str) -> list[os.DirEntry[str]] | None:
    """The entries a listing of ``directory`` shows while it is stale; ``None`` when it is not."""
    plan = _installed.plan
    if plan is None or not plan.stale:
        return None
    key = os.fspath(directory).rstrip("/") or "/"
    found = plan.stale.get(key)
    if found is None:
        return None
    if time.monotonic() < found[0]:
        return found[1]
    del plan.stale[key]
    return None
