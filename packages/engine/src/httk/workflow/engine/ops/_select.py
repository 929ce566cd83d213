"""Finding jobs: selectors, and the cursor-stable sorted walker of job list and selector scans.

**Selectors** turn what an operator typed into the markers of the jobs it names.

A selector is one word. In this order:

1. **A path** — when the word is absolute, exists relative to the current directory, or exists relative
   to the workspace root. It must lie inside the workspace (symlinks resolved). Then:

   - the workspace root, or a *placement directory* in the payload space, names every job below it;
   - a *payload directory* ``<placement>/<job-key>``, or any path inside one (``.../run/OUTCAR``), names
     that job (the deepest job key on the path whose placement holds its marker, so a child placed
     inside its parent's payload is the child);
   - a *marker path* ``.httk-workflow/state/<kind>/<placement>/<marker>`` names that marker's job, which is
     then found where it is *now* (the marker may have moved since the path was copied);
   - a directory of the state tree ``.httk-workflow/state/<kind>[/<placement>]`` names the jobs of that
     kind below it; any other path in ``.httk-workflow`` names no job.

2. **A job UUID** (36 characters) or a **complete job key** ``<tag>--<uuid>`` — that job.

3. **A unique prefix** of a job UUID or of a job key (case-insensitive) — the job it begins; a prefix
   matching several is refused, listing them (spec/03), by every command: a tag begins the keys of
   longer tags too, and one word acting on several jobs is what paths and globs are for.

Resolution follows the lookup ladder of ``_index`` and its three rules: a selector that gives a placement
(a payload or marker path) probes that placement's state directories first (bounded); a hit in the
process's index is confirmed before use; and a miss is reported only after one complete walk of the
state tree. A complete walk filters names on the job key before parsing them, so looking one job up in a
100,000-job workspace costs one listing of every state directory, not 100,000 name parses; an exact UUID
or key stops at its first hit and confirms it with a probe of its placement (which also catches a job
with two markers). Nothing here writes.

Every failure is a :class:`SelectorError` (an :class:`InvalidNameError`, so the command line reports it as
bad input, status 2), carrying the markers an ambiguous selector matched.

**The walker** of ``job list`` and of selector scans: sorted listings, pruned, resumable.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from httk.workflow.engine.core._jobs import index_of
from httk.workflow.engine.core._scan import Anomaly, AnomalyReason
from httk.workflow.engine.core._states import CORE_KINDS, Kind
from httk.workflow.engine.core._workspace import (
    CONTROL_DIR,
    MarkerLocation,
    Workspace,
    marker_stem,
    probe_marker,
)
from httk.workflow.protocol import (
    RESERVED_COMPONENT,
    UUID_LENGTH,
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
    needle: str | None = None,
) -> Iterator[MarkerLocation | Anomaly]:
    """Markers (and anomalies) of ``kind`` in listing order, below ``placement``, strictly after ``after``.

    ``after`` must be of ``kind`` and lie at or below ``placement``; the caller checks that. With
    ``needle`` only the entries whose names contain it are looked at (anomalies among the others are not
    reported): a search for one job then costs little more per entry than the listing itself.
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
    walk = _SortedWalk(kind, key_filter, after.job_key if after else None, needle)
    yield from walk.directory(start, "/".join(components), remainder)


class _SortedWalk:
    """One sorted walk of one kind: the filter, and the cursor's job key for the cursor's own directory."""

    __slots__ = ("_after_key", "_key_filter", "_kind", "_needle")

    def __init__(
        self, kind: Kind, key_filter: KeyFilter | None, after_key: str | None, needle: str | None
    ) -> None:
        self._kind = kind
        self._key_filter = key_filter
        self._after_key = None if after_key is None else os.fsencode(after_key)
        self._needle = needle

    def directory(
        self, path: str, placement: str, remainder: Sequence[str] | None
    ) -> Iterator[MarkerLocation | Anomaly]:
        """One directory: its markers in key order, then its subdirectories; ``remainder`` is the cursor's
        placement below this directory (``None`` when no cursor applies here, empty at the cursor's own)."""
        listed = _list(path, self._needle)
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


def _list(path: str, needle: str | None = None) -> tuple[_Files, _Directories] | Anomaly:
    """The sorted entries of one directory; an absent one (renamed or pruned meanwhile) is empty. With
    ``needle``, only the non-directories whose names contain it.

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
                if needle is not None and needle not in name:
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


AMBIGUITY_LISTED = 10
"""How many matches an ambiguity error names before it says how many more there are."""


class SelectorKind(StrEnum):
    """How a selector was read."""

    JOB_ID = "job_id"
    JOB_KEY = "job_key"
    PREFIX = "prefix"
    PAYLOAD_PATH = "payload_path"
    MARKER_PATH = "marker_path"
    PLACEMENT = "placement"


class SelectorError(InvalidNameError):
    """A selector names no job, or several where one is needed (``matches`` then lists them)."""

    def __init__(self, selector: str, rule: str, matches: Sequence[MarkerLocation] = ()) -> None:
        super().__init__("job selector", selector, rule)
        self.selector = selector
        self.matches = tuple(matches)


@dataclass(frozen=True, slots=True)
class Selection:
    """The jobs a selector names, in listing order (kind, then placement, then job key)."""

    selector: str
    how: SelectorKind
    markers: tuple[MarkerLocation, ...]
    placement: str | None = None
    kind: Kind | None = None


# -- the public entry points ------------------------------------------------------------------------
def select_jobs(workspace: Workspace, selector: str, *, cwd: Path | str | None = None) -> Selection:
    """Every job ``selector`` names (at least one; none is a :class:`SelectorError`)."""
    if not selector or selector != selector.strip():
        raise SelectorError(selector, "must be a nonempty word without surrounding blanks")
    path = _as_path(workspace, selector, Path(cwd) if cwd is not None else Path.cwd())
    if path is not None:
        selection = _select_path(workspace, selector, path)
    else:
        selection = _select_identity(workspace, selector)
    if not selection.markers:
        raise SelectorError(selector, _nothing(selection))
    if selection.how is SelectorKind.PREFIX and len(selection.markers) > 1:
        # spec/03: "any unique prefix"; a tag is a prefix of its own jobs' keys and of longer tags'
        # (si-relax begins si-relax-static--…), so naming several by one is never taken as meant.
        raise SelectorError(selector, ambiguity(selection.markers), selection.markers)
    return selection


def select_each(
    workspace: Workspace, selectors: Sequence[str], *, cwd: Path | str | None = None
) -> list[MarkerLocation]:
    """Every job the selectors name, each once (by placement and job key), in the order first named."""
    found: dict[tuple[str, str], MarkerLocation] = {}
    for selector in selectors:
        for marker in select_jobs(workspace, selector, cwd=cwd).markers:
            found.setdefault((marker.placement, marker.job_key), marker)
    return list(found.values())


def select_job(workspace: Workspace, selector: str, *, cwd: Path | str | None = None) -> MarkerLocation:
    """The one job ``selector`` names; a selector naming several is refused with the jobs it matched."""
    selection = select_jobs(workspace, selector, cwd=cwd)
    if len(selection.markers) > 1:
        raise SelectorError(selector, ambiguity(selection.markers), selection.markers)
    return selection.markers[0]


def locate_job(
    workspace: Workspace, job_id: str, *, job_key: str | None = None, placement: str | None = None
) -> MarkerLocation | None:
    """The ladder for one job: placement probe, confirmed index hit, then one complete walk.

    ``None`` only after the complete walk found nothing. With ``job_key`` the walk matches the whole key.
    """
    if placement is not None and job_key is not None:
        found = probe_marker(workspace, placement, job_key)
        if found is not None:
            workspace.note_marker(found)
            return found
    hit = index_of(workspace).cached(job_id)
    if hit is not None and (job_key is None or hit.job_key == job_key):
        return hit
    return _walk_for_one(workspace, job_id, job_key)


def ambiguity(matches: Sequence[MarkerLocation]) -> str:
    """``matches N jobs: key (kind at placement), ...`` naming at most :data:`AMBIGUITY_LISTED`."""
    shown = ", ".join(f"{m.job_key} ({m.kind.value} at {m.placement})" for m in matches[:AMBIGUITY_LISTED])
    more = len(matches) - AMBIGUITY_LISTED
    return f"matches {len(matches)} jobs: {shown}" + (f" and {more} more" if more > 0 else "")


# -- identities ---------------------------------------------------------------------------------------
def _select_identity(workspace: Workspace, selector: str) -> Selection:
    word = selector.lower()
    exact = _exact_key(word)
    if exact is not None:
        how = SelectorKind.JOB_KEY if exact.tag is not None else SelectorKind.JOB_ID
        found = locate_job(workspace, exact.job_id, job_key=str(exact) if exact.tag else None)
        return Selection(selector, how, () if found is None else (found,))
    if "/" in word or "\0" in word:
        raise SelectorError(selector, "is neither an existing path nor a job UUID, job key or prefix")

    def begins(stem: str) -> bool:
        return stem.startswith(word) or stem[-UUID_LENGTH:].startswith(word)

    # Both ways of beginning need the word inside the name: the walk skips every other name unparsed.
    matches = sorted(_walk_all(workspace, begins, needle=word), key=sort_key)
    return Selection(selector, SelectorKind.PREFIX, tuple(matches))


def _exact_key(word: str) -> JobKey | None:
    try:
        return JobKey.parse(word)
    except InvalidNameError:
        return None


def _walk_all(
    workspace: Workspace,
    key_filter: KeyFilter,
    *,
    kinds: Iterable[Kind] = CORE_KINDS,
    placement: str | None = None,
    needle: str | None = None,
) -> Iterable[MarkerLocation]:
    """Every marker whose key passes ``key_filter``, each noted in the index (rule 3: built by scans);
    ``needle`` is text every such key holds (see :func:`walk_sorted`)."""
    for kind in kinds:
        for item in walk_sorted(workspace, kind, placement=placement, key_filter=key_filter, needle=needle):
            if isinstance(item, MarkerLocation):
                index_of(workspace).note(item)
                yield item


def _walk_for_one(workspace: Workspace, job_id: str, job_key: str | None) -> MarkerLocation | None:
    """Rule 2's last rung: walk until the job's first marker, then confirm it by probing its placement."""

    def wanted(stem: str) -> bool:
        return stem == job_key if job_key is not None else stem.endswith(job_id)

    for marker in _walk_all(workspace, wanted, needle=job_key or job_id):
        if marker.job_id != job_id:
            continue
        confirmed = probe_marker(workspace, marker.placement, marker.job_key)
        if confirmed is not None:
            index_of(workspace).note(confirmed)
            return confirmed
    return None


# -- paths --------------------------------------------------------------------------------------------
def _as_path(workspace: Workspace, selector: str, cwd: Path) -> Path | None:
    """The absolute path a selector names, or ``None`` when it is not a path that exists."""
    given = Path(selector)
    if given.is_absolute():
        return given
    for base in (cwd, workspace.root):
        candidate = base / given
        if os.path.lexists(candidate):
            return candidate
    return None


def _relative_parts(workspace: Workspace, selector: str, path: Path) -> list[str]:
    real_root = os.path.realpath(workspace.root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        raise SelectorError(selector, f"is not inside the workspace {workspace.root}")
    relative = os.path.relpath(real, real_root)
    return [] if relative == "." else relative.split("/")


def _select_path(workspace: Workspace, selector: str, path: Path) -> Selection:
    parts = _relative_parts(workspace, selector, path)
    if parts and parts[0] == CONTROL_DIR:
        return _select_control_path(workspace, selector, parts[1:])
    # Every component that is a job key may be a payload; the deepest one whose placement holds its marker
    # wins (a child placed inside its parent's payload is the child), then the deepest with a job.json.
    candidates = [
        ("/".join(parts[:index]), key, index)
        for index in range(len(parts) - 1, 0, -1)
        if (key := _exact_key(parts[index])) is not None
    ]
    for placement, key, _index in candidates:
        found = probe_marker(workspace, placement, str(key))
        if found is not None:
            return Selection(selector, SelectorKind.PAYLOAD_PATH, (found,), placement)
    for placement, key, index in candidates:
        if (workspace.root.joinpath(*parts[: index + 1]) / "job.json").is_file():
            located = locate_job(workspace, key.job_id, job_key=str(key), placement=placement)
            markers = () if located is None else (located,)
            return Selection(selector, SelectorKind.PAYLOAD_PATH, markers, placement)
    placement = "/".join(parts)
    return _select_placement(workspace, selector, placement or None, CORE_KINDS)


def _select_control_path(workspace: Workspace, selector: str, parts: list[str]) -> Selection:
    if len(parts) < 2 or parts[0] != "state" or parts[1] not in {k.value for k in CORE_KINDS}:
        raise SelectorError(
            selector, f"names no job: inside {CONTROL_DIR} only state/<kind>/... paths select jobs"
        )
    kind = Kind(parts[1])
    rest = parts[2:]
    if len(rest) >= 2:
        try:
            name = MarkerName.parse(rest[-1])
        except InvalidNameError:
            name = None
        if name is not None:
            placement = "/".join(rest[:-1])
            _check_placement(selector, placement)
            found = locate_job(workspace, name.job_id, job_key=str(name.key), placement=placement)
            markers = () if found is None else (found,)
            return Selection(selector, SelectorKind.MARKER_PATH, markers, placement)
    return _select_placement(workspace, selector, "/".join(rest) or None, (kind,))


def _select_placement(
    workspace: Workspace, selector: str, placement: str | None, kinds: Sequence[Kind]
) -> Selection:
    if placement is not None:
        _check_placement(selector, placement)
    markers = tuple(_walk_all(workspace, _everything, kinds=kinds, placement=placement))
    only = kinds[0] if len(kinds) == 1 else None
    return Selection(selector, SelectorKind.PLACEMENT, markers, placement, only)


def _check_placement(selector: str, placement: str) -> None:
    if RESERVED_COMPONENT in placement.split("/"):
        raise SelectorError(selector, f"names no job: a placement never contains {RESERVED_COMPONENT}")
    try:
        validate_placement(placement)
    except InvalidNameError as exc:
        raise SelectorError(selector, f"is not a placement: {exc.rule}") from None


def _everything(_stem: str) -> bool:
    return True


def _nothing(selection: Selection) -> str:
    if selection.how is SelectorKind.PLACEMENT:
        where = f"below placement {selection.placement}" if selection.placement else "in the workspace"
        of_kind = f" {selection.kind.value}" if selection.kind is not None else ""
        return f"names no{of_kind} job: there is none {where}"
    if selection.how is SelectorKind.PAYLOAD_PATH:
        return "names a payload without a state marker (an orphan payload, or not a submitted job)"
    if selection.how is SelectorKind.MARKER_PATH:
        return "names a marker whose job has no marker anywhere in the workspace now"
    return "matches no job in the workspace"
