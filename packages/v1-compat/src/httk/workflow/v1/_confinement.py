"""What the v1 runner may write besides its own directories: a subtask's place in its parent's tree.

A manager that confines runners (``docs/confinement.md``) lets a runner write its workdir, its attempt
control directory, ``.httk-job/`` and ``logs/`` of its own job. A top-level v1 task needs nothing more:
its task directory is ``task/<its v1 name>`` in its payload, and ``task/`` is its workdir. A subtask's
job holds only job.json; its task directory stays inside its parent's run directory, where the parent's
later steps find it and where its name, the status view, is renamed after every step. So this declares,
for a subtask's job, the directory that holds its task directory: the run directory of its parent task,
in the parent job's payload (never the parent's job.json, which lies beside ``task/``).

The manager loads this through the entry point ``httk.workflow.v1`` registers in the group
``httk.workflow.writable_paths`` for the runner ``pkg:httk.workflow/v1/runner`` and calls it once per
confined attempt, so it imports nothing beyond the package's name grammar. It resolves the subtask's locator
(inputs ``v1.anchor`` and ``v1.task``) exactly as the runner does (``runner/lib/task.sh``): each
``ht.task.<set>.<id>`` component stands for the one task directory whose name starts so; a locator
that names no single directory declares nothing, and the runner then fails the job as
``v1.task_missing``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import TaskNameError
from ._names import TaskName


def writable_paths(job: Mapping[str, Any], payload: Path, workspace: Path) -> list[Path]:
    """The run directory holding this subtask's task directory; nothing for a top-level task."""
    inputs = job.get("inputs")
    if not isinstance(inputs, Mapping):
        return []
    anchor, locator = inputs.get("v1.anchor"), inputs.get("v1.task")
    if not (isinstance(anchor, str) and anchor and isinstance(locator, str) and locator):
        return []
    task = locate(Path(workspace) / anchor, locator)
    return [] if task is None else [task.parent]


def locate(anchor: Path, locator: str) -> Path | None:
    """The directory ``locator`` names below ``anchor`` (``None`` when it names none, or several)."""
    directory = anchor
    for part in locator.split("/"):
        if part.startswith("ht.task.") and part.count(".") == 3:
            try:
                with os.scandir(directory) as listing:
                    found = [
                        entry.path
                        for entry in listing
                        if entry.name.startswith(part + ".")
                        and entry.is_dir(follow_symlinks=False)
                        and _is_task_name(entry.name)
                    ]
            except OSError:
                return None
            if len(found) != 1:
                return None
            directory = Path(found[0])
        else:
            directory = directory / part
    return directory if directory.is_dir() and not directory.is_symlink() else None


def _is_task_name(name: str) -> bool:
    try:
        TaskName.parse(name)
    except TaskNameError:
        return False
    return True
