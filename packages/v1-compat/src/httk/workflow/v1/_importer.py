"""Importing a v1 tree: each top-level runnable task becomes an ordinary job of a workspace.

What :func:`import_tree` guarantees:

* **Nothing runs twice.** A top-level task becomes one job; its subtasks travel inside its payload and
  become children only when the v1 runner spawns them. Tasks a live v1 task manager may own (the
  reader's :func:`live_evidence`) are skipped and reported, never touched, unless ``force``.
* **Idempotent.** Job ids are uuid5 over the placement prefix and the task's ROOT-relative path with the
  fields v1 changes left out (:func:`job_id_of`), and job.json holds nothing that changes between runs,
  so importing the same tree again finds every job placed with the same bytes and adds nothing. A
  placed job whose job.json differs is a conflict, reported and left alone.
* **Crash-safe.** Per task: (1) the copy is made below the workspace's ``tmp/`` (batched ``cp -a
  --parents``; a copy dies with the import), (2) a payload is made beside it, job.json in it and the
  copy moved into its ``task/`` (:class:`JobPlacer`), (3) the engine renames the payload into place and
  publishes its marker (the commit point). Interrupted before (3), the rerun copies again (a dead run's
  staging is removed); between the payload rename and the marker, the payload is an orphan the rerun
  finds at its placement and completes. With ``move`` the task directory itself leaves the tree at (2),
  by one rename into a payload below ``tmp/`` that a record names: the rerun submits it
  (:meth:`JobPlacer.recover_moves`) before it reads the tree; an orphan of a moved task is found by the
  sweep of the placements of the tree's directories (its job.json names the tree as ``v1.root``).
* **Nothing else changes.** A refused task is reported with its path and why; what was staged for it
  is removed; the tree is read, never written, except for the rename a ``move`` makes.

Cost: the reader's walk; one ``cp -a`` process per batch of about a thousand tasks; per job one
directory, one job.json, one rename, the engine's submission (payload rename, marker); per placement one
listing of the placement and of each state kind there, so a second import of 10,000 tasks reads
directories, not job files.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from httk.workflow.engine import Workspace, attach
from httk.workflow.protocol import InvalidNameError, WorkflowError, validate_placement

from . import _mutations as mutations
from ._errors import ImportRefusedError
from ._import_options import ImportOptions
from ._import_plan import classify, entry_for
from ._import_report import ImportAction, ImportEntry, ImportReport
from ._jobdoc import JobPlan, placement_in
from ._placements import ImportedJob, Placement, imported_from
from ._placing import JobPlacer, alive
from ._reader import Tree, read_tree

STAGING_PREFIX = "v1-import."
SETTLING = "importing v1 tasks"
"""What :func:`import_tree` reports to its ``progress`` callable."""

Progress = Callable[[str, int], None]
"""``progress(what, done)``: the engine's progress convention (``workspace fsck``, ``gc``)."""


def _silent(what: str, done: int) -> None:
    del what, done


_COPY_BATCH_BYTES = 64 * 1024


def import_tree(
    workspace: Path | str,
    root: Path | str,
    options: ImportOptions | None = None,
    *,
    now: float | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import the v1 tree ``root`` into ``workspace``; see the module header for what it guarantees.

    ``progress(what, done)``, when given, is called as each planned task is settled (imported, found
    already imported, refused), with the number settled so far: the engine's progress convention.

    Raises :class:`ImportRefusedError` before writing anything when the options or the placement are
    invalid, the workspace lies inside the tree, or ``move`` crosses filesystems; the engine's
    ``WorkspaceError`` when the workspace cannot be attached; :class:`TreeError` for an unreadable root.

    Examples
    --------
    >>> report = import_tree("ws", "Runs", ImportOptions(placement="legacy"))  # doctest: +SKIP
    >>> report.counts  # doctest: +SKIP
    {'imported': 41, 'skipped_terminal': 12}
    """
    options = options or ImportOptions()
    prefix = _check_options(options)
    attached = attach(workspace, writable=not options.dry_run, durable=options.durable)
    tree_root = Path(root).absolute()
    _check_layout(attached, tree_root, options)
    placer = JobPlacer(attached, dry_run=options.dry_run)
    recovered = [] if options.dry_run else placer.recover_moves()  # before the tree is read
    tree = read_tree(tree_root)
    entries, plans = classify(tree, options, time.time() if now is None else now)
    run = _Run(attached, tree, options, prefix, placer)
    entries.extend(run.settle(plans, progress or _silent))
    entries.extend(run.sweep_orphans({plan.job_id for plan in plans}))
    entries.extend(run.recovered(recovered))
    run.finish()
    return ImportReport.build(
        tree_root,
        attached.root,
        prefix,
        options.dry_run,
        entries=entries,
        problems=tree.problems,
        ignored=tree.ignored,
        views=tree.views,
    )


def _check_options(options: ImportOptions) -> str:
    try:
        prefix = validate_placement(options.placement)
    except InvalidNameError as exc:
        raise ImportRefusedError(
            f"--placement {options.placement!r} is not a placement: {exc.rule}"
        ) from None
    if options.attempts < 0:
        raise ImportRefusedError(f"--attempts must be 0 or more, not {options.attempts}")
    if options.stale_after < 0:
        raise ImportRefusedError(f"the staleness window must be 0 s or more, not {options.stale_after}")
    return prefix


def _check_layout(workspace: Workspace, root: Path, options: ImportOptions) -> None:
    ws = workspace.root.resolve()
    tree = root.resolve()
    if ws == tree or tree in ws.parents or ws in tree.parents:
        raise ImportRefusedError(
            f"the workspace {ws} and the v1 tree {tree} overlap: the tree would be read with the "
            "workspace's own jobs in it; keep them apart"
        )
    if options.move and not options.dry_run and os.stat(tree).st_dev != os.stat(ws).st_dev:
        raise ImportRefusedError(
            f"--move renames tasks, so the v1 tree {tree} and the workspace {ws} must be on one "
            "filesystem; import without --move to copy them"
        )


class _Run:
    """One import's writing half: staging, submissions, the orphan sweep."""

    def __init__(
        self, workspace: Workspace, tree: Tree, options: ImportOptions, prefix: str, placer: JobPlacer
    ) -> None:
        self.workspace = workspace
        self.tree = tree
        self.options = options
        self.prefix = prefix
        self.placer = placer
        self._staging: Path | None = None
        self._batches = 0
        if not options.dry_run:
            self._remove_dead_staging()

    def placement(self, name: str) -> Placement:
        return self.placer.placements.get(name)

    # -- settling each planned job -------------------------------------------------------------------
    def settle(self, plans: list[JobPlan], progress: Progress) -> list[ImportEntry]:
        entries: list[ImportEntry] = []
        fresh: list[JobPlan] = []

        def settled(entry: ImportEntry) -> None:
            entries.append(entry)
            progress(SETTLING, len(entries))

        for plan in plans:
            if str(plan.key) in self.placement(plan.placement).payloads:
                settled(self._settle_placed(plan))
            elif self.options.dry_run:
                settled(entry_for(plan, ImportAction.WOULD_IMPORT))
            else:
                fresh.append(plan)
        made = (self._submit(plan, plan.task.path) for plan in fresh) if self.options.move else None
        for entry in made if made is not None else self._copy_and_submit(fresh):
            settled(entry)
        return entries

    def _settle_placed(self, plan: JobPlan) -> ImportEntry:
        placement = self.placement(plan.placement)
        payload = placement.path / str(plan.key)
        try:
            placed = (payload / "job.json").read_bytes()
        except OSError as exc:
            return entry_for(
                plan, ImportAction.REFUSED, f"{payload} holds no readable job.json ({exc.strerror})"
            )
        if placed != plan.data:
            return entry_for(plan, ImportAction.REFUSED, _conflict(placed, plan))
        if str(plan.key) in placement.kinds:
            return entry_for(plan, ImportAction.ALREADY_IMPORTED)
        if self.options.dry_run:
            return entry_for(plan, ImportAction.WOULD_IMPORT, "completes an interrupted import of it")
        self.placer.complete(payload, plan.key, plan.document["priority"], plan.data, plan.placement)
        return entry_for(plan, ImportAction.COMPLETED, "an interrupted import of it is completed")

    def _copy_and_submit(self, plans: list[JobPlan]) -> Iterator[ImportEntry]:
        """Copy the tasks batch by batch and submit each copy. One ``cp -a`` runs at a time: a copy
        overlapping the placing of the batch before it made both slower (they contend for the same
        filesystem's metadata), so the batches are large and in sequence."""
        for batch in _batches(plans):
            yield from self._copy_batch(batch)

    def _copy_batch(self, batch: list[JobPlan]) -> Iterator[ImportEntry]:
        """One ``cp -a`` for the batch; when it fails, one per task, so only the failing ones are refused."""
        target = self._batch_dir()
        try:
            mutations.copy_trees(self.tree.root, [plan.task.relpath for plan in batch], target, durable=False)
        except OSError as exc:
            if len(batch) > 1:
                for plan in batch:
                    yield from self._copy_batch([plan])
                return
            yield entry_for(batch[0], ImportAction.REFUSED, f"it cannot be copied: {exc}")
            return
        for plan in batch:
            yield self._submit(plan, target / plan.task.relpath)

    def _submit(self, plan: JobPlan, source: Path) -> ImportEntry:
        """Place the copy (or, with --move, the task itself) as the job (:meth:`JobPlacer.place`)."""
        try:
            self.placer.place(plan, source, in_tree=self.options.move)
        except (WorkflowError, OSError) as exc:
            return entry_for(plan, ImportAction.REFUSED, f"it cannot be submitted: {exc}")
        return entry_for(plan, ImportAction.IMPORTED)

    # -- orphans of interrupted imports --------------------------------------------------------------
    def sweep_orphans(self, planned: set[str]) -> list[ImportEntry]:
        """Complete payloads an interrupted import of this tree placed without a marker.

        Only payloads below the placement of one of the tree's directories are looked at, only
        the unmarked ones are opened, and only those whose job.json names this tree as ``v1.root``.
        """
        entries: list[ImportEntry] = []
        for name in dict.fromkeys(placement_in(self.prefix, d) for d in self.tree.directories):
            if not (self.workspace.root / name).is_dir():
                continue
            placement = self.placement(name)
            for payload in sorted(placement.payloads - placement.kinds.keys()):
                entry = self._orphan(placement, name, payload, planned)
                if entry is not None:
                    entries.append(entry)
        return entries

    def _orphan(self, placement: Placement, name: str, payload: str, planned: set[str]) -> ImportEntry | None:
        job = imported_from(placement.path / payload, self.tree.root)
        if job is None or job.key.job_id in planned:
            return None
        if self.options.dry_run:
            return ImportEntry(
                job.relpath, job.status, ImportAction.WOULD_IMPORT, "completes an interrupted import of it"
            )
        priority = int(job.document["priority"])
        self.placer.complete(placement.path / payload, job.key, priority, job.data, name)
        return _completed(job, name, "an interrupted import of it is completed")

    def recovered(self, moves: list[tuple[str, str]]) -> list[ImportEntry]:
        """The moves an earlier import left that this one submitted (:meth:`JobPlacer.recover_moves`)."""
        entries = []
        for placement, key in moves:
            job = imported_from(self.workspace.root / placement / key, self.tree.root)
            if job is not None:
                entries.append(_completed(job, placement, "an interrupted --move of it is completed"))
        return entries

    # -- staging -------------------------------------------------------------------------------------
    def _batch_dir(self) -> Path:
        if self._staging is None:
            token = f"{socket.gethostname()}.{os.getpid()}.{os.urandom(4).hex()}"
            self._staging = self.workspace.tmp_dir / f"{STAGING_PREFIX}{token}"
            mutations.make_dirs(self._staging, durable=False)
        self._batches += 1
        batch = self._staging / str(self._batches)
        mutations.make_dirs(batch, durable=False)
        return batch

    def _remove_dead_staging(self) -> None:
        """Staging left by an import on this host whose process is gone (its copies are unreferenced)."""
        host = socket.gethostname()
        try:
            names = os.listdir(self.workspace.tmp_dir)
        except FileNotFoundError:
            return
        for name in names:
            parts = name[len(STAGING_PREFIX) :].rsplit(".", 2)
            if not name.startswith(STAGING_PREFIX) or len(parts) != 3 or parts[0] != host:
                continue
            if parts[1].isdigit() and not alive(int(parts[1])):
                mutations.remove_tree(self.workspace.tmp_dir / name)

    def finish(self) -> None:
        if self._staging is not None:
            mutations.remove_tree(self._staging)


def _completed(job: ImportedJob, placement: str, why: str) -> ImportEntry:
    return ImportEntry(
        job.relpath,
        job.status,
        ImportAction.COMPLETED,
        why,
        job_id=job.key.job_id,
        job_key=str(job.key),
        placement=placement,
    )


def _batches(plans: Iterable[JobPlan]) -> Iterator[list[JobPlan]]:
    """Plans in chunks whose ``cp`` argument list stays small (each chunk one ``cp -a`` process)."""
    chunk: list[JobPlan] = []
    size = 0
    for plan in plans:
        length = len(os.fsencode(plan.task.relpath)) + 1
        if chunk and size + length > _COPY_BATCH_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(plan)
        size += length
    if chunk:
        yield chunk


def _conflict(placed: bytes, plan: JobPlan) -> str:
    try:
        document = json.loads(placed)
    except ValueError:
        document = {}
    differing = sorted(
        member
        for member in set(document) | set(plan.document)
        if member != "inputs" and document.get(member) != plan.document.get(member)
    )
    old_inputs, new_inputs = document.get("inputs") or {}, plan.document.get("inputs") or {}
    differing += sorted(
        f"inputs.{member}"
        for member in set(old_inputs) | set(new_inputs)
        if old_inputs.get(member) != new_inputs.get(member)
    )
    return (
        f"job {plan.job_id} was imported before with another definition (differing: "
        f"{', '.join(differing) or 'formatting'}); a job id names one definition, so it is left as it is"
    )
