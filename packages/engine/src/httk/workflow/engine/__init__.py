"""The httk-workflow engine: workspaces, submission, the runner store, journals and transitions.

The public names below are what the command line and library callers use; everything else lives in
private modules (``_workspace``, ``_submit``, ``_runner_store``, ...) and may change without notice.

Importing this package loads the engine and the protocol rules it applies, so the command line imports
it inside command bodies only, never for ``--help``.

Examples
--------
>>> from httk.workflow.engine import Submitter, attach, init  # doctest: +SKIP
>>> workspace = init("runs/demo", name="demo")  # doctest: +SKIP
>>> Submitter(workspace).submit_payload(payload, "project-a/00")  # doctest: +SKIP
"""

from ._runner_store import PublishedRunner, publish_runner
from ._submit import SubmitResult, SubmitStatus, Submitter
from ._workspace import Workspace, attach, init

__all__ = [
    "PublishedRunner",
    "SubmitResult",
    "SubmitStatus",
    "Submitter",
    "Workspace",
    "attach",
    "init",
    "publish_runner",
]
