"""Options and arguments shared by several commands, each defined once as an ``Annotated`` alias.

Two spellings of every workspace command work (DECISIONS D6): ``spec/02`` puts the workspace first
(``policy set WS KEY VALUE``), ``spec/03`` names it with an option (``policy set --workspace WS --key K
--value V``). A command therefore declares its words as optional positionals plus an option for each,
and :func:`bind` fills every slot its option left open with the next positional word, in order. A word
left over is accepted only when it repeats ``--workspace``.

This module imports only typer and the standard library: it is loaded for ``--help``.
"""

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

WorkspaceArg = Annotated[
    str | None,
    typer.Argument(
        metavar="WORKSPACE", show_default=False, help="The workspace directory (or give it with --workspace)."
    ),
]
WorkspaceOpt = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        metavar="WS",
        show_default=False,
        help="The workspace directory, instead of the WORKSPACE argument.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
DurableOpt = Annotated[
    bool | None,
    typer.Option(
        "--durable/--no-durable",
        show_default=False,
        help="Synchronize writes to storage, or not, for this command only "
        "[default: the workspace's own mode].",
    ),
]

SearchPathOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--runner-search-path", metavar="DIR", help="A root for installed runners (repeatable, ordered)."
    ),
]
ModuleOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--runner-module",
        metavar="MODULE",
        help="Allow pkg: runners of MODULE and its subpackages (repeatable) [default: httk.workflow].",
    ),
]

ValueArg = Annotated[
    str | None,
    typer.Argument(metavar="VALUE", show_default=False, help="JSON; a word that is not JSON is a string."),
]
KeyOpt = Annotated[
    str | None, typer.Option("--key", metavar="KEY", show_default=False, help="KEY or NAME, as an option.")
]
ValueOpt = Annotated[
    str | None, typer.Option("--value", metavar="VALUE", show_default=False, help="VALUE, as an option.")
]


class UsageError(typer.BadParameter):
    """A command line that does not say what to do: click prints the usage and exits with status 2."""

    def format_message(self) -> str:
        return self.message


def bind(words: Sequence[str | None], slots: Sequence[tuple[str, str | None]]) -> list[str]:
    """Assign positional ``words`` to the ``slots`` their options left open; return every slot's value.

    ``slots`` is ``(METAVAR, option value)`` in positional order, the workspace first. Missing slots and
    surplus words are usage errors; a surplus first word must name the same directory as --workspace.
    """
    given = [word for word in words if word is not None]
    open_slots = [index for index, (_name, value) in enumerate(slots) if value is None]
    surplus = len(given) - len(open_slots)
    if surplus > 0:
        option = slots[0][1]
        if surplus > 1 or option is None:
            raise UsageError(f"unexpected extra argument {given[-surplus]!r}")
        _require_same_workspace(given[0], option)
        given = given[1:]
    if len(given) < len(open_slots):
        raise UsageError(_missing_message(slots, open_slots[len(given)]))
    values = [value for _name, value in slots]
    for index, word in zip(open_slots, given, strict=True):
        values[index] = word
    return [value for value in values if value is not None]


def bind_many(words: Sequence[str], option: str | None, *, what: str) -> tuple[str, list[str]]:
    """Split ``[WORKSPACE] ITEM...`` into the workspace and at least one item.

    With --workspace every word is an item, except a first word that is itself a workspace directory:
    it must then be the same one.
    """
    items = list(words)
    if option is None:
        if not items:
            raise UsageError(_NO_WORKSPACE)
        workspace = items.pop(0)
    else:
        workspace = option
        if items and _is_workspace(items[0]):
            _require_same_workspace(items.pop(0), option)
    if not items:
        raise UsageError(f"missing {what}")
    return workspace, items


_NO_WORKSPACE = "no workspace given: pass WORKSPACE or --workspace WS"


def _missing_message(slots: Sequence[tuple[str, str | None]], index: int) -> str:
    return _NO_WORKSPACE if index == 0 else f"missing {slots[index][0]}"


def _is_workspace(word: str) -> bool:
    return os.path.isdir(os.path.join(word, ".httk-workflow"))


def _require_same_workspace(argument: str, option: str) -> None:
    if _same_directory(Path(argument), Path(option)):
        return
    raise UsageError(f"the WORKSPACE argument {argument!r} and --workspace {option!r} differ")


def _same_directory(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return a.resolve() == b.resolve()


def json_or_text(text: str) -> object:
    """A VALUE word: JSON when it parses as JSON, otherwise the word itself as a string (``keep``)."""
    import json

    def refuse(constant: str) -> object:
        raise ValueError(constant)

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError):  # nested past what the parser can hold is not JSON here either
        return text


def login_name() -> str:
    """The operator a request or a delete names when ``--operator`` is not given: this account's login."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise UsageError("cannot tell who you are: pass --operator") from None
