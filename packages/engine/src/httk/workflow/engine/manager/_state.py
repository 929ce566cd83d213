"""What every part of a running manager shares: its identity, its workspace, its live attempts.

The passes (:mod:`._launch`, :mod:`._commit`, :mod:`._recovery`) are functions of this state, so each
can be read and tested on its own; :class:`~._manager.Manager` only drives them.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from httk.workflow.engine.core._clock import Clock, age_seconds
from httk.workflow.engine.core._jobs import JobCache, LoadedJob, read_frame
from httk.workflow.engine.core._liveness import read_heartbeat
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import TransitionResult, move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.publish._outcome import Decision
from httk.workflow.protocol import WorkflowError

from . import _resources
from ._attempt import PreparedAttempt
from ._config import ManagerConfig
from ._executor import GatedProcess

log = logging.getLogger("httk.workflow.manager")
M = TypeVar("M")


@dataclass
class LiveAttempt:
    """An attempt this manager launched and still supervises."""

    marker: MarkerLocation  # the running marker
    frame: dict[str, Any]  # the running frame
    job: LoadedJob
    prepared: PreparedAttempt
    process: GatedProcess
    terminated_at: float | None = None  # set when a drain stopped it
    # What it reserves of the manager's capacities until it is reaped (empty without resource scheduling).
    allocation: dict[str, int] = field(default_factory=dict)


COMMIT_RETRY_FIRST_SECONDS = 1.0
COMMIT_RETRY_MAX_SECONDS = 60.0
COMMIT_RETRIES_BEFORE_IDLE = 5
"""The backoff of a manager retrying its own commit that an I/O error interrupted (1, 2, 4, 8, 16 s
while it keeps the manager from going idle, then up to a minute apart)."""


class ManagerState:
    """Identity, workspace and bookkeeping of one manager process."""

    def __init__(self, workspace: Workspace, config: ManagerConfig, clock: Clock) -> None:
        self.workspace = workspace
        self.config = config
        self.clock = clock
        self.manager_id = str(uuid.uuid4())
        self.lease_seconds = config.lease_seconds or workspace.policy.lease_seconds
        self.jobs = JobCache(workspace)
        # Invariant: an attempt id is in ``live`` exactly while its process is neither reaped nor handed
        # to a successor; no other manager can hold the same attempt, because its running marker is ours.
        self.live: dict[str, LiveAttempt] = {}
        self.launched = 0
        # Ready markers whose requirement did not fit next to the running attempts at the last try, with
        # the frame they name (a marker name pins its frame, so it never needs reading twice). Cleared
        # when the manager refills its ready window; a candidate retried is taken out.
        self.awaiting_room: dict[MarkerLocation, dict[str, Any]] = {}
        self.committed = 0
        # Attempts whose commit is durable and whose control directory awaits D5 retirement; the loop
        # retires them after refilling the freed slot (a crash before that only leaves them to GC).
        self.retiring: list[LiveAttempt] = []
        # What a pass repeated every tick has already logged (one key per stuck marker or attempt), so a
        # job this manager must leave alone is reported once, not hundreds of times a second.
        self._noted: set[str] = set()
        # Commits of this manager's own that stopped short (a transaction replay met an I/O error): job
        # key -> (failures so far, monotonic time of the next try). While this manager heartbeats no
        # other one may finish them, so it retries them itself, backing off.
        self.deferred_commits: dict[str, tuple[int, float]] = {}

    @property
    def writer_id(self) -> str:
        return self.workspace.journal().writer_id

    def move(
        self,
        marker: MarkerLocation,
        kind: Kind,
        trigger: Trigger,
        members: dict[str, Any],
        *,
        priority: int | None = None,
    ) -> TransitionResult:
        return move_marker(self.workspace, marker, kind, trigger, members, priority=priority)

    def apply(self, marker: MarkerLocation, decision: Decision, trigger: Trigger) -> bool:
        """Move ``marker`` where ``decision`` says; return whether this manager's move won."""
        members = dict(decision.members)
        members.setdefault("manager_id", self.manager_id)
        result = self.move(marker, decision.kind, trigger, members, priority=decision.priority)
        if result.won:
            self.committed += 1
            log.info("%s -> %s (%s)", marker.job_key, decision.kind.value, members.get("reason"))
        return result.won

    def owner_alive(self, frame: dict[str, Any]) -> tuple[bool, float | None]:
        """Whether the manager a frame names still heartbeats within its lease, and the heartbeat age."""
        owner = frame.get("manager_id")
        if owner == self.manager_id:
            return True, 0.0
        if not isinstance(owner, str):
            return False, None
        heartbeat = read_heartbeat(self.workspace, owner)
        now = self.clock.now()
        age = heartbeat.age(now)
        if age is None:
            # No readable heartbeat is no evidence of silence by itself (one delayed metadata read must
            # not look stale): the claim's own start is the latest sign of life we know of.
            age = age_seconds(frame.get("lease_started_at"), now)
        lease = float(frame.get("lease_seconds") or heartbeat.lease_seconds)
        return (age is not None and age <= lease), age

    def reserved(self) -> dict[str, int]:
        """What the attempts this manager runs reserve of its capacities, by label."""
        return _resources.reserved(live.allocation for live in self.live.values())

    def defer_commit(self, job_key: str) -> float:
        """Note a commit of ours that must be tried again; return the seconds until the next try."""
        failures = self.deferred_commits.get(job_key, (0, 0.0))[0] + 1
        delay = min(COMMIT_RETRY_MAX_SECONDS, COMMIT_RETRY_FIRST_SECONDS * 2.0 ** (failures - 1))
        self.deferred_commits[job_key] = (failures, self.clock.monotonic() + delay)
        return delay

    def commit_retry_due(self, job_key: str) -> bool:
        """Whether a committing marker of ours may be finished now (always, unless it was deferred)."""
        deferred = self.deferred_commits.get(job_key)
        return deferred is None or self.clock.monotonic() >= deferred[1]

    def commits_pending(self) -> bool:
        """Whether a deferred commit of ours keeps this manager from being idle.

        Only for its first few tries: a commit that keeps failing is left committing when the manager
        goes idle, and any manager finishes it once this one's lease has run out.
        """
        return any(failures < COMMIT_RETRIES_BEFORE_IDLE for failures, _ in self.deferred_commits.values())

    def first_time(self, key: str) -> bool:
        """Whether ``key`` is new to this manager (it is remembered from now on)."""
        if key in self._noted:
            return False
        self._noted.add(key)
        return True

    def frame_or_none(self, marker: MarkerLocation) -> dict[str, Any] | None:
        """The marker's frame; an unreadable one is logged once (fsck repairs it) and yields ``None``."""
        try:
            return read_frame(self.workspace, marker)
        except WorkflowError as exc:
            path = marker.path(self.workspace)
            if self.first_time(f"unreadable frame {path}"):
                log.error("marker %s names an unreadable frame: %s (run workspace fsck)", path, exc)
            return None


class PerManager(Generic[M]):
    """What a pass remembers about one manager incarnation, made on first use.

    Keyed weakly by the state, so the memory goes with the manager (and with a test's throwaway state)
    instead of outliving it in a module-level table.
    """

    def __init__(self, make: Callable[[], M]) -> None:
        self._make = make
        self._by_state: weakref.WeakKeyDictionary[ManagerState, M] = weakref.WeakKeyDictionary()

    def of(self, state: ManagerState) -> M:
        found = self._by_state.get(state)
        if found is None:
            found = self._by_state[state] = self._make()
        return found
