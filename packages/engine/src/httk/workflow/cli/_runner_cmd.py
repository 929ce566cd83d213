"""``httk workflow runner``: publish a shared runner into the workspace runner store.

``runner publish WS --name N PATH`` stores a file, or a directory entered at its top-level ``run``, as
``.httk-workflow/runners/N`` and prints the ``runner`` member a job.json embeds to use it::

    {"path": "relax.py", "sha256": "...", "source": "workspace"}

Publication is content addressed: identical content again changes nothing; different content under a
stored name needs ``--replace``, because jobs already pin the stored digest (``spec/03`` "Share one
runner between many jobs"). Whether the store changed goes to standard error, so standard output is
exactly the JSON to embed.
"""

from typing import Annotated

import typer

from ._options import DurableOpt, JsonOpt, WorkspaceArg, WorkspaceOpt, bind
from ._render import json_text, note, print_json

app = typer.Typer(name="runner", help="Publish shared runners into a workspace.", no_args_is_help=True)

RunnerNameOpt = Annotated[
    str,
    typer.Option(
        "--name",
        metavar="NAME",
        show_default=False,
        help="The name jobs use as runner.path (source workspace).",
    ),
]
SourceArg = Annotated[
    str | None,
    typer.Argument(
        metavar="PATH", show_default=False, help="A runner file, or a directory with a 'run' file."
    ),
]
ReplaceOpt = Annotated[
    bool, typer.Option("--replace", help="Replace a stored runner of this name whose content differs.")
]


@app.command("publish")
def publish(
    *,
    name: RunnerNameOpt,
    workspace: WorkspaceArg = None,
    path: SourceArg = None,
    workspace_option: WorkspaceOpt = None,
    replace: ReplaceOpt = False,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Publish a runner file or tree and print the job.json runner reference that pins it."""
    root, source = bind([workspace, path], [("WORKSPACE", workspace_option), ("PATH", None)], writes=True)
    from pathlib import Path

    from httk.workflow.engine import attach, publish_runner

    runner = publish_runner(attach(root, durable=durable), name, Path(source), replace=replace)
    if as_json:
        print_json(
            {
                "name": runner.name,
                "kind": runner.kind,
                "sha256": runner.sha256,
                "changed": runner.changed,
                "runner": runner.reference(),
            }
        )
        return
    typer.echo(json_text(runner.reference()))
    what = "published" if runner.changed else "unchanged:"
    note(f"{what} runner {runner.name!r} ({runner.kind}, sha256 {runner.sha256})")
