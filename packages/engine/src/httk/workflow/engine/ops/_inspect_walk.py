"""The cursor-stable walker of ``job list`` and of selector scans: sorted listings, pruned, resumable.

What it guarantees. :func:`walk_sorted` yields the markers of one kind in the **listing order**: depth
first below ``state/<kind>/``, each directory's own markers before its subdirectories, markers ordered by
job key (then by full name, which only matters for a corrupt duplicate), subdirectories by name — every
comparison bytewise on the file-system encoding of the name. Any two walks of an unchanged tree therefore
yield the same sequence, and a :class:`Position` (kind, placement, job key) names a point in it: a walk
``after`` a position yields exactly the markers that follow it. A job keeps its position while its marker
is renamed within one kind and placement (a priority change or a takeover changes the name, not the key),
so paging is stable under the transitions that do not change a job's kind; a job that changes kind
between two pages may be listed twice or not at all, which is the price of not holding a snapshot.

Why sorted listings, unlike the manager's :class:`~._scan.MarkerStream`. A directory stream cannot be
resumed across processes, and its order is the filesystem's hash order, which need not repeat after
reopening; a cursor that must survive between two command invocations has to be a name, so each
directory on the path to the cursor is listed whole and sorted. ``placement`` is pruned before descent:
the walk opens ``state/<kind>/<placement>`` directly and never lists a sibling of it. ``key_filter`` sees
each marker's job key *before* the name is parsed, so a tag or prefix query pays the parse (about 10 µs)
only for the names it keeps.

Cost: every directory of the walked subtree is listed once and sorted (O(n log n) in its entry count);
resuming after a cursor lists the directories on the cursor's path again and skips what precedes it. It
reads no marker contents and no journal frame, and writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.engine.core._scan import Anomaly, AnomalyReason
from httk.workflow.engine.core._states import CORE_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, marker_stem
from httk.workflow.protocol import (
    RESERVED_COMPONENT,
    InvalidNameError,
    JobKey,
    MarkerName,
    validate_placement,
)

KeyFilter = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Position:
    """A point in the listing order: ``<kind>/<placement>/<job-key>`` as text (the ``next_after`` cursor).

    Examples
    --------
    >>> p = Position.parse("ready/project-a/00/silicon--01234567-89ab-cdef-0123-456789abcdef")
    >>> p.kind.value, p.placement
    ('ready', 'project-a/00')
    """

    kind: Kind
    placement: str
    job_key: str

    def __str__(self) -> str:
        return f"{self.kind.value}/{self.placement}/{self.job_key}"

    @classmethod
    def of(cls, marker: MarkerLocation) -> Position:
        return cls(marker.kind, marker.placement, marker.job_key)

    @classmethod
    def parse(cls, text: str) -> Position:
        """Parse a cursor, refusing anything :meth:`__str__` cannot have produced."""
        kind_text, _, rest = text.partition("/")
        placement, _, key = rest.rpartition("/")
        try:
            kind = Kind(kind_text)
        except ValueError:
            raise InvalidNameError(
                "cursor", text, f"must begin with a state kind, not {kind_text!r}"
            ) from None
        if kind not in CORE_KINDS:
            raise InvalidNameError("cursor", text, f"{kind_text!r} is not a core state kind")
        try:
            validate_placement(placement)
            JobKey.parse(key)
        except InvalidNameError as exc:
            raise InvalidNameError("cursor", text, f"must be <kind>/<placement>/<job-key>: {exc}") from None
        return cls(kind, placement, key)


def sort_key(marker: MarkerLocation) -> tuple[int, tuple[bytes, ...], bytes, bytes]:
    """The listing order of markers of several kinds (kinds in :data:`CORE_KINDS` order).

    Within one placement directory this is the walker's order; across placements the walker puts a
    directory's markers before its subdirectories, which this key reproduces by sorting placements
    component-wise.
    """
    return (
        CORE_KINDS.index(marker.kind),
        tuple(os.fsencode(c) for c in marker.placement.split("/")),
        os.fsencode(marker.job_key),
        os.fsencode(str(marker.name)),
    )


def walk_sorted(
    workspace: Workspace,
    kind: Kind,
    *,
    placement: str | None = None,
    after: Position | None = None,
    key_filter: KeyFilter | None = None,
) -> Iterator[MarkerLocation | Anomaly]:
    """Markers (and anomalies) of ``kind`` in listing order, below ``placement``, strictly after ``after``.

    ``after`` must be of ``kind`` and lie at or below ``placement``; the caller checks that.
    """
    start = str(workspace.state_dir(kind))
    components: list[str] = []
    if placement:
        for component in placement.split("/"):
            start = os.path.join(start, component)
            if os.path.islink(start):
                yield Anomaly(Path(start), AnomalyReason.SYMLINK)
                return
        components = placement.split("/")
    remainder: list[str] | None = None
    if after is not None:
        remainder = after.placement.split("/")[len(components) :]
    walk = _SortedWalk(kind, key_filter, after.job_key if after else None)
    yield from walk.directory(start, "/".join(components), remainder)


class _SortedWalk:
    """One sorted walk of one kind: the filter, and the cursor's job key for the cursor's own directory."""

    __slots__ = ("_after_key", "_key_filter", "_kind")

    def __init__(self, kind: Kind, key_filter: KeyFilter | None, after_key: str | None) -> None:
        self._kind = kind
        self._key_filter = key_filter
        self._after_key = None if after_key is None else os.fsencode(after_key)

    def directory(
        self, path: str, placement: str, remainder: Sequence[str] | None
    ) -> Iterator[MarkerLocation | Anomaly]:
        """One directory: its markers in key order, then its subdirectories; ``remainder`` is the cursor's
        placement below this directory (``None`` when no cursor applies here, empty at the cursor's own)."""
        listed = _list(path)
        if isinstance(listed, Anomaly):
            yield listed
            return
        files, directories = listed
        if remainder:
            # The cursor lies deeper: this directory's markers and every smaller subdirectory precede it.
            first = os.fsencode(remainder[0])
            for name_bytes, name, entry_path in directories:
                if name_bytes >= first:
                    deeper = remainder[1:] if name_bytes == first else None
                    yield from self._descend(entry_path, placement, name, deeper)
            return
        threshold = self._after_key if remainder is not None else None
        for stem, _name_bytes, name, entry_path, entry_type in files:
            if threshold is not None and stem <= threshold:
                continue
            item = self._marker(placement, name, entry_path, entry_type)
            if item is not None:
                yield item
        for _name_bytes, name, entry_path in directories:
            yield from self._descend(entry_path, placement, name, None)

    def _descend(
        self, path: str, placement: str, name: str, remainder: Sequence[str] | None
    ) -> Iterator[MarkerLocation | Anomaly]:
        if name == RESERVED_COMPONENT:
            yield Anomaly(Path(path), AnomalyReason.RESERVED_PLACEMENT)
            return
        yield from self.directory(path, f"{placement}/{name}" if placement else name, remainder)

    def _marker(
        self, placement: str, name: str, path: str, entry_type: str
    ) -> MarkerLocation | Anomaly | None:
        """Classify one non-directory entry; ``None`` when the filter drops it."""
        if self._key_filter is not None and not self._key_filter(marker_stem(name)):
            return None
        if entry_type == "l":
            return Anomaly(Path(path), AnomalyReason.SYMLINK)
        if entry_type != "f":
            return Anomaly(Path(path), AnomalyReason.NOT_A_REGULAR_FILE)
        if not placement:
            return Anomaly(Path(path), AnomalyReason.NO_PLACEMENT)
        try:
            return MarkerLocation(self._kind, placement, MarkerName.parse(name))
        except InvalidNameError:
            return Anomaly(Path(path), AnomalyReason.UNPARSEABLE_NAME)


_Files = list[tuple[bytes, bytes, str, str, str]]
"""(job-key bytes, name bytes, name, path, type) of each non-directory entry, sorted; the type is
``f`` for a regular file, ``l`` for a symlink and ``o`` for anything else, as the listing reported it."""
_Directories = list[tuple[bytes, str, str]]
"""(name bytes, name, path) of each subdirectory, sorted."""


def _list(path: str) -> tuple[_Files, _Directories] | Anomaly:
    """The sorted entries of one directory; an absent one (renamed or pruned meanwhile) is empty.

    File types come from the listing itself (no ``stat`` per entry where the filesystem reports types).
    """
    files: _Files = []
    directories: _Directories = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if entry.is_dir(follow_symlinks=False):
                    directories.append((os.fsencode(name), name, entry.path))
                    continue
                kind = "f" if entry.is_file(follow_symlinks=False) else "l" if entry.is_symlink() else "o"
                files.append((os.fsencode(marker_stem(name)), os.fsencode(name), name, entry.path, kind))
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    except PermissionError:
        return Anomaly(Path(path), AnomalyReason.UNREADABLE_DIRECTORY)
    files.sort()
    directories.sort()
    return files, directories
