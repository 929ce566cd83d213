"""Climbing a problem's remedy ladder, with a backup before every change and the history in job state.

The ladder position of every problem lives in the job's state (``vasp.ladders``: the rung reached and
how often its remedy was used), so a retry resumes the ladder where the last attempt left it. A rung's
remedy is used at most its budget of times; a remedy that does not apply (:mod:`._remedies`) is passed
over without spending anything; and the job as a whole spends at most ``vasp.max_remedies`` remedies.

Applying a remedy is crash-safe in this order: the files it will rewrite are copied into
``.httk-vasp/backups/<NNN>-<problem>/`` with their SHA-256; the remedy is recorded as *pending* in job
state (synchronized); the change is written; its after-digests complete the record. An attempt that
finds a pending remedy (its predecessor died in between) restores the backup and forgets it -- the
problem shows again and the same rung is chosen again -- so a half-written change never survives.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping

from ._catalog import Problem
from ._remedies import REMEDIES, Calculation, Change, apply_change

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from httk.workflow.sdk._files import StrPath

BACKUPS = ".httk-vasp/backups"


def digest(path: StrPath) -> str | None:
    """The SHA-256 of a file, or ``None`` when it does not exist."""
    try:
        with open(path, "rb") as stream:
            return hashlib.sha256(stream.read()).hexdigest()
    except FileNotFoundError:
        return None


def next_remedy(
    problem: Problem, ladders: Mapping[str, Any], calculation: Calculation
) -> tuple[int, str, Change] | None:
    """The rung, remedy name and change to apply next for ``problem``; ``None`` when the ladder is spent."""
    position = ladders.get(problem.name, {"rung": 0, "uses": 0})
    rung, uses = int(position["rung"]), int(position["uses"])
    while rung < len(problem.ladder):
        step = problem.ladder[rung]
        if uses < step.budget:
            change = REMEDIES[step.remedy](calculation)
            if change is not None:
                return rung, step.remedy, change
        rung, uses = rung + 1, 0
    return None


def climbed(ladders: Mapping[str, Any], problem: str, rung: int) -> dict[str, Any]:
    """The ladder positions after one use of ``rung`` of ``problem``'s ladder."""
    position = dict(ladders.get(problem, {"rung": 0, "uses": 0}))
    uses = position["uses"] + 1 if position["rung"] == rung else 1
    return {**ladders, problem: {"rung": rung, "uses": uses}}


def back_up(workdir: StrPath, number: int, problem: str, change: Change) -> dict[str, Any]:
    """Copy the files ``change`` rewrites into a numbered backup; the pending record of the remedy."""
    relative = f"{BACKUPS}/{number:03d}-{problem}"
    folder = os.path.join(workdir, relative)
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    before: dict[str, str | None] = {}
    for name in change.files():
        path = os.path.join(workdir, name)
        if os.path.isfile(path):
            shutil.copy2(path, os.path.join(folder, name))
        before[name] = digest(path)
    return {"backup": relative, "before": before}


def apply_with_record(calculation: Calculation, change: Change, record: dict[str, Any]) -> dict[str, Any]:
    """Write ``change``; the record completed with what it did and the digests after."""
    apply_change(calculation, change)
    after = {name: digest(os.path.join(calculation.workdir, name)) for name in change.files()}
    return {**record, "description": change.description, "deleted": list(change.delete), "after": after}


def restore(workdir: StrPath, pending: Mapping[str, Any]) -> list[str]:
    """Put back the files of an interrupted remedy from its backup; the names restored."""
    folder = os.path.join(workdir, str(pending.get("backup", "")))
    restored = []
    for name, before in dict(pending.get("before", {})).items():
        path = os.path.join(workdir, name)
        if digest(path) == before:
            continue
        if os.path.isfile(backup := os.path.join(folder, name)):
            shutil.copy2(backup, path)
            restored.append(name)
    return restored
