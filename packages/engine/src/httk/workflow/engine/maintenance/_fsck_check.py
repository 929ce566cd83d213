"""``workspace fsck``: every marker of every state kind checked against the frame it names. Read-only.

What it guarantees. :func:`check` opens nothing for writing, creates no journal writer and works on a
workspace attached read-only. It walks every state kind (``_scan.walk_markers``, exhaustive, no budget)
and checks each marker that stays put during the walk exactly once:

* its record reference resolves — within the visibility deadline — to a frame whose checksum verifies
  (the reader's problem codes: missing_segment, short_read, checksum_mismatch, length_mismatch,
  trailer_mismatch, reference_mismatch, invalid_header, undecodable_frame, invalid_record_ref);
* that frame is a state frame whose workspace_id, job_id, job_key, placement, kind and state_generation
  agree with the marker's path and name (identity_mismatch); a ``g0.init`` reference resolves to nothing
  by definition and is accepted only in ``submitted`` (elsewhere it is an identity_mismatch);
* a marker of a kind that has live work attached (claimed, running, committing, cancelling, waiting,
  paused) has its payload directory (payload_missing). A submitted, ready or terminal marker without a
  payload is what ``workspace gc`` collects, not damage;
* no job has two markers (duplicate_marker, one problem naming them all). A job seen twice during the
  walk is probed again at its placement afterwards, the way a manager probes, because a job that moved
  from a kind not yet walked into one walked later is seen twice without being damaged. Which marker is
  true cannot be told from the names, so a duplicate is reported and never repaired;
* ``state/`` holds only the state kinds (unknown_state_kind for anything else, never entered).

Entries of the state tree that are not markers are reported with the walker's reason
(unparseable_name, no_placement, symlink, ...), except a marker-shaped name whose only defect is its
reference, which is an invalid_record_ref of an identifiable job, so that repair can still restore it.

Why late frames are waited out together. A frame read that finds the segment absent or short is retried
until the workspace's visibility deadline (``spec/01``: never declare a merely slow network filesystem
damaged). Waiting per marker would cost one deadline per late frame; instead every late frame is set
aside during the walk and retried together afterwards on one backoff schedule, so the whole check waits
at most one deadline however many frames are late.

Cost: one walk of every state directory (O(jobs), listed in DESIGN's complexity budget), one frame read
per marker (an open, two ``pread`` calls, a SHA-256 and a JSON parse), one ``lstat`` per payload of a
kind that needs one, and one integer per job held in memory to notice a second marker (about 70 bytes a
job: 70 MB at a million jobs).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import backoff_schedule
from httk.workflow.engine.core._frames import FRAME_FORMAT
from httk.workflow.engine.core._scan import Anomaly, AnomalyReason, walk_markers
from httk.workflow.engine.core._segments import JournalReader
from httk.workflow.engine.core._states import IN_PROGRESS_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, duplicate_markers
from httk.workflow.protocol import (
    InvalidNameError,
    JobKey,
    JournalDamageError,
    JournalError,
    MarkerName,
    RecordRef,
    decode_base36,
)

LATE_CODES = frozenset({"missing_segment", "short_read"})
"""Reader codes that may only mean "not visible yet": retried until the visibility deadline."""

FRAME_CODES = JournalDamageError.CODES | {"identity_mismatch", "io_error"}
"""Problems of a marker whose job is known: what ``--repair`` re-points at an older frame."""

FIXED_ACTIONS = frozenset({"repaired", "rebuilt"})
"""What a repair did that leaves nothing for an operator."""

MARKER_SHAPED = frozenset({AnomalyReason.UNPARSEABLE_NAME, AnomalyReason.NO_PLACEMENT})
"""Anomalies that are regular files where markers live: the ones ``--quarantine-unrepairable`` moves."""


@dataclass(frozen=True, slots=True)
class MarkerSubject:
    """A marker as fsck identifies it: its real path and what its name says, reference text included.

    Unlike :class:`MarkerLocation` it also describes a marker whose reference does not parse, which is
    still a known job at a known generation.
    """

    path: Path
    kind: Kind
    placement: str
    key: JobKey
    priority: int
    generation: int
    ref_text: str

    @classmethod
    def of(cls, workspace: Workspace, marker: MarkerLocation) -> MarkerSubject:
        name, where = marker.name, (marker.path(workspace), marker.kind, marker.placement)
        return cls(*where, name.key, name.priority, name.generation, name.ref_text)

    @property
    def job_id(self) -> str:
        return self.key.job_id

    @property
    def writer(self) -> str | None:
        """The writer UUID the reference names, when it parses."""
        try:
            return RecordRef.parse(self.ref_text).writer
        except InvalidNameError:
            return None


@dataclass
class Problem:
    """One finding: a stable ``code``, where it is, and what fsck did about it (``action``).

    ``action`` is ``reported`` by a check; a repair sets ``repaired``, ``rebuilt`` (its lost history
    rebuilt from job.json), ``quarantined``, ``unrepairable`` (no readable older frame), ``live_owner`` (its
    manager heartbeats), ``live_process`` (its attempt still runs here), ``moved`` (another actor moved the
    marker meanwhile) or ``left`` (never repaired: see ``note``).
    """

    code: str
    path: str  # relative to the workspace root, printable (an undecodable byte is shown escaped)
    detail: str
    location: Path = field(repr=False)  # the entry itself
    subject: MarkerSubject | None = field(default=None, repr=False)
    action: str = "reported"
    note: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        subject = self.subject
        return {
            "code": self.code,
            "path": self.path,
            "kind": None if subject is None else subject.kind.value,
            "placement": None if subject is None else subject.placement,
            "job_key": None if subject is None else str(subject.key),
            "generation": None if subject is None else subject.generation,
            "record_ref": None if subject is None else subject.ref_text,
            "detail": self.detail,
            "action": self.action,
            "note": self.note,
            **self.details,
        }


@dataclass
class FsckReport:
    """Everything one fsck found and did; ``clean`` is what the exit status reports."""

    root: str
    workspace_id: str
    markers: dict[str, int] = field(default_factory=dict)  # markers checked per state kind
    problems: list[Problem] = field(default_factory=list)
    repair: bool = False
    leftovers: dict[str, int] | None = None  # gc's dry-run census of always-safe leftovers

    @property
    def left(self) -> list[Problem]:
        """The problems still waiting for an operator: everything not repaired or rebuilt."""
        return [problem for problem in self.problems if problem.action not in FIXED_ACTIONS]

    @property
    def clean(self) -> bool:
        return not self.left

    def counts(self) -> dict[str, int]:
        """Problems per action."""
        counts: dict[str, int] = {}
        for problem in self.problems:
            counts[problem.action] = counts.get(problem.action, 0) + 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        return {
            "workspace": self.root,
            "workspace_id": self.workspace_id,
            "repair": self.repair,
            "markers_checked": sum(self.markers.values()),
            "markers": dict(self.markers),
            "problems": [problem.as_dict() for problem in self.problems],
            "actions": self.counts(),
            "left": len(self.left),
            "clean": self.clean,
            "leftovers": self.leftovers,
        }


CHECKING = "checking markers"
"""What :func:`check` reports progress as: the entries of the state tree checked so far."""


def check(workspace: Workspace, *, progress: Callable[[str, int], None] | None = None) -> FsckReport:
    """Check every marker of every state kind (see the module docstring); writes nothing.

    ``progress`` is called after each entry with :data:`CHECKING` and the entries checked so far.
    """
    checker = _Checker(workspace)
    try:
        checker.unknown_kinds()
        checked = 0
        for kind in Kind:
            checker.report.markers[kind.value] = 0
            for item in walk_markers(workspace, kind):
                if isinstance(item, Anomaly):
                    checker.anomaly(kind, item)
                else:
                    checker.marker(item)
                if progress is not None:
                    checked += 1
                    progress(CHECKING, checked)
        checker.settle_late()
        checker.settle_duplicates()
    finally:
        checker.reader.close()
    return checker.report


def printable(text: str) -> str:
    """``text`` with any byte that is not UTF-8 (kept by ``surrogateescape``) shown as an escape."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def identity_problem(workspace_id: str, marker: MarkerLocation, frame: Mapping[str, Any]) -> str | None:
    """Why ``frame`` is not the frame ``marker`` names, or ``None`` when every identity member agrees."""
    name = marker.name
    expected = (
        ("format", FRAME_FORMAT),
        ("workspace_id", workspace_id),
        ("job_id", name.key.job_id),
        ("job_key", marker.job_key),
        ("placement", marker.placement),
        ("kind", marker.kind.value),
        ("state_generation", name.generation),
    )
    for member, value in expected:
        found = frame.get(member)
        if found != value or isinstance(found, bool):
            return f"the frame's {member} is {found!r}, the marker says {value!r}"
    return None


class _Checker:
    """One check's walk: the report so far and the frame reads still waiting to become visible.

    A healthy marker costs its frame read and nothing else: paths and the problem's subject are built
    only for a marker that has a problem.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.root = str(workspace.root)
        # One attempt per read: waiting is done for all late frames together (see the module docstring).
        self.reader = JournalReader(
            workspace.journal_dir, visibility_deadline=0.0, clock=workspace.clock, keep_open=True
        )
        self.report = FsckReport(self.root, workspace.workspace_id)
        self.late: list[tuple[MarkerLocation, RecordRef]] = []
        self.seen: set[int] = set()  # the job ids met so far, as integers (the smallest thing to hold)
        self.seen_twice: dict[int, MarkerLocation] = {}

    def add(self, code: str, subject: MarkerSubject | None, detail: str, path: Path) -> None:
        relative = printable(Path(os.path.relpath(path, self.root)).as_posix())
        self.report.problems.append(Problem(code, relative, detail, path, subject))

    def add_marker(self, code: str, marker: MarkerLocation, detail: str) -> None:
        subject = MarkerSubject.of(self.workspace, marker)
        self.add(code, subject, detail, subject.path)

    def marker(self, marker: MarkerLocation) -> None:
        self.report.markers[marker.kind.value] += 1
        job = int(marker.job_id.replace("-", ""), 16)
        if job in self.seen:
            self.seen_twice.setdefault(job, marker)
        else:
            self.seen.add(job)
        if marker.kind in IN_PROGRESS_KINDS:
            self._check_payload(marker)
        ref = marker.name.ref
        if ref is not None:
            self._verify(marker, ref, late_ok=True)
        elif marker.kind is not Kind.SUBMITTED:
            detail = "a generation 0 'init' marker names no frame and belongs only in submitted"
            self.add_marker("identity_mismatch", marker, detail)

    def unknown_kinds(self) -> None:
        """Report what ``state/`` holds besides the state kinds (walks never enter it)."""
        kinds = {kind.value for kind in Kind}
        state = self.workspace.control / "state"
        try:
            names = sorted(os.listdir(state))
        except OSError:
            return  # no state tree: every walk below finds nothing, which is what it is
        for name in names:
            if name not in kinds:
                detail = (
                    f"state/ holds only the state kinds ({', '.join(sorted(kinds))}); nothing reads {name!r}"
                )
                self.add("unknown_state_kind", None, detail, state / name)

    def settle_duplicates(self) -> None:
        """Report each job whose second marker survives a fresh probe of its placement."""
        for marker in self.seen_twice.values():
            found = duplicate_markers(self.workspace, marker.placement, marker.job_key)
            if not found:
                continue  # it moved between kinds during the walk: one marker now
            paths = [
                printable(Path(os.path.relpath(m.path(self.workspace), self.root)).as_posix()) for m in found
            ]
            detail = (
                f"the job has {len(found)} markers; exactly one is current and the names cannot tell which"
            )
            subject = MarkerSubject.of(self.workspace, found[0])
            self.add("duplicate_marker", subject, detail, subject.path)
            self.report.problems[-1].details["markers"] = paths

    def anomaly(self, kind: Kind, anomaly: Anomaly) -> None:
        if anomaly.reason is AnomalyReason.UNPARSEABLE_NAME:
            subject, rule = _subject_with_bad_ref(self.workspace, kind, anomaly.path)
            if subject is not None:
                self.report.markers[kind.value] += 1
                self.add("invalid_record_ref", subject, rule, anomaly.path)
                return
        self.add(anomaly.reason.value, None, _ANOMALY_DETAILS[anomaly.reason], anomaly.path)

    def _check_payload(self, marker: MarkerLocation) -> None:
        payload = os.path.join(self.root, marker.placement, marker.job_key)
        try:
            info = os.lstat(payload)
        except FileNotFoundError:
            self.add_marker("payload_missing", marker, f"no payload directory at {payload}")
            return
        if not stat.S_ISDIR(info.st_mode):
            self.add_marker("payload_missing", marker, f"{payload} is not a directory (a symlink or a file)")

    def _verify(self, marker: MarkerLocation, ref: RecordRef, *, late_ok: bool) -> None:
        try:
            frame = self.reader.read(ref)
        except JournalDamageError as exc:
            if late_ok and exc.code in LATE_CODES:
                self.late.append((marker, ref))
            else:
                self.add_marker(exc.code, marker, exc.detail)
            return
        except JournalError as exc:
            self.add_marker("io_error", marker, str(exc))
            return
        mismatch = identity_problem(self.report.workspace_id, marker, frame)
        if mismatch is not None:
            self.add_marker("identity_mismatch", marker, mismatch)

    def settle_late(self) -> None:
        """Retry every late frame on one backoff schedule; report what is still absent at the deadline."""
        for delay in backoff_schedule(self.workspace.policy.visibility_deadline_seconds):
            if not self.late:
                return
            self.workspace.clock.sleep(delay)
            self._recheck(late_ok=True)
        self._recheck(late_ok=False)

    def _recheck(self, *, late_ok: bool) -> None:
        pending, self.late = self.late, []
        for marker, ref in pending:
            self._verify(marker, ref, late_ok=late_ok)


_ANOMALY_DETAILS = {
    AnomalyReason.UNPARSEABLE_NAME: "a file where markers live whose name is not a marker name",
    AnomalyReason.NO_PLACEMENT: "a file directly below the state kind, where no placement is",
    AnomalyReason.SYMLINK: "a symbolic link in the state tree (markers are regular files)",
    AnomalyReason.NOT_A_REGULAR_FILE: "neither a regular file nor a directory",
    AnomalyReason.RESERVED_PLACEMENT: "a directory named like the control directory",
    AnomalyReason.UNREADABLE_DIRECTORY: "a state directory that cannot be listed",
}


def _subject_with_bad_ref(workspace: Workspace, kind: Kind, path: Path) -> tuple[MarkerSubject | None, str]:
    """A marker name whose job key, priority and generation parse and whose reference alone does not.

    Returns the subject and why its reference is invalid, or ``(None, "")`` when the name cannot be
    interpreted at all.
    """
    relative = path.relative_to(workspace.state_dir(kind))
    placement = relative.parent.as_posix()
    stem, dot, ref_text = path.name.rpartition(".")
    stem, g, generation_text = stem.rpartition(".g")
    key_text, p, priority_text = stem.rpartition(".p")
    if not (dot and g and p and placement != ".") or len(priority_text) != 3 or not priority_text.isdigit():
        return None, ""
    try:
        key = JobKey.parse(key_text)
        generation = decode_base36(generation_text, bits=64, what="marker generation")
    except InvalidNameError:
        return None, ""
    try:
        ref = None if ref_text == "init" else RecordRef.parse(ref_text)
        MarkerName(key, int(priority_text), generation, ref)
    except InvalidNameError as exc:
        subject = MarkerSubject(path, kind, placement, key, int(priority_text), generation, ref_text)
        return subject, exc.rule
    return None, ""  # every part parses, so the name as a whole is what is wrong (its length)
