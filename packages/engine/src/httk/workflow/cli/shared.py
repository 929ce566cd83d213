"""What every command shares, an add-on's included: the WORKSPACE argument and its one resolver.

A command declares ``workspace: WorkspaceArg = None`` (and ``workspace_option: WorkspaceOpt = None``) and
its other words as optional positionals, then calls :func:`bind` (fixed words) or :func:`bind_many`
(``[WORKSPACE] ITEM...``) with ``writes=`` saying whether it changes the workspace. The workspace comes
back as the path to attach: the word given (a registered name or a directory holding
``.httk-workflow/``), or the closest enclosing workspace, the project's recorded default, the registry
default, or the per-user default workspace (created by a command that writes). :func:`resolve` resolves
one word, or none, and says which rule chose (``Resolved.located``).

A long command draws its progress bar with :func:`progress_bar` when :func:`wanted` (a terminal, no
``--json``); rich is imported only when a bar is drawn.

This module imports only typer and the standard library: it is loaded for ``--help``.
"""

from ._options import Resolved, UsageError, WorkspaceArg, WorkspaceOpt, bind, bind_many, resolve
from ._progress import progress_bar, wanted

__all__ = [
    "Resolved",
    "UsageError",
    "WorkspaceArg",
    "WorkspaceOpt",
    "bind",
    "bind_many",
    "progress_bar",
    "resolve",
    "wanted",
]
