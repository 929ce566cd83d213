"""``workspace fsck --repair``: re-point a damaged marker at the last good frame of its job, or set it aside.

What it guarantees.

* History is added, never rewritten. A repair adopts the newest readable state frame of the same job
  (workspace, job, key and placement agreeing) whose generation is *strictly* older than the marker's,
  appends one state frame with reason ``fsck_repair`` chained to it (``previous_record_ref``) that carries
  its members forward and records ``fsck_repair.recovered_record_ref``, and renames the marker onto it at
  the next generation by the one verified transition (:func:`~._transition.move_marker`, the
  kind-keeping ``fsck_repair`` row of the table). The marker keeps its kind, placement and priority.
  A frame at or beyond the marker's generation is never adopted: it is the damaged frame itself or a
  transition no rename ever committed.
* Nothing a live manager owns is touched: a claimed, running, committing or cancelling marker whose
  owning manager still heartbeats within its lease is reported (``live_owner``) and left as it is. The
  owners are the managers its readable frames name (from the adopted generation on) and the writer of
  the reference the marker names, which is the manager that moved it there even when that frame is gone.
* A marker with no readable older frame, or a marker-shaped file whose name identifies no job, is
  ``unrepairable``; with ``quarantine_unrepairable`` it is moved into ``.httk-workflow/quarantine/``
  beside an audit record naming its original path and why. ``payload_missing`` is never acted on, and
  neither is a frame problem of a marker whose payload is missing.
* With ``rebuild_lost`` (``--rebuild-lost``), a marker whose job has no readable older frame — a
  ``--no-durable`` workspace that lost whole journal segments to a power cut — is moved by the
  ``fsck_rebuild`` transition onto one frame rebuilt from job.json and what its name says
  (:func:`rebuilt`, :data:`~._states.REBUILDS`), which records that history was lost; a
  waiting marker stays unrepairable (its join was in the lost history). The live-owner guard holds, and
  a job whose recorded attempt process still runs on this host is left (``live_process``). A durable
  workspace never needs it: every frame is synchronized before the rename that publishes it.
* Crash safety: every mutation is one of the seam's (journal append, marker rename, record write,
  quarantine rename). A repair interrupted before its rename leaves the damaged marker and an orphan
  frame at the marker's next generation, which the strictly-older rule can never adopt, so running the
  repair again converges on the same result; interrupted after it, the marker is already repaired.

Why a forward journal scan. The backward link of the job is in exactly the frame that cannot be read, so
the chain cannot be followed; ``spec/01`` allows this one forward read, bounded as above.

Cost: one forward scan of every journal segment (every frame read and decoded), once per repair however
many markers are damaged, and one listing of ``managers/``. Nothing is scanned when nothing is damaged.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._frames import (
    FRAME_FORMAT,
    REBUILD_REASON,
    REPAIR_REASON,
    Counters,
    Frame,
    failure_of,
    first_activation,
    kept_members,
)
from httk.workflow.engine.core._jobs import load_job
from httk.workflow.engine.core._journal import scan_segment
from httk.workflow.engine.core._liveness import ManagerView, list_managers, process_alive, read_process_file
from httk.workflow.engine.core._segments import SEGMENT_SUFFIX
from httk.workflow.engine.core._states import OWNED_KINDS, REBUILDS, Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.requests._requests import QUARANTINE_FORMAT
from httk.workflow.protocol import (
    InvalidDocumentError,
    JournalError,
    MarkerName,
    RecordRef,
    WorkflowError,
    WorkspaceUnavailableError,
)
from httk.workflow.protocol._digest import ATTEMPT_DIR_PREFIX
from httk.workflow.protocol._jsonio import dump_pretty

from ._fsck_check import FRAME_CODES, MARKER_SHAPED, FsckReport, MarkerSubject, Problem, check, printable
from ._gc import always_safe_census

NOT_CARRIED = frozenset({"fsck_repair", "operator_key"})
"""Members of the adopted frame a repair does not copy (besides what ``kept_members`` drops): they record
an earlier repair or who asked for an earlier transition, not the job's state."""

Adopted = tuple[RecordRef, dict[str, Any]]


def repair_problems(
    workspace: Workspace, report: FsckReport, *, quarantine_unrepairable: bool, rebuild_lost: bool = False
) -> None:
    """Act on every problem of ``report`` (a fresh check of ``workspace``) and record what was done."""
    workspace.require_writable()
    report.repair = True
    wanted = {p.subject.job_id for p in report.problems if p.subject is not None and p.code in FRAME_CODES}
    repairer = _Repairer(workspace, job_frames(workspace, wanted), quarantine_unrepairable)
    repairer.rebuild_lost = rebuild_lost
    repairer.payload_missing = {p.location for p in report.problems if p.code == "payload_missing"}
    repairer.duplicated = {
        p.subject.job_id for p in report.problems if p.code == "duplicate_marker" and p.subject is not None
    }
    for problem in report.problems:
        repairer.settle(problem)


# -- the journal, read forwards ----------------------------------------------------------------------
def job_frames(workspace: Workspace, job_ids: set[str]) -> dict[str, list[Adopted]]:
    """Every readable state frame naming one of ``job_ids``, by job id (empty when none is wanted)."""
    found: dict[str, list[Adopted]] = {job_id: [] for job_id in job_ids}
    if not found:
        return found
    for segment in _segments(workspace.journal_dir):
        try:
            for scanned in scan_segment(segment):
                record, ref = scanned.record, scanned.ref
                if record is None or ref is None or record.get("format") != FRAME_FORMAT:
                    continue
                job_id = record.get("job_id")
                if isinstance(job_id, str) and job_id in found:
                    found[job_id].append((ref, record))
        except JournalError:
            continue  # an unreadable segment or header: nothing more in it can be adopted
    return found


def _segments(journal_dir: Path) -> Iterator[Path]:
    for writer in _sorted_entries(journal_dir):
        if writer.is_dir(follow_symlinks=False):
            for segment in _sorted_entries(Path(writer.path)):
                if segment.name.endswith(SEGMENT_SUFFIX) and segment.is_file(follow_symlinks=False):
                    yield Path(segment.path)


def _sorted_entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return sorted(listing, key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def same_job(workspace: Workspace, subject: MarkerSubject, frame: Mapping[str, Any]) -> bool:
    """Whether ``frame`` is a frame of the marker's job in this workspace (any kind, any generation)."""
    generation = frame.get("state_generation")
    return (
        frame.get("workspace_id") == workspace.workspace_id
        and frame.get("job_key") == str(subject.key)
        and frame.get("placement") == subject.placement
        and isinstance(generation, int)
        and not isinstance(generation, bool)
    )


def adopt(frames: list[Adopted], generation: int) -> Adopted | None:
    """The newest frame strictly older than ``generation``; ties go to a frame a later one chains to.

    Several frames share a generation only when transitions raced and all but one lost; the winner is the
    one some readable frame names as its predecessor, when that frame survived.
    """
    chained = {frame.get("previous_record_ref") for _ref, frame in frames}
    older = [(ref, frame) for ref, frame in frames if frame["state_generation"] < generation]
    if not older:
        return None
    return max(
        older,
        key=lambda item: (
            item[1]["state_generation"],
            str(item[0]) in chained,
            str(item[1].get("created_at")),
            str(item[0]),
        ),
    )


# -- who owns a marker -------------------------------------------------------------------------------
class _Managers:
    """The registered managers by id and by writer id, read once per repair."""

    def __init__(self, views: list[ManagerView]) -> None:
        self.by_id = {view.manager_id: view for view in views}
        self.by_writer = {str(view.member("writer_id")): view for view in views if view.member("writer_id")}

    def live_owner(
        self, subject: MarkerSubject, frames: list[Adopted], adopted: Adopted | None
    ) -> ManagerView | None:
        """A live manager that owns the marker's next transition, or ``None``."""
        if subject.kind not in OWNED_KINDS:
            return None
        floor = -1 if adopted is None else adopted[1]["state_generation"]
        views = [self.by_writer.get(subject.writer or ""), self.by_id.get(subject.writer or "")]
        for _ref, frame in frames:
            if frame["state_generation"] >= floor and frame.get("kind") in OWNED_KINDS:
                views.extend(self.by_id.get(name) for name in _owners(frame))
        return next((view for view in views if view is not None and view.live), None)


def _owners(frame: Mapping[str, Any]) -> Iterator[str]:
    cancellation = frame.get("cancellation")
    names = [frame.get("manager_id")]
    if isinstance(cancellation, Mapping):
        names += [cancellation.get("fenced_by"), cancellation.get("previous_manager_id")]
    yield from (name for name in names if isinstance(name, str))


# -- acting on one problem ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _RepairSource(MarkerLocation):
    """The damaged marker as :func:`move_marker` sees it: its real path, and the name a healthy marker of
    this generation would carry — one naming the adopted frame, so that the repair frame's
    ``previous_record_ref`` and the successor name are derived from it. Its real name may not even parse.
    """

    source: Path = Path()

    def path(self, workspace: Workspace) -> Path:
        del workspace
        return self.source

    def path_text(self, workspace: Workspace) -> str:
        del workspace
        return str(self.source)


class _Repairer:
    def __init__(self, workspace: Workspace, frames: dict[str, list[Adopted]], quarantine: bool) -> None:
        self.workspace = workspace
        self.frames = frames
        self.quarantine = quarantine
        self.managers = _Managers(list_managers(workspace))
        self.payload_missing: set[Path] = set()
        self.duplicated: set[str] = set()  # jobs with two markers: none of their markers is touched
        self.rebuild_lost = False

    def settle(self, problem: Problem) -> None:
        subject = problem.subject
        if problem.code == "payload_missing":
            _leave(problem, "never repaired: restore the payload directory, or delete the job")
        elif problem.code == "duplicate_marker":
            _leave(
                problem, "never repaired: `job log` on each shows its history; remove the stale one by hand"
            )
        elif subject is None:
            if problem.code in MARKER_SHAPED:
                self._unrepairable(problem, "its name identifies no job")
            else:
                _leave(problem, "not a marker: look at it by hand")
        elif problem.code == "io_error":
            _leave(problem, "the segment could not be read; run fsck again")
        elif problem.location in self.payload_missing:
            _leave(problem, "its payload is missing, so it is not repaired")
        elif subject.job_id in self.duplicated:
            _leave(problem, "its job has two markers, so none of them is repaired")
        else:
            self._repair(problem, subject)

    def _repair(self, problem: Problem, subject: MarkerSubject) -> None:
        frames = [f for f in self.frames.get(subject.job_id, []) if same_job(self.workspace, subject, f[1])]
        adopted = adopt(frames, subject.generation)
        owner = self.managers.live_owner(subject, frames, adopted)
        if owner is not None:
            problem.action = "live_owner"
            problem.note = f"manager {owner.manager_id} still heartbeats within its lease and owns it"
            problem.details["owner"] = owner.manager_id
        elif adopted is None and self.rebuild_lost:
            # Nothing older to adopt: what is readable of the job (if anything) is orphans at or past the
            # marker's generation, such as an interrupted rebuild's own frame, which no marker committed.
            self._rebuild(problem, subject)
        elif adopted is None:
            self._unrepairable(
                problem,
                "no readable frame of this job is older than the marker (--rebuild-lost rebuilds one from "
                "job.json)",
            )
        else:
            self._re_point(problem, subject, adopted)

    def _re_point(self, problem: Problem, subject: MarkerSubject, adopted: Adopted) -> None:
        ref, frame = adopted
        members = {key: value for key, value in kept_members(frame).items() if key not in NOT_CARRIED}
        if subject.kind in OWNED_KINDS and frame.get("kind") not in OWNED_KINDS:
            # The adopted frame's manager only moved the job (say, registered it); it never owned this
            # kind. Carrying its id would make it look like the owner, and recovery would wait on it for
            # as long as it lives; without one, recovery treats the marker as abandoned, which it is.
            members.pop("manager_id", None)
        members["reason"] = REPAIR_REASON
        members["fsck_repair"] = {
            "recovered_record_ref": str(ref),
            "damaged_record_ref": subject.ref_text,
            "problem": problem.code,
        }
        problem.details["recovered_record_ref"] = str(ref)
        note = f"re-pointed at the frame of generation {frame['state_generation']}"
        self._move(problem, subject, ref, Frame(subject.kind, members), ("repaired", note))

    def _rebuild(self, problem: Problem, subject: MarkerSubject) -> None:
        """Move the marker onto a frame rebuilt from job.json: the job's whole history is gone."""
        if subject.kind not in REBUILDS:
            self._unrepairable(
                problem, f"a {subject.kind.value} job cannot be rebuilt: what it waited for was lost"
            )
            return
        payload = self.workspace.payload_path(subject.placement, str(subject.key))
        try:
            job = load_job(self.workspace, subject.placement, str(subject.key))
            if (job.document["id"], job.document.get("tag")) != (subject.key.job_id, subject.key.tag):
                raise WorkflowError(f"job.json names job {job.document['id']}, not {subject.key}")
        except (InvalidDocumentError, WorkflowError) as exc:
            self._unrepairable(problem, f"its history is lost and job.json cannot be used: {exc}")
            return
        running = _running_attempt(payload)
        if running is not None:
            problem.action = "live_process"
            problem.note = f"its attempt process {running} still runs on this host; stop it first"
            return
        lost = {
            "lost_record_ref": subject.ref_text,
            "problem": problem.code,
            "from_kind": subject.kind.value,
            "lost_generations": {"first": 1, "last": subject.generation},
        }
        frame = rebuilt(subject.kind, job.document, job.digest, lost)
        done = ("rebuilt", f"history lost; rebuilt from job.json as {frame.kind.value}")
        self._move(problem, subject, _PLACEHOLDER_REF, frame, done)

    def _move(
        self, problem: Problem, subject: MarkerSubject, ref: RecordRef, frame: Frame, done: tuple[str, str]
    ) -> None:
        """Move the damaged marker onto ``frame`` (from a name naming ``ref``); ``done`` is the action and
        note to record when this move won."""
        name = MarkerName(subject.key, subject.priority, subject.generation, ref)
        source = _RepairSource(subject.kind, subject.placement, name, subject.path)
        trigger = Trigger.FSCK_REPAIR if frame.reason == REPAIR_REASON else Trigger.FSCK_REBUILD
        try:
            result = move_marker(self.workspace, source, frame, trigger)
        except WorkspaceUnavailableError as exc:
            problem.action, problem.note = "moved", f"the marker vanished meanwhile: {exc}"
            return
        if not result.won or result.current is None:
            problem.action, problem.note = "moved", "another actor moved the marker meanwhile; run fsck again"
            return
        problem.action, problem.note = done
        problem.details["repaired_marker"] = _relative(self.workspace, result.current.path(self.workspace))

    def _unrepairable(self, problem: Problem, why: str) -> None:
        if not self.quarantine:
            problem.action, problem.note = "unrepairable", f"{why}; --quarantine-unrepairable sets it aside"
            return
        entry = quarantine_entry(self.workspace, problem, why)
        if entry is None:
            problem.action, problem.note = "moved", "the entry vanished meanwhile; run fsck again"
            return
        problem.action, problem.note = "quarantined", why
        problem.details["quarantine_entry"] = _relative(self.workspace, self.workspace.quarantine_dir / entry)


_PLACEHOLDER_REF = RecordRef("00000000-0000-4000-8000-000000000000", 0, 0, 0, "0" * 32)
"""What a rebuilt marker's source name names: only its generation and priority are used (the rebuilt
frame says ``previous_record_ref: null`` itself), and the damaged reference may not even parse."""


def _running_attempt(payload: Path) -> int | None:
    """The pid of an attempt process of this job that still runs on this host, if any."""
    for entry in _sorted_entries(payload):
        if entry.name.startswith(ATTEMPT_DIR_PREFIX) and entry.is_dir(follow_symlinks=False):
            try:
                identity = read_process_file(Path(entry.path))
            except InvalidDocumentError:
                continue
            if identity is not None and process_alive(identity) is True:
                return int(identity["pid"])
    return None


def _leave(problem: Problem, note: str) -> None:
    problem.action, problem.note = "left", note


def _relative(workspace: Workspace, path: Path) -> str:
    return printable(Path(os.path.relpath(path, workspace.root)).as_posix())


def quarantine_entry(workspace: Workspace, problem: Problem, why: str) -> str | None:
    """Move the problem's entry into ``quarantine/`` beside an audit record; the entry name, or ``None``.

    The entry's name is derived from the file (path, inode, size), never from what its name claims, so it
    cannot traverse or collide, and a crash between the record and the move repeats the same names.
    """
    durable = workspace.durable
    try:
        info = os.lstat(problem.location)
    except FileNotFoundError:
        return None
    seed = f"{problem.path}\0{info.st_ino}\0{info.st_size}".encode()
    entry = f"marker-{hashlib.sha256(seed).hexdigest()[:32]}"
    subject = problem.subject
    record = {
        "format": QUARANTINE_FORMAT,
        "format_version": 1,
        "entry": entry,
        "original_path": problem.path,
        "reason": f"{problem.code}: {problem.detail}; {why}",
        "problem": problem.code,
        "job_key": None if subject is None else str(subject.key),
        "quarantined_by": "workspace fsck",
        "quarantined_at": utc_timestamp(workspace.clock.now()),
    }
    directory = workspace.quarantine_dir
    _fsops.make_dirs(directory, durable=durable)
    _fsops.write_file_atomic(directory / f"{entry}.quarantine", dump_pretty(record), durable=durable)
    try:
        _fsops.rename(problem.location, directory / entry, durable=durable)
    except FileNotFoundError:
        return None
    return entry


COUNTING_LEFTOVERS = "counting always-safe leftovers"


def fsck(
    workspace: Workspace,
    *,
    repair: bool = False,
    quarantine_unrepairable: bool = False,
    rebuild_lost: bool = False,
    progress: Callable[[str, int], None] | None = None,
) -> FsckReport:
    """Check the workspace (:mod:`._fsck_check`), repair what ``repair`` may (rebuilding lost histories
    with ``rebuild_lost``), and count always-safe leftovers.

    Without ``repair`` nothing is written; with it the workspace must be attached writable.
    ``progress(what, done)`` hears how far each phase is: the entries checked, then the entries the
    leftover count visited (:data:`COUNTING_LEFTOVERS`).
    """
    report = check(workspace, progress=progress)
    if repair:
        repair_problems(
            workspace, report, quarantine_unrepairable=quarantine_unrepairable, rebuild_lost=rebuild_lost
        )
    census_progress = None
    if progress is not None:
        report_to = progress

        def census_progress(_what: str, done: int) -> None:
            report_to(COUNTING_LEFTOVERS, done)

    report.leftovers = leftover_census(workspace, progress=census_progress)
    return report


def leftover_census(
    workspace: Workspace, *, progress: Callable[[str, int], None] | None = None
) -> dict[str, int]:
    """gc's dry-run count of always-safe leftovers (``total``, ``removed_jobs``, ``tmp_entries``,
    ``retired_requests``, ``placement_directories``), reported for information only; writes nothing."""
    return always_safe_census(workspace, progress=progress)


HISTORY_LOST = "history_lost"
"""The code a rebuilt frame gives what it cannot know: the failure, the reason for a new attempt, the
evidence that a cancelled job's attempt stopped."""


def rebuilt(source: Kind, document: Mapping[str, Any], digest: str, lost: Mapping[str, Any]) -> Frame:
    """The one frame ``workspace fsck --rebuild-lost`` writes for a job whose whole history was lost.

    It is made of what is left: job.json (``document`` and its ``digest``) and what the marker's name says
    (its kind ``source``; priority and generation go into the record). It starts a chain of its own
    (``previous_record_ref`` null) and ``lost`` records what is gone (:data:`REBUILDS` gives the kind):
    a job an attempt held counts that attempt, as an unclean restart; a failed job fails with
    ``history_lost``, a paused one waits for an operator, a cancelled one stays cancelled.
    """
    kind = REBUILDS[source]
    message = "the job's history was lost (never synchronized to storage) and rebuilt by workspace fsck"
    members = {**first_activation(document, digest), "previous_record_ref": None, "fsck_rebuild": dict(lost)}
    if source in OWNED_KINDS and kind is Kind.READY:
        members |= {
            **Counters(1, 1, 1).as_members(),
            "attempt_reason": HISTORY_LOST,
            "unclean_restart": True,
            "last_failure": failure_of(HISTORY_LOST, message),
        }
    elif kind is Kind.FAILED:
        members["failure"] = failure_of(HISTORY_LOST, message)
    elif kind is Kind.PAUSED:
        members["pause"] = {"reason": message}
    elif kind is Kind.CANCELLED:
        members["cancellation"] = {"verified": HISTORY_LOST}
    return Frame(kind, {**members, "reason": REBUILD_REASON})
