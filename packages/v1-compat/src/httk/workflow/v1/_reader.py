"""Reading an httk v1 task tree: every ``ht.task.*`` directory below a root, nested ones included.

What :func:`read_tree` guarantees:

* It only reads. Nothing below the root is created, renamed or touched (not even an access time it can
  avoid: directories are listed, and only ``ht.nextstep``, ``ht.reason`` and ``alive.*`` are opened).
* Every directory whose basename starts with ``ht.task.`` ends up in exactly one place: a
  :class:`Task` (top-level in :attr:`Tree.tasks`, nested in its enclosing task's ``subtasks``), a
  :class:`Problem` (the name does not parse; it is reported with its path and nothing below it is read,
  because a misread parent would turn its subtasks into top-level tasks), an :class:`Ignored` entry, or a
  :class:`View` (a symbolic link named like a task: a derived status view, never followed).
* The quirks of v1 that change what a name means are kept as facts, not resolved here: a half-published
  ``ht.tmp.task.*`` and a task anywhere below an ``ht.tmp.*`` directory are ignored as v1 ignores them;
  ``ht.nextstep`` may hold ``ht_finished``/``ht_broken`` whatever the status says; a ``stopped`` task
  whose reason is exit code 43 timed out (the watchdog race of v1 §1.9); a ``running`` task is live or
  stale only by the evidence :func:`live_evidence` weighs (directory mtime, ``alive.<owner>``).

Cost: one directory listing per directory below the root outside ``ht.tmp.*`` staging, one ``lstat``
per task, and one small read per ``ht.nextstep``, ``ht.reason`` and heartbeat file.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import TaskNameError, TreeError
from ._names import TMP_PREFIX, Status, TaskName, looks_like_task

RUN_CURRENT = "ht.run.current"
RUN_RESUME = "ht.run.resume"
RUN_PREFIX = "ht.run."
NEXTSTEP = "ht.nextstep"
REASON = "ht.reason"
STATS_DIR = "ht.taskmgrstats"
ALIVE_PREFIX = "alive."
PROGRAMS = ("ht_steps", "ht_run")
FINISHED_SENTINEL, BROKEN_SENTINEL = "ht_finished", "ht_broken"
STALE_SECONDS = 15 * 60
"""v1's staleness rule: a ``running`` directory untouched for more than 15 minutes (``find -mmin +15``)."""
WATCHDOG_CODE = 43
_ATOMIC = ("ht.atomic.", "ht.tmp.atomic.")
_TMP_TASK = "ht.tmp.task."
_REASON_CODE = re.compile(r"non-defined error code \((\d*)\)")
_READ_LIMIT = 1 << 16


@dataclass(frozen=True, slots=True)
class Task:
    """One v1 task directory as found: its name, the control files that matter, its subtasks."""

    path: Path
    relpath: str
    """POSIX path relative to the tree's root."""
    name: TaskName
    mtime: float
    program: str | None
    """``ht_steps`` when the directory holds one (it takes precedence), else ``ht_run``, else None."""
    executable: bool
    run_current: bool
    run_archives: tuple[str, ...]
    """The other ``ht.run.*`` directories (``ht.run.<stamp>`` archives), by name."""
    next_step: str | None
    """The text of ``ht.nextstep`` in the program's working directory, stripped; None when absent."""
    reason: str | None
    """The last nonblank line of ``ht.reason``; None when absent."""
    pending_transactions: tuple[str, ...]
    """``ht.atomic.*`` / ``ht.tmp.atomic.*`` in the task directory and ``ht.run.current``, task-relative."""
    resume: bool
    """An ``ht.run.resume`` directory waits to become the run directory."""
    subtasks: tuple[Task, ...] = ()
    unsafe: str | None = None
    """The first symbolic link or special file anywhere below the task (root-relative), if any: a job's
    payload holds only regular files and directories."""

    @property
    def reason_code(self) -> int | None:
        """The exit code in a ``Task returned non-defined error code (N)`` reason, when there is one."""
        match = _REASON_CODE.search(self.reason or "")
        return int(match.group(1)) if match and match.group(1) else None

    @property
    def timed_out(self) -> bool:
        """``timeout``, or ``stopped`` by the watchdog's exit code 43 (both mean the same in v1)."""
        status = self.name.status
        return status is Status.TIMEOUT or (status is Status.STOPPED and self.reason_code == WATCHDOG_CODE)

    @property
    def declared(self) -> str | None:
        """``finished`` or ``broken`` when ``ht.nextstep`` already holds that decision's sentinel."""
        if self.next_step == FINISHED_SENTINEL:
            return "finished"
        if self.next_step == BROKEN_SENTINEL:
            return "broken"
        return None

    def walk(self) -> Iterator[Task]:
        """This task, then every nested task, depth first (a parent before its children)."""
        yield self
        for subtask in self.subtasks:
            yield from subtask.walk()


@dataclass(frozen=True, slots=True)
class Problem:
    """A directory named like a task that is not one; nothing below it was read."""

    relpath: str
    message: str


@dataclass(frozen=True, slots=True)
class Ignored:
    """Something v1 itself never runs (half-published, below an ``ht.tmp.*`` directory, not a directory)."""

    relpath: str
    reason: str


@dataclass(frozen=True, slots=True)
class View:
    """A symbolic link named like a task: a status view, never followed."""

    relpath: str
    target: str


@dataclass(frozen=True, slots=True)
class Tree:
    """Everything :func:`read_tree` found below one root."""

    root: Path
    tasks: tuple[Task, ...]
    """The top-level tasks: those not inside another task directory, in path order."""
    problems: tuple[Problem, ...] = ()
    ignored: tuple[Ignored, ...] = ()
    views: tuple[View, ...] = ()
    heartbeats: Mapping[str, float] = field(default_factory=dict)
    """``alive.<owner>`` heartbeat files by owner id: the newest mtime seen."""
    directories: tuple[str, ...] = ()
    """Every directory outside tasks that was listed, root-relative (``""`` is the root itself)."""

    def walk(self) -> Iterator[Task]:
        """Every task, top-level and nested, depth first."""
        for task in self.tasks:
            yield from task.walk()


def read_tree(root: Path | str) -> Tree:
    """Read the v1 tree below ``root``; :class:`TreeError` when ``root`` is not a readable directory.

    Examples
    --------
    >>> tree = read_tree("Runs")  # doctest: +SKIP
    >>> [task.name.status.value for task in tree.walk()]  # doctest: +SKIP
    ['waitstart', 'finished']
    """
    root = Path(root)
    try:
        mode = os.stat(root).st_mode
    except OSError as exc:
        raise TreeError(f"cannot read the v1 tree ({exc.strerror})", root) from None
    if not stat.S_ISDIR(mode):
        raise TreeError("the v1 tree root is not a directory", root)
    walker = _Walker(root)
    tasks = walker.plain(root, "")
    if walker.root_error is not None:
        raise TreeError(f"cannot list the v1 tree ({walker.root_error})", root)
    return Tree(
        root=root,
        tasks=tuple(tasks),
        problems=tuple(walker.problems),
        ignored=tuple(walker.ignored),
        views=tuple(walker.views),
        heartbeats=dict(walker.heartbeats),
        directories=tuple(walker.directories),
    )


def live_evidence(
    task: Task, tree: Tree, *, now: float | None = None, stale_after: float = STALE_SECONDS
) -> str | None:
    """Why a live v1 task manager may own ``task`` or one of its subtasks, or None when none may.

    A ``running`` directory is live while its mtime is within ``stale_after`` (a v1 manager touches it
    every 150 s) or while its owner's ``alive.<owner>`` heartbeat is (touched every 321 s). Other
    statuses are never owned: the too-many-restarts ``stopped`` keeps a manager id as its owner, but no
    manager acts on it again.
    """
    now = time.time() if now is None else now
    for candidate in task.walk():
        if candidate.name.status is not Status.RUNNING:
            continue
        age = now - candidate.mtime
        if age <= stale_after:
            return f"{candidate.relpath} is running and was modified {_ago(age)} ago"
        beat = tree.heartbeats.get(candidate.name.owner)
        if beat is not None and now - beat <= stale_after:
            return (
                f"{candidate.relpath} is running and its owner's heartbeat "
                f"alive.{candidate.name.owner} was touched {_ago(now - beat)} ago"
            )
    return None


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


class _Walker:
    """One pass over a tree, accumulating what :class:`Tree` reports."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[Problem] = []
        self.ignored: list[Ignored] = []
        self.views: list[View] = []
        self.heartbeats: dict[str, float] = {}
        self.directories: list[str] = []
        self.root_error: str | None = None

    # -- outside tasks ------------------------------------------------------------------------------
    def plain(self, directory: Path, relpath: str) -> list[Task]:
        """The tasks found in a directory outside every task (a category or project directory)."""
        self.directories.append(relpath)
        entries = self._list(directory, relpath)
        tasks: list[Task] = []
        for entry in entries:
            child = _join(relpath, entry.name)
            if entry.name.startswith(TMP_PREFIX):
                self._tmp(entry, child)
            elif looks_like_task(entry.name):
                task = self._task_entry(entry, child)
                if task is not None:
                    tasks.append(task)
            elif entry.name == STATS_DIR and _is_dir(entry):
                self._heartbeats(Path(entry.path), child)
            elif _is_dir(entry):
                tasks.extend(self.plain(Path(entry.path), child))
        return tasks

    def _heartbeats(self, directory: Path, relpath: str) -> None:
        for entry in self._list(directory, relpath):
            if entry.name.startswith(ALIVE_PREFIX) and entry.is_file(follow_symlinks=False):
                owner = entry.name[len(ALIVE_PREFIX) :]
                mtime = entry.stat(follow_symlinks=False).st_mtime
                self.heartbeats[owner] = max(mtime, self.heartbeats.get(owner, mtime))

    def _tmp(self, entry: os.DirEntry[str], relpath: str) -> None:
        """v1 never runs anything below ``ht.tmp.*``; report the tasks there, read nothing else."""
        if not _is_dir(entry) or entry.name.startswith(_ATOMIC[1]):
            return
        if entry.name.startswith(_TMP_TASK):
            self.ignored.append(Ignored(relpath, "half-published (ht.tmp.task.*): v1 never runs it"))
            return
        for inner in self._list(Path(entry.path), relpath):
            child = _join(relpath, inner.name)
            if looks_like_task(inner.name) and _is_dir(inner):
                self.ignored.append(Ignored(child, "below an ht.tmp.* directory: v1 never runs it"))
            elif _is_dir(inner) and not inner.name.startswith(TMP_PREFIX):
                self._tmp(inner, child)

    # -- tasks ---------------------------------------------------------------------------------------
    def _task_entry(
        self, entry: os.DirEntry[str], relpath: str, hazards: list[str] | None = None
    ) -> Task | None:
        """A task, a view, an ignored entry or a problem; a nested one's hazards go to ``hazards``."""
        if entry.is_symlink():
            self.views.append(View(relpath, os.readlink(entry.path)))
            return None
        if not entry.is_dir(follow_symlinks=False):
            self.ignored.append(Ignored(relpath, "named like a task but not a directory"))
            return None
        try:
            name = TaskName.parse(entry.name)
        except TaskNameError as exc:
            self.problems.append(Problem(relpath, exc.rule))
            if hazards is not None:  # not entered as a task, but it travels in its parent's payload
                hazards.extend(_hazards_below(Path(entry.path), relpath))
            return None
        task = self._task(Path(entry.path), relpath, name, entry.stat(follow_symlinks=False).st_mtime)
        if hazards is not None and task.unsafe is not None:
            hazards.append(task.unsafe)
        return task

    def _task(self, path: Path, relpath: str, name: TaskName, mtime: float) -> Task:
        program: str | None = None
        executable = False
        run_current = resume = False
        archives: list[str] = []
        pending: list[str] = []
        subtasks: list[Task] = []
        reason: str | None = None
        nextstep_dir: Path | None = None
        hazards: list[str] = []
        for entry in self._list(path, relpath):
            child = _join(relpath, entry.name)
            if _hazard(entry):
                hazards.append(child)
            if entry.name in PROGRAMS and entry.is_file(follow_symlinks=False):
                if program != PROGRAMS[0]:  # ht_steps takes precedence over ht_run
                    program = entry.name
                    executable = os.access(entry.path, os.X_OK)
            elif entry.name == REASON and entry.is_file(follow_symlinks=False):
                reason = _last_line(Path(entry.path))
            elif entry.name.startswith(_ATOMIC) and _is_dir(entry):
                pending.append(entry.name)
                hazards.extend(_hazards_below(Path(entry.path), child))
            elif entry.name.startswith(TMP_PREFIX):
                self._tmp(entry, child)
                hazards.extend(_hazards_below(Path(entry.path), child) if _is_dir(entry) else ())
            elif looks_like_task(entry.name):
                subtask = self._task_entry(entry, child, hazards)
                if subtask is not None:
                    subtasks.append(subtask)
            elif _is_dir(entry):
                atomics: list[str] | None = None
                if entry.name == RUN_CURRENT:
                    run_current = True
                    nextstep_dir = Path(entry.path)
                    atomics = []
                elif entry.name == RUN_RESUME:
                    resume = True
                elif entry.name.startswith(RUN_PREFIX):
                    archives.append(entry.name)
                subtasks.extend(self._inside(Path(entry.path), child, hazards, atomics))
                pending.extend(f"{RUN_CURRENT}/{name}" for name in atomics or ())
        if program == PROGRAMS[1]:
            nextstep_dir = path  # ht_run runs in the task directory itself
        return Task(
            path=path,
            relpath=relpath,
            name=name,
            mtime=mtime,
            program=program,
            executable=executable,
            run_current=run_current,
            run_archives=tuple(archives),
            next_step=None if nextstep_dir is None else _read_text(nextstep_dir / NEXTSTEP),
            reason=reason,
            pending_transactions=tuple(pending),
            resume=resume,
            subtasks=tuple(subtasks),
            unsafe=hazards[0] if hazards else None,
        )

    def _inside(
        self, directory: Path, relpath: str, hazards: list[str], atomics: list[str] | None = None
    ) -> list[Task]:
        """The tasks anywhere below a directory of a task (v1 subtasks may live at any depth).

        ``hazards`` collects symbolic links and special files; ``atomics`` the transaction directories
        found directly in ``directory``; staged transaction contents are never searched for tasks.
        """
        found: list[Task] = []
        for entry in self._list(directory, relpath):
            child = _join(relpath, entry.name)
            if _hazard(entry):
                hazards.append(child)
            if entry.name.startswith(_ATOMIC):
                if atomics is not None and _is_dir(entry):
                    atomics.append(entry.name)
                hazards.extend(_hazards_below(Path(entry.path), child) if _is_dir(entry) else ())
            elif entry.name.startswith(TMP_PREFIX):
                self._tmp(entry, child)
                hazards.extend(_hazards_below(Path(entry.path), child) if _is_dir(entry) else ())
            elif looks_like_task(entry.name):
                task = self._task_entry(entry, child, hazards)
                if task is not None:
                    found.append(task)
            elif _is_dir(entry):
                found.extend(self._inside(Path(entry.path), child, hazards))
        return found

    # -- listing -------------------------------------------------------------------------------------
    def _list(self, directory: Path, relpath: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as listing:
                return sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            if relpath == "":
                self.root_error = exc.strerror or str(exc)
            else:
                self.problems.append(Problem(relpath, f"cannot list this directory ({exc.strerror})"))
            return []


def _join(relpath: str, name: str) -> str:
    return f"{relpath}/{name}" if relpath else name


def _is_dir(entry: os.DirEntry[str]) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _hazard(entry: os.DirEntry[str]) -> bool:
    """A symbolic link or a special file: what a job's payload may not hold."""
    return entry.is_symlink() or not (entry.is_dir() or entry.is_file())


def _hazards_below(directory: Path, relpath: str) -> list[str]:
    """The symbolic links and special files anywhere below a directory the walk does not enter."""
    found: list[str] = []
    try:
        with os.scandir(directory) as listing:
            entries = list(listing)
    except OSError:
        return found
    for entry in entries:
        child = _join(relpath, entry.name)
        if _hazard(entry):
            found.append(child)
        elif entry.is_dir(follow_symlinks=False):
            found.extend(_hazards_below(Path(entry.path), child))
    return found


def _read_text(path: Path) -> str | None:
    """A small control file's text, stripped of surrounding whitespace; None when absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_READ_LIMIT)
    except OSError:
        return None
    return data.decode("utf-8", "replace").strip()


def _last_line(path: Path) -> str | None:
    text = _read_text(path)
    if not text:
        return None
    return text.splitlines()[-1].strip()
