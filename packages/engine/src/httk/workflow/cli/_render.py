"""Rendering command results: JSON for scripts, small rich tables or plain lines for people.

rich is imported inside the functions that draw, so loading this module costs nothing.
"""

from collections.abc import Iterable, Sequence

import typer


def print_json(value: object) -> None:
    """Print ``value`` as indented JSON on standard output."""
    import json

    typer.echo(json.dumps(value, indent=2))


def json_text(value: object) -> str:
    """``value`` as one line of JSON with sorted keys, as the specification prints it (``{"a": 1}``)."""
    import json

    return json.dumps(value, sort_keys=True)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Print a borderless table on standard output, as wide as the terminal, without trailing blanks."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(*headers, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console = Console(highlight=False)
    with console.capture() as captured:
        console.print(table)
    for line in captured.get().splitlines():
        typer.echo(line.rstrip())


def note(message: str) -> None:
    """One line of human-facing status on standard error (never mixed into parsable output)."""
    typer.echo(message, err=True)
