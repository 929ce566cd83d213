"""The task manager of one workspace: the ticks of small passes that turn submitted jobs into finished
ones.

Each tick takes a heartbeat opportunity, reaps its own attempts, and then runs one bounded pass per
active kind in the order startup recovery needs them: committing (finish what a dead manager fenced),
claimed and running (recover abandoned attempts), waiting (decide joins, :mod:`._waiting`), submitted
(register), ready (claim and launch, best priority within the window). A pass streams one kind through a
:class:`MarkerStream` under entry and marker budgets, so no tick reads the whole workspace and the
terminal kinds are never opened (a join looks at its own children's placements only).

Every marker move goes through :func:`move_marker`; a lost race only means another actor got there
first. Nothing here holds a lock: the marker rename is the only compare-and-swap.

A manager is one workspace's member of a manager process: :mod:`._fleet` runs the loop that ticks
it (and its siblings, when the process serves several workspaces), decides when it is idle and drains
it on a signal; :mod:`._record` is the manifest and heartbeat it publishes.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.engine.core._clock import SYSTEM_CLOCK, Clock
from httk.workflow.engine.core._liveness import current_job
from httk.workflow.engine.core._scan import MarkerStream
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach
from httk.workflow.engine.maintenance._gc import PeriodicCollection

from . import _cancel, _commit, _detach, _launch, _recovery, _request_apply, _waiting
from ._fleet import Fleet, Roster, WorkerPool
from ._record import ManagerIdentity, ManagerRecord
from ._slurm import AllocationWatch
from ._state import AnomalyReport, Census, LiveAttempt, ManagerConfig, ManagerState, take_census
from ._storage import STORAGE_ERRORS, Unfinished, persist

__all__ = ["Manager", "ManagerIdentity", "ManagerRecord", "RunSummary"]

log = logging.getLogger("httk.workflow.manager")

Handler = Callable[[ManagerState, MarkerLocation], "bool | None"]
"""One marker of a pass: whether it moved (``None``: nothing to do with it now)."""

# The scan of one tick, in the order startup recovery needs (spec/01, "Task-manager startup and
# recovery"): finish what dead managers fenced, carry cancellations forward, recover abandoned claims and
# attempts, decide joins, register. Then the request pass, and last the claim pass over ``ready``, which
# so sees every slot and job the passes before it freed (:data:`SCAN_ORDER`).
PASSES: tuple[tuple[Kind, Handler], ...] = (
    (Kind.COMMITTING, _recovery.on_committing),
    (Kind.CANCELLING, _cancel.on_cancelling),  # resumes inherited cancellations too
    (Kind.CLAIMED, _recovery.on_claimed_or_running),
    (Kind.RUNNING, _recovery.on_claimed_or_running),
    (Kind.WAITING, _waiting.on_waiting),  # at most once per scan interval while attempts run
    (Kind.SUBMITTED, _launch.register),
)

# Handlers that take a whole pass at once: their moves share one group commit (core._transition).
BATCHED: dict[Handler, Callable[[ManagerState, Sequence[MarkerLocation]], bool]] = {
    _launch.register: _launch.register_all,
}

# Invariant: every kind a manager moves on its own (core._states.ACTIVE_KINDS) is streamed exactly once
# per scan, and no other kind ever is (tests/engine/manager/test_manager_passes.py).
SCAN_ORDER = (*(kind for kind, _ in PASSES), Kind.READY)


@dataclass
class RunSummary:
    manager_id: str
    census: Census
    launched: int = 0
    committed: int = 0
    exit_reason: str = "idle"


class Manager:
    """A task manager attached to one workspace."""

    def __init__(
        self, workspace: Workspace | Path | str, config: ManagerConfig, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        if not isinstance(workspace, Workspace):
            workspace = attach(workspace, durable=config.durable, clock=clock)
        workspace.require_writable()
        self.state = ManagerState(workspace, config, clock)
        self.draining = False
        # Set by the roster that serves this manager among others (._watch): the workers it shares,
        # and a detach in progress (no scans or claims; only what it holds is reaped and committed).
        self.pool: WorkerPool | None = None
        self.detaching = False
        self.start_at_first_tick = False
        self.closed = False
        self._drain_reason: str | None = None  # logged by the next tick (never from a signal handler)
        self._last_beat = float("-inf")
        self._last_scan = float("-inf")
        self._window: list[MarkerLocation] = []
        self._window_at = float("-inf")
        self._last_join_pass = float("-inf")
        self._quiet: set[Kind] = set()
        self._detach_passes_begun = False
        self._report = AnomalyReport()
        self.gc = PeriodicCollection(config.gc_interval, clock)
        self.allocation = AllocationWatch.of(config.drain_before_end, os.environ, clock)
        self.record: ManagerRecord | None = None
        self._streams = {
            kind: MarkerStream(
                workspace,
                kind,
                placement_prefixes=config.placement_prefixes,
                discovery_budget=config.discovery_budget,
                maximum_pass_markers=config.maximum_pass_markers,
                heartbeat=self.heartbeat_opportunity,
                only_jobs=config.only_jobs,
            )
            for kind in SCAN_ORDER
        }

    @property
    def manager_id(self) -> str:
        return self.state.manager_id

    @property
    def workspace(self) -> Workspace:
        return self.state.workspace

    @property
    def config(self) -> ManagerConfig:
        return self.state.config

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Open this incarnation's journal writer and publish the manager's manifest and heartbeat."""
        state, config = self.state, self.state.config
        identity = ManagerIdentity(
            manager_id=state.manager_id,
            pools=config.pools,
            capabilities=config.capabilities,
            resources=None if config.resources is None else dict(config.resources),
            placement_prefixes=config.placement_prefixes,
            runner_modules=tuple(sorted(config.runner_modules)),
            runner_search_paths=tuple(str(p) for p in config.runner_search_path),
            workers=config.workers,
            lease_seconds=state.lease_seconds,
            label=config.label,
            only_jobs=None if config.only_jobs is None else tuple(sorted(config.only_jobs)),
            batch=current_job(os.environ),
        )
        record = ManagerRecord(state.workspace, identity, state.writer_id)
        persist(f"publish the record of manager {state.manager_id}", record.create, state.clock)
        self.record = record
        self._last_beat = state.clock.monotonic()

    def run(self, roster: Roster | None = None, *, rescan_interval: float | None = None) -> RunSummary:
        """Serve until quiet (or forever with ``config.idle``), then take the census.

        ``roster`` serves this manager among others (:mod:`._watch`). Alone, it honours a detach as
        ``manager run`` does: refused while the workspace's detach request is there (before anything is
        published), and looking for one every ``rescan_interval`` seconds (ten by default), so that a
        detach requested meanwhile is acknowledged once what this manager holds is finished (exit
        reason ``detached``).
        """
        if roster is None:
            if self.record is None:
                _detach.refuse_detached(self.workspace.root)
            interval = _detach.DEFAULT_RESCAN_SECONDS if rescan_interval is None else rescan_interval
            roster = _detach.SoloRoster(self, interval)
        try:
            if self.record is None:
                self.start()
            self.notice_confinement()
            reason = Fleet(roster, self.config, self.state.clock).serve()
            # A workspace detached or gone is no longer this manager's to read: it may be moving.
            census = Census() if self.closed else take_census(self.workspace, self.config)
        finally:
            self.close()
        return self.summary(census, reason)

    def summary(self, census: Census, reason: str) -> RunSummary:
        return RunSummary(self.manager_id, census, self.state.launched, self.state.committed, reason)

    def notice_confinement(self) -> None:
        notice = self.state.confiner.notice()
        if notice is not None:
            log.warning("%s", notice)  # once per manager, where Landlock is missing

    def close(self) -> None:
        """Let go of the workspace: the journal writer's segment and the confinement's handles."""
        if self.closed:
            return
        self.closed = True
        self.workspace.close()  # after an error too: the journal writer lets go of its segment
        self.state.confiner.close()

    def finish(self) -> None:
        """The cleanup a loop ended any way needs: committed attempts retired, listings closed."""
        self._retire_committed()
        for stream in self._streams.values():
            stream.close()

    def busy(self) -> bool:
        """Whether work in hand keeps this manager awake: attempts, cancellations, commits to retry."""
        state = self.state
        return bool(state.live) or bool(_cancel.in_progress(state)) or state.commits_pending()

    def settled(self) -> bool | None:
        """Whether every active kind completed a discovery cycle with nothing to act on; ``None`` when
        a listing has not yet shown a job this manager just published there (look again after a poll)."""
        if not self._quiet >= set(SCAN_ORDER):
            return False
        owed = self.state.unseen.owed_kinds()
        if owed:
            self._quiet -= owed
            return None
        return True

    def next_scan_in(self) -> float:
        return self.config.scan_interval - (self.state.clock.monotonic() - self._last_scan)

    def tick(self) -> bool:
        """One round: heartbeat, reap, then the passes. Whether anything moved.

        Every active kind gets one bounded pass when a scan is due; between scans a reaped attempt only
        refills its slot from the ready window.
        """
        if self.record is None and self.start_at_first_tick:
            self.start()  # a roster's member: the first claim of a process waits for one start, not all
        self.heartbeat_opportunity()
        if self.pool is not None:
            self.pool.turn(self)
        if not self.draining and self.allocation is not None and self.allocation.ending():
            self.request_drain("its Slurm allocation is about to end")
        if self._drain_reason is not None:
            live = len(self.state.live)
            log.info("draining (%s): no more claims; stopping %d running attempts", self._drain_reason, live)
            self._drain_reason = None
        if self.draining:
            self._stop_live()  # also an attempt launched while the signal was being handled
        reaped = self._reap()
        acted = reaped | _commit.finish_unfinished(self.state)
        if self.draining:
            pass
        elif self.detaching:
            acted |= self._held_passes()  # no claims: what it holds, and what no live manager does
        elif self._scan_due():
            self._last_scan = self.state.clock.monotonic()
            for kind, handler in PASSES:
                if kind is Kind.WAITING:
                    if not self._joins_due():
                        continue
                    self._last_join_pass = self.state.clock.monotonic()
                acted |= self._pass(kind, handler)
            requests = self.state.storage.contain(
                "handle the requests of manager",
                self.manager_id,
                _request_apply.handle_requests,
                self.state,
                budget=self.config.maximum_pass_markers,
            )
            acted |= requests is True
            self.heartbeat_opportunity()
            acted |= self._claim_pass()
        elif reaped:
            acted |= self._claim_pass()  # refill the freed slot now; the other kinds wait for their scan
        self._retire_committed()
        if self.gc.due() and not self.draining:  # at a tick's end: never between seeing a marker and acting
            self.state.storage.contain(
                "collect garbage for manager",
                self.manager_id,
                self.gc.collect,
                self.workspace,
                heartbeat=self.heartbeat_opportunity,
                writer_id=self.state.writer_id,
            )
        if acted:
            self._quiet.clear()
        return acted

    def _held_passes(self) -> bool:
        """A detaching manager's passes: only the kinds a detach waits for (claimed, running, committing,
        cancelling), so what a manager that is not live left there — its heartbeat stale, or its process
        gone from this host (DECISIONS D17) — is recovered, by the same rules as any recovery, instead of
        holding the detach up forever. Its own work it reaps and commits as before; it claims nothing.

        The kinds' quiet is forgotten when the detach begins: :meth:`held_settled` wants a whole cycle
        of each, after it, that found nothing to act on."""
        if not self._detach_passes_begun:
            self._detach_passes_begun = True
            self._quiet -= set(_detach.HELD_KINDS)
        elif not self._scan_due():
            return False
        self._last_scan = self.state.clock.monotonic()
        acted = False
        for kind, handler in PASSES:
            if kind in _detach.HELD_KINDS:
                acted |= self._pass(kind, handler)
        return acted

    def held_settled(self) -> bool:
        """Whether, since its detach began, a whole cycle of each held kind found nothing to recover."""
        return self._detach_passes_begun and self._quiet >= set(_detach.HELD_KINDS)

    def _retire_committed(self) -> None:
        while self.state.retiring:
            live = self.state.retiring.pop()
            self.state.storage.contain(
                "retire the attempt control of",
                live.marker.job_key,
                _commit.retire_attempt_control,
                live,
            )

    def _scan_due(self) -> bool:
        """Scan when idle-handed, or every ``scan_interval`` while attempts run (reaping stays fast).

        A reaped attempt always triggers a scan, so a freed worker slot is refilled at once; between
        exits only the cheap reap runs every ``poll_interval``, which spares a parallel filesystem five
        directory passes per poll.
        """
        if not self.state.live:
            return True
        return self.state.clock.monotonic() - self._last_scan >= self.config.scan_interval

    def _joins_due(self) -> bool:
        """Evaluate joins at most once per ``scan_interval`` while attempts run, at every scan otherwise.

        A reaped attempt triggers a scan, and a join's evaluation lists every one of its children's
        placements: evaluated on every reap, a fan-out of n children would cost O(n**2) listings.
        """
        if not self.state.live:
            return True
        return self.state.clock.monotonic() - self._last_join_pass >= self.config.scan_interval

    def _pass(self, kind: Kind, handler: Handler) -> bool:
        started = self.state.clock.monotonic()
        try:
            return self._run_pass(kind, handler)
        finally:
            self._judge_pass(kind, self.state.clock.monotonic() - started)

    def _judge_pass(self, kind: Kind, seconds: float) -> None:
        """A pass using half of the lease is a warning, nine tenths an error (spec/03, "Long scans")."""
        share = seconds / self.state.lease_seconds
        if share >= 0.5:
            log.log(
                logging.ERROR if share >= 0.9 else logging.WARNING,
                "the %s pass took %.1f s, %.0f%% of the %.0f s lease: raise lease_seconds, split the "
                "workspace, or reduce what this manager scans (--placement-prefix)",
                kind.value,
                seconds,
                100 * share,
                self.state.lease_seconds,
            )

    def _run_pass(self, kind: Kind, handler: Handler) -> bool:
        result = self._streams[kind].next_pass()
        self._report(result.anomalies)
        self.state.unseen.listed(kind, result.markers, cycle_ended=result.exhausted_cycle)
        failures = self.state.storage.failures
        batch = BATCHED.get(handler)
        acted = batch(self.state, result.markers) if batch is not None else False
        doing = f"act on the {kind.value} job"
        for marker in [] if batch is not None else result.markers:
            acted |= self.state.storage.contain(doing, marker.job_key, handler, self.state, marker) is True
            self.heartbeat_opportunity()  # one join evaluation may list thousands of children
        # A job a storage error left where it was is work still to do: the kind is not quiet (the next
        # pass tries it again), even when the error hit every job of the pass (a batch's group commit).
        self._note_cycle(kind, result.exhausted_cycle and self.state.storage.failures == failures, acted)
        self.heartbeat_opportunity()
        return acted

    def _claim_pass(self) -> bool:
        """Claim the best candidates of the current ready window, refilling the window when it runs dry.

        The window is one bounded pass of the ready stream, ordered by the priority in the marker names
        (stable among equals) and kept between ticks for ``window_seconds``: a manager with two workers
        claims one or two jobs per tick, and rescanning and re-parsing the whole window each time was
        most of its CPU. Candidates are checked for claimability best-first, only until the free slots
        are filled, so what is claimed is exactly what a fresh window would have chosen.

        A candidate whose resources do not fit next to the running attempts is passed over for the next
        one (a smaller job may start before a larger, better one) and stays in the window for a later
        pass, in its place.
        """
        if self._free_slots() <= 0:
            return False  # the ready stream waits where it is; a full manager is not quiet
        if self.state.storage.paused:
            self._quiet.discard(Kind.READY)  # work waits for storage: the manager is not idle
            return False
        exhausted = False
        if not self._window or self.state.clock.monotonic() - self._window_at > self.config.window_seconds:
            result = self._streams[Kind.READY].next_pass()
            self._report(result.anomalies)
            self.state.unseen.listed(Kind.READY, result.markers, cycle_ended=result.exhausted_cycle)
            self._window = sorted(result.markers, key=lambda marker: marker.name.priority)
            self._window_at = self.state.clock.monotonic()
            self.state.awaiting_room.clear()  # candidates of the old window are rediscovered, not kept
            exhausted = result.exhausted_cycle
        acted = False
        passed_over: list[MarkerLocation] = []
        failures = self.state.storage.failures
        # A claim that fails on storage pauses claiming at once, for the rest of this pass too.
        while self._window and self._free_slots() > 0 and not self.draining and not self.state.storage.paused:
            # As many candidates as there are free slots, claimed and launched as one group commit; a
            # claim another actor won frees its slot for the next round.
            chosen = _launch.choose_from(self.state, self._window, self._free_slots(), passed_over)
            if chosen:
                acted |= _launch.claim_all(self.state, chosen) > 0
            self.heartbeat_opportunity()
        if passed_over:
            self._window[:0] = passed_over
        # Only candidates left for want of a slot or of room keep the kind awake; one tried and not won
        # (a lost race, a frame that cannot be read, resources beyond this manager) is nothing this
        # manager can progress. A candidate left for want of room implies running attempts, which keep
        # the manager awake until they end and make room.
        # A claim a storage error left ready is tried again, as a job of another pass (_run_pass).
        quiet = exhausted and not self._window and self.state.storage.failures == failures
        self._note_cycle(Kind.READY, quiet, acted)
        return acted

    def _note_cycle(self, kind: Kind, exhausted: bool, acted: bool) -> None:
        if acted:
            self._quiet.discard(kind)
        elif exhausted:
            self._quiet.add(kind)

    def _free_slots(self) -> int:
        if self.pool is None:
            return self.config.workers - len(self.state.live)
        return self.pool.slots_for(self)

    def _reap(self) -> bool:
        acted = False
        for attempt_id, live in list(self.state.live.items()):
            status = live.process.poll()
            if status is None:
                continue
            del self.state.live[attempt_id]
            acted = True
            if self.state.storage.contain(
                "record the exit of",
                live.marker.job_key,
                _cancel.note_reaped,
                self.state,
                live,
                status,
            ):
                continue  # a cancellation fenced it: its exit is the evidence, there is nothing to commit
            _commit.finish_reaped(self.state, attempt_id, Unfinished(live, status))
        return acted

    # -- heartbeat -------------------------------------------------------------------------------
    def heartbeat_opportunity(self) -> None:
        """Beat when the interval has passed; called between kinds and from inside long scans."""
        if self.record is None:
            return
        now = self.state.clock.monotonic()
        storage = self.state.storage
        if storage.probe_due() or now - self._last_beat >= self.config.heartbeat_interval(
            self.state.lease_seconds
        ):
            try:
                self.record.beat()
            except STORAGE_ERRORS as exc:
                storage.failed("publish the heartbeat of manager", self.manager_id, exc)
                return  # tried again at the next opportunity; a stale heartbeat only makes us look older
            self._last_beat = now
            storage.worked()  # a write that works: claiming resumes if it was paused

    # -- draining --------------------------------------------------------------------------------
    def request_drain(self, reason: str = "asked to") -> None:
        """Stop claiming, stop the running attempts, and keep committing until the drain timeout."""
        self.draining = True
        self._drain_reason = reason
        self._stop_live()

    def _stop_live(self) -> None:
        """SIGTERM every live attempt not stopped yet (each once)."""
        for live in list(self.state.live.values()):
            if live.terminated_at is None:
                live.terminated_at = self.state.clock.monotonic()
                live.process.terminate_group(signal.SIGTERM)

    def live_attempts(self) -> list[LiveAttempt]:
        return list(self.state.live.values())
