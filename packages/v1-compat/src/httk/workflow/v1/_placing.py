"""Placing a planned job: job.json into its prepared payload, its status view, the engine's submission.

Shared by the importer and ``v1 new``. The order is the one their crash safety rests on: job.json is
written into a directory nobody references yet (a staging copy, or with ``in_tree`` the v1 task itself),
the view is created beside where the payload goes (a view that names a payload not yet there only
points nowhere for a moment), and the engine's :meth:`Submitter.submit_bundle` renames the payload
into place and publishes its marker. Whatever fails before the marker is undone here: the view this
call made is removed, and a job.json written into a v1 task is taken out again.

``submit_bundle`` is the engine's submission of an already checked payload (what a committing parent
uses for its children): it does not walk the payload again or re-read job.json. The payload was
checked by the reader's walk, which found no symbolic link or special file below the task
(:attr:`Task.unsafe`), and job.json is composed by :func:`plan_job` from validated names; a manager
validates job.json once more when it registers the job (a bad one fails as ``protocol_error``). On an
import of 10,000 tasks the second walk and parse were a third of the time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from httk.workflow.engine import Submitter, Workspace
from httk.workflow.protocol import JobKey, WorkflowError

from . import _mutations as mutations
from ._jobdoc import JobPlan
from ._placements import Placements


class JobPlacer:
    """Places jobs into one workspace, keeping its placement listings up to date."""

    def __init__(self, workspace: Workspace, *, dry_run: bool = False) -> None:
        self.workspace = workspace
        self.durable = workspace.durable
        self.placements = Placements(workspace)
        self._submitter = None if dry_run else Submitter(workspace)
        self._made: set[str] = set()
        """Placements whose directory this placer made or found (a pruner removing one meanwhile
        fails the view's creation, and with it that job's placing, which a rerun completes)."""

    def place(self, plan: JobPlan, source: Path, *, in_tree: bool = False) -> None:
        """Make ``source`` (a prepared payload without job.json) the job ``plan`` describes.

        Raises the engine's error or ``OSError`` after undoing its own changes.
        """
        submitter = self._need_submitter()
        created_view = False
        try:
            mutations.write_file(source / "job.json", plan.data, durable=self.durable)
            if self.durable and not in_tree:
                mutations.fsync_tree(source)
            created_view = self.ensure_view(plan)
            digest = hashlib.sha256(plan.data).hexdigest()
            submitter.submit_bundle(source, plan.key, plan.document["priority"], digest, plan.placement)
        except (WorkflowError, OSError):
            if created_view:
                self.drop_view(plan)
            if in_tree:
                mutations.unlink(source / "job.json", durable=self.durable)  # the task is as it was
            raise
        placement = self.placements.get(plan.placement)
        placement.payloads.add(str(plan.key))
        placement.kinds[str(plan.key)] = "submitted"

    def complete(self, payload: Path, key: JobKey, priority: int, data: bytes, placement: str) -> None:
        """Publish the marker of a payload an interrupted run placed (its job.json is ``data``)."""
        digest = hashlib.sha256(data).hexdigest()
        self._need_submitter().submit_bundle(payload, key, priority, digest, placement)
        self.placements.get(placement).kinds[str(key)] = "submitted"

    def ensure_view(self, plan: JobPlan) -> bool:
        """The status view beside the payload, unless one of this job's exists; True when made now."""
        placement = self.placements.get(plan.placement)
        target = str(plan.key)
        if target in placement.targets or plan.view in placement.views:
            return False
        if plan.placement not in self._made:
            mutations.make_dirs(placement.path, durable=self.durable)
            self._made.add(plan.placement)
        mutations.symlink(target, placement.path / plan.view, durable=self.durable)
        placement.views[plan.view] = target
        placement.targets.add(target)
        return True

    def drop_view(self, plan: JobPlan) -> None:
        placement = self.placements.get(plan.placement)
        mutations.unlink(placement.path / plan.view, durable=self.durable)
        placement.views.pop(plan.view, None)
        placement.targets.discard(str(plan.key))

    def _need_submitter(self) -> Submitter:
        if self._submitter is None:
            raise RuntimeError("a dry run places nothing")
        return self._submitter
