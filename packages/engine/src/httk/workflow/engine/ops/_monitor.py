"""What ``httk workflow monitor`` shows of a workspace, gathered refresh after refresh. Read-only.

What it guarantees. A :class:`Monitor` opens nothing for writing, creates no journal writer and no
directory, and works on a workspace attached read-only. Each :meth:`Monitor.refresh` costs a bounded
amount of work whatever the size of the workspace, and returns one typed :class:`MonitorSnapshot`:

* **Counts** per core state kind and per placement prefix. Each kind is counted with the manager's own
  bounded listing, a :class:`~._scan.MarkerStream` (fair across placement roots, resumable between
  passes) in its counting mode, which recognizes marker names as ``workspace status`` does rather than
  parsing them. A refresh serves the kinds in turn, one pass each, until every kind has finished a *cycle*
  (walked its whole tree once) or the refresh's ``budget`` of directory entries is spent; the first kind
  served moves by one each refresh, so a budget that runs out never starves the same kind. A kind whose
  cycle began and ended within the refresh is **exact** (as ``workspace status`` is: exact at no single
  instant, but every marker that stays put is counted once). A kind too large for that is counted over
  several refreshes and shown **sampled**: the count of its last finished cycle, whose oldest part is as
  old as that cycle's start (``age_seconds``); until its first cycle finishes it is **partial**, a lower
  bound. So the screen always says which numbers it can vouch for.
* **Managers** with their heartbeats (``core._liveness.list_managers``, as ``workspace managers``).
* **A page of jobs** (``job list``'s :func:`~._inspect.list_jobs`) under a :class:`JobQuery`: kinds, a
  tag substring, a placement prefix, and a cursor.

:func:`job_detail` reads one job the way ``job show``, ``job log --limit`` and ``job why`` do, probing
the job at its placement (bounded), so a job that moved since it was listed is found where it is now.

Why the counting streams are kept between refreshes. A full count of a large workspace is the one
thing a monitor cannot afford on every refresh (``workspace status`` lists every state directory); a
stream that resumes where the last refresh stopped spreads that walk over as many refreshes as it needs
and never walks one placement twice in a cycle.

Cost of a refresh: at most ``budget`` directory entries counted (plus one pass of every kind that
finished early, bounded by the same budget), one ``job list`` page (the directories it passes through,
each listed and sorted; a tag filter that matches fewer jobs than a page lists the selected kinds
whole, as ``job list --tag-contains`` does), and one read of every manager's manifest and heartbeat.
Open directory listings: at most ``max_open_roots`` placement roots per kind, one listing per level of
each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from httk.workflow.engine.core._liveness import ManagerView, list_managers
from httk.workflow.engine.core._scan import MarkerStream, PassResult, StreamStatistics
from httk.workflow.engine.core._states import CORE_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker
from httk.workflow.protocol import InvalidNameError, validate_placement

from ._history import job_history
from ._inspect import list_jobs, selected_kinds
from ._select import Position
from ._show import show_job
from ._why import WhyContext, diagnose
from ._why_report import Diagnosis

BUDGET = 16384
"""Directory entries one refresh may visit to count markers, by default: a sixth of what ``workspace
status`` visits at 100,000 jobs, and about a quarter of its time (``benchmarks/monitor.py``)."""
PAGE_SIZE = 100
MAX_OPEN_ROOTS = 4
"""Placement roots each kind's stream keeps open between refreshes (the manager's default is 16)."""


class Certainty(StrEnum):
    """How far a count can be trusted (see the module docstring)."""

    EXACT = "exact"
    SAMPLED = "sampled"
    PARTIAL = "partial"


@dataclass(frozen=True)
class KindCount:
    """The count of one kind: in total and per placement prefix, how certain, and how old at worst."""

    kind: Kind
    count: int
    by_placement: Mapping[str, int]
    certainty: Certainty
    age_seconds: float  # since the walk the count comes from began (0 for an exact count)
    refreshes: int  # refreshes that walk spanned

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "count": self.count,
            "by_placement": dict(self.by_placement),
            "certainty": self.certainty.value,
            "age_seconds": round(self.age_seconds, 3),
            "refreshes": self.refreshes,
        }


@dataclass(frozen=True)
class JobQuery:
    """Which jobs the page shows: state kinds (none: all), a tag substring, a placement prefix, a cursor."""

    kinds: tuple[Kind, ...] = ()
    tag_contains: str | None = None
    placement: str | None = None
    after: Position | None = None
    limit: int = PAGE_SIZE

    @classmethod
    def of(
        cls,
        kinds: Sequence[str] = (),
        *,
        tag_contains: str | None = None,
        placement: str | None = None,
        limit: int = PAGE_SIZE,
    ) -> JobQuery:
        """A checked query from kind names (raises :class:`InvalidNameError` naming a bad word)."""
        return cls(selected_kinds(kinds) if kinds else (), tag_contains, placement, None, limit).checked()

    def checked(self) -> JobQuery:
        """The query with its kinds in listing order; raises :class:`InvalidNameError` naming a bad member."""
        if self.tag_contains is not None and not self.tag_contains:
            raise InvalidNameError("tag query", self.tag_contains, "must not be empty")
        if self.placement is not None:
            validate_placement(self.placement)
        if self.limit < 1:
            raise InvalidNameError("page size", self.limit, "must be at least 1")
        kinds = selected_kinds(self.kinds) if self.kinds else ()
        return replace(self, kinds=kinds)


@dataclass(frozen=True)
class JobsPage:
    """One page of jobs under a query, and the cursor of the next page (``None`` on the last)."""

    query: JobQuery
    jobs: tuple[MarkerLocation, ...]
    next_after: Position | None
    anomalies: int


@dataclass(frozen=True)
class MonitorSnapshot:
    """One refresh: the workspace, its counts, its managers and a page of its jobs."""

    root: str
    name: str | None
    workspace_id: str
    read_only_reason: str | None
    counts: tuple[KindCount, ...]  # every core kind, in the state table's order
    managers: tuple[ManagerView, ...]
    page: JobsPage
    anomalies: int  # entries of the state tree the counting walks found that are not markers
    entries_visited: int  # what this refresh's counting cost
    budget: int
    depth: int

    @property
    def total(self) -> int:
        return sum(count.count for count in self.counts)

    @property
    def certainty(self) -> Certainty:
        """The weakest certainty of any kind's count."""
        found = {count.certainty for count in self.counts}
        for level in (Certainty.PARTIAL, Certainty.SAMPLED):
            if level in found:
                return level
        return Certainty.EXACT

    @property
    def placements(self) -> list[str]:
        """Every placement prefix any count names, in byte order."""
        names = {prefix for count in self.counts for prefix in count.by_placement}
        return sorted(names, key=lambda name: name.encode("utf-8", "surrogateescape"))

    @property
    def managers_live(self) -> int:
        return sum(1 for manager in self.managers if manager.live)


# -- counting -----------------------------------------------------------------------------------------
@dataclass
class _Cycle:
    """One walk of a kind's tree: begun at ``started`` (clock seconds), served from refresh ``first`` to
    refresh ``last``."""

    started: float
    first: int
    last: int
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def refreshes(self) -> int:
        return self.last - self.first + 1


class _KindCounter:
    """One kind's stream and the counts of its current and its last finished cycle."""

    def __init__(self, workspace: Workspace, kind: Kind, pass_entries: int, depth: int) -> None:
        self.kind = kind
        self.depth = depth
        self.stream = MarkerStream(
            workspace,
            kind,
            discovery_budget=pass_entries,
            maximum_pass_markers=pass_entries,
            max_open_roots=MAX_OPEN_ROOTS,
            count_only=True,
        )
        self.current: _Cycle | None = None
        self.finished: _Cycle | None = None

    def serve(self, now: float, refresh: int) -> PassResult:
        """One pass of the stream, its markers counted into the current cycle."""
        if self.current is None:
            self.current = _Cycle(now, refresh, refresh)
        cycle = self.current
        cycle.last = refresh
        result = self.stream.next_pass()
        depth = self.depth
        for placement, found in result.counted.items():
            cycle.counts["/".join(placement.split("/")[:depth])] += found
        if result.exhausted_cycle:
            self.finished, self.current = cycle, None
        return result

    def count(self, now: float, refresh: int) -> KindCount:
        """The finished cycle's count (exact when it ran within this refresh), else the partial one."""
        cycle, certainty = self.finished, Certainty.SAMPLED
        if cycle is not None and cycle.first == cycle.last == refresh:
            certainty = Certainty.EXACT
        elif cycle is None:
            cycle, certainty = self.current or _Cycle(now, refresh, refresh), Certainty.PARTIAL
            cycle.last = refresh
        age = 0.0 if certainty is Certainty.EXACT else max(0.0, now - cycle.started)
        total = sum(cycle.counts.values())
        return KindCount(self.kind, total, dict(cycle.counts), certainty, age, cycle.refreshes)

    def close(self) -> None:
        self.stream.close()


class Monitor:
    """Refreshable, bounded, read-only view of one workspace (see the module docstring).

    Not thread-safe: one refresh at a time. Close it (or use it as a context manager) to release the
    directory listings its streams keep open between refreshes.

    Examples
    --------
    >>> with Monitor(attach("runs/demo", writable=False)) as monitor:  # doctest: +SKIP
    ...     snapshot = monitor.refresh(JobQuery(kinds=(Kind.FAILED,)))
    ...     [(count.kind.value, count.count, count.certainty.value) for count in snapshot.counts]
    """

    def __init__(self, workspace: Workspace, *, budget: int = BUDGET, depth: int = 1) -> None:
        if budget < len(CORE_KINDS):
            raise InvalidNameError("count budget", budget, f"must be at least {len(CORE_KINDS)}")
        if depth < 1:
            raise InvalidNameError("placement depth", depth, "must be at least 1")
        self.workspace = workspace
        self.budget = budget
        self.depth = depth
        # Every kind gets one pass per round, so a round never costs more than the budget.
        pass_entries = budget // len(CORE_KINDS)
        self._counters = [_KindCounter(workspace, kind, pass_entries, depth) for kind in CORE_KINDS]
        self._refreshes = 0

    def __repr__(self) -> str:
        return (
            f"Monitor(root={str(self.workspace.root)!r}, budget={self.budget}, refreshes={self._refreshes})"
        )

    def statistics(self) -> dict[Kind, StreamStatistics]:
        """Each kind's counting stream: passes, finished cycles, roots in rotation, listings held open."""
        return {counter.kind: counter.stream.statistics() for counter in self._counters}

    def refresh(self, query: JobQuery | None = None) -> MonitorSnapshot:
        """Count (within the budget), read the managers and one page of jobs under ``query``."""
        query = (query or JobQuery()).checked()
        self._refreshes += 1
        refresh = self._refreshes
        clock = self.workspace.clock
        visited, anomalies = self._count(clock.monotonic(), refresh)
        now = clock.monotonic()
        page = jobs_page(self.workspace, query)
        return MonitorSnapshot(
            root=str(self.workspace.root),
            name=self.workspace.name,
            workspace_id=self.workspace.workspace_id,
            read_only_reason=self.workspace.read_only_reason,
            counts=tuple(counter.count(now, refresh) for counter in self._counters),
            managers=tuple(list_managers(self.workspace)),
            page=page,
            anomalies=anomalies,
            entries_visited=visited,
            budget=self.budget,
            depth=self.depth,
        )

    def _count(self, now: float, refresh: int) -> tuple[int, int]:
        """Serve the kinds round by round until each finished a cycle or the budget is spent."""
        shift = (refresh - 1) % len(self._counters)
        pending = self._counters[shift:] + self._counters[:shift]
        visited = anomalies = 0
        while pending and visited < self.budget:
            for counter in list(pending):
                result = counter.serve(now, refresh)
                visited += result.entries_visited
                anomalies += len(result.anomalies)
                if result.exhausted_cycle:
                    pending.remove(counter)
                if visited >= self.budget:
                    break
        return visited, anomalies

    def close(self) -> None:
        for counter in self._counters:
            counter.close()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def jobs_page(workspace: Workspace, query: JobQuery) -> JobsPage:
    """One page of ``job list`` under ``query`` (checked first)."""
    query = query.checked()
    page = list_jobs(
        workspace,
        kinds=query.kinds,
        placement=query.placement,
        tag_contains=query.tag_contains,
        limit=query.limit,
        after=query.after,
    )
    return JobsPage(query, tuple(page.jobs), page.next_after, len(page.anomalies))


# -- one job ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobDetail:
    """One job as ``job show``, ``job log --limit`` and ``job why`` report it, read at one moment."""

    marker: MarkerLocation
    show: dict[str, Any]
    log: tuple[dict[str, Any], ...]
    why: Diagnosis


def job_detail(
    workspace: Workspace, placement: str, job_key: str, *, log_limit: int = 200
) -> JobDetail | None:
    """The job ``job_key`` at ``placement`` where it is now, or ``None`` when it is no longer there."""
    marker = probe_marker(workspace, placement, job_key)
    if marker is None:
        return None
    history = tuple(job_history(workspace, marker, limit=log_limit))
    why = diagnose(workspace, marker, WhyContext.read(workspace))
    return JobDetail(marker, show_job(workspace, marker), history, why)
