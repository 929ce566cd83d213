"""httk v1 compatibility: read legacy ``ht.task.*`` trees and run them under the httk-workflow engine.

The public names below are what the ``httk workflow v1`` commands and library callers use; everything
else lives in private modules (``_names``, ``_reader``, ...) and may change without notice. Names load
lazily, so importing this package costs only what the first name used needs.

Examples
--------
>>> from httk.workflow.v1 import read_tree  # doctest: +SKIP
>>> tree = read_tree("Runs")  # doctest: +SKIP
>>> sorted({task.name.status.value for task in tree.walk()})  # doctest: +SKIP
['finished', 'waitstart']
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._errors import ImportRefusedError, TaskNameError, TemplateError, TreeError, V1Error
    from ._import_options import ImportOptions
    from ._import_report import ImportAction, ImportEntry, ImportReport
    from ._importer import import_tree
    from ._jobdoc import JobPlan, TaskRefusedError, plan_job
    from ._names import Status, TaskName
    from ._reader import STALE_SECONDS, Ignored, Problem, Task, Tree, View, live_evidence, read_tree
    from ._runner import RUNNER_PATH, runner_root, runner_sha256
    from ._status import TreeStatus, tree_status
    from ._template import NewTask, new_task

_HOMES = {
    "NewTask": "_template",
    "TemplateError": "_errors",
    "new_task": "_template",
    "TreeStatus": "_status",
    "tree_status": "_status",
    "ImportAction": "_import_report",
    "ImportEntry": "_import_report",
    "ImportOptions": "_import_options",
    "ImportRefusedError": "_errors",
    "ImportReport": "_import_report",
    "JobPlan": "_jobdoc",
    "RUNNER_PATH": "_runner",
    "TaskRefusedError": "_jobdoc",
    "import_tree": "_importer",
    "plan_job": "_jobdoc",
    "runner_root": "_runner",
    "runner_sha256": "_runner",
    "Ignored": "_reader",
    "Problem": "_reader",
    "STALE_SECONDS": "_reader",
    "Status": "_names",
    "Task": "_reader",
    "TaskName": "_names",
    "TaskNameError": "_errors",
    "Tree": "_reader",
    "TreeError": "_errors",
    "V1Error": "_errors",
    "View": "_reader",
    "live_evidence": "_reader",
    "read_tree": "_reader",
}

__all__ = [
    "Ignored",
    "ImportAction",
    "ImportEntry",
    "ImportOptions",
    "ImportRefusedError",
    "ImportReport",
    "JobPlan",
    "NewTask",
    "Problem",
    "RUNNER_PATH",
    "STALE_SECONDS",
    "Status",
    "Task",
    "TaskName",
    "TaskNameError",
    "TaskRefusedError",
    "TemplateError",
    "Tree",
    "TreeError",
    "TreeStatus",
    "V1Error",
    "View",
    "import_tree",
    "live_evidence",
    "new_task",
    "plan_job",
    "read_tree",
    "runner_root",
    "runner_sha256",
    "tree_status",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
