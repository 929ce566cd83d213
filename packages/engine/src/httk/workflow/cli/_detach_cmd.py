"""``httk workflow workspace detach|attach``: take a workspace out of its managers' service, and back.

``detach`` publishes the detach request (spec/01, "Dynamic detachment") and waits until the workspace
is quiescent: every manager with a live heartbeat there has acknowledged it and no job is claimed,
running, committing or cancelling. Then the workspace may be moved out of its watch root. A rerun waits
on the same request. ``attach`` withdraws the request; managers watching the workspace's watch root
serve it again at their next rescan (an explicit ``manager run WORKSPACE`` refuses a detached one).
"""

import time
from typing import Annotated

import typer

from ._options import JsonOpt, WorkspaceArg, WorkspaceOpt, bind
from ._render import print_json

TimeoutOpt = Annotated[
    float,
    typer.Option("--timeout", metavar="SECONDS", min=0.0, help="How long to wait for quiescence."),
]
NoWaitOpt = Annotated[bool, typer.Option("--no-wait", help="Publish the request and return without waiting.")]
POLL_SECONDS = 0.2


def detach(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    timeout: TimeoutOpt = 600.0,
    no_wait: NoWaitOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Ask every live manager to stop serving the workspace; report when it is safe to move out.

    Exits 1 when it is not quiescent within --timeout (the request stays; run it again to keep waiting).
    """
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach, detach_quiescence, request_detach

    attached = attach(root)
    detach_id = request_detach(attached)
    deadline = time.monotonic() + timeout
    while True:
        state = detach_quiescence(attached, detach_id)
        if state.quiescent or no_wait or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    if as_json:
        print_json(
            {
                "workspace": str(attached.root),
                "workspace_id": attached.workspace_id,
                "detach_id": detach_id,
                "quiescent": state.quiescent,
                "acknowledged": list(state.acknowledged),
                "waiting_for": list(state.waiting_for),
                "held": state.held,
            }
        )
    elif state.quiescent:
        typer.echo(
            f"workspace {attached.root} is quiescent ({len(state.acknowledged)} manager(s) acknowledged "
            f"detach {detach_id}): safe to move out; `httk workflow workspace attach` serves it again"
        )
    else:
        typer.echo(f"workspace {attached.root}: detach {detach_id} requested; {state.line()}")
    if not state.quiescent and not no_wait:
        raise typer.Exit(1)


def reattach(*, workspace: WorkspaceArg = None, workspace_option: WorkspaceOpt = None) -> None:
    """Withdraw a detach request: managers watching the workspace serve it again at their next rescan."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    from httk.workflow.engine import attach, withdraw_detach

    attached = attach(root)
    if withdraw_detach(attached):
        typer.echo(f"workspace {attached.root}: detach withdrawn; watching managers serve it again")
    else:
        typer.echo(f"workspace {attached.root} was not detached")
