"""Job selectors: turning what an operator typed into the markers of the jobs it names.

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

3. **A prefix** of a job UUID or of a job key (case-insensitive) — the jobs it begins; a command that
   needs one job refuses a prefix matching several and lists them.

Resolution follows the lookup ladder of ``_index`` and its three rules: a selector that gives a placement
(a payload or marker path) probes that placement's state directories first (bounded); a hit in the
process's index is confirmed before use; and a miss is reported only after one complete walk of the
state tree. A complete walk filters names on the job key before parsing them, so looking one job up in a
100,000-job workspace costs one listing of every state directory, not 100,000 name parses; an exact UUID
or key stops at its first hit and confirms it with a probe of its placement (which also catches a job
with two markers). Nothing here writes.

Every failure is a :class:`SelectorError` (an :class:`InvalidNameError`, so the command line reports it as
bad input, status 2), carrying the markers an ambiguous selector matched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from httk.workflow.engine.core._jobs import index_of
from httk.workflow.engine.core._states import CORE_KINDS, Kind
from httk.workflow.engine.core._workspace import CONTROL_DIR, MarkerLocation, Workspace, probe_marker
from httk.workflow.protocol import (
    RESERVED_COMPONENT,
    UUID_LENGTH,
    InvalidNameError,
    JobKey,
    MarkerName,
    validate_placement,
)

from ._inspect_walk import KeyFilter, sort_key, walk_sorted

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
    return selection


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

    matches = sorted(_walk_all(workspace, begins), key=sort_key)
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
) -> Iterable[MarkerLocation]:
    """Every marker whose key passes ``key_filter``, each noted in the index (rule 3: built by scans)."""
    for kind in kinds:
        for item in walk_sorted(workspace, kind, placement=placement, key_filter=key_filter):
            if isinstance(item, MarkerLocation):
                index_of(workspace).note(item)
                yield item


def _walk_for_one(workspace: Workspace, job_id: str, job_key: str | None) -> MarkerLocation | None:
    """Rule 2's last rung: walk until the job's first marker, then confirm it by probing its placement."""

    def wanted(stem: str) -> bool:
        return stem == job_key if job_key is not None else stem.endswith(job_id)

    for marker in _walk_all(workspace, wanted):
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
