"""``httk workflow monitor [WORKSPACE...]``: a live terminal view of workspaces, their jobs and managers.

The screen (``cli/_monitor_app.py``, textual) shows the counts per state kind and placement, the
managers with their heartbeats, a page of jobs under a filter, and one job's ``show``, ``log`` and
``why``; it publishes the requests of ``job request`` (continue, cancel, pause, set_priority) after a
confirmation, through the same engine function. What it reads comes from ``engine/ops/_monitor.py``:
bounded, read-only, and saying when a count is sampled rather than exact.

Without a terminal (standard input and standard output must both be one) the command says so on one
``error:`` line and exits 2: scripts read ``workspace status --json`` and ``job list --json`` instead.

This module imports typer and the shared option helpers only; the engine and textual (which costs a
noticeable fraction of a second to import) are imported inside the command body.
"""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ._options import DurableOpt, WorkspaceOpt, resolve

if TYPE_CHECKING:
    from httk.workflow.engine import Workspace

WorkspacesArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[WORKSPACE]...",
        show_default=False,
        help="The workspaces to watch (or --workspace); 'w' switches between them.",
    ),
]
IntervalOpt = Annotated[
    float, typer.Option("--interval", metavar="SECONDS", min=0.1, help="Seconds between two refreshes.")
]
BudgetOpt = Annotated[
    int,
    typer.Option(
        "--budget",
        metavar="ENTRIES",
        min=64,
        help="Directory entries one refresh may visit to count jobs; a kind larger than that is counted "
        "over several refreshes and shown as sampled (~).",
    ),
]
DepthOpt = Annotated[
    int, typer.Option("--depth", metavar="DEPTH", min=1, help="Placement components per count column.")
]
PageOpt = Annotated[int, typer.Option("--page-size", metavar="N", min=1, help="Jobs on one page.")]
OperatorOpt = Annotated[
    str | None,
    typer.Option(
        "--operator",
        metavar="O",
        show_default=False,
        help="Who the requests name [default: your operator identity, else the login name].",
    ),
]

NO_TERMINAL = (
    "httk workflow monitor needs a terminal (standard input and output are not both one); "
    "scripts read 'workspace status --json' and 'job list --json'"
)


def monitor(
    *,
    workspaces: WorkspacesArg = None,
    workspace_option: WorkspaceOpt = None,
    interval: IntervalOpt = 2.0,
    budget: BudgetOpt = 16384,
    depth: DepthOpt = 1,
    page_size: PageOpt = 100,
    operator: OperatorOpt = None,
    durable: DurableOpt = None,
) -> None:
    """Watch workspaces live: counts, managers, jobs; continue, cancel, pause or reprioritize a job."""
    words = [*(workspaces or []), *([workspace_option] if workspace_option is not None else [])]
    roots = [resolve(word, writes=False, rule="argument").path for word in words] or [
        resolve(None, writes=False).path
    ]
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        typer.echo(f"error: {NO_TERMINAL}", err=True)
        raise typer.Exit(2)
    from httk.workflow.engine import attach

    from ._monitor_app import run_monitor
    from ._monitor_screens import MonitorSettings
    from ._request_cmd import signing_operator

    attached: list[Workspace] = []
    for root in roots:
        workspace = attach(root, writable=False)
        if all(workspace.root != other.root for other in attached):
            attached.append(workspace)
    operator, signer = signing_operator(operator)
    settings = MonitorSettings(
        interval=interval,
        budget=budget,
        depth=depth,
        page_size=page_size,
        operator=operator,
        signer=signer,
        durable=durable,
    )
    run_monitor(attached, settings)
