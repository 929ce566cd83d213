"""A command whose workspace is ``REMOTE:WORKSPACE`` runs on that remote, as the remote's own ``httk``.

``spec/03`` "Running on a remote": a remote is only transport. When the word a command resolves as its
workspace is ``NAME:REST`` and ``NAME`` is a configured remote (and the word is not an existing local
path), the resolver raises :class:`RemoteWorkspaceError` before anything is read or written here;
:func:`._reporting.reporting` catches it and :func:`run_remotely` runs the same command line on the
remote with that word replaced by ``REST`` (a path there, or a name in the remote's registry), its
standard output, standard error and exit status passed through. ``run`` and ``manager run`` add
``--detach`` (:func:`remote_arguments`): the remote's own launcher starts the managers, and the ssh
connection does not stay open for their lifetime.

The command line is the one ``httk`` (or ``httk-taskmanager``, translated to the ``httk workflow`` tree)
was started with, recorded by :func:`record_command_line`; a command called in-process without one
cannot be forwarded and says so.

This module imports the standard library only; the engine is imported when a command is forwarded.
"""

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

REMOTE_ARGUMENTS = "__httk_remote_arguments__"
_COMMAND_LINE: list[list[str]] = []  # the one command line this process was started with, once recorded

F = TypeVar("F", bound=Callable[..., Any])


class RemoteWorkspaceError(Exception):
    """The workspace word ``word`` is ``remote:rest``: the command runs on ``remote``."""

    def __init__(self, word: str, remote: str, rest: str) -> None:
        super().__init__(f"{word!r} is a workspace on remote {remote!r}")
        self.word, self.remote, self.rest = word, remote, rest


def remote_word(word: str | None) -> None:
    """Raise :class:`RemoteWorkspaceError` when ``word`` names a workspace on a configured remote."""
    if word is None or ":" not in word or os.path.lexists(word):
        return
    name, _colon, rest = word.partition(":")
    if "/" in name or not name:
        return
    from httk.workflow.engine import lookup_remote

    if lookup_remote(name) is not None:
        raise RemoteWorkspaceError(word, name, rest)


def remote_arguments(*arguments: str) -> Callable[[F], F]:
    """Mark a command to add ``arguments`` (when absent) to its command line when it runs remotely."""

    def mark(function: F) -> F:
        setattr(function, REMOTE_ARGUMENTS, arguments)
        return function

    return mark


def record_command_line(arguments: Sequence[str]) -> None:
    _COMMAND_LINE[:] = [list(arguments)]


def run_remotely(request: RemoteWorkspaceError, function: Callable[..., Any]) -> int:
    """Run the recorded command line on ``request.remote`` with the workspace word replaced; its status."""
    from httk.workflow.engine import find_remote, passthrough
    from httk.workflow.protocol import RemoteError

    if not _COMMAND_LINE:
        raise RemoteError(f"{request}; it can only be reached by the httk executable")
    if not request.rest:
        raise RemoteError(
            f"{request.word!r} names no workspace: write {request.remote}:PATH or {request.remote}:NAME"
        )
    arguments = [_replaced(word, request) for word in _COMMAND_LINE[0]]
    arguments += [extra for extra in getattr(function, REMOTE_ARGUMENTS, ()) if extra not in arguments]
    return passthrough(find_remote(request.remote), arguments)


def _replaced(word: str, request: RemoteWorkspaceError) -> str:
    if word == request.word:
        return request.rest
    option, equals, value = word.partition("=")
    return (
        f"{option}={request.rest}" if equals and option.startswith("--") and value == request.word else word
    )
