"""The ``httk`` and ``httk-taskmanager`` executables: the tree of command groups.

The canonical tree is ``httk workflow workspace|job|runner|manager|launcher|workflows|transfer|remote|
config …`` (``spec/02``), with ``httk workflow run``, ``httk workflow precheck`` and ``httk workflow
collect``. ``httk workspace …`` and ``httk job …`` are the same groups at the top level (DECISIONS D6),
and every command that takes a WORKSPACE argument also accepts ``--workspace WS``. ``httk-taskmanager``
is an alias executable with ``init`` (= workspace init), ``submit`` (= job submit), ``run``,
``request``, ``status`` and ``precheck``.

Each group is a module with its own ``typer.Typer`` (``_workspace_cmd``, ``_job_cmd``, ``_runner_cmd``,
``_manager_cmd``, ``_launcher_cmd``, ``_workflows_cmd``, ``_transfer_cmd``, ``_remote_cmd``,
``_config_cmd``); this module only assembles them. Other packages add groups to ``httk workflow``
through the entry point group ``httk.workflow.cli``, loaded only when used (``_addons``). Every command
reports our errors as one ``error:`` line and a documented exit status (``_reporting``, whose table the
epilog repeats).

Loading this module (and so ``--help``) imports typer and the command modules only: the engine, the
protocol rules, pydantic, jsonschema and rich tables are imported inside command bodies, and only
through the engine's public face, :mod:`httk.workflow.engine`.
"""

import sys
from typing import Annotated

import typer

from . import (
    _addons,
    _collect_cmd,
    _config_cmd,
    _job_cmd,
    _launcher_cmd,
    _manager_cmd,
    _monitor_cmd,
    _remote_cmd,
    _request_cmd,
    _runner_cmd,
    _transfer_cmd,
    _why_cmd,
    _workflows_cmd,
    _workspace_cmd,
)
from ._inspect_cmd import status
from ._remote_run import record_command_line
from ._reporting import DEBUG_VARIABLE, reported

EPILOG = (
    "Exit status: 0 success; 1 other failure, or fsck left something to do; 2 bad input (usage, "
    "invalid name or document, refused policy or setting, submission or runner publication); 3 the "
    "workspace cannot be attached or changed. Errors are one 'error:' line on stderr; "
    f"{DEBUG_VARIABLE}=1 shows the traceback."
)


def _root(name: str, help_text: str) -> typer.Typer:
    return typer.Typer(
        name=name,
        help=help_text,
        epilog=EPILOG,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


workflow_app = typer.Typer(
    name="workflow", help="Workspaces, jobs and runners of the workflow filesystem.", no_args_is_help=True
)
workflow_app.add_typer(_workspace_cmd.app)
workflow_app.add_typer(_job_cmd.app)
workflow_app.add_typer(_runner_cmd.app)
workflow_app.add_typer(_manager_cmd.app)
workflow_app.add_typer(_launcher_cmd.app)
workflow_app.add_typer(_workflows_cmd.app)
workflow_app.add_typer(_transfer_cmd.app)
workflow_app.add_typer(_remote_cmd.app)
workflow_app.add_typer(_config_cmd.app)
workflow_app.command("run", help="Run task managers through the workspace's launcher (= 'manager run').")(
    _manager_cmd.run
)
workflow_app.command("precheck")(_why_cmd.precheck)
workflow_app.command("collect")(_collect_cmd.collect)
workflow_app.command("monitor")(_monitor_cmd.monitor)

app = _root("httk", "The httk command line.")


def _print_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import version

        typer.echo(f"httk-workflow {version('httk-workflow')}")
        raise typer.Exit()


@app.callback()
def _root_callback(
    ctx: typer.Context,
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    _addons.install(ctx, "workflow")  # ``httk workflow NAME`` also finds the add-ons' groups


app.add_typer(workflow_app)
app.add_typer(_workspace_cmd.app, help="Alias of 'httk workflow workspace'.")
app.add_typer(_job_cmd.app, help="Alias of 'httk workflow job'.")
reported(app)

taskmanager_app = _root("httk-taskmanager", "The task-manager alias of 'httk workflow'.")
taskmanager_app.command("init", help="Alias of 'httk workflow workspace init'.")(_workspace_cmd.init)
taskmanager_app.command("submit", help="Alias of 'httk workflow job submit'.")(_job_cmd.submit)
taskmanager_app.command("run", help="Alias of 'httk workflow run'.")(_manager_cmd.run)
taskmanager_app.command("request", help="Alias of 'httk workflow job request'.")(_request_cmd.request)
taskmanager_app.command("status", help="Alias of 'httk workflow workspace status'.")(status)
taskmanager_app.command("precheck", help="Alias of 'httk workflow precheck'.")(_why_cmd.precheck)
reported(taskmanager_app)


_TASKMANAGER_TREE = {
    "init": ["workspace", "init"],
    "submit": ["job", "submit"],
    "run": ["run"],
    "request": ["job", "request"],
    "status": ["workspace", "status"],
    "precheck": ["precheck"],
}
"""What each ``httk-taskmanager`` command is in the ``httk workflow`` tree a remote runs."""


def main() -> None:
    """Entry point of ``httk``."""
    record_command_line(sys.argv[1:])
    app(prog_name="httk")


def taskmanager_main() -> None:
    """Entry point of ``httk-taskmanager``."""
    words = sys.argv[1:]
    if words and words[0] in _TASKMANAGER_TREE:
        record_command_line(["workflow", *_TASKMANAGER_TREE[words[0]], *words[1:]])
    taskmanager_app(prog_name="httk-taskmanager")
