"""The loop of a manager process: every workspace it serves ticked in turn, one pool of workers, signals.

A manager process serves a *roster* of members, one per attached workspace (:class:`Member` is what
the loop needs of :class:`~._manager.Manager`). The roster of ``manager run`` (:mod:`._watch`)
attaches, re-roots, marks unavailable and detaches members between loop turns, at its own rescan
interval, so a workspace arriving or leaving never interrupts a tick; a ``Manager.run()`` alone is
served by :class:`~._detach.SoloRoster`, which only looks for a detach request.

**Idleness** is the members' together: the loop goes on while any member acted or holds work in hand
(attempts, cancellations, commits to retry), sleeps a poll while one waits for storage or owes a
listing, and is quiet once every member has completed a full discovery cycle of every active kind with
nothing to act on. Without ``idle`` it then stops; with ``idle`` it keeps serving (and rescanning), and
``idle_timeout`` bounds how long it stays quiet.

**One pool of workers** (:class:`WorkerPool`): with more than one member, ``workers`` attempts run at
once across all of them, and a member's resource requirements are placed against the capacities left by
every member's attempts. Slots go round-robin: a member may claim while no other member that was
refused a slot since its own last claim has waited longer, so one workspace's backlog never starves
another's (it is also the reason a member claims one job per turn while others wait). With one member
the pool is not used at all, and a claim pass fills every free slot, as it always did.

**Draining**: SIGTERM or SIGINT (or a member's Slurm allocation ending) drains every member: no more
claims, running attempts stopped, committing until the drain timeout; a second signal exits at once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from httk.workflow.engine.core._clock import Clock, SystemClock

from ._gate import GatedProcess, wait_for_exit
from ._state import LiveAttempt, ManagerConfig, ManagerState
from ._storage import PROBE_SECONDS

log = logging.getLogger("httk.workflow.manager")


class Member(Protocol):
    """What the loop needs of one workspace's manager (:class:`~._manager.Manager`)."""

    state: ManagerState
    draining: bool

    def tick(self) -> bool: ...

    def busy(self) -> bool: ...

    def settled(self) -> bool | None: ...

    def next_scan_in(self) -> float: ...

    def request_drain(self, reason: str = ...) -> None: ...

    def finish(self) -> None: ...


class Roster(Protocol):
    """The members the loop serves now; :meth:`refresh` may change them between turns."""

    def members(self) -> Sequence[Member]: ...

    def refresh(self) -> bool:
        """Attach, re-root, detach or retire members when due; whether anything changed."""
        ...

    def serving(self) -> bool:
        """Whether there is anything left to serve (watch roots stay served with no member)."""
        ...


class WorkerPool:
    """``workers`` slots shared by several members, handed out round-robin (see the module)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.members: Sequence[Member] = ()
        self._sequence = 0
        self._last: dict[int, int] = {}  # id(member) -> the sequence number of its latest claim
        self._launched: dict[int, int] = {}  # id(member) -> its launch count when last seen
        self._wanting: set[int] = set()  # members refused a slot during their latest turn

    def turn(self, member: Member) -> None:
        """A member's tick begins: it wants a slot again only if it is refused one in this tick."""
        self._wanting.discard(id(member))

    def forget(self, member: Member) -> None:
        key = id(member)
        self._wanting.discard(key)
        self._last.pop(key, None)
        self._launched.pop(key, None)

    def slots_for(self, member: Member) -> int:
        """How many claims ``member`` may make now: 0 while it is another's turn, else its share."""
        key = id(member)
        launched = member.state.launched
        if launched != self._launched.get(key, 0):
            self._sequence += 1
            self._last[key] = self._sequence
            self._launched[key] = launched
        free = self.workers - sum(len(other.state.live) for other in self.members)
        mine = self._last.get(key, 0)
        if free <= 0 or any(self._last.get(other, 0) < mine for other in self._wanting - {key}):
            self._wanting.add(key)
            return 0
        return 1

    def live(self) -> Iterable[LiveAttempt]:
        """Every member's running attempts: what their resources are placed beside."""
        for member in self.members:
            yield from member.state.live.values()


class Fleet:
    """Serves a roster until it is quiet (or forever with ``config.idle``); see the module."""

    def __init__(self, roster: Roster, config: ManagerConfig, clock: Clock) -> None:
        self.roster = roster
        self.config = config
        self.clock = clock
        self.draining = False
        self._drain_started: float | None = None

    def serve(self) -> str:
        """The loop, with this process's signal handlers installed; the reason it ended."""
        previous = self._install_signal_handlers()
        try:
            return self._loop()
        except Exception:
            # The traceback reaches the terminal too, but an operator reads a detached manager's log.
            managers = ", ".join(member.state.manager_id for member in self.roster.members())
            log.exception("manager %s stopped by an unexpected error", managers or "(serving no workspace)")
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for member in self.roster.members():
                member.finish()

    def _loop(self) -> str:
        clock, config = self.clock, self.config
        quiet_since: float | None = None
        while True:
            changed = self.roster.refresh()
            members = self.roster.members()
            if not members and not self.roster.serving():
                return "detached"
            if not self.draining and any(member.draining for member in members):
                self.request_drain("a workspace's manager is draining")
            acted = changed
            for member in members:
                acted |= member.tick()
            if self.draining:
                if not any(member.state.live for member in members) or self._drain_expired():
                    return "drained"
                clock.sleep(config.poll_interval)
                continue
            if acted or any(member.busy() for member in members):
                quiet_since = None
                if not acted:
                    self._wait_for_attempts(members)
                continue
            if any(member.state.storage.paused for member in members):
                quiet_since = None  # claimable work may wait for storage: probe, do not go idle
                clock.sleep(PROBE_SECONDS / 2)
                continue
            settled = [member.settled() for member in members]
            if None in settled:  # a listing has not shown a job a member just published: look again
                clock.sleep(config.poll_interval)
                continue
            if not all(settled):
                continue
            if not config.idle:
                return "idle"
            now = clock.monotonic()
            quiet_since = now if quiet_since is None else quiet_since
            if config.idle_timeout is not None and now - quiet_since >= config.idle_timeout:
                return "idle-timeout"
            clock.sleep(config.idle_poll_interval)

    def _wait_for_attempts(self, members: Sequence[Member]) -> None:
        """Sleep until a live attempt exits or the next scan is due (a blind poll without pidfds)."""
        config = self.config
        processes: list[GatedProcess] = [
            live.process for member in members for live in member.state.live.values()
        ]
        if isinstance(self.clock, SystemClock) and processes:
            remaining = min(member.next_scan_in() for member in members)
            if wait_for_exit(processes, min(max(remaining, config.poll_interval), config.scan_interval)):
                return
        self.clock.sleep(config.poll_interval)

    # -- signals and draining --------------------------------------------------------------------
    def _install_signal_handlers(self) -> dict[int, Any]:
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.draining:
            os._exit(128 + signum)  # the second signal: leave at once, recovery handles the rest
        self.request_drain(f"received {signal.Signals(signum).name}")

    def request_drain(self, reason: str) -> None:
        """Drain every member: stop claiming, stop the running attempts, keep committing a while."""
        self.draining = True
        self._drain_started = self.clock.monotonic()
        for member in self.roster.members():
            if not member.draining:
                member.request_drain(reason)

    def _drain_expired(self) -> bool:
        started = self._drain_started
        return started is not None and self.clock.monotonic() - started >= self.config.drain_timeout
