"""What a manager does when the filesystem fails it: contain the error, keep serving, pause claiming.

A write can fail anywhere under a manager — ENOSPC or EIO from a create, a journal append, an fsync or a
rename — and so can a read. None of that may stop the manager or lose a committed transition. Every
place the manager acts on one job (a pass over a marker, a claim, a commit, a launch) runs inside
:meth:`StorageWatch.contain`: a storage error leaves that job at its last commit point — every
transition is one rename, so it either happened or did not — and is logged once per job and kind of
work, and the manager goes on with the next job; the job is tried again by a later pass, or by a later
manager. A commit of an attempt this manager reaped is kept as :class:`Unfinished` and retried here. A job
whose markers prove corrupt (:class:`TransitionError`) is logged the same way, for fsck, and left.

**Claiming pauses while writes fail.** A failed write marks storage as failing. While it is, the manager
claims nothing new (an attempt it cannot commit would only be lost work), keeps reaping and committing
what runs, and probes storage with its heartbeat every :data:`PROBE_SECONDS`; the first write that works
again resumes claiming. Entering and leaving the pause are logged once each.

**A listing may not show yet what this manager just published.** On a filesystem with lazy metadata
visibility a rename (or the directory made for it) reaches this process's own listings late; spec/01
bounds such waits by ``policy.visibility_deadline_seconds``. A manager that trusted a listing missing the
ready job it had just registered would judge itself idle and stop with the job still to run, so
:class:`Unseen` remembers every job it moved into ready or waiting until a pass of that kind lists it,
and the manager is not idle while one is owed and its deadline has not passed.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import Clock
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._transition import TransitionResult
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.protocol import JournalError, TransitionError, WorkspaceUnavailableError

log = logging.getLogger("httk.workflow.manager")
T = TypeVar("T")

STORAGE_ERRORS: tuple[type[BaseException], ...] = (OSError, JournalError, WorkspaceUnavailableError)
"""What the filesystem (or the journal above it) raises when it cannot do what a transition needs."""

CONTAINED: tuple[type[BaseException], ...] = (*STORAGE_ERRORS, TransitionError)
"""What :meth:`StorageWatch.contain` keeps from stopping the manager: storage errors, and corrupt markers."""

TRANSIENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ESTALE, errno.ENOMEM, errno.EAGAIN}
    | {errno.ETIMEDOUT, errno.ENOLCK, errno.EBUSY, errno.EMFILE, errno.ENFILE}
)
"""Errors of the storage or the system, not of the job: an attempt they keep from starting goes back to
ready. Any other error while preparing one (a workdir that is a symlink, say) fails the attempt."""

PROBE_SECONDS = 1.0
"""How often a paused manager tries its heartbeat to learn whether writes work again."""

RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0


@dataclass
class Unfinished:
    """An attempt this manager reaped whose outcome it could not commit yet."""

    live: Any  # the LiveAttempt (kept opaque: this module sits below the manager's state)
    status: int
    failures: int = 0
    next_try: float = 0.0


class StorageWatch:
    """Whether this manager's writes are failing, and the one error line per job and kind of work."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.failing_since: float | None = None
        self._last_probe = float("-inf")
        self._logged: set[tuple[str, str]] = set()
        self.failures = 0  # storage errors met so far: a pass that met one has work left, it is not quiet

    @property
    def paused(self) -> bool:
        """Whether claiming is paused: the latest write this manager knows of failed."""
        return self.failing_since is not None

    def contain(self, doing: str, job: str, action: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """``action(*args, **kwargs)``; a storage error is logged (once per job and ``doing``) and yields
        ``None``."""
        try:
            return action(*args, **kwargs)
        except CONTAINED as exc:
            self.note(doing, job, exc)
        return None

    def note(self, doing: str, job: str, exc: BaseException) -> None:
        """What :meth:`contain` does with an error it caught, for one job of a batch that failed; an
        error that is neither storage's nor a corrupt marker's is raised again."""
        if isinstance(exc, STORAGE_ERRORS):
            self.failed(doing, job, exc)
        elif isinstance(
            exc, TransitionError
        ):  # a job whose markers are corrupt: fsck's, not a reason to stop
            self._note(doing, job, exc)
        else:
            raise exc

    def failed(self, doing: str, job: str, exc: BaseException) -> None:
        self.failures += 1
        if self.failing_since is None:
            self.failing_since = self.clock.monotonic()
            log.error("storage is failing (%s): claiming paused until writes work again", _short(exc))
        self._note(doing, job, exc)

    def _note(self, doing: str, job: str, exc: BaseException) -> None:
        if (doing, job) not in self._logged:
            self._logged.add((doing, job))
            log.error(
                "cannot %s %s: %s; it stays at its last commit point and is tried again", doing, job, exc
            )

    def worked(self) -> None:
        """A write succeeded: claiming resumes if it was paused."""
        if self.failing_since is not None:
            seconds = self.clock.monotonic() - self.failing_since
            self.failing_since = None
            self._logged.clear()
            log.warning("storage works again after %.1f s: claiming resumed", seconds)

    def probe_due(self) -> bool:
        """Whether a paused manager should try a write now (its heartbeat) to see if storage is back."""
        now = self.clock.monotonic()
        if self.failing_since is None or now - self._last_probe < PROBE_SECONDS:
            return False
        self._last_probe = now
        return True


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` is storage trouble that may pass (:data:`TRANSIENT_ERRNOS`, or the journal's)."""
    if isinstance(exc, JournalError | WorkspaceUnavailableError):
        return True
    return isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS


PERSIST_TRIES = 5


def persist(doing: str, action: Callable[[], None], clock: Clock) -> None:
    """``action()``, tried again after a storage error (:data:`PERSIST_TRIES` times, a growing pause
    between): what a manager cannot work without, such as its record at start. The last error becomes
    one clear :class:`WorkspaceUnavailableError`, never a traceback of the filesystem's."""
    for tries in range(1, PERSIST_TRIES + 1):
        try:
            action()
            return
        except FileExistsError:
            raise  # not a storage error: the name is taken
        except STORAGE_ERRORS as exc:
            if tries == PERSIST_TRIES:
                raise WorkspaceUnavailableError(f"cannot {doing}: {exc}") from exc
            log.error("cannot %s (%s); trying again", doing, exc)
            clock.sleep(PROBE_SECONDS * tries)


def retry_delay(failures: int) -> float:
    """Seconds before the next try after ``failures`` failed ones (doubling, bounded)."""
    return min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2.0 ** max(failures - 1, 0))


def _short(exc: BaseException) -> str:
    code = getattr(exc, "errno", None)
    cause = exc.__cause__
    if code is None and isinstance(cause, OSError):
        code = cause.errno
    return type(exc).__name__ + ("" if code is None else f", {errno.errorcode.get(code, code)}")


class Unseen:
    """Jobs this manager moved into a kind its own passes serve, not yet listed by a pass of that kind.

    Ready and waiting are the kinds a pass must find for the job to go on (a claim, a join); what the
    manager moves elsewhere it either keeps in hand (its attempts) or is done with. A job owed a listing
    whose marker has gone from where this manager put it was moved on by another actor and is owed
    nothing. Recording is one dictionary operation per move, and noticing one lookup per listed marker
    while anything is owed.

    A job stays owed until the visibility deadline has passed and, after its publication, a whole cycle
    of its kind's passes has begun and ended without showing it. The cycle is what makes the deadline
    mean a lagging listing rather than a large workspace: the fair stream shows a job published behind
    its position only in the next cycle, which over a million ready jobs takes far longer than the
    deadline, and every such job would otherwise be given up on (and logged) although no listing lagged.

    Memory is bounded: beyond :data:`OWED_JOBS` jobs (one registration pass over a million submitted
    jobs publishes far more before the ready stream comes round to them), what is owed is kept per
    placement directory, as the deadline and cycle count of the latest job published there, and let go
    under the same rule, silently: which of its jobs a listing showed is not known.
    """

    TRACKED = frozenset({Kind.READY, Kind.WAITING})
    OWED_JOBS = 16_384

    def __init__(self, workspace: Workspace, clock: Clock, deadline_seconds: float) -> None:
        self._workspace = workspace
        self._clock = clock
        self._deadline = deadline_seconds
        # job key -> (marker, monotonic deadline, its kind's cycles ended when it was published)
        self._owed: dict[str, tuple[MarkerLocation, float, int]] = {}
        self._directories: dict[tuple[Kind, str], tuple[float, int]] = {}  # beyond OWED_JOBS
        self._cycles = dict.fromkeys(self.TRACKED, 0)  # whole cycles of each kind's passes, ended

    def published(self, results: Iterable[TransitionResult]) -> None:
        """Note the moves this manager won: a job now in a tracked kind is owed a listing."""
        for result in results:
            current = result.current
            if not result.won or current is None:
                continue
            kind = current.kind
            if kind in self.TRACKED:
                deadline = self._clock.monotonic() + self._deadline
                if len(self._owed) < self.OWED_JOBS or current.job_key in self._owed:
                    self._owed[current.job_key] = (current, deadline, self._cycles[kind])
                else:
                    self._directories[(kind, current.placement)] = (deadline, self._cycles[kind])
            elif self._owed:
                self._owed.pop(current.job_key, None)

    def listed(self, kind: Kind, markers: Iterable[MarkerLocation], *, cycle_ended: bool) -> None:
        """A pass of ``kind`` listed ``markers`` (and ended a whole cycle, or not): what it showed is
        owed nothing any more."""
        if cycle_ended and kind in self._cycles:
            self._cycles[kind] += 1
        if not self._owed:
            return
        for marker in markers:
            owed = self._owed.get(marker.job_key)
            if owed is not None and owed[0].kind is kind:
                del self._owed[marker.job_key]

    def owed_kinds(self) -> set[Kind]:
        """The kinds a listing still owes a job this manager put there and that is still there.

        One given up on (the deadline and a whole cycle since passed) is let go, and each kind's are
        logged in one line: a later pass or manager finds them when they show.
        """
        now = self._clock.monotonic()
        late: dict[Kind, list[str]] = {}
        for key, (marker, deadline, cycles) in list(self._owed.items()):
            kind = marker.kind
            if not _fsops.lexists(marker.path_text(self._workspace)):
                del self._owed[key]  # moved on by another manager or an operator
            elif now >= deadline and self._cycles[kind] >= cycles + 2:
                del self._owed[key]
                late.setdefault(kind, []).append(key)
        for where, (deadline, cycles) in list(self._directories.items()):
            if now >= deadline and self._cycles[where[0]] >= cycles + 2:
                del self._directories[where]
        for kind, keys in late.items():
            log.warning(
                "%d %s which this manager moved to %s %s still missing from listings of %s after the "
                "visibility deadline (%.1f s) and a whole pass over %s (%s); a later pass or manager will "
                "find them",
                len(keys),
                "job" if len(keys) == 1 else "jobs",
                kind.value,
                "is" if len(keys) == 1 else "are",
                kind.value,
                self._deadline,
                kind.value,
                ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else ""),
            )
        owed = {marker.kind for marker, _deadline, _cycles in self._owed.values()}
        return owed | {kind for kind, _placement in self._directories}
