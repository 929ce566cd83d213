"""Discovering markers: the manager's fair, bounded :class:`MarkerStream` and the exhaustive walker.

Both stream ``state/<kind>/`` with :func:`os.scandir`, one directory entry at a time, never following a
symlink and never holding more than one open listing per directory level. An entry that is not a marker
(an unparseable name, a symlink, a file directly below ``state/<kind>/`` where no placement is) is
reported as an :class:`Anomaly` for the caller; an entry or directory that vanishes mid-walk (a concurrent
transition renamed it) is skipped silently. ``placement_prefixes`` enter the prefix directories directly,
so nothing outside them is ever opened.

**Guarantee of a stream.** A *cycle* walks every top-level root (the first placement components, or the
configured prefix directories) to completion once; ``PassResult.exhausted_cycle`` marks its last pass,
and the next pass starts a new cycle from the beginning, so markers that arrived meanwhile are found.
Within a cycle every marker that stays in place is returned exactly once. Each pass visits at most
``discovery_budget`` entries (``B``) and returns at most ``maximum_pass_markers`` markers (``M``).

**Fairness.** Up to ``max_open_roots`` roots are *in rotation* at once, and every pass serves every root
in rotation, each with an equal share of both budgets: the ``i``-th of ``n`` roots may use up to
``ceil(left / (n - i))`` of what the roots before it left, so each gets at least ``floor(B'/n)`` entries
and ``floor(M/n)`` markers, ``B'`` being ``B`` less the entries that admitted new roots in that pass (one
per root). What a root leaves unused goes to the roots after it, and the first place moves by one root per
pass. A root with ``k`` entries in rotation beside ``n - 1`` others is therefore finished within about
``k / floor(B'/n)`` passes however large its siblings are: one huge root cannot starve a small sibling.
Roots beyond the rotation wait, in listing order, for a slot, which only roots being served can hold; a
root that finishes early waits for the cycle to end before it is walked again (so that nothing is found
twice in a cycle), which bounds the delay of a new marker by one cycle.

**Why live listings rather than sorted names.** The resume cursor of a root is its stack of open
``os.scandir`` iterators, suspended where the last pass stopped. POSIX guarantees that one open directory
stream returns every entry that is neither added nor removed meanwhile exactly once, in whatever order
the filesystem keeps (hash order on ext4 and xfs, stable but not sorted, and not guaranteed to repeat
after reopening, which a new cycle does not need); that is the stable order that lets no marker starve.
Sorting instead would make the cursor a name (continue after it), but a directory stream cannot seek to a
name, so every pass would re-read and filter the whole directory and the first pass would also sort it.
On ext4 at 100,000 entries that is 64 ms to list the directory and 93 ms to list and sort it, before a
single name is parsed, on every pass; one default pass here costs about 3 ms (most of it parsing 256
names at about 10 µs each), and the first pass of a fresh stream about 11 ms with the page cache dropped.
The prices of live listings: open file descriptors, at most one per directory level of each root in
rotation plus one for the root listing; and read-ahead, since a listing hands out entries the C library
fetched in 32 KiB batches, a resumed pass may return a marker renamed away since. Markers are
candidates, never facts: the claim's rename decides, and a miss is tolerated. On NFS a server that
invalidates readdir cookies may likewise make a resumed listing repeat or skip entries.

**Counting.** A stream made with ``count_only`` tells markers by :func:`~._workspace.is_marker_name`
(one regular expression, as ``workspace status`` does) instead of parsing them, and returns how many it
found per placement (``PassResult.counted``) instead of the markers: the same fair, bounded cycles at
a tenth of the cost per marker, for a monitor that counts and claims nothing.

**Cost.** A pass costs O(discovery_budget) directory entries plus one ``opendir`` per directory entered;
the first pass of a cycle costs no more than any other. Nothing is written or kept on disk: a restarted
manager begins a fresh cycle. :func:`walk_markers` visits each entry of the kind's tree (or of the prefix
subtrees) once, about 12 µs per marker (1.2 s for 100,000), and holds one listing per placement level.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from httk.workflow.protocol import (
    RESERVED_COMPONENT,
    InvalidNameError,
    MarkerName,
    WorkspaceError,
    placement_prefix_matches,
    validate_placement,
)

from . import _fsops
from ._states import Kind
from ._workspace import MarkerLocation, Workspace, is_marker_name

DISCOVERY_BUDGET = 4096
MAXIMUM_PASS_MARKERS = 256
HEARTBEAT_EVERY = 512
MAX_OPEN_ROOTS = 16


class AnomalyReason(StrEnum):
    """Why an entry of the state tree is not a marker (stable codes for reports and fsck)."""

    UNPARSEABLE_NAME = "unparseable_name"
    NO_PLACEMENT = "no_placement"
    SYMLINK = "symlink"
    NOT_A_REGULAR_FILE = "not_a_regular_file"
    RESERVED_PLACEMENT = "reserved_placement"
    UNREADABLE_DIRECTORY = "unreadable_directory"


@dataclass(frozen=True, slots=True)
class Anomaly:
    """An entry of the state tree that is not a marker, for the caller to report."""

    path: Path
    reason: AnomalyReason


@dataclass(frozen=True, slots=True)
class PassResult:
    """What one :meth:`MarkerStream.next_pass` found; ``exhausted_cycle`` marks the last pass of a cycle."""

    markers: list[MarkerLocation]
    anomalies: list[Anomaly]
    entries_visited: int
    exhausted_cycle: bool
    counted: Counter[str] = field(default_factory=Counter)  # count_only: markers per placement


@dataclass(frozen=True, slots=True)
class StreamStatistics:
    """The state of a stream: passes run, cycles completed, roots in rotation, listings held open."""

    passes: int
    cycles: int
    roots_in_rotation: int
    open_directories: int


def _noop() -> None:
    return None


def normalize_prefixes(prefixes: Sequence[str]) -> tuple[str, ...]:
    """Validate placement prefixes and drop every one that lies at or below another, sorted."""
    valid = sorted({validate_placement(prefix) for prefix in prefixes})
    # Invariant: no kept prefix lies at or below another kept prefix, so overlapping prefixes never walk
    # one subtree twice (test_overlapping_prefixes_yield_each_marker_once).
    return tuple(p for p in valid if not any(q != p and placement_prefix_matches(p, q) for q in valid))


# -- one entry ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Counted:
    """A marker a counting stream saw, unparsed: only its placement is kept."""

    placement: str


_Item = MarkerLocation | _Counted | Anomaly | None
"""What visiting one entry gives: a marker (or, counting, its placement), an anomaly, or nothing to
report (a directory entered, an entry that vanished)."""


class _Listing(Protocol):
    def __next__(self) -> os.DirEntry[str]: ...

    def close(self) -> None: ...


def _vanished(exc: OSError) -> bool:
    return isinstance(exc, (FileNotFoundError, NotADirectoryError)) or exc.errno == errno.ESTALE


def _open_listing(path: str) -> _Listing | Anomaly | None:
    """An open listing of ``path``; ``None`` when it vanished, an anomaly when it may not be read."""
    try:
        return _fsops.scandir(path)
    except OSError as exc:
        if _vanished(exc):
            return None
        if isinstance(exc, PermissionError):
            return Anomaly(Path(path), AnomalyReason.UNREADABLE_DIRECTORY)
        raise WorkspaceError(f"cannot list a state directory: {exc.strerror}", path) from None


def _next_entry(listing: _Listing, path: str) -> os.DirEntry[str] | None:
    """The next entry of an open listing; ``None`` at its end or when its directory vanished."""
    try:
        return next(listing)
    except StopIteration:
        return None
    except OSError as exc:
        if _vanished(exc):
            return None
        raise WorkspaceError(f"cannot list a state directory: {exc.strerror}", path) from None


def _is_text(name: str) -> bool:
    """Whether a filename is UTF-8 text (``os.fsdecode`` turns an undecodable byte into a surrogate)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _classify(entry: os.DirEntry[str], kind: Kind, placement: str, parse: bool = True) -> _Item | str:
    """Classify one entry of the directory at ``placement`` ("" for ``state/<kind>/`` itself).

    A string is the placement of a subdirectory to enter. The file-type tests use the type the listing
    reported and stat only where the filesystem does not report one. Without ``parse`` a marker is only
    recognized, not parsed.
    """
    if entry.is_file(follow_symlinks=False):
        if not placement:
            return Anomaly(Path(entry.path), AnomalyReason.NO_PLACEMENT)
        if not parse:
            if is_marker_name(entry.name):
                return _Counted(placement)
            return Anomaly(Path(entry.path), AnomalyReason.UNPARSEABLE_NAME)
        try:
            return MarkerLocation(kind, placement, MarkerName.parse(entry.name))
        except InvalidNameError:
            return Anomaly(Path(entry.path), AnomalyReason.UNPARSEABLE_NAME)
    if entry.is_dir(follow_symlinks=False):
        if entry.name == RESERVED_COMPONENT:
            return Anomaly(Path(entry.path), AnomalyReason.RESERVED_PLACEMENT)
        if not _is_text(entry.name):  # no frame could name a placement holding an undecodable byte
            return Anomaly(Path(entry.path), AnomalyReason.UNPARSEABLE_NAME)
        return f"{placement}/{entry.name}" if placement else entry.name
    if entry.is_symlink():
        return Anomaly(Path(entry.path), AnomalyReason.SYMLINK)
    try:  # the type tests swallow ENOENT, so "none of them" may mean the entry was renamed away
        os.lstat(entry.path)
    except OSError as exc:
        if _vanished(exc):
            return None
        raise WorkspaceError(f"cannot inspect a state entry: {exc.strerror}", entry.path) from None
    return Anomaly(Path(entry.path), AnomalyReason.NOT_A_REGULAR_FILE)


# -- one root ----------------------------------------------------------------------------------------
class _Walk:
    """A resumable depth-first walk below one directory: each ``next()`` visits exactly one entry.

    The cursor is the stack of open listings, one per directory level, suspended between visits.
    """

    __slots__ = ("_kind", "_levels", "_parse")

    def __init__(self, kind: Kind, listing: _Listing, path: str, placement: str, parse: bool = True) -> None:
        self._kind = kind
        self._parse = parse
        # Invariant: one open listing per level of the current path and none other, so a walk holds at most
        # (placement depth) descriptors (test_open_directories_stay_bounded).
        self._levels: list[tuple[_Listing, str, str]] = [(listing, path, placement)]

    @classmethod
    def open(cls, kind: Kind, path: str, placement: str, parse: bool = True) -> _Walk | Anomaly | None:
        listing = _open_listing(path)
        if listing is None or isinstance(listing, Anomaly):
            return listing
        return cls(kind, listing, path, placement, parse)

    @property
    def depth(self) -> int:
        return len(self._levels)

    def __iter__(self) -> Iterator[_Item]:
        return self

    def __next__(self) -> _Item:
        while self._levels:
            listing, path, placement = self._levels[-1]
            entry = _next_entry(listing, path)
            if entry is None:
                self._leave()
                continue
            item = _classify(entry, self._kind, placement, self._parse)
            if not isinstance(item, str):
                return item
            return self._enter(entry.path, item)
        raise StopIteration

    def _enter(self, path: str, placement: str) -> Anomaly | None:
        listing = _open_listing(path)
        if listing is None or isinstance(listing, Anomaly):
            return listing
        self._levels.append((listing, path, placement))
        return None

    def _leave(self) -> None:
        self._levels.pop()[0].close()

    def close(self) -> None:
        while self._levels:
            self._leave()


def _unsafe_root(state_dir: str) -> Anomaly | None:
    """An anomaly when ``state/<kind>/`` is no directory of the workspace's own: a link would have the
    markers of another tree scheduled, a file cannot be listed. Absent is an empty kind, not a problem."""
    try:
        mode = os.lstat(state_dir).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        return Anomaly(Path(state_dir), AnomalyReason.UNREADABLE_DIRECTORY)
    if stat.S_ISLNK(mode):
        return Anomaly(Path(state_dir), AnomalyReason.SYMLINK)
    if not stat.S_ISDIR(mode):
        return Anomaly(Path(state_dir), AnomalyReason.UNREADABLE_DIRECTORY)
    return None


def _open_prefix(state_dir: str, kind: Kind, prefix: str, parse: bool = True) -> _Walk | Anomaly | None:
    """Open the prefix directory itself, refusing to pass through a symlinked component."""
    path = state_dir
    for component in prefix.split("/"):
        path = os.path.join(path, component)
        if os.path.islink(path):  # an absent component is no link; opening the prefix then finds nothing
            return Anomaly(Path(path), AnomalyReason.SYMLINK)
    return _Walk.open(kind, path, prefix, parse)


# -- the exhaustive walker ---------------------------------------------------------------------------
def walk_markers(
    workspace: Workspace,
    kind: Kind,
    *,
    placement_prefixes: Sequence[str] = (),
    on_entry: Callable[[], None] | None = None,
) -> Generator[MarkerLocation | Anomaly, None, None]:
    """Every marker and anomaly of one kind, streamed, with ``on_entry`` called once per entry visited.

    For status, fsck and the idle census: no budget and no order. With ``placement_prefixes`` only the
    prefix directories are entered (overlapping prefixes are walked once). Closing the generator early
    releases the listings it holds.

    Examples
    --------
    >>> markers = [m for m in walk_markers(ws, Kind.READY) if isinstance(m, MarkerLocation)]  # doctest: +SKIP
    """
    state_dir = str(workspace.state_dir(kind))
    for prefix in normalize_prefixes(placement_prefixes) or ("",):
        root = _unsafe_root(state_dir) or (
            _open_prefix(state_dir, kind, prefix) if prefix else _Walk.open(kind, state_dir, "")
        )
        if not isinstance(root, _Walk):
            if root is not None:
                yield root
            continue
        try:
            for item in root:
                if on_entry is not None:
                    on_entry()
                if item is not None and not isinstance(item, _Counted):  # a parsing walk never counts
                    yield item
        finally:
            root.close()


# -- the fair, bounded stream ------------------------------------------------------------------------
@dataclass
class _Pass:
    """The budgets and findings of one pass; every visited entry goes through :meth:`visit`."""

    entries_left: int
    markers_left: int
    heartbeat_every: int
    heartbeat: Callable[[], None]
    only_jobs: frozenset[str] | None = None
    visited: int = 0
    markers: list[MarkerLocation] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    counted: Counter[str] = field(default_factory=Counter)
    found: int = 0  # markers returned or counted

    @property
    def spent(self) -> bool:
        return self.entries_left <= 0 or self.markers_left <= 0

    def visit(self, item: _Item) -> None:
        self.visited += 1
        self.entries_left -= 1
        if self.visited % self.heartbeat_every == 0:
            self.heartbeat()
        self.record(item)

    def record(self, item: _Item) -> None:
        if isinstance(item, MarkerLocation):
            if self.only_jobs is not None and item.job_key not in self.only_jobs:
                return  # another job's marker: visited (it costs budget) but never returned
            self.markers.append(item)
        elif isinstance(item, _Counted):
            self.counted[item.placement] += 1
        else:
            if item is not None:
                self.anomalies.append(item)
            return
        self.markers_left -= 1
        self.found += 1


class _RootListing:
    """The roots of one cycle without prefixes: ``state/<kind>/`` listed one (budgeted) entry at a time."""

    def __init__(self, kind: Kind, state_dir: str, parse: bool) -> None:
        self._kind = kind
        self._state_dir = state_dir
        self._parse = parse
        self._listing: _Listing | None = None
        self._started = False
        self.exhausted = False

    @property
    def open_directories(self) -> int:
        return 0 if self._listing is None else 1

    def next_root(self, sink: _Pass) -> _Walk | None:
        if not self._started:
            self._started = True
            opened = _unsafe_root(self._state_dir) or _open_listing(self._state_dir)
            if opened is None or isinstance(opened, Anomaly):  # absent state/<kind>/: an empty cycle
                sink.record(opened)
                self.exhausted = True
                return None
            self._listing = opened
        assert self._listing is not None
        entry = _next_entry(self._listing, self._state_dir)
        if entry is None:
            self.close()
            return None
        item = _classify(entry, self._kind, "")
        if not isinstance(item, str):
            sink.visit(item)
            return None
        root = _Walk.open(self._kind, entry.path, item, self._parse)
        sink.visit(root if isinstance(root, Anomaly) else None)
        return root if isinstance(root, _Walk) else None

    def close(self) -> None:
        self.exhausted = True
        if self._listing is not None:
            self._listing.close()
            self._listing = None


class _PrefixRoots:
    """The roots of one cycle with prefixes: the prefix directories themselves, costing no entry."""

    open_directories = 0

    def __init__(self, kind: Kind, state_dir: str, prefixes: tuple[str, ...], parse: bool) -> None:
        self._kind = kind
        self._state_dir = state_dir
        self._parse = parse
        self._pending = deque(prefixes)

    @property
    def exhausted(self) -> bool:
        return not self._pending

    def next_root(self, sink: _Pass) -> _Walk | None:
        root = _open_prefix(self._state_dir, self._kind, self._pending.popleft(), self._parse)
        if isinstance(root, Anomaly):
            sink.record(root)
            return None
        return root

    def close(self) -> None:
        self._pending.clear()


def _serve(walk: _Walk, sink: _Pass, entries: int, markers: int) -> bool:
    """Visit up to ``entries`` entries of ``walk``, stopping after ``markers`` markers; True when it ended."""
    stop_at = sink.found + markers
    for _ in range(entries):
        try:
            item = next(walk)
        except StopIteration:
            return True
        sink.visit(item)
        if sink.found >= stop_at:
            break
    return False


def _share(left: int, ways: int) -> int:
    return -(-left // ways)


class MarkerStream:
    """Fair, bounded, resumable discovery of the markers of one kind; see the module docstring.

    With ``only_jobs`` (job keys) it returns only those jobs' markers; the others still count as visited
    entries. With ``count_only`` it returns no markers but how many it saw per placement (``counted``;
    see "Counting" in the module docstring). Close the stream (or use it as a context manager) to release
    the listings it keeps open between passes. An exception from ``heartbeat`` abandons the pass; what it
    had visited is found again only in the next cycle.

    Examples
    --------
    >>> with MarkerStream(workspace, Kind.READY) as stream:  # doctest: +SKIP
    ...     window = stream.next_pass().markers
    """

    def __init__(
        self,
        workspace: Workspace,
        kind: Kind,
        *,
        placement_prefixes: Sequence[str] = (),
        discovery_budget: int = DISCOVERY_BUDGET,
        maximum_pass_markers: int = MAXIMUM_PASS_MARKERS,
        heartbeat_every: int = HEARTBEAT_EVERY,
        heartbeat: Callable[[], None] = _noop,
        max_open_roots: int = MAX_OPEN_ROOTS,
        only_jobs: frozenset[str] | None = None,
        count_only: bool = False,
    ) -> None:
        for name, value in (
            ("discovery_budget", discovery_budget),
            ("maximum_pass_markers", maximum_pass_markers),
            ("heartbeat_every", heartbeat_every),
            ("max_open_roots", max_open_roots),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        self.kind = kind
        self.placement_prefixes = normalize_prefixes(placement_prefixes)
        self._state_dir = str(workspace.state_dir(kind))
        self._budgets = (discovery_budget, maximum_pass_markers, heartbeat_every)
        self._heartbeat = heartbeat
        self._max_open_roots = max_open_roots
        self.only_jobs = only_jobs
        self.count_only = count_only
        self._source: _RootListing | _PrefixRoots | None = None
        # Invariant: the rotation holds the unfinished, opened roots of the current cycle in serving order,
        # never more than max_open_roots of them (test_open_directories_stay_bounded).
        self._rotation: deque[_Walk] = deque()
        self._passes = 0
        self._cycles = 0

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"MarkerStream(kind={self.kind.value!r}, prefixes={list(self.placement_prefixes)!r}, "
            f"passes={stats.passes}, cycles={stats.cycles}, roots_in_rotation={stats.roots_in_rotation})"
        )

    def statistics(self) -> StreamStatistics:
        held = sum(walk.depth for walk in self._rotation)
        if self._source is not None:
            held += self._source.open_directories
        return StreamStatistics(self._passes, self._cycles, len(self._rotation), held)

    def next_pass(self) -> PassResult:
        """Discover the next window of markers, resuming every root where the previous pass left it."""
        if self._source is None:
            self._source = self._new_source()
        entries, markers, every = self._budgets
        sink = _Pass(entries, markers, every, self._heartbeat, self.only_jobs)
        self._admit(sink)
        first = self._rotation[0] if self._rotation else None
        while self._rotation:
            self._serve_round(sink)
            if sink.spent:
                break
            self._admit(sink)
        # Invariant: the next pass starts with the root after this pass's first, so neither rounding nor
        # a budget smaller than the rotation favours one root
        # (test_the_first_place_rotates_by_one_root_per_pass).
        if self._rotation and self._rotation[0] is first:
            self._rotation.rotate(-1)
        exhausted = not self._rotation and self._source.exhausted
        if exhausted:
            self._source.close()
            self._source = None
            self._cycles += 1
        self._passes += 1
        return PassResult(sink.markers, sink.anomalies, sink.visited, exhausted, sink.counted)

    def _new_source(self) -> _RootListing | _PrefixRoots:
        if self.placement_prefixes:
            return _PrefixRoots(self.kind, self._state_dir, self.placement_prefixes, not self.count_only)
        return _RootListing(self.kind, self._state_dir, not self.count_only)

    def _admit(self, sink: _Pass) -> None:
        assert self._source is not None
        while len(self._rotation) < self._max_open_roots and not self._source.exhausted and not sink.spent:
            root = self._source.next_root(sink)
            if root is not None:
                self._rotation.append(root)

    def _serve_round(self, sink: _Pass) -> None:
        """Serve every root once, each with an equal share of what the roots before it left."""
        roots = list(self._rotation)
        for index, root in enumerate(roots):
            if sink.spent:
                return
            ways = len(roots) - index
            if _serve(root, sink, _share(sink.entries_left, ways), _share(sink.markers_left, ways)):
                self._rotation.remove(root)
                root.close()

    def close(self) -> None:
        """Release every open listing; a later pass starts a fresh cycle."""
        while self._rotation:
            self._rotation.popleft().close()
        if self._source is not None:
            self._source.close()
            self._source = None

    def __enter__(self) -> MarkerStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
