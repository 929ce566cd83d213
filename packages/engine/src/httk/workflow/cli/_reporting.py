"""How a command reports our errors: one ``error:`` line on standard error and a documented exit status.

Every command of the ``httk`` tree, an add-on's included, runs inside :func:`reported`'s wrapper, which
turns an error of the table below into that line and status and lets anything else propagate (a bug
keeps its traceback). A command whose workspace is on a remote runs there instead (``_remote_run``), and
its exit status is the remote command's. ``HTTK_WORKFLOW_DEBUG=1`` lets every error propagate with its
traceback.

=====  ===========================================================================================
0      success
1      any other failure: another WorkflowError (journal, transition), an operating-system error, an
       add-on command group that cannot be loaded (or ``workspace fsck`` left something for an operator)
2      bad input: a usage error, an invalid name or document (InvalidNameError, InvalidDocumentError),
       a refused policy or setting (PolicyError), submission (SubmissionError), runner publication
       (RunnerStoreError), a launcher or launch setting (LauncherError), a transfer (TransferError), or
       a remote or its setting (RemoteError)
3      the workspace cannot be attached or changed: no or invalid format.json, an unsupported or
       withdrawn profile or extension, an existing workspace at init (WorkspaceError)
=====  ===========================================================================================

The wrapper is applied to the command callbacks (typer's public ``registered_commands``), not by a
custom click group: that keeps the command line on typer's public interface alone.
"""

import errno
import functools
import os
import weakref
from collections.abc import Callable
from typing import Any

import typer

from ._remote_run import RemoteWorkspaceError, run_remotely

DEBUG_VARIABLE = "HTTK_WORKFLOW_DEBUG"


class AddOnError(Exception):
    """An add-on's entry point cannot be used: it does not load, or is not what its group promises."""


def exit_code(exc: BaseException) -> int | None:
    """The documented exit status for an error we report in one line, or None to let it propagate."""
    from httk.workflow.protocol import (
        InvalidDocumentError,
        InvalidNameError,
        LauncherError,
        PolicyError,
        RemoteError,
        RunnerStoreError,
        SubmissionError,
        TransferError,
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
        TransferError,
        RemoteError,
    )
    if isinstance(exc, bad_input):
        return 2  # PolicyError is a WorkspaceError, so this test comes first
    if isinstance(exc, WorkspaceError):
        return 3
    if isinstance(exc, WorkflowError | AddOnError):
        return 1
    if isinstance(exc, OSError) and exc.errno != errno.EPIPE:
        return 1
    return None


def error_line(exc: BaseException) -> str:
    """``error: <message> (<note>; <note>)`` on one line."""
    notes = getattr(exc, "__notes__", None) or []
    message = str(exc) + (f" ({'; '.join(notes)})" if notes else "")
    return "error: " + " ".join(message.splitlines())


_REPORTED: "weakref.WeakSet[typer.Typer]" = weakref.WeakSet()


def reported(app: typer.Typer) -> typer.Typer:
    """Wrap every command of ``app`` and of its groups, once, so that it reports as the module says."""
    if app in _REPORTED:
        return app
    _REPORTED.add(app)
    for command in app.registered_commands:
        if command.callback is not None:
            command.callback = reporting(command.callback)
    for group in app.registered_groups:
        if isinstance(group.typer_instance, typer.Typer):
            reported(group.typer_instance)
    return app


def reporting(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` reporting our errors in one line (typer reads its signature through ``__wrapped__``)."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return function(*args, **kwargs)
            except RemoteWorkspaceError as remote:  # the workspace is on a remote: the command runs there
                status = run_remotely(remote, function)
        except Exception as exc:
            code = exit_code(exc)
            if code is None or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
                raise
            typer.echo(error_line(exc), err=True)
            raise typer.Exit(code) from None
        raise typer.Exit(status)

    return run
