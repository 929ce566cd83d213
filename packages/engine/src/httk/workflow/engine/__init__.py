"""The httk-workflow engine: workspaces, submission, the runner store, journals and transitions.

The public names below are what the command line and library callers use; everything else lives in
private modules of its layers (``core._workspace``, ``publish._submit``, ...) and may change without notice.

Names load lazily, so importing this package costs only what the first name used needs.

Examples
--------
>>> from httk.workflow.engine import Submitter, attach, init  # doctest: +SKIP
>>> workspace = init("runs/demo", name="demo")  # doctest: +SKIP
>>> Submitter(workspace).submit_payload(payload, "project-a/00")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from httk.workflow.engine.core._workspace import Workspace, attach, init
    from httk.workflow.engine.ops._monitor import (
        Certainty,
        JobDetail,
        JobQuery,
        JobsPage,
        KindCount,
        Monitor,
        MonitorSnapshot,
        job_detail,
    )
    from httk.workflow.engine.publish._runners import PublishedRunner, publish_runner
    from httk.workflow.engine.publish._submit import SubmitResult, SubmitStatus, Submitter

# Loaded on first use: a read command needs the workspace module, not the submission machinery.
_HOMES = {
    "Certainty": "ops._monitor",
    "JobDetail": "ops._monitor",
    "JobQuery": "ops._monitor",
    "JobsPage": "ops._monitor",
    "KindCount": "ops._monitor",
    "Monitor": "ops._monitor",
    "MonitorSnapshot": "ops._monitor",
    "PublishedRunner": "publish._runners",
    "publish_runner": "publish._runners",
    "SubmitResult": "publish._submit",
    "SubmitStatus": "publish._submit",
    "Submitter": "publish._submit",
    "Workspace": "core._workspace",
    "attach": "core._workspace",
    "init": "core._workspace",
    "job_detail": "ops._monitor",
}

__all__ = [
    "Certainty",
    "JobDetail",
    "JobQuery",
    "JobsPage",
    "KindCount",
    "Monitor",
    "MonitorSnapshot",
    "PublishedRunner",
    "SubmitResult",
    "SubmitStatus",
    "Submitter",
    "Workspace",
    "attach",
    "init",
    "job_detail",
    "publish_runner",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
