"""Workspace-wide inspection: ``workspace status`` counts and ``job list`` pages. Read-only.

What it guarantees. Both open nothing for writing, create no journal writer and no directory, and work
on a workspace attached read-only (an unsupported profile or extension included).
:func:`workspace_status` counts every marker of every core kind by one exhaustive walk — exact at no
single instant, since managers keep moving markers meanwhile, but every marker that stays put is
counted exactly once. :func:`list_jobs`
returns one page of the **listing order** of ``_inspect_walk`` and a ``next_after`` cursor that continues
it; ``--placement`` is pruned before descent, ``--tag-contains`` filters names before they are parsed.
A page names each job once: a marker that moves on from one kind's directory to a later one while the
walk passes both is met twice, and the page keeps its newest generation (:func:`page_of`). Across pages
no such promise can hold without a snapshot the protocol does not have: a job that moves on past the
cursor is listed again on a later page, at its new kind.

Why a separate counting walk. :func:`~._scan.walk_markers` parses every marker name (about 20 µs each);
``status`` only needs to know that a name *is* a marker, which one regular expression answers in about
1 µs (:func:`~._inspect_walk.is_marker_name`), so 100,000 jobs are counted in well under a second.

Cost: ``status`` lists every state directory once (O(jobs), the reason it is in DESIGN's complexity
budget) and reads the managers' heartbeats; a ``job list`` page of ``N`` lists and sorts the directories
it passes through and parses only the names it returns.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from httk.workflow.engine.core._liveness import list_managers
from httk.workflow.engine.core._scan import Anomaly
from httk.workflow.engine.core._states import CORE_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, is_marker_name
from httk.workflow.protocol import (
    RESERVED_COMPONENT,
    InvalidNameError,
    TransferError,
    placement_prefix_matches,
    validate_placement,
)

from ._select import Position, walk_sorted

TRANSFER_EXTENSION = "detached-transfer-v1"
"""Enabled, ``status`` also counts transferring jobs (the name is not imported: it pulls the bundle code)."""


# -- status -------------------------------------------------------------------------------------------
@dataclass
class StatusReport:
    """Counts per state kind (every core kind, zeros included), optionally per placement prefix."""

    root: str
    workspace_id: str
    name: str | None
    read_only_reason: str | None
    kinds: dict[str, int]
    anomalies: int
    managers_live: int
    managers_other: int
    depth: int | None = None
    by_placement: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.kinds.values())

    def as_dict(self) -> dict[str, Any]:
        report: dict[str, Any] = {
            "workspace": self.root,
            "workspace_id": self.workspace_id,
            "name": self.name,
            "read_only_reason": self.read_only_reason,
            "kinds": dict(self.kinds),
            "total": self.total,
            "anomalies": self.anomalies,
            "managers": {"live": self.managers_live, "not_live": self.managers_other},
        }
        if self.depth is not None:
            report["by_placement"] = {"depth": self.depth, "placements": self.by_placement}
        return report


def workspace_status(workspace: Workspace, *, by_placement: int | None = None) -> StatusReport:
    """Count every job by state kind, and by placement prefix of ``by_placement`` components on request.

    Every core kind is counted, zeros included, and transferring too when detached-transfer-v1 is enabled.
    """
    if by_placement is not None and by_placement < 1:
        raise InvalidNameError("placement depth", by_placement, "must be at least 1")
    kinds: dict[str, int] = {}
    per_prefix: dict[str, Counter[str]] = {}
    anomalies = 0
    transfers = TRANSFER_EXTENSION in workspace.extensions
    for kind in (*CORE_KINDS, Kind.TRANSFERRING) if transfers else CORE_KINDS:
        counts, bad = count_markers(workspace, kind, depth=by_placement)
        if kind is Kind.TRANSFERRING:
            counts += count_detached(workspace, depth=by_placement)
        kinds[kind.value] = sum(counts.values())
        anomalies += bad
        for prefix, count in counts.items():
            per_prefix.setdefault(prefix, Counter())[kind.value] += count
    managers = list_managers(workspace)
    live = sum(1 for manager in managers if manager.live)
    report = StatusReport(
        root=str(workspace.root),
        workspace_id=workspace.workspace_id,
        name=workspace.name,
        read_only_reason=workspace.read_only_reason,
        kinds=kinds,
        anomalies=anomalies,
        managers_live=live,
        managers_other=len(managers) - live,
        depth=by_placement,
    )
    if by_placement is not None:
        order = {kind: index for index, kind in enumerate(kinds)}
        report.by_placement = {
            prefix: dict(sorted(counts.items(), key=lambda item: order[item[0]]))
            for prefix, counts in sorted(per_prefix.items(), key=lambda item: os.fsencode(item[0]))
        }
    return report


def count_markers(workspace: Workspace, kind: Kind, *, depth: int | None = None) -> tuple[Counter[str], int]:
    """Markers of ``kind`` per placement prefix of ``depth`` components ("" for all), and the anomalies.

    An anomaly is anything in the state tree that is not a marker in a placement: what ``fsck`` reports.
    """
    counts: Counter[str] = Counter()
    anomalies = 0
    stack: list[tuple[str, str]] = [(str(workspace.state_dir(kind)), "")]
    while stack:
        path, placement = stack.pop()
        prefix = "" if depth is None else "/".join(placement.split("/")[:depth])
        here = 0
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name == RESERVED_COMPONENT:
                            anomalies += 1
                        else:
                            child = f"{placement}/{entry.name}" if placement else entry.name
                            stack.append((entry.path, child))
                    elif placement and entry.is_file(follow_symlinks=False) and is_marker_name(entry.name):
                        here += 1
                    else:
                        anomalies += 1
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError:
            anomalies += 1
            continue
        if here:
            counts[prefix] += here
    return counts, anomalies


def count_detached(workspace: Workspace, *, depth: int | None = None) -> Counter[str]:
    """Sealed bundles the workspace holds awaiting acknowledgement, per placement prefix of ``depth``.

    A detached job is still this workspace's until its destination acknowledges the import, although
    its marker has left the state tree for the bundle (spec/01, the detached bundle): ``status`` counts
    it as transferring, beside the markers of a detach or import under way.
    """
    from ._transfer_bundle import outgoing_bundles, read_manifest  # only transfer workspaces load it

    counts: Counter[str] = Counter()
    for outgoing in outgoing_bundles(workspace):
        if depth is None:
            counts[""] += 1
            continue
        try:
            placement = str(read_manifest(outgoing.path)["source"]["placement"])
        except TransferError:
            placement = ""  # a damaged bundle still counts; `transfer show` names what is wrong
        counts["/".join(placement.split("/")[:depth])] += 1
    return counts


# -- job list -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobPage:
    """One page of ``job list``: the jobs, the cursor continuing after them, and anomalies passed."""

    jobs: list[MarkerLocation]
    next_after: Position | None
    anomalies: list[Anomaly]


def selected_kinds(kinds: Sequence[Kind | str]) -> tuple[Kind, ...]:
    """The selected kinds in listing order; no selection means every core kind."""
    wanted: set[Kind] = set()
    for kind in kinds:
        try:
            value = Kind(kind)
        except ValueError:
            raise InvalidNameError("state kind", kind, "is not a state kind") from None
        if value not in CORE_KINDS:
            raise InvalidNameError("state kind", kind, "is not a core state kind")
        wanted.add(value)
    return tuple(kind for kind in CORE_KINDS if not wanted or kind in wanted)


def iter_jobs(
    workspace: Workspace,
    *,
    kinds: Sequence[Kind | str] = (),
    placement: str | None = None,
    tag_contains: str | None = None,
    after: Position | str | None = None,
) -> Generator[MarkerLocation | Anomaly, None, None]:
    """Every selected marker in listing order, strictly after ``after`` (a cursor or its text).

    A cursor of a kind that is not selected, or outside ``placement``, is refused rather than silently
    starting over.
    """
    chosen = selected_kinds(kinds)
    if placement is not None:
        validate_placement(placement)
    cursor = Position.parse(after) if isinstance(after, str) else after
    if cursor is not None:
        if cursor.kind not in chosen:
            raise InvalidNameError(
                "cursor",
                str(cursor),
                f"is of kind {cursor.kind.value!r}, which is not among the selected kinds "
                f"({', '.join(k.value for k in chosen)})",
            )
        if placement is not None and not placement_prefix_matches(cursor.placement, placement):
            raise InvalidNameError("cursor", str(cursor), f"lies outside --placement {placement}")
    key_filter = None
    if tag_contains is not None:
        if not tag_contains:
            raise InvalidNameError("tag query", tag_contains, "must not be empty")
        needle = tag_contains

        def key_filter(stem: str) -> bool:
            tag, separator, _uuid = stem.rpartition("--")
            return bool(separator) and needle in tag

    if cursor is not None:
        chosen = chosen[chosen.index(cursor.kind) :]
    for kind in chosen:
        resume = cursor if cursor is not None and kind is cursor.kind else None
        yield from walk_sorted(workspace, kind, placement=placement, after=resume, key_filter=key_filter)


def list_jobs(
    workspace: Workspace,
    *,
    kinds: Sequence[Kind | str] = (),
    placement: str | None = None,
    tag_contains: str | None = None,
    limit: int | None = None,
    after: Position | str | None = None,
) -> JobPage:
    """One page of at most ``limit`` jobs (all without a limit) and the cursor that continues after it.

    ``next_after`` is set only when another selected job follows the page: the walk looks one job ahead.
    """
    if limit is not None and limit < 1:
        raise InvalidNameError("limit", limit, "must be at least 1")
    stream = iter_jobs(workspace, kinds=kinds, placement=placement, tag_contains=tag_contains, after=after)
    try:
        return page_of(stream, limit)
    finally:
        stream.close()


def page_of(stream: Iterable[MarkerLocation | Anomaly], limit: int | None) -> JobPage:
    """The first ``limit`` distinct jobs of a listing stream, each at the newest generation it was met at.

    A job met again at a newer generation moves to where it was met the second time, so the page stays
    in listing order and its last entry is the walk's position for the cursor; met again at an older one
    (a listing can lag behind a rename), the later sighting is dropped.
    """
    jobs: dict[str, MarkerLocation] = {}
    anomalies: list[Anomaly] = []
    more = False
    for item in stream:
        if isinstance(item, Anomaly):
            anomalies.append(item)
            continue
        seen = jobs.get(item.job_id)
        if seen is not None:
            if item.name.generation > seen.name.generation:
                del jobs[item.job_id]
                jobs[item.job_id] = item
            continue
        if limit is not None and len(jobs) == limit:
            more = True
            break
        jobs[item.job_id] = item
    page = list(jobs.values())
    next_after = Position.of(page[-1]) if more and page else None
    return JobPage(page, next_after, anomalies)


def job_row(workspace: Workspace, marker: MarkerLocation) -> dict[str, Any]:
    """The JSON of one listed job: what its marker's path says, nothing read."""
    return {
        **marker_identity(marker),
        "marker": marker.path(workspace).relative_to(workspace.root).as_posix(),
        "cursor": str(Position.of(marker)),
    }


def marker_identity(marker: MarkerLocation) -> dict[str, Any]:
    """The members ``job list`` and ``job show`` both open a job's JSON with, read off its marker name."""
    return {
        "job_id": marker.job_id,
        "job_key": marker.job_key,
        "tag": marker.name.key.tag,
        "kind": marker.kind.value,
        "placement": marker.placement,
        "priority": marker.name.priority,
        "generation": marker.name.generation,
    }
