"""``httk workflow config init|show|rotate``: this user's operator identity (DECISIONS D20).

``init`` creates an Ed25519 key pair and the identity (name and email) in the user's httk configuration
directory (``$HTTK_CONFIG_HOME``, else the XDG one); it never overwrites one. From then on ``job
request`` signs every request it publishes. ``show`` prints the identity, its current public key
(``operator_key``) and that key's fingerprint. ``rotate`` makes a new current key, keeps the old one
retired, and prints the ``workspace trust add`` command that makes a workspace trust the new key.

Without ``--non-interactive``, a missing ``--name`` or ``--email`` is asked for when standard input is a
terminal; otherwise it is a usage error.
"""

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from ._options import JsonOpt, UsageError
from ._render import print_json

if TYPE_CHECKING:
    from httk.workflow.engine import Identity, IdentityStore

app = typer.Typer(
    name="config", help="This user's operator identity, which signs requests.", no_args_is_help=True
)

NameOpt = Annotated[
    str | None,
    typer.Option("--name", metavar="NAME", show_default=False, help="Your name, as requests record it."),
]
EmailOpt = Annotated[
    str | None, typer.Option("--email", metavar="EMAIL", show_default=False, help="Your email address.")
]
NonInteractiveOpt = Annotated[
    bool, typer.Option("--non-interactive", help="Never prompt: a missing --name or --email is an error.")
]


@app.command("init")
def init(
    *,
    name: NameOpt = None,
    email: EmailOpt = None,
    non_interactive: NonInteractiveOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Create your operator identity: an Ed25519 key pair (private key mode 0600), name and email."""
    from httk.workflow.engine import IdentityStore

    name = _value(name, "--name", "Name", IdentityStore.name_problem, non_interactive)
    email = _value(email, "--email", "Email", IdentityStore.email_problem, non_interactive)
    store = IdentityStore.for_user()
    identity = store.create(name, email)
    if as_json:
        print_json(_as_json(store, identity))
        return
    typer.echo(f"created the operator identity {identity.operator} in {store.path}")
    _print_key(store, identity)
    typer.echo("requests you publish are signed from now on; a workspace trusts this key with:")
    typer.echo(f"  {_trust_command(identity)}")


@app.command("show")
def show(*, as_json: JsonOpt = False) -> None:
    """Print your operator identity, its public key and the key's fingerprint."""
    from httk.workflow.engine import IdentityStore

    store = IdentityStore.for_user()
    identity = store.require()
    if as_json:
        print_json(_as_json(store, identity))
        return
    typer.echo(f"operator     {identity.operator}")
    _print_key(store, identity)
    retired = [key for key in identity.keys if key.retired_at is not None]
    for key in retired:
        typer.echo(f"retired      {key.operator_key} ({key.fingerprint}, retired {key.retired_at})")


@app.command("rotate")
def rotate(*, as_json: JsonOpt = False) -> None:
    """Make a new key (the old one is kept, retired) and print how a workspace trusts it."""
    from httk.workflow.engine import IdentityStore

    store = IdentityStore.for_user()
    identity, old = store.rotate()
    if as_json:
        print_json({**_as_json(store, identity), "retired": old.as_dict(), "trust": _trust_command(identity)})
        return
    typer.echo(f"new key for {identity.operator}; the old one {old.fingerprint} is retired and kept")
    _print_key(store, identity)
    typer.echo("trust the new key in each workspace that requires signatures:")
    typer.echo(f"  {_trust_command(identity)}")
    typer.echo(
        f"  httk workflow workspace trust remove WORKSPACE {old.operator_key}   (when it is no longer used)"
    )


def _value(
    given: str | None, option: str, label: str, problem_of: Callable[[str], str | None], non_interactive: bool
) -> str:
    if given is None:
        if non_interactive or not sys.stdin.isatty():
            raise UsageError(f"missing {option} (required without a terminal or with --non-interactive)")
        given = str(typer.prompt(label))
    problem = problem_of(given)
    if problem is not None:
        raise UsageError(f"{option}: {problem}")
    return given


def _print_key(store: "IdentityStore", identity: "Identity") -> None:
    key = identity.current
    typer.echo(f"operator_key {key.operator_key}")
    typer.echo(f"fingerprint  {key.fingerprint}")
    typer.echo(f"private key  {store.keys_dir / key.key_file}")


def _trust_command(identity: "Identity") -> str:
    return f"httk workflow workspace trust add WORKSPACE {identity.current.operator_key}"


def _as_json(store: "IdentityStore", identity: "Identity") -> dict[str, object]:
    key = identity.current
    return {
        "name": identity.name,
        "email": identity.email,
        "operator": identity.operator,
        "operator_key": key.operator_key,
        "fingerprint": key.fingerprint,
        "identity_file": str(store.path),
        "private_key_file": str(store.keys_dir / key.key_file),
        "keys": [{**k.as_dict(), "fingerprint": k.fingerprint} for k in identity.keys],
    }
