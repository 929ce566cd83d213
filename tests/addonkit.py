"""A tiny add-on distribution, installed the way importlib.metadata finds one: a ``*.dist-info`` directory.

:func:`install_addon` writes ``<site>/<name>-0.1.dist-info/{METADATA,entry_points.txt}`` and the package
the entry points name; a process started with :func:`environment` (``PYTHONPATH=<site>``) sees the
add-on as installed, exactly as pip would leave it, without touching the test's own interpreter.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping
from pathlib import Path

ADDON_MODULE = "fake_httk_addon"
IMPORT_MARK = "imported-by"
"""The add-on's module appends the importing process's pid to this file: it proves when it was imported."""

CLI_SOURCE = '''
import os
from pathlib import Path

import typer

Path(os.environ["FAKE_ADDON_MARKS"], "{mark}").open("a").write(f"{{os.getpid()}}\\n")

app = typer.Typer(name="demo", help="Demo group.", no_args_is_help=True, add_completion=False)


@app.command()
def hello(name: str = "world") -> None:
    """Say hello."""
    typer.echo(f"hello {{name}}")


@app.command()
def refuse() -> None:
    """Raise an error of the engine's table: it must be one line and exit 2."""
    from httk.workflow.protocol import SubmissionError

    raise SubmissionError("the demo refuses")


def not_a_group() -> None:
    """An entry point value that is not a typer.Typer."""
'''

LIBRARY_SOURCE = """
from pathlib import Path


def library() -> Path:
    return Path(__file__).with_name("demo.sh")


def broken_library() -> Path:
    raise RuntimeError("the demo library is broken")


def missing_library() -> str:
    return "/nonexistent/demo.sh"
"""


def install_addon(
    site: Path, entry_points: Mapping[str, Mapping[str, str]], *, name: str = "fakeaddon"
) -> Path:
    """Install the add-on below ``site`` with ``entry_points`` (group -> name -> value); return ``site``."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\nSummary: Demo commands for tests.\n"
    )
    sections = [
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in names.items())
        for group, names in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(sections))
    package = site / ADDON_MODULE
    if not package.exists():
        package.mkdir()
        (package / "__init__.py").write_text(textwrap.dedent(LIBRARY_SOURCE))
        (package / "cli.py").write_text(textwrap.dedent(CLI_SOURCE.format(mark=IMPORT_MARK)))
        (package / "demo.sh").write_text("demo_greeting() { printf 'hello from demo\\n'; }\n")
    return site


def environment(site: Path, marks: Path) -> dict[str, str]:
    """The environment of a process that sees the add-ons below ``site`` (imports recorded in ``marks``)."""
    marks.mkdir(exist_ok=True)
    env = {name: value for name, value in os.environ.items() if name != "HTTK_WORKFLOW_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    env["FAKE_ADDON_MARKS"] = str(marks)
    return env


def imports(marks: Path) -> int:
    """How many processes imported the add-on's command module."""
    path = marks / IMPORT_MARK
    return len(path.read_text().splitlines()) if path.exists() else 0
