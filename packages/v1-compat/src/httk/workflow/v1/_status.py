"""``httk workflow v1 status``: a summary of a v1 tree, and which jobs an import made of its tasks.

Read only: the tree is listed as :func:`read_tree` lists it; the workspace, when given, is attached
read-only and only the placements the tree's directories mirror are listed (one listing per state kind
there), so the mapping costs no job file reads except for jobs whose task left the tree (``--move``).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine import attach

from ._jobdoc import TaskRefusedError, placement_in, plan_job
from ._names import Status
from ._placements import Placements, imported_from
from ._reader import (
    STALE_SECONDS,
    WATCHDOG_CODE,
    Ignored,
    Problem,
    Task,
    Tree,
    View,
    live_evidence,
    read_tree,
)


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A task named ``running``: live (a v1 manager may own it) or stale (its manager is gone)."""

    relpath: str
    owner: str
    age_seconds: float
    """Since its directory was last modified."""
    live: bool
    evidence: str | None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    owner: str
    age_seconds: float
    fresh: bool


@dataclass(frozen=True, slots=True)
class Quirk:
    """Something in a task v1 would handle differently from what its name suggests (reference §3.6)."""

    relpath: str
    note: str


@dataclass(frozen=True, slots=True)
class JobOfTask:
    """What a top-level task became in the workspace: its job and that job's state kind now."""

    relpath: str
    status: str
    job_key: str | None
    placement: str | None
    kind: str | None
    """The job's state kind, or None when no job of it exists."""
    note: str | None = None


@dataclass(frozen=True, slots=True)
class TreeStatus:
    root: Path
    tasks: int
    top_level: int
    by_status: dict[str, dict[str, int]]
    """status -> {"top_level": n, "nested": m}, for the statuses present."""
    by_set: dict[str, int]
    running: tuple[RunningTask, ...]
    heartbeats: tuple[Heartbeat, ...]
    quirks: tuple[Quirk, ...]
    problems: tuple[Problem, ...]
    ignored: tuple[Ignored, ...]
    views: tuple[View, ...]
    workspace: Path | None = None
    placement: str | None = None
    jobs: tuple[JobOfTask, ...] = field(default_factory=tuple)
    """With a workspace: each top-level task's job, then the jobs of tasks no longer in the tree."""

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "tasks": self.tasks,
            "top_level": self.top_level,
            "by_status": self.by_status,
            "by_set": self.by_set,
            "running": [_fields(r) for r in self.running],
            "heartbeats": [_fields(h) for h in self.heartbeats],
            "quirks": [_fields(q) for q in self.quirks],
            "problems": [_fields(p) for p in self.problems],
            "ignored": [_fields(i) for i in self.ignored],
            "views": [_fields(v) for v in self.views],
            "workspace": None if self.workspace is None else str(self.workspace),
            "placement": self.placement,
            "jobs": [_fields(j) for j in self.jobs],
        }


def tree_status(
    root: Path | str,
    *,
    workspace: Path | str | None = None,
    placement: str = "v1",
    now: float | None = None,
    stale_after: float = STALE_SECONDS,
) -> TreeStatus:
    """Summarise the v1 tree ``root``; with ``workspace``, map its tasks to the jobs an import made.

    Examples
    --------
    >>> status = tree_status("Runs", workspace="ws")  # doctest: +SKIP
    >>> status.by_status["waitstart"]  # doctest: +SKIP
    {'top_level': 3, 'nested': 2}
    """
    tree = read_tree(Path(root).absolute())
    now = time.time() if now is None else now
    top = {id(task) for task in tree.tasks}
    by_status: dict[str, Counter[str]] = defaultdict(Counter)
    by_set: Counter[str] = Counter()
    for task in tree.walk():
        by_status[task.name.status.value]["top_level" if id(task) in top else "nested"] += 1
        by_set[task.name.set] += 1
    jobs: tuple[JobOfTask, ...] = ()
    if workspace is not None:
        jobs = _jobs_of(tree, attach(workspace, writable=False), placement)
    return TreeStatus(
        root=tree.root,
        tasks=sum(by_set.values()),
        top_level=len(tree.tasks),
        by_status={s.value: _two(by_status[s.value]) for s in Status if s.value in by_status},
        by_set=dict(sorted(by_set.items())),
        running=tuple(_running(tree, now, stale_after)),
        heartbeats=tuple(
            Heartbeat(owner, now - beat, now - beat <= stale_after)
            for owner, beat in sorted(tree.heartbeats.items())
        ),
        quirks=tuple(q for task in tree.walk() for q in _quirks(task)),
        problems=tree.problems,
        ignored=tree.ignored,
        views=tree.views,
        workspace=None if workspace is None else Path(workspace).absolute(),
        placement=placement if workspace is not None else None,
        jobs=jobs,
    )


def _two(counts: Counter[str]) -> dict[str, int]:
    return {"top_level": counts["top_level"], "nested": counts["nested"]}


def _running(tree: Tree, now: float, stale_after: float) -> list[RunningTask]:
    found = []
    for task in tree.walk():
        if task.name.status is Status.RUNNING:
            evidence = live_evidence(task, tree, now=now, stale_after=stale_after)
            found.append(
                RunningTask(task.relpath, task.name.owner, now - task.mtime, evidence is not None, evidence)
            )
    return found


def _quirks(task: Task) -> list[Quirk]:
    """What the reference's §3.6 says v1 does to such a task, where it differs from its name."""
    notes = []
    status = task.name.status
    if status.waiting and task.declared == "finished":
        notes.append("ht.nextstep holds ht_finished: v1 would end it broken, the v1 runner ends it finished")
    if status.waiting and task.declared == "broken":
        notes.append(
            "ht.nextstep holds ht_broken: v1 would stop it with code (), the v1 runner ends it broken"
        )
    if status is Status.STOPPED and task.reason_code == WATCHDOG_CODE:
        notes.append("stopped with code 43: v1's watchdog timed it out (imported, it fails as timeout)")
    if status is Status.STOPPED and task.reason_code == 0:
        notes.append("stopped with code 0: its ht_steps exited 0, which v1 does not take as finished")
    if status is Status.STOPPED and task.reason == "Too many restarts!":
        notes.append(f"stopped after too many restarts; its owner {task.name.owner} is no live manager")
    if status is Status.FINISHED and task.run_current:
        notes.append("finished but still holds ht.run.current (httk's reader would refuse it)")
    if task.program == "ht_run":
        notes.append("ht_run only: v1 ran it from PATH; the v1 runner runs the task's own ./ht_run")
    if task.program is None:
        notes.append("neither ht_steps nor ht_run: v1 would stop it with code 127")
    if task.pending_transactions:
        notes.append(
            f"{len(task.pending_transactions)} pending transaction(s), replayed before its next step"
        )
    if task.resume:
        notes.append("ht.run.resume waits to become ht.run.current at its next step")
    return [Quirk(task.relpath, note) for note in notes]


def _jobs_of(tree: Tree, workspace: Any, prefix: str) -> tuple[JobOfTask, ...]:
    placements = Placements(workspace)
    found: list[JobOfTask] = []
    planned: set[str] = set()
    for task in tree.tasks:
        status = task.name.status.value
        try:
            plan = plan_job(task, root=tree.root, prefix=prefix)
        except TaskRefusedError as exc:
            found.append(JobOfTask(task.relpath, status, None, None, None, f"cannot be a job: {exc}"))
            continue
        planned.add(str(plan.key))
        kind = placements.get(plan.placement).kinds.get(str(plan.key))
        found.append(JobOfTask(task.relpath, status, str(plan.key), plan.placement, kind))
    for name in dict.fromkeys(placement_in(prefix, d) for d in tree.directories):
        placement = placements.get(name)
        for payload in sorted(placement.payloads - planned):
            job = imported_from(placement.path / payload, tree.root)
            if job is not None:
                kind = placement.kinds.get(payload)
                found.append(JobOfTask(job.relpath, job.status, payload, name, kind, "moved out of the tree"))
    return tuple(found)


def _fields(item: Any) -> dict[str, Any]:
    return {name: getattr(item, name) for name in item.__slots__}
