"""``httk workflow job request``: publish an operator control request for one job.

Both spellings of DECISIONS D6 work::

    httk workflow job request WS JOB ACTION --operator O --reason R      (spec/02)
    httk job request ACTION --workspace WS JOB --reason R                (spec/03)

ACTION is one of continue, override_step (with ``--step``), cancel, set_priority (with ``--priority``)
and pause. Which of the two words is the action is read from the words themselves; with both being
action names the spelling decides (JOB ACTION after a WORKSPACE argument, ACTION JOB with
``--workspace``). JOB is any job selector (:func:`httk.workflow.engine.select_job`: a UUID, a job key, a
unique prefix of either, a payload or marker path).

The request is written against the job's current marker (its exact generation and record reference), so
a manager applies it only if the job has not moved since. The command refuses up front what a manager
would retire anyway — an action the job's state does not allow, or an ``override_step`` to a step outside
the runner's recorded ``runner_steps`` (``--force`` publishes it anyway, with a note) — and prints the
request id; notes go to standard error. ``--force`` on continue or override_step also accepts reviving a
child that a decided join already consumed (the manager records the hazard).

When this user has an operator identity (``httk workflow config init``) the request is signed with its
current key (DECISIONS D20) and ``--operator`` defaults to the identity's ``Name <email>``; without one
it is published unsigned, as before.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._options import DurableOpt, JsonOpt, UsageError, WorkspaceOpt, bind_many, login_name
from ._render import note, print_json

if TYPE_CHECKING:
    from httk.workflow.engine import KeySigner

ACTIONS = ("continue", "override_step", "cancel", "set_priority", "pause")

WordsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[WORKSPACE] JOB ACTION",
        show_default=False,
        help="The workspace (or --workspace), the job selector and the action, in either order.",
    ),
]
OperatorOpt = Annotated[
    str | None,
    typer.Option(
        "--operator",
        metavar="O",
        show_default=False,
        help="Who asks [default: the operator identity's 'Name <email>', else the login name].",
    ),
]
ReasonOpt = Annotated[str, typer.Option("--reason", metavar="R", help="Why, for the journal.")]
PriorityOpt = Annotated[
    int | None,
    typer.Option("--priority", metavar="N", show_default=False, help="set_priority: 0 (highest) to 999."),
]
StepOpt = Annotated[
    str | None,
    typer.Option("--step", metavar="S", show_default=False, help="override_step: the step to start."),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="continue/override_step: publish a step the runner never declared, and revive a child a "
        "decided join consumed (the hazard is recorded).",
    ),
]


def request(
    *,
    words: WordsArg = None,
    workspace_option: WorkspaceOpt = None,
    operator: OperatorOpt = None,
    reason: ReasonOpt = "",
    priority: PriorityOpt = None,
    step: StepOpt = None,
    force: ForceOpt = False,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ask the managers to continue, override_step, cancel, set_priority or pause one job."""
    root, items = bind_many(words or [], workspace_option, what="JOB and ACTION", writes=True)
    selector, action = split_job_and_action(items, action_first=workspace_option is not None)
    check_options(action, priority=priority, step=step, force=force)
    from httk.workflow.engine import attach, publish_request, select_job

    workspace = attach(root, durable=durable)
    marker = select_job(workspace, selector)
    operator, signer = signing_operator(operator)
    published = publish_request(
        workspace,
        marker.placement,
        marker.job_key,
        action,
        operator=operator,
        reason=reason,
        priority=priority,
        step=step,
        force=force,
        signer=signer,
    )
    for text in published.notes:
        note(f"note: {text}")
    document = published.document
    if as_json:
        print_json(_as_json(workspace.root, published.path, document, published.kind.value, published.notes))
        return
    signed = f", signed by {document['operator_key']}" if "operator_key" in document else ""
    typer.echo(
        f"requested {action} of {marker.job_key} ({published.kind.value} at generation "
        f"{document['expected_generation']}): request {document['request_id']}{signed}"
    )


def signing_operator(operator: str | None) -> tuple[str, "KeySigner | None"]:
    """Who a request names (``operator``, else the identity's ``Name <email>``, else the login name) and
    the key that signs it: this user's current one, when they have an operator identity."""
    from httk.workflow.engine import IdentityStore

    store = IdentityStore.for_user()
    identity = store.load()
    if identity is None:
        return operator or login_name(), None
    return operator or identity.operator, store.signer()


def split_job_and_action(items: list[str], *, action_first: bool) -> tuple[str, str]:
    """``(JOB, ACTION)`` from the two words left after the workspace, in either order."""
    if len(items) != 2:
        raise UsageError(f"expected JOB and ACTION, got {len(items)} word(s): {' '.join(items)}")
    first, second = items
    if first in ACTIONS and (second not in ACTIONS or action_first):
        return second, first
    if second in ACTIONS:
        return first, second
    raise UsageError(f"no ACTION given: one of the words must be {', '.join(ACTIONS)}")


def check_options(action: str, *, priority: int | None, step: str | None, force: bool) -> None:
    """Each action takes exactly the options it needs."""
    from httk.workflow.protocol import validate_priority, validate_step

    if (priority is not None) != (action == "set_priority"):
        raise UsageError("--priority is required by set_priority and taken by no other action")
    if (step is not None) != (action == "override_step"):
        raise UsageError("--step is required by override_step and taken by no other action")
    if force and action not in ("continue", "override_step"):
        raise UsageError("--force applies to continue and override_step only")
    if priority is not None:
        validate_priority(priority)
    if step is not None:
        validate_step(step)


def _as_json(
    root: Path, path: Path, document: dict[str, Any], kind: str, notes: tuple[str, ...]
) -> dict[str, Any]:
    return {
        "request_id": document["request_id"],
        "path": path.relative_to(root).as_posix(),
        "state": kind,
        "request": document,
        "notes": list(notes),
    }
