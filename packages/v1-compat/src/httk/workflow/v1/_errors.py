"""The exceptions of the httk v1 compatibility package, each naming the path or name it is about.

They extend the project's one hierarchy (:class:`httk.workflow.protocol.WorkflowError`), so the ``httk``
command maps them like every other error::

    WorkflowError
    └── V1Error                  anything this package refuses on purpose
        ├── TaskNameError        a directory named ht.task.* that is not the nine-field v1 grammar
        ├── TreeError            a v1 tree cannot be read (no such directory, unreadable root)
        ├── ImportRefusedError   an import cannot start (workspace, placement, options)
        └── TemplateError        a v1 template directory cannot be instantiated
"""

from __future__ import annotations

from pathlib import Path

from httk.workflow.protocol import WorkflowError


class V1Error(WorkflowError):
    """Base of every error this package raises on purpose."""


class TaskNameError(V1Error, ValueError):
    """A basename that starts like a v1 task directory but does not follow its grammar."""

    def __init__(self, name: str, rule: str) -> None:
        self.name = name
        self.rule = rule
        super().__init__(f"not a v1 task name {name!r}: {rule}")


class TreeError(V1Error):
    """A v1 tree cannot be read at all."""

    def __init__(self, message: str, path: Path | str) -> None:
        self.path = str(path)
        super().__init__(f"{message}: {self.path}")


class ImportRefusedError(V1Error):
    """An import cannot start: nothing was written."""


class TemplateError(V1Error):
    """A v1 template directory cannot be instantiated: nothing was submitted."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        self.path = None if path is None else str(path)
        super().__init__(message if path is None else f"{message}: {self.path}")
