"""The v1 task directory name: ``ht.task.<set>.<id>.<step>.<restarts>.<owner>.<priority>.<status>``.

v1 splits the basename on ``.`` and takes the fields by position, so a name with one dot too many is found
by its status suffix and then silently misread. This parser accepts exactly the nine-field form: every
field nonempty and free of whitespace, RESTARTS a decimal counter, PRIORITY 1-5 and STATUS one of the
values v1 writes or once wrote. Anything else raises :class:`TaskNameError`; a name is never guessed.
For every accepted name ``str(TaskName.parse(name)) == name``.

Examples
--------
>>> name = TaskName.parse("ht.task.any.twostep.start.0.unclaimed.3.waitstart")
>>> name.status, name.priority
(<Status.WAITSTART: 'waitstart'>, 3)
>>> str(name.renamed(step="second", status=Status.WAITSTEP))
'ht.task.any.twostep.second.0.unclaimed.3.waitstep'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from ._errors import TaskNameError

PREFIX = "ht.task."
TMP_PREFIX = "ht.tmp."
FIELDS = 9
UNCLAIMED = "unclaimed"
NO_OWNER = "none"
"""The owner HT_TASK_CREATE gives a subtask, and the single-job manager after one ends."""


class Status(StrEnum):
    """Field 9 of a task name: what v1 (master) writes, plus the legacy values it still searches for."""

    WAITSTART = "waitstart"
    WAITSTEP = "waitstep"
    WAITSUBTASKS = "waitsubtasks"
    RUNNING = "running"
    FINISHED = "finished"
    BROKEN = "broken"
    TIMEOUT = "timeout"
    STOPPED = "stopped"
    SINGLEJOB = "singlejob"
    WAITING = "waiting"
    SUBRUNS = "subruns"

    @property
    def waiting(self) -> bool:
        """A status a v1 task manager picks up on its own (``running`` only once stale)."""
        return self in _WAITING

    @property
    def active(self) -> bool:
        """A status that keeps a ``waitsubtasks`` ancestor waiting (v1 TM:763-770)."""
        return self in _ACTIVE

    @property
    def terminal(self) -> bool:
        """finished, broken, timeout or stopped: never picked up again."""
        return self in _TERMINAL

    @property
    def legacy(self) -> bool:
        """singlejob (the broken --rename mode of the single-job manager), waiting and subruns."""
        return self in _LEGACY


_WAITING = frozenset({Status.WAITSTART, Status.WAITSTEP, Status.WAITSUBTASKS})
_ACTIVE = _WAITING | {Status.RUNNING}
_TERMINAL = frozenset({Status.FINISHED, Status.BROKEN, Status.TIMEOUT, Status.STOPPED})
_LEGACY = frozenset({Status.SINGLEJOB, Status.WAITING, Status.SUBRUNS})
_STATUSES = {status.value: status for status in Status}
_FIELD_NAMES = ("set", "id", "step", "restarts", "owner", "priority", "status")


@dataclass(frozen=True, slots=True)
class TaskName:
    """The seven fields of a v1 task directory name after ``ht.task.``."""

    set: str
    id: str
    step: str
    restarts: int
    owner: str
    priority: int
    status: Status

    @classmethod
    def parse(cls, basename: str) -> TaskName:
        """Parse a directory basename; :class:`TaskNameError` names the first rule it breaks."""
        fields = basename.split(".")
        if len(fields) != FIELDS or fields[0] != "ht" or fields[1] != "task":
            raise TaskNameError(
                basename,
                f"must be ht.task. and seven '.'-separated fields, not {len(fields) - 2} "
                "(a field holding a '.' shifts every later one)",
            )
        values = fields[2:]
        for field_name, value in zip(_FIELD_NAMES, values, strict=True):
            if not value:
                raise TaskNameError(basename, f"the {field_name} field is empty")
            if any(character.isspace() for character in value):
                raise TaskNameError(basename, f"the {field_name} field holds whitespace")
        set_, id_, step, restarts, owner, priority, status = values
        if not (restarts.isascii() and restarts.isdigit()):
            raise TaskNameError(basename, f"the restarts field {restarts!r} is not a decimal counter")
        if priority not in ("1", "2", "3", "4", "5"):
            raise TaskNameError(basename, f"the priority field {priority!r} is not 1-5")
        known = _STATUSES.get(status)
        if known is None:
            raise TaskNameError(basename, f"the status field {status!r} is not a v1 status")
        return cls(set_, id_, step, int(restarts), owner, int(priority), known)

    def __str__(self) -> str:
        return (
            f"{PREFIX}{self.set}.{self.id}.{self.step}.{self.restarts}."
            f"{self.owner}.{self.priority}.{self.status.value}"
        )

    def renamed(self, **changes: object) -> TaskName:
        """A copy with some fields replaced (the fields keep their types)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def stem(self) -> str:
        """``ht.task.<set>.<id>``: the part of the name no v1 manager changes after creation."""
        return f"{PREFIX}{self.set}.{self.id}"


def looks_like_task(basename: str) -> bool:
    """Whether a basename claims to be a v1 task directory (it may still fail to parse)."""
    return basename.startswith(PREFIX)
