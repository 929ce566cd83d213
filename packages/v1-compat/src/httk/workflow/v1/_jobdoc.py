"""The job.json of an imported v1 task: identity, runner, workdir, pool, priority, budget and origin.

What a v1 task becomes (issue "httk v1 compatibility", item 2):

=================  ======================================================================================
member             value
=================  ======================================================================================
``id``             uuid5 of :data:`NAMESPACE` over the placement prefix and the task's ROOT-relative path
                   with what a v1 manager changes left out: the name's step, restarts, owner and status
                   fields, and the category directory (``ht.waitstart/<p>``, ``ht.running``, ...) v1
                   moved it through; so importing the same tree again names the same jobs
``tag``            the v1 task id in tag syntax (lower case, other characters as ``-``), when any is left
``name``           ``httk v1 task <the task directory's absolute path>``: ``job show`` prints it, so every
                   job says which v1 task it came from (an instantiated template names its template)
``runner``         the installed v1 runner (:mod:`._runner`)
``workdir``        persistent ``task``, which holds the task directory under its v1 name (the
                   payload beside it holds job.json, which a confined runner may not write)
``initial_step``   the STEP field (the runner lets ``ht.nextstep`` override it, as v1 did)
``priority``       v1 priority 1-5 onto 100, 300, 500, 700, 900 (v1's default 3 is the protocol's 500)
``claim.pool``     the task set, in pool syntax: lower case, ``--`` (``<computer>--<queue>``) as ``.``
``retry_policy``   the v1 attempt limit: ``maximum_attempts_per_activation`` = limit + 1, retried on
                   ``lease_lost`` and ``process_failure`` (v1 re-ran a task whose manager died); the
                   runner applies v1's own rule, restarts above the limit stop the task
``inputs``         the v1 origin, flat scalars the Bash runner reads: ``v1.origin`` (absolute path),
                   ``v1.root``, ``v1.relpath``, ``v1.name``, the seven name fields (``v1.restarts`` counts
                   the restart of a stale running task) and ``v1.attempts``
=================  ======================================================================================

Every rule that can refuse a task raises :class:`TaskRefusedError` with the reason, and nothing is
written: the importer reports the task with its path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.protocol import (
    InvalidNameError,
    JobKey,
    validate_placement,
    validate_pool,
    validate_step,
    validate_tag,
)

from ._errors import V1Error
from ._names import Status, TaskName
from ._reader import Task
from ._runner import runner_reference

NAMESPACE = uuid.UUID("2ef16c7c-ec7d-48b5-89e0-066e2cfd42da")
"""The uuid5 namespace of imported v1 tasks (fixed forever: job ids of earlier imports depend on it)."""
DEFAULT_ATTEMPTS = 10
"""v1's default attempt limit (``taskmanager.sh -a``)."""
WORKFLOW = "httk.v1"
NAME_PREFIX = "httk v1 task "
WORKDIR = "task"
"""The payload's directory holding the task directory (``task/ht.task.…``): the job's workdir."""
RETRY_ON = ("lease_lost", "process_failure")
CATEGORIES = frozenset(
    {"ht.waitstart", "ht.waiting", "ht.running", "ht.finished", "ht.broken", "ht.timeout", "ht.stopped"}
)
"""The category directories v1's transport and task manager sorted tasks into by status (§1.4)."""
_WAITSTART = "ht.waitstart"
_PRIORITIES = frozenset("12345")
_TAG_MAX = 40


class TaskRefusedError(V1Error):
    """A task that cannot become a job as it is; the message says why."""


@dataclass(frozen=True, slots=True)
class JobPlan:
    """One task's job: its document, the exact job.json bytes, where it goes, and its job key."""

    task: Task
    document: dict[str, Any]
    data: bytes
    placement: str
    key: JobKey

    @property
    def job_id(self) -> str:
        return self.key.job_id

    @property
    def view(self) -> str:
        """The name the task directory starts with in ``task/`` (its status view): the task's own."""
        return self.task.path.name


def priority_of(v1_priority: int) -> int:
    """The protocol priority (0 highest .. 999) of a v1 priority (1 highest .. 5).

    Examples
    --------
    >>> [priority_of(p) for p in range(1, 6)]
    [100, 300, 500, 700, 900]
    """
    return 100 + (v1_priority - 1) * 200


def pool_of(task_set: str) -> str:
    """The claim pool of a v1 task set; :class:`TaskRefusedError` when no pool can say it.

    Examples
    --------
    >>> pool_of("hpc--main"), pool_of("any")
    ('hpc.main', 'any')
    """
    pool = task_set.lower().replace("--", ".")
    try:
        return validate_pool(pool)
    except InvalidNameError as exc:
        raise TaskRefusedError(f"its task set {task_set!r} cannot be a claim pool ({exc.rule})") from None


def tag_of(task_id: str) -> str | None:
    """A tag for the job key from the v1 task id, or None when nothing of it fits the tag syntax.

    Examples
    --------
    >>> tag_of("Si-hex_A1"), tag_of("..")
    ('si-hex_a1', None)
    """
    tag = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in task_id.lower())
    while "--" in tag:
        tag = tag.replace("--", "-")
    tag = tag.lstrip("._-")[:_TAG_MAX]
    if not tag:
        return None
    try:
        return validate_tag(tag)
    except InvalidNameError:
        return None


def campaign_dir(directory: str) -> str:
    """A ROOT-relative directory without the category directory in which v1 kept a task's status.

    On a compute resource v1 sorted tasks into ``ht.waitstart/<priority>/<project>/...`` and moved each
    claimed one to ``ht.running/<project>/...``, then to ``ht.finished/``, ``ht.broken/``,
    ``ht.timeout/`` or ``ht.stopped/`` (reference §1.4): the leading ``ht.waitstart/<1-5>`` pair, else
    the last category component, is as much the task's status as its name's last field, so it is left
    out of the job's identity and placement.

    Examples
    --------
    >>> [campaign_dir(d) for d in ("ht.waitstart/2/proj/sub", "ht.running/proj/sub", "proj/sub", "")]
    ['proj/sub', 'proj/sub', 'proj/sub', '']
    """
    parts = directory.split("/") if directory else []
    if len(parts) >= 2 and parts[0] == _WAITSTART and parts[1] in _PRIORITIES:
        return "/".join(parts[2:])
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in CATEGORIES:
            return "/".join(parts[:index] + parts[index + 1 :])
    return directory


def job_id_of(prefix: str, relpath: str, name: TaskName) -> str:
    """The uuid5 job id of the task at ROOT-relative ``relpath`` imported below placement ``prefix``:
    over the prefix, the task's directory without v1's category (:func:`campaign_dir`) and the name
    without the fields a v1 manager changes (step, restarts, owner, status)."""
    parent = campaign_dir(posixpath.dirname(relpath))
    stable = f"{name.stem}.{name.priority}"
    return str(uuid.uuid5(NAMESPACE, f"{prefix}\n{parent}\n{stable}"))


def placement_in(prefix: str, directory: str) -> str:
    """The placement of the tasks in the ROOT-relative ``directory``: ``prefix/<it without v1's
    category>`` (:func:`campaign_dir`), not yet validated."""
    parent = campaign_dir(directory)
    return f"{prefix}/{parent}" if parent else prefix


def placement_of(prefix: str, relpath: str) -> str:
    """The placement of the task at ROOT-relative ``relpath`` (:func:`placement_in` its directory);
    :class:`TaskRefusedError` when it is no valid placement."""
    placement = placement_in(prefix, posixpath.dirname(relpath))
    try:
        return validate_placement(placement)
    except InvalidNameError as exc:
        raise TaskRefusedError(f"its placement {placement!r} is not valid ({exc.rule})") from None


def plan_job(task: Task, *, root: Path, prefix: str, attempts: int = DEFAULT_ATTEMPTS) -> JobPlan:
    """The job a top-level task becomes below placement ``prefix``; :class:`TaskRefusedError` if none."""
    name = task.name
    if task.program is None:
        raise TaskRefusedError("it has neither ht_steps nor ht_run (v1 would stop it with exit code 127)")
    if not task.executable:
        raise TaskRefusedError(f"its {task.program} is not executable (v1 would stop it with exit code 126)")
    if task.unsafe is not None:
        raise TaskRefusedError(
            f"it holds {task.unsafe}, a symbolic link or special file; a job's payload holds only files "
            "and directories (symlinks are refused)"
        )
    try:
        initial_step = validate_step(name.step)
    except InvalidNameError as exc:
        raise TaskRefusedError(f"its step {name.step!r} is not a step name ({exc.rule})") from None
    placement = placement_of(prefix, task.relpath)
    key = JobKey(job_id_of(prefix, task.relpath, name), tag_of(name.id))
    restarts = name.restarts + (1 if name.status is Status.RUNNING else 0)
    root_text = os.path.abspath(root)
    origin = os.path.join(root_text, task.relpath)
    document: dict[str, Any] = {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": key.job_id,
        "tag": key.tag,
        "name": f"{NAME_PREFIX}{origin}",
        "workflow": WORKFLOW,
        "runner": runner_reference(),
        "workdir": {"mode": "persistent", "path": WORKDIR},
        "data": {"mode": "none"},
        "initial_step": initial_step,
        "priority": priority_of(name.priority),
        "claim": {"pool": pool_of(name.set), "required_capabilities": []},
        "retry_policy": {"maximum_attempts_per_activation": attempts + 1, "retry_on": list(RETRY_ON)},
        "resources": {},
        "parent": None,
        "inputs": {
            "v1.origin": origin,
            "v1.root": root_text,
            "v1.relpath": task.relpath,
            "v1.name": task.path.name,
            "v1.set": name.set,
            "v1.id": name.id,
            "v1.step": name.step,
            "v1.restarts": restarts,
            "v1.owner": name.owner,
            "v1.priority": name.priority,
            "v1.status": name.status.value,
            "v1.attempts": attempts,
        },
    }
    if key.tag is None:
        del document["tag"]
    return JobPlan(task, document, _serialized(document), placement, key)


def with_inputs(
    plan: JobPlan, changes: Mapping[str, Any], *, remove: Iterable[str] = (), name: str | None = None
) -> JobPlan:
    """The same job with some ``inputs`` replaced, added or removed, and another ``name`` when given
    (and job.json serialized again)."""
    inputs = {k: v for k, v in plan.document["inputs"].items() if k not in set(remove)}
    inputs.update(changes)
    document = {**plan.document, "inputs": inputs}
    if name is not None:
        document["name"] = name
    return dataclasses.replace(plan, document=document, data=_serialized(document))


def _serialized(document: Mapping[str, Any]) -> bytes:
    """job.json as this package writes it: compact (the indenting encoder has no C accelerator, and an
    import writes thousands), UTF-8 unescaped, one final newline."""
    return (json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
