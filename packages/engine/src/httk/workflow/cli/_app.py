"""The ``httk`` and ``httk-taskmanager`` executables: wiring of the command groups, and exit codes.

The canonical tree is ``httk workflow workspace|job|runner …`` (``spec/02``). ``httk workspace …`` and
``httk job …`` are the same groups at the top level (DECISIONS D6), and every command that takes a
WORKSPACE argument also accepts ``--workspace WS``. ``httk-taskmanager`` is an alias executable with
``init`` (= workspace init) and ``submit`` (= job submit).

Exit status
-----------
=====  ===========================================================================================
0      success
1      any other failure: another WorkflowError (journal, transition), or an operating-system error
       (or ``workspace fsck`` left something for an operator)
2      bad input: a usage error, an invalid name or document (InvalidNameError, InvalidDocumentError),
       a refused policy or setting (PolicyError), submission (SubmissionError), runner publication
       (RunnerStoreError), or a launcher or launch setting (LauncherError)
3      the workspace cannot be attached or changed: no or invalid format.json, an unsupported or
       withdrawn profile or extension, an existing workspace at init (WorkspaceError)
=====  ===========================================================================================

An error is one line ``error: <message>`` on standard error; ``HTTK_WORKFLOW_DEBUG=1`` lets it propagate
with its traceback instead.

Loading this module (and so ``--help``) imports typer and the command modules only: the engine, the
protocol rules, pydantic, jsonschema and rich tables are imported inside command bodies.
"""

import errno
import os
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from . import (
    _debug_cmd,
    _fsck_cmd,
    _gc_cmd,
    _inspect_cmd,
    _job_cmd,
    _launcher_cmd,
    _manager_cmd,
    _monitor_cmd,
    _request_cmd,
    _runner_cmd,
    _why_cmd,
    _workspace_cmd,
)

if TYPE_CHECKING:
    from typer._click import Context  # typer 0.29 vendors click; its Context is what groups receive

DEBUG_VARIABLE = "HTTK_WORKFLOW_DEBUG"

EPILOG = (
    "Exit status: 0 success; 1 other failure, or fsck left something to do; 2 bad input (usage, "
    "invalid name or document, refused policy or setting, submission or runner publication); 3 the "
    "workspace cannot be attached or changed. Errors are one 'error:' line on stderr; "
    f"{DEBUG_VARIABLE}=1 shows the traceback."
)


def exit_code(exc: BaseException) -> int | None:
    """The documented exit status for an error we report in one line, or None to let it propagate."""
    from httk.workflow.protocol import (
        InvalidDocumentError,
        InvalidNameError,
        LauncherError,
        PolicyError,
        RunnerStoreError,
        SubmissionError,
        WorkflowError,
        WorkspaceError,
    )

    bad_input = (
        InvalidDocumentError,
        InvalidNameError,
        PolicyError,
        SubmissionError,
        RunnerStoreError,
        LauncherError,
    )
    if isinstance(exc, bad_input):
        return 2  # PolicyError is a WorkspaceError, so this test comes first
    if isinstance(exc, WorkspaceError):
        return 3
    if isinstance(exc, WorkflowError):
        return 1
    if isinstance(exc, OSError) and exc.errno != errno.EPIPE:
        return 1
    return None


def error_line(exc: BaseException) -> str:
    """``error: <message> (<note>; <note>)`` on one line."""
    notes = getattr(exc, "__notes__", None) or []
    message = str(exc) + (f" ({'; '.join(notes)})" if notes else "")
    return "error: " + " ".join(message.splitlines())


class ReportingGroup(TyperGroup):
    """The root group: turns our errors into one stderr line and an exit status (see the module doc)."""

    def invoke(self, ctx: "Context") -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            code = exit_code(exc)
            if code is None or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
                raise
            typer.echo(error_line(exc), err=True)
            raise typer.Exit(code) from None


def _root(name: str, help_text: str) -> typer.Typer:
    return typer.Typer(
        name=name,
        cls=ReportingGroup,
        help=help_text,
        epilog=EPILOG,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


# The read commands live in one module (_inspect_cmd) and join the groups they belong to.
_workspace_cmd.app.command("status")(_inspect_cmd.status)
_workspace_cmd.app.command("managers")(_inspect_cmd.managers)
_workspace_cmd.app.command("fsck")(_fsck_cmd.fsck)
_workspace_cmd.app.command("gc")(_gc_cmd.gc)
_job_cmd.app.command("list")(_inspect_cmd.list_jobs)
_job_cmd.app.command("show")(_inspect_cmd.show)
_job_cmd.app.command("log")(_inspect_cmd.log)
_job_cmd.app.command("why")(_why_cmd.why)
_job_cmd.app.command("request")(_request_cmd.request)
_job_cmd.app.command("debug", epilog=_debug_cmd.DEBUG_EPILOG)(_debug_cmd.debug)
_job_cmd.app.command("delete", epilog=_debug_cmd.DELETE_EPILOG)(_debug_cmd.delete)

workflow_app = typer.Typer(
    name="workflow", help="Workspaces, jobs and runners of the workflow filesystem.", no_args_is_help=True
)
workflow_app.add_typer(_workspace_cmd.app)
workflow_app.add_typer(_job_cmd.app)
workflow_app.add_typer(_runner_cmd.app)
workflow_app.add_typer(_manager_cmd.app)
workflow_app.add_typer(_launcher_cmd.app)
workflow_app.command("run", help="Run task managers through the workspace's launcher (= 'manager run').")(
    _manager_cmd.run
)
workflow_app.command("precheck")(_why_cmd.precheck)
workflow_app.command("monitor")(_monitor_cmd.monitor)

app = _root("httk", "The httk command line.")
app.add_typer(workflow_app)
app.add_typer(_workspace_cmd.app, help="Alias of 'httk workflow workspace'.")
app.add_typer(_job_cmd.app, help="Alias of 'httk workflow job'.")

taskmanager_app = _root("httk-taskmanager", "The task-manager alias of 'httk workflow'.")
taskmanager_app.command("init", help="Alias of 'httk workflow workspace init'.")(_workspace_cmd.init)
taskmanager_app.command("submit", help="Alias of 'httk workflow job submit'.")(_job_cmd.submit)
taskmanager_app.command("run", help="Alias of 'httk workflow run'.")(_manager_cmd.run)
taskmanager_app.command("request", help="Alias of 'httk workflow job request'.")(_request_cmd.request)
taskmanager_app.command("status", help="Alias of 'httk workflow workspace status'.")(_inspect_cmd.status)
taskmanager_app.command("precheck", help="Alias of 'httk workflow precheck'.")(_why_cmd.precheck)


def main() -> None:
    """Entry point of ``httk``."""
    app(prog_name="httk")


def taskmanager_main() -> None:
    """Entry point of ``httk-taskmanager``."""
    taskmanager_app(prog_name="httk-taskmanager")
