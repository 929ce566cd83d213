"""Rendering command results: JSON for scripts, aligned tables or plain lines for people."""

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from httk.workflow.engine import SubmitResult, Workspace


def print_json(value: object) -> None:
    """Print ``value`` as indented JSON on standard output."""
    import json

    typer.echo(json.dumps(value, indent=2))


def json_text(value: object) -> str:
    """``value`` as one line of JSON with sorted keys, as the specification prints it (``{"a": 1}``)."""
    import json

    return json.dumps(value, sort_keys=True)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Print a borderless table with aligned columns, a header rule, and no trailing blanks.

    Written here rather than with rich: importing rich costs about 70 ms, which a read command on a
    parallel filesystem cannot afford (start-up is part of speed).
    """
    body = [[str(cell) for cell in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in body:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False)).rstrip()

    typer.echo(line(headers))
    typer.echo(line(["-" * width for width in widths]))
    for row in body:
        typer.echo(line(row))


def note(message: str) -> None:
    """One line of human-facing status on standard error (never mixed into parsable output)."""
    typer.echo(message, err=True)


def submission_json(workspace: "Workspace", result: "SubmitResult") -> dict[str, Any]:
    """What ``job submit --json`` and ``job new --json`` print of one submitted job."""
    return {
        "job_id": result.job_id,
        "job_key": result.job_key,
        "placement": result.placement,
        "status": str(result.status),
        "state": str(result.marker.kind),
        "marker": result.marker.path(workspace).relative_to(workspace.root).as_posix(),
    }
