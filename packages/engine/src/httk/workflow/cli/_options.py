"""Options and arguments shared by several commands, each defined once as an ``Annotated`` alias.

Two spellings of every workspace command work (DECISIONS D6): ``spec/02`` puts the workspace first
(``policy set WS KEY VALUE``), ``spec/03`` names it with an option (``policy set --workspace WS --key K
--value V``). A command therefore declares its words as optional positionals plus an option for each,
and :func:`bind` fills every slot its option left open with the next positional word, in order. A word
left over is accepted only when it repeats ``--workspace``.

A word ``REMOTE:WORKSPACE`` naming a configured remote is never resolved here: it raises
``_remote_run.RemoteWorkspace``, and the command runs on that remote.

This module imports only typer and the standard library: it is loaded for ``--help``.
"""

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._remote_run import remote_word

if TYPE_CHECKING:
    from httk.workflow.engine import Located, Readings

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


def bind(words: Sequence[str | None], slots: Sequence[tuple[str, str | None]], *, writes: bool) -> list[str]:
    """Assign positional ``words`` to the ``slots`` their options left open; return every slot's value.

    ``slots`` is ``(METAVAR, option value)`` in positional order, the workspace first. The workspace
    slot is optional: a first word is the workspace when there is one word more than the other open
    slots, and otherwise the workspace is resolved by :func:`resolve` (``writes`` says whether the
    command may create the per-user default workspace). Missing slots and surplus words are usage
    errors; a surplus first word must name the same workspace as --workspace.
    """
    given = [word for word in words if word is not None]
    option, rest = slots[0][1], slots[1:]
    open_slots = [index for index, (_name, value) in enumerate(rest) if value is None]
    need = len(open_slots)
    if len(given) > need + 1:
        raise UsageError(f"unexpected extra argument {given[need + 1]!r}")
    workspace: str | None = None
    if len(given) == need + 1:
        word = given.pop(0)
        if option is None:
            workspace = _named(word)
        else:
            _require_same_workspace(word, option)
    elif given and option is None and _takes_as_workspace(given[0], rest[open_slots[0]][0]):
        workspace = given.pop(0)  # a workspace directory: the word missing is the next one
    if len(given) < need:
        raise UsageError(f"missing {rest[open_slots[len(given)]][0]}")
    values = [value for _name, value in rest]
    for index, word in zip(open_slots, given, strict=True):
        values[index] = word
    root = workspace if workspace is not None else _implicit(option, writes, given[:1]).path
    return [root, *(value for value in values if value is not None)]


def bind_many(words: Sequence[str], option: str | None, *, what: str, writes: bool) -> tuple[str, list[str]]:
    """Split ``[WORKSPACE] ITEM...`` into the workspace and at least one item.

    Without --workspace the first word is the workspace when it names one (a registered name or a
    directory holding ``.httk-workflow/``) and more words follow; a lone word that names one is refused
    as ambiguous. With --workspace every word is an item, except a first word naming that same
    workspace; a first word that is another workspace directory is refused.
    """
    items = list(words)
    workspace: str | None = None
    if option is None and items and _readings(items[0]).any:
        if len(items) == 1:
            _takes_as_workspace(items[0], what)
        workspace = _named(items.pop(0))  # a workspace directory alone leaves the item missing
    elif option is not None and items:
        first = _readings(items[0])
        if first.directory is not None:
            _require_same_workspace(items.pop(0), option)
        elif first.entry is not None and _same_directory(first.entry.path, Path(_named(option))):
            items.pop(0)  # the option's workspace named twice; another registered name is an item
    if not items:
        raise UsageError(f"missing {what}")
    return workspace if workspace is not None else _implicit(option, writes, items[:1]).path, items


@dataclass(frozen=True)
class Resolved:
    """The workspace a command acts on: ``path`` as the command passes it on, and why it was chosen."""

    path: str
    located: "Located"


def resolve(word: str | None, *, writes: bool, rule: str = "option") -> Resolved:
    """The workspace ``word`` names (a registered name or a path), or the rules' choice when it is None.

    A command that ``writes`` creates the per-user default workspace when the rules reach it and it does
    not exist yet, and says so once on standard error; a read command that finds no workspace is a usage
    error.
    """
    from httk.workflow.engine import Registry, locate_implicit, locate_word, per_user_default_path

    registry = Registry.for_user()
    if word is not None:
        remote_word(word)
        found = _readings(word)
        _refuse_conflict(found)
        located = locate_word(found, registry, rule=rule)
        return Resolved(
            word if found.entry is None or found.directory is not None else str(located.root), located
        )
    chosen = locate_implicit(registry, Path(os.getcwd()), create=writes)
    if chosen is None:
        raise UsageError(
            f"no workspace: {os.getcwd()} is not inside one, no default is recorded for it or for this "
            f"user, and the per-user default workspace {per_user_default_path()} does not exist yet; pass "
            "WORKSPACE or --workspace WS (a name or a path)"
        )
    if chosen.created:
        registered = f", registered as {chosen.name!r}" if chosen.name else ""
        typer.echo(f"note: created the per-user default workspace {chosen.root}{registered}", err=True)
    return Resolved(str(chosen.root), chosen)


def _implicit(option: str | None, writes: bool, first: Sequence[str]) -> Resolved:
    """:func:`resolve` for a command whose first word was not taken as its workspace.

    A first word with a path separator that names nothing is most likely a mistyped workspace: it
    would fail as the command's next argument anyway, so it must not first create the per-user default
    workspace; it is refused instead, unless some workspace is chosen without creating one.
    """
    if writes and option is None and first and os.sep in first[0] and not os.path.lexists(first[0]):
        try:
            return resolve(None, writes=False)
        except UsageError:
            raise UsageError(
                f"{first[0]!r} is neither a workspace nor an existing path, and no other workspace is "
                "chosen; nothing was created (pass WORKSPACE or --workspace WS, a name or a path)"
            ) from None
    return resolve(option, writes=writes)


def _named(word: str) -> str:
    return resolve(word, writes=False, rule="argument").path


def _readings(word: str) -> "Readings":
    from httk.workflow.engine import Registry, workspace_readings

    remote_word(word)
    return workspace_readings(word, Registry.for_user())


def _refuse_conflict(found: "Readings") -> None:
    if found.conflicting and found.entry is not None:
        raise UsageError(
            f"{found.word!r} is ambiguous: it is the workspace directory {found.directory} and the name "
            f"registered for {found.entry.path}; write ./{found.word} for the directory, or the "
            "registered path for the other"
        )


def _takes_as_workspace(word: str, what: str) -> bool:
    """Whether a word the count makes the command's next argument is a workspace directory instead.

    A directory holding ``.httk-workflow/`` is never a job, a payload or a key, so it is the workspace
    (and the next argument is missing); a registered name could as well be a job key or a payload's
    name, so it is refused as ambiguous, naming both readings.
    """
    found = _readings(word)
    _refuse_conflict(found)
    if found.directory is not None:
        return True
    if found.entry is None:
        return False
    raise UsageError(
        f"{word!r} is ambiguous: it is the registered name of the workspace {found.entry.path}, and it "
        f"could be the {what}; give the workspace too (WORKSPACE {what}), or name it with --workspace WS "
        f"to make {word!r} the {what}"
    )


def _require_same_workspace(argument: str, option: str) -> None:
    if _same_directory(Path(_named(argument)), Path(_named(option))):
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
