"""Placing a planned job: a payload holding job.json and the v1 task, and the engine's submission.

Shared by the importer and ``v1 new``. A job's payload is ``job.json`` beside ``task/``, its workdir,
which holds the v1 task directory under its v1 name (``task/ht.task.…``; that name is the task's status
view, renamed by the runner after every step). The task is never the payload itself: a confined runner
may write its workdir but not the payload beside it, which holds job.json (``docs/confinement.md``).

The order is the one crash safety rests on: the payload is made where nobody references it yet
(``tmp/`` of the workspace), the task moved into it, and the engine's
:meth:`Submitter.submit_bundle` renames the payload into place and publishes its marker (the commit
point). A copied task is staged below ``tmp/`` already, so whatever fails before the marker only
leaves an unreferenced staging directory. A task moved out of the v1 tree (``--move``) leaves the
tree by the one rename into its payload: a record beside that payload (``v1-move.<job key>.json``)
names where it came from until the submission is done, so that a failure puts it back at once and an
import cut short anywhere is completed, or undone, by the next import on this host
(:meth:`JobPlacer.recover_moves`).

``submit_bundle`` is the engine's submission of an already checked payload (what a committing parent
uses for its children): it does not walk the payload again or re-read job.json. The payload was
checked by the reader's walk, which found no symbolic link or special file below the task
(:attr:`Task.unsafe`), and job.json is composed by :func:`plan_job` from validated names; a manager
validates job.json once more when it registers the job (a bad one fails as ``protocol_error``). On an
import of 10,000 tasks the second walk and parse were a third of the time.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

from httk.workflow.engine import Submitter, Workspace
from httk.workflow.protocol import JobKey, WorkflowError

from . import _mutations as mutations
from ._jobdoc import WORKDIR, JobPlan
from ._placements import Placements

MOVE_PREFIX = "v1-move."


class JobPlacer:
    """Places jobs into one workspace, keeping its placement listings up to date."""

    def __init__(self, workspace: Workspace, *, dry_run: bool = False) -> None:
        self.workspace = workspace
        self.durable = workspace.durable
        self.placements = Placements(workspace)
        self._submitter = None if dry_run else Submitter(workspace)

    def place(self, plan: JobPlan, task: Path, *, in_tree: bool = False) -> None:
        """Make the v1 task directory ``task`` the job ``plan`` describes: a copy staged below the
        workspace's ``tmp/``, or with ``in_tree`` the task in the v1 tree itself, which is moved.

        Raises the engine's error or ``OSError`` after undoing its own changes (a moved task is back).
        """
        self._need_submitter()
        if in_tree:
            payload = self.workspace.tmp_dir / f"{MOVE_PREFIX}{plan.key}"
            record = payload.with_name(f"{payload.name}.json")
            mutations.make_dirs(self.workspace.tmp_dir, durable=self.durable)
            mutations.write_file(record, _move_record(plan, task), durable=self.durable)
        else:
            payload = task.with_name(f"{task.name}.payload")
            record = None
        moved = payload / WORKDIR / task.name
        try:
            mutations.make_dirs(payload / WORKDIR, durable=self.durable)
            mutations.write_file(payload / "job.json", plan.data, durable=self.durable)
            mutations.rename(task, moved, durable=self.durable)
            if self.durable and not in_tree:
                mutations.fsync_tree(payload)
            self._submit(payload, plan.key, plan.document["priority"], plan.data, plan.placement)
        except (WorkflowError, OSError):
            if in_tree and moved.is_dir():
                mutations.rename(moved, task, durable=self.durable)  # the tree is as it was
            if record is not None:
                mutations.remove_tree(payload)
                mutations.unlink(record, durable=self.durable)
            raise
        if record is not None:
            mutations.unlink(record, durable=self.durable)
        placement = self.placements.get(plan.placement)
        placement.payloads.add(str(plan.key))
        placement.kinds[str(plan.key)] = "submitted"

    def complete(self, payload: Path, key: JobKey, priority: int, data: bytes, placement: str) -> None:
        """Publish the marker of a payload an interrupted run placed (its job.json is ``data``)."""
        self._submit(payload, key, priority, data, placement)
        self.placements.get(placement).kinds[str(key)] = "submitted"

    def recover_moves(self) -> list[tuple[str, str]]:
        """Finish the moves (``--move``) an import on this host left when it died: a task already in its
        payload is submitted, one not yet moved is left in the tree; the placement and job key of each
        job submitted."""
        done: list[tuple[str, str]] = []
        try:
            names = sorted(os.listdir(self.workspace.tmp_dir))
        except FileNotFoundError:
            return done
        for name in names:
            if name.startswith(MOVE_PREFIX) and name.endswith(".json"):
                record = self.workspace.tmp_dir / name
                recorded = _read_record(record)
                if recorded is not None and _dead_here(recorded) and self._recover(record, recorded):
                    done.append((str(recorded["placement"]), str(recorded["key"])))
        return done

    def _recover(self, record: Path, recorded: dict[str, object]) -> bool:
        payload = record.with_name(record.name[: -len(".json")])
        task = Path(str(recorded["task"]))
        moved = payload / WORKDIR / task.name
        submitted = False
        if moved.is_dir():
            data = (payload / "job.json").read_bytes()
            key = JobKey.parse(str(recorded["key"]))
            priority = int(json.loads(data)["priority"])
            self.complete(payload, key, priority, data, str(recorded["placement"]))
            submitted = not payload.exists()
            if not submitted:  # a job of this key was placed already: the task goes back to the tree
                mutations.rename(moved, task, durable=self.durable)
        mutations.remove_tree(payload)
        mutations.unlink(record, durable=self.durable)
        return submitted

    def _submit(self, payload: Path, key: JobKey, priority: int, data: bytes, placement: str) -> None:
        digest = hashlib.sha256(data).hexdigest()
        self._need_submitter().submit_bundle(payload, key, priority, digest, placement)

    def _need_submitter(self) -> Submitter:
        if self._submitter is None:
            raise RuntimeError("a dry run places nothing")
        return self._submitter


def _move_record(plan: JobPlan, task: Path) -> bytes:
    record = {
        "key": str(plan.key),
        "placement": plan.placement,
        "task": str(task),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    return json.dumps(record, sort_keys=True).encode() + b"\n"


def _read_record(path: Path) -> dict[str, object] | None:
    """A move record, or None when it is torn (its import died writing it: the task never moved)."""
    try:
        recorded = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(recorded, dict) and {"key", "placement", "task", "host", "pid"} <= recorded.keys():
        return recorded
    return None


def _dead_here(recorded: dict[str, object]) -> bool:
    """Whether the import that wrote a record ran on this host and is gone."""
    return recorded["host"] == socket.gethostname() and not alive(int(str(recorded["pid"])))


def alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one of another account counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
