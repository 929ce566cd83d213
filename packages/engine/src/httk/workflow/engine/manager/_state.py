"""A manager's configuration, what every part of a running manager shares, and the census it ends with.

:class:`ManagerConfig` is the deployment policy of one manager process; every member has the command
line's default.

:class:`ManagerState` is what the passes share: identity, workspace, live attempts, bookkeeping. The
passes (:mod:`._launch`, :mod:`._commit`, :mod:`._recovery`, ...) are functions of this state, so each
can be read and tested on its own; :class:`~._manager.Manager` only drives them.

:class:`Census` is what a manager prints when it stops: every job left, classified by what would
progress it. :func:`take_census` is the one exhaustive walk a manager makes, once, at exit; it reads
job.json only for ready jobs, to say why this manager could not claim them, and the state frame of a
ready job only when the manager schedules resources and nothing else already excludes the job (its
requirement lives there). Whether it could is :func:`._rules.claim_mismatches`, the predicate the claim
pass, ``job why`` and ``precheck`` apply, so the census cannot drift from them.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from httk.workflow.engine.core._clock import Clock, age_seconds
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._fsops import OwedSyncs
from httk.workflow.engine.core._jobs import JobCache, LoadedJob, check_owned_marker, load_job, read_frame
from httk.workflow.engine.core._liveness import manager_gone, read_heartbeat, read_manifest
from httk.workflow.engine.core._scan import Anomaly, walk_markers
from httk.workflow.engine.core._states import CORE_KINDS, FENCED_KINDS, Kind, Trigger
from httk.workflow.engine.core._transition import Move, TransitionResult, move_marker, move_markers
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.protocol import ForeignOwnerError, WorkflowError

from . import _rules
from ._attempt import PreparedAttempt
from ._confine import Confiner
from ._gate import GatedProcess
from ._rules import (
    DEFAULT_JOIN_GRACE_SECONDS,
    DEFAULT_TAKEOVER_GRACE_FACTOR,
    DEFAULT_WINDOW_SECONDS,
    claim_mismatches,
    requirement_of,
    unmet,
)
from ._storage import StorageWatch, Unfinished, Unseen

DEFAULT_POLL_INTERVAL = 0.005
DEFAULT_IDLE_POLL_INTERVAL = 0.25
DEFAULT_SCAN_INTERVAL = 0.25


@dataclass(frozen=True)
class ManagerConfig:
    """Deployment policy of one manager process.

    ``lease_seconds`` ``None`` follows the workspace policy. ``idle`` keeps serving when there is nothing
    to do; without it the manager exits once nothing it can progress remains (jobs it can never claim are
    reported, not waited for), or after ``idle_timeout`` seconds of waiting on work other managers hold.
    ``only_jobs`` (job keys) restricts every discovery — the marker streams and the request pass — to
    those jobs; ``job debug`` runs such a private manager, which claims no unrelated work.

    ``resources`` are the capacities the manager schedules against (``--worker-resource`` and SLURM's;
    :mod:`._resources`). ``None``, the library default and ``job debug``'s, schedules no resources at
    all: requirements are neither checked nor reserved. A manager started from the command line always
    has a mapping, so one with no capacities never claims a job that declares a positive amount.
    """

    workers: int = 1
    pools: tuple[str, ...] = ("default",)
    capabilities: tuple[str, ...] = ()
    resources: Mapping[str, int] | None = None
    lease_seconds: float | None = None
    idle: bool = False
    idle_timeout: float | None = None
    placement_prefixes: tuple[str, ...] = ()
    runner_search_path: tuple[Path, ...] = ()
    runner_modules: tuple[str, ...] = ("httk.workflow",)
    takeover_grace_factor: float = DEFAULT_TAKEOVER_GRACE_FACTOR
    unsafe_persistent_takeover: bool = False
    unsafe_isolated_takeover: bool = False
    join_grace_seconds: float = DEFAULT_JOIN_GRACE_SECONDS
    cancel_grace_seconds: float = 10.0  # SIGTERM to SIGKILL of a cancelled attempt's process group
    drain_timeout: float = 60.0
    label: str | None = None
    durable: bool | None = None
    bash_api: Path | None = None  # instead of the installed HTTK_WORKFLOW_BASH_API (tests, development)
    discovery_budget: int = 4096
    maximum_pass_markers: int = 256
    poll_interval: float = DEFAULT_POLL_INTERVAL
    scan_interval: float = DEFAULT_SCAN_INTERVAL
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    idle_poll_interval: float = DEFAULT_IDLE_POLL_INTERVAL
    only_jobs: frozenset[str] | None = None
    gc_interval: float | None = None  # seconds between garbage collections at the end of a tick; None: never
    manager_id: str | None = None  # chosen by a launcher (so it can put output beside the log); else random
    drain_before_end: float | None = None  # inside a Slurm job: drain once its end is this many seconds away
    confine: bool = True  # runners enter a Landlock ruleset where the kernel has one (._confine)

    def heartbeat_interval(self, lease_seconds: float) -> float:
        """Beat often enough that two missed beats still leave most of the lease."""
        return min(lease_seconds / 4.0, 30.0)


log = logging.getLogger("httk.workflow.manager")
M = TypeVar("M")


@dataclass
class LiveAttempt:
    """An attempt this manager launched and still supervises."""

    marker: MarkerLocation  # the running marker
    frame: Frame  # the running frame
    job: LoadedJob
    prepared: PreparedAttempt
    process: GatedProcess
    terminated_at: float | None = None  # set when a drain stopped it
    # What it reserves of the manager's capacities until it is reaped (empty without resource scheduling).
    allocation: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Owner:
    """What a recoverer knows of the manager a frame names: alive, its heartbeat's age, and whether its
    recorded process is provably gone from this host (DECISIONS D17), which ends its lease at once."""

    alive: bool
    heartbeat_age: float | None
    manager_process_gone: bool = False

    def evidence(self) -> dict[str, Any]:
        """The members every recovery records about the previous owner."""
        return {
            "heartbeat_age_seconds": self.heartbeat_age,
            "manager_process_gone": self.manager_process_gone,
        }


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
        self.manager_id = config.manager_id or str(uuid.uuid4())
        self.lease_seconds = config.lease_seconds or workspace.policy.lease_seconds
        self.jobs = JobCache(workspace)
        self.confiner = Confiner(config.confine)
        self.storage = StorageWatch(clock)
        self.unseen = Unseen(workspace, clock, workspace.policy.visibility_deadline_seconds)
        # Attempts reaped whose commit a storage error interrupted: attempt id -> what to finish them with.
        # Like ``live``, a running marker whose attempt is here is this manager's to finish, not to recover.
        self.unfinished: dict[str, Unfinished] = {}
        # Invariant: an attempt id is in ``live`` exactly while its process is neither reaped nor handed
        # to a successor; no other manager can hold the same attempt, because its running marker is ours.
        self.live: dict[str, LiveAttempt] = {}
        # Every attempt of the manager process's workers when it serves several workspaces (._fleet):
        # a resource requirement is placed beside all of them, not only this workspace's.
        self.pool_live: Callable[[], Iterable[LiveAttempt]] | None = None
        self.launched = 0
        # Ready markers whose requirement did not fit next to the running attempts at the last try, with
        # the frame they name (a marker name pins its frame, so it never needs reading twice). Cleared
        # when the manager refills its ready window; a candidate retried is taken out.
        self.awaiting_room: dict[MarkerLocation, Frame] = {}
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
        # The Bash libraries every attempt gets (HTTK_WORKFLOW_BASH_API, add-ons' ...): _launch.bash_apis
        # resolves them from the installed packages once, when the first attempt launches.
        self.bash_apis: dict[str, str] | None = None
        # Other managers' manifests (written once, never changed) while they may be alive, and the
        # managers whose recorded process is gone (D17), which stay gone.
        self._manifests: dict[str, dict[str, Any]] = {}
        self._gone_managers: set[str] = set()

    @property
    def writer_id(self) -> str:
        return self.workspace.journal().writer_id

    def move(self, marker: MarkerLocation, frame: Frame, trigger: Trigger) -> TransitionResult:
        result = move_marker(self.workspace, marker, frame, trigger)
        self.unseen.published((result,))
        return result

    def move_all(
        self,
        moves: Sequence[Move],
        *,
        failed: Callable[[int, Exception], None] | None = None,
        owed: OwedSyncs | None = None,
        owe_to: OwedSyncs | None = None,
    ) -> list[TransitionResult]:
        """Several jobs' moves as one group commit (:func:`move_markers`, which tells ``failed`` of a
        rename that failed, synchronizes the directories ``owed`` with the renames', or leaves the
        renames' to the later batch ``owe_to``)."""
        results = move_markers(self.workspace, moves, failed=failed, owed=owed, owe_to=owe_to)
        self.unseen.published(results)
        return results

    def apply(self, marker: MarkerLocation, decision: Frame, trigger: Trigger) -> bool:
        """Move ``marker`` to the frame a decision built (this manager's id where it names none); return
        whether this manager's move won."""
        frame = decision.with_defaults(manager_id=self.manager_id)
        result = self.move(marker, frame, trigger)
        if result.won:
            self.committed += 1
            log.info("%s -> %s (%s)", marker.job_key, frame.kind.value, frame.reason)
        return result.won

    def owner(self, frame: Frame) -> Owner:
        """Whether the manager a frame names is alive: heartbeating within its lease, and not known dead.

        A manager whose recorded process is provably gone from this host is dead now, whatever its last
        heartbeat says (DECISIONS D17); its manifest is read once (it never changes) and its process
        probed while its heartbeat is fresh.
        """
        owner = frame.manager_id
        if owner == self.manager_id:
            return Owner(True, 0.0)
        if not isinstance(owner, str):
            return Owner(False, None)
        heartbeat = read_heartbeat(self.workspace, owner)
        now = self.clock.now()
        age = heartbeat.age(now)
        if age is None:
            # No readable heartbeat is no evidence of silence by itself (one delayed metadata read must
            # not look stale): the claim's own start is the latest sign of life we know of.
            age = age_seconds(frame.get("lease_started_at"), now)
        lease = frame.lease_seconds or heartbeat.lease_seconds
        if age is None or age > lease:
            return Owner(False, age)
        if self._manager_gone(owner):
            return Owner(False, age, manager_process_gone=True)
        return Owner(True, age)

    def _manager_gone(self, manager_id: str) -> bool:
        if manager_id in self._gone_managers:
            return True  # a process that is gone never comes back
        if manager_id not in self._manifests:
            manifest = read_manifest(self.workspace, manager_id)
            if manifest is None:
                return False  # no evidence (not yet visible, or collected): the heartbeat decides
            self._manifests[manager_id] = manifest
        if not manager_gone(self._manifests[manager_id]):
            return False
        self._gone_managers.add(manager_id)
        del self._manifests[manager_id]
        return True

    def reserved(self) -> dict[str, int]:
        """What the attempts this manager runs reserve of its capacities, by label."""
        return _rules.reserved(live.allocation for live in self.running_attempts())

    def running_attempts(self) -> Iterable[LiveAttempt]:
        """The attempts whose reservations a new one is placed beside: this process's, in every workspace."""
        return self.live.values() if self.pool_live is None else self.pool_live()

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
        if any(item.failures < COMMIT_RETRIES_BEFORE_IDLE for item in self.unfinished.values()):
            return True
        return any(failures < COMMIT_RETRIES_BEFORE_IDLE for failures, _ in self.deferred_commits.values())

    def holds(self, marker: MarkerLocation) -> bool:
        """Whether an attempt this manager still works on (running, or reaped and unfinished) is at
        ``marker``: not abandoned, whatever its frame says about the owner."""
        return any(live.marker == marker for live in self.live.values()) or any(
            item.live.marker == marker for item in self.unfinished.values()
        )

    def first_time(self, key: str) -> bool:
        """Whether ``key`` is new to this manager (it is remembered from now on)."""
        if key in self._noted:
            return False
        self._noted.add(key)
        return True

    def frame_or_none(self, marker: MarkerLocation) -> Frame | None:
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


BLOCKED_GROUPS = {"capability": "capabilities", "resource": "resources"}
"""``ready_blocked`` groups reasons by the requirement's name in :func:`claim_mismatches`."""


@dataclass
class Census:
    kinds: Counter[str] = field(default_factory=Counter)
    not_claimable: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0
    anomalies: int = 0
    # The largest amount of each resource label a job not claimable here asked for (for the advice).
    resource_needs: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(self.not_claimable.items()))
        blocked = sum(self.not_claimable.values())
        parts = [
            f"{self.kinds['succeeded']} succeeded",
            f"{self.kinds['failed']} failed",
            f"{blocked} not claimable here" + (f" ({reasons})" if reasons else ""),
            f"{self.kinds['waiting']} waiting",
            f"{self.kinds['paused']} paused",
            f"{self.unreadable} unreadable",
        ]
        others = {
            k: v
            for k, v in self.kinds.items()
            if k in ("submitted", "claimed", "running", "committing", "cancelling", "cancelled") and v
        }
        if others:
            parts.append(", ".join(f"{v} {k}" for k, v in sorted(others.items())))
        if self.anomalies:
            parts.append(f"{self.anomalies} unparseable entries (run workspace fsck)")
        return "summary: " + ", ".join(parts)

    def advice(self) -> list[str]:
        """What would let a manager claim the jobs this one could not (flags for pools and capabilities)."""
        lines: list[str] = []
        for reason, count in sorted(self.not_claimable.items()):
            what, _, label = reason.partition(" ")
            if what == "pool":
                lines.append(f"{count} ready job(s) need pool {label}: run a manager with --pool {label}")
            elif what == "capability":
                lines.append(f"{count} ready job(s) need capability {label}: add --capability {label}")
            elif what == "resource":
                need = self.resource_needs.get(label, 1)
                lines.append(
                    f"{count} ready job(s) need resource {label} (up to {need}): "
                    f"add --worker-resource {label} {need}"
                )
            elif what == "owner":
                lines.append(
                    f"{count} ready job(s) belong to another account: only its own managers run them"
                )
            else:
                lines.append(f"{count} ready job(s) need {reason}, which this manager does not serve")
        if self.unreadable:
            lines.append(f"{self.unreadable} job(s) have an unreadable definition: run workspace fsck")
        return lines

    def ready_blocked(self) -> dict[str, dict[str, int]]:
        """The jobs not claimable here by requirement, then label: ``{"resources": {"gpus": 2}}``."""
        blocked: dict[str, dict[str, int]] = {}
        for reason, count in sorted(self.not_claimable.items()):
            what, _, label = reason.partition(" ")
            blocked.setdefault(BLOCKED_GROUPS.get(what, what), {})[label] = count
        return blocked

    def as_dict(self) -> dict[str, object]:
        return {
            "kinds": dict(self.kinds),
            "not_claimable": dict(self.not_claimable),
            "ready_blocked": self.ready_blocked(),
            "unreadable": self.unreadable,
            "anomalies": self.anomalies,
        }


def _why_not(
    workspace: Workspace, marker: MarkerLocation, config: ManagerConfig, census: Census
) -> str | None:
    """The first requirement the claim predicate finds unmet (``pool gpu``), ``unreadable``, or ``None``."""
    try:
        check_owned_marker(workspace, marker)
        job = load_job(workspace, marker.placement, marker.job_key).document
    except ForeignOwnerError:
        return "owner other"  # another account's job: only its own managers claim it
    except WorkflowError:
        return "unreadable"
    unmet_here = claim_mismatches(job, config.pools, config.capabilities)
    requirement: dict[str, int] = {}
    if not unmet_here and config.resources is not None:
        requirement = _requirement(workspace, marker)
        unmet_here = claim_mismatches(
            job, config.pools, config.capabilities, requirement=requirement, capacities=config.resources
        )
    if not unmet_here:
        return None
    if unmet_here[0] == "pool":
        return f"pool {job['claim']['pool']}"
    if unmet_here[0] == "capabilities":
        missing = sorted(set(job["claim"].get("required_capabilities", ())) - set(config.capabilities))
        return f"capability {missing[0]}"
    if unmet_here[0] == "resources":
        label = unmet(requirement, config.resources or {})[0]
        census.resource_needs[label] = max(census.resource_needs.get(label, 0), requirement[label])
        return f"resource {label}"
    return f"executor {job['runner'].get('backend', 'path')}"


def _requirement(workspace: Workspace, marker: MarkerLocation) -> dict[str, int]:
    """The ready frame's requirement; none when the frame cannot be read (fsck's business, as in a claim)."""
    try:
        frame: Mapping[str, Any] = read_frame(workspace, marker) or {}
    except WorkflowError:
        return {}
    return requirement_of(frame.get("resources"))


def _readable(workspace: Workspace, marker: MarkerLocation) -> bool:
    try:
        load_job(workspace, marker.placement, marker.job_key)
    except WorkflowError:
        return False
    return True


def take_census(workspace: Workspace, config: ManagerConfig) -> Census:
    census = Census()
    for kind in CORE_KINDS:
        for item in walk_markers(workspace, kind, placement_prefixes=config.placement_prefixes):
            if not isinstance(item, MarkerLocation):
                census.anomalies += 1
                continue
            census.kinds[kind.value] += 1
            if kind is Kind.READY:
                reason = _why_not(workspace, item, config, census)
                if reason == "unreadable":
                    census.unreadable += 1
                elif reason is not None:
                    census.not_claimable[reason] += 1
            elif kind in FENCED_KINDS and not _readable(workspace, item):
                census.unreadable += 1
    return census


REPORTED_ANOMALIES = 100
"""How many entries that are not markers a manager names in its log, each once."""


class AnomalyReport:
    """Logs each entry of the state tree that is not a marker once, the first :data:`REPORTED_ANOMALIES`
    by name: a directory of 100,000 stray files must not become 100,000 log lines (fsck lists them all)."""

    def __init__(self) -> None:
        self._reported: set[Path] = set()  # Invariant: at most REPORTED_ANOMALIES paths
        self._enough = False

    def __call__(self, anomalies: Sequence[Anomaly]) -> None:
        for anomaly in anomalies:
            if anomaly.path in self._reported:
                continue
            if len(self._reported) >= REPORTED_ANOMALIES:
                if not self._enough:
                    self._enough = True
                    log.error(
                        "more than %d entries of the state tree are not job markers; they are never "
                        "scheduled, and no more are named here (workspace fsck lists them all)",
                        REPORTED_ANOMALIES,
                    )
                return
            self._reported.add(anomaly.path)
            log.error(
                "not a job marker, never scheduled (workspace fsck quarantines it): %s (%s)",
                anomaly.path,
                anomaly.reason,
            )
