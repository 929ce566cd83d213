"""Which top-level tasks of a v1 tree become jobs, and why the others do not (the importer's first half).

Pure decisions over what the reader found; nothing is written. In order, a task is skipped when its
status is a legacy one (singlejob, waiting, subruns), when a live v1 task manager may own it (unless
``force``), when it is terminal (unless ``include_finished``); refused when :func:`plan_job` refuses
it; and refused together with every other task that would get the same job id (two tasks differing
only in the fields v1 changes are one task to v1). A task may hold any name: its directory goes into
``task/`` of its payload, beside job.json, never in its place.
"""

from __future__ import annotations

from collections import Counter

from ._import_options import ImportOptions
from ._import_report import ImportAction, ImportEntry
from ._jobdoc import JobPlan, TaskRefusedError, plan_job
from ._reader import Task, Tree, live_evidence


def classify(tree: Tree, options: ImportOptions, now: float) -> tuple[list[ImportEntry], list[JobPlan]]:
    """What becomes of each top-level task: an entry already (skipped, refused) or a job to settle."""
    entries: list[ImportEntry] = []
    plans: list[JobPlan] = []
    for task in tree.tasks:
        status = task.name.status
        nested = sum(1 for _ in task.walk()) - 1

        def entry(action: ImportAction, reason: str, task: Task = task, nested: int = nested) -> ImportEntry:
            return ImportEntry(task.relpath, task.name.status.value, action, reason, subtasks=nested)

        if status.legacy:
            entries.append(
                entry(ImportAction.SKIPPED_LEGACY, f"status {status.value} is not run by v1 any more")
            )
            continue
        evidence = live_evidence(task, tree, now=now, stale_after=options.stale_after)
        if evidence is not None and not options.force:
            entries.append(entry(ImportAction.SKIPPED_LIVE, f"a live v1 task manager may own it: {evidence}"))
            continue
        if status.terminal and not options.include_finished:
            entries.append(
                entry(ImportAction.SKIPPED_TERMINAL, f"{status.value} (import with --include-finished)")
            )
            continue
        try:
            plan = plan_job(task, root=tree.root, prefix=options.placement, attempts=options.attempts)
        except TaskRefusedError as exc:
            entries.append(entry(ImportAction.REFUSED, str(exc)))
            continue
        plans.append(plan)
    return entries, _without_duplicates(plans, entries)


def _without_duplicates(plans: list[JobPlan], entries: list[ImportEntry]) -> list[JobPlan]:
    """Tasks that differ only in fields v1 changes are one task to v1: refuse all of them."""
    counts = Counter(plan.job_id for plan in plans)
    kept = []
    for plan in plans:
        if counts[plan.job_id] == 1:
            kept.append(plan)
            continue
        others = sorted(p.task.relpath for p in plans if p.job_id == plan.job_id and p is not plan)
        entries.append(
            entry_for(
                plan,
                ImportAction.REFUSED,
                f"it shares set, id and priority with {', '.join(others)} in one directory (v1's "
                "category directories aside), so both would be one job; rename one of them",
                with_job=False,
            )
        )
    return kept


def entry_for(
    plan: JobPlan, action: ImportAction, reason: str | None = None, *, with_job: bool = True
) -> ImportEntry:
    task = plan.task
    return ImportEntry(
        task.relpath,
        task.name.status.value,
        action,
        reason,
        job_id=plan.job_id if with_job else None,
        job_key=str(plan.key) if with_job else None,
        placement=plan.placement if with_job else None,
        subtasks=sum(1 for _ in task.walk()) - 1,
    )
