"""Command groups other packages add to ``httk workflow``: the entry point group ``httk.workflow.cli``.

An add-on registers one entry point per group: its name is the group's name, its value a
``typer.Typer``::

    [project.entry-points."httk.workflow.cli"]
    vasp = "httk.workflow.vasp.cli:app"

so that ``httk workflow vasp …`` runs the VASP package's commands. Nothing of an add-on is imported, and
the installed distributions are not even scanned, until ``httk workflow`` meets a word that is not one of
its own commands or lists its commands (``httk workflow --help``): a command of the engine's own pays
nothing for the add-ons installed beside it. The listing shows each add-on by its distribution's summary;
the add-on's ``typer.Typer`` is loaded only when its group is used, and its commands then report errors as
the engine's own do. An engine command of the same name wins over an add-on's.

An entry point that does not load, or whose value is not a ``typer.Typer``, makes only its own group fail:
``httk workflow NAME`` prints one ``error:`` line naming the entry point and exits 1; every other command
works as before.

How: click's group keeps its commands in a mutable mapping (``Group.commands``); the root callback replaces
the ``workflow`` group's with :class:`AddOnCommands`, which answers the engine's own names at once and asks
the entry points only for the others. Each add-on appears as a small proxy command that forwards its
arguments, untouched, to the add-on's group, so listing never imports an add-on.
"""

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import typer
import typer.main

from ._reporting import AddOnError, reported

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "httk.workflow.cli"
FORWARD_EVERYTHING = {
    "ignore_unknown_options": True,
    "allow_extra_args": True,
    "allow_interspersed_args": False,
    "help_option_names": [],
}
"""The proxy parses nothing: every word after the group's name, --help included, goes to the add-on."""


class AddOnCommands(MutableMapping[str, Any]):
    """A group's own commands, then the add-ons' groups, which are looked for only when first needed."""

    def __init__(self, own: MutableMapping[str, Any]) -> None:
        self.own = own
        self._addons: dict[str, Any] | None = None

    def addons(self) -> dict[str, Any]:
        """The add-on groups by name (proxies; nothing of an add-on is imported), found once."""
        if self._addons is None:
            found = discover()
            self._addons = {name: proxy(entries) for name, entries in found.items() if name not in self.own}
        return self._addons

    def __getitem__(self, name: str) -> Any:
        if name in self.own:
            return self.own[name]
        return self.addons()[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.own[name] = command

    def __delitem__(self, name: str) -> None:
        del self.own[name]

    def __iter__(self) -> Iterator[str]:
        yield from self.own
        yield from self.addons()

    def __len__(self) -> int:
        return len(self.own) + len(self.addons())


def install(ctx: typer.Context, group_name: str) -> None:
    """Let the group ``group_name`` below ``ctx``'s command find add-on groups (a root callback calls it)."""
    root: Any = ctx.command  # a click group: its subcommands are a public mutable mapping
    group = root.get_command(ctx, group_name)
    if group is not None and not isinstance(group.commands, AddOnCommands):
        group.commands = AddOnCommands(group.commands)


def discover() -> "dict[str, list[EntryPoint]]":
    """Every entry point of the group, by name (two distributions may claim one name)."""
    from importlib.metadata import entry_points  # deferred: reading every distribution's metadata costs

    found: dict[str, list[EntryPoint]] = {}
    for entry in entry_points(group=GROUP):
        found.setdefault(entry.name, []).append(entry)
    return found


def describe(entry: "EntryPoint") -> str:
    """``entry point vasp = httk.workflow.vasp.cli:app (httk-workflow-vasp 0.1.0, group ...)``."""
    dist = entry.dist
    source = f"{dist.name} {dist.version}, " if dist is not None else ""
    return f"entry point {entry.name} = {entry.value} ({source}group {entry.group})"


def summary(entry: "EntryPoint") -> str:
    """The help line of an add-on group that is not loaded: its distribution's summary and name."""
    dist = entry.dist
    if dist is None:
        return f"Add-on commands ({entry.value})."
    text = str(dist.metadata.json.get("summary", "")).strip()
    return f"[{dist.name}] {text}" if text else f"Add-on commands of {dist.name}."


def load(name: str, entries: "list[EntryPoint]") -> Any:
    """The add-on's group as a click command, its commands reporting like ours; AddOnError if unusable."""
    if len(entries) > 1:
        listed = "; ".join(describe(entry) for entry in entries)
        raise AddOnError(f"the add-on command group {name!r} is registered more than once: {listed}")
    (entry,) = entries
    try:
        app = entry.load()
    except Exception as exc:
        problem = f"{describe(entry)}: {type(exc).__name__}: {exc}"
        raise AddOnError(f"the add-on command group {name!r} cannot be loaded: {problem}") from exc
    if not isinstance(app, typer.Typer):
        raise AddOnError(
            f"the add-on command group {name!r} is not a typer.Typer but a {type(app).__name__}: "
            f"{describe(entry)}"
        )
    return typer.main.get_command(reported(app))


def proxy(entries: "list[EntryPoint]") -> Any:
    """A command named like the add-on group that loads it when run and hands it every word it was given."""
    name = entries[0].name
    stub = typer.Typer()

    @stub.command(
        name=name, help=summary(entries[0]), context_settings=FORWARD_EVERYTHING, add_help_option=False
    )
    def forward(ctx: typer.Context) -> None:
        group = load(name, entries)
        parent: Any = ctx.parent  # the add-on's group takes the proxy's place: 'httk workflow NAME ...'
        with group.make_context(name, list(ctx.args), parent=parent) as inner:
            group.invoke(inner)

    return typer.main.get_command(reported(stub))
