"""Remotes: the named machines a command reaches over ssh, kept in this user's configuration.

A remote is transport only (``spec/03`` "Running on a remote"): it says how to reach a machine and how
to run ``httk`` there; every workspace operation on it is the remote's own ``httk`` acting on its own
files. ``remote add --template ssh NAME`` writes ``remotes/NAME.json`` below the user's httk
configuration directory (``$HTTK_CONFIG_HOME``, beside the workspace registry), one small file per name,
created by an exclusive rename (of two racing ``add``\\ s exactly one wins) and replaced whole by an
atomic rename on every ``configure``. Its settings are checked by name and value (:data:`SETTINGS`):
an unknown key is refused naming the known ones, and nothing is written.

The one template is ``ssh``: the system OpenSSH client (:mod:`._ssh`), never a Python ssh stack, so the
user's agent, ``~/.ssh/config``, ProxyJump and Kerberos work as they do for ``ssh`` itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._user_dirs import config_home
from httk.workflow.protocol import RemoteError, WorkflowError
from httk.workflow.protocol._jsonio import dump_pretty, read_json_object

from ._registry import NAME_RULE, looks_like_name

REMOTE_FORMAT = "httk-workflow-remote"
TEMPLATES = ("ssh",)
_WORD = re.compile(r"[^\s@/:\\'\"`$;&|<>()]+")


def _word(what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        # a host or user name goes on ssh's command line: one that starts with '-' would be an option
        if not _WORD.fullmatch(value) or value.startswith("-"):
            raise ValueError(f"{what} must be one word without spaces, quotes or shell characters")
        return value

    return check


def _host(value: str) -> str:
    if value.startswith("[") and value.endswith("]"):  # an IPv6 address, as ssh writes one
        value = value[1:-1]
    if value.startswith("-") or not re.fullmatch(r"[A-Za-z0-9._:%-]+", value):
        raise ValueError("a host name or address (letters, digits, '.', '-', ':')")
    return value


def _port(value: str) -> str:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ValueError("a port number from 1 to 65535")
    return str(int(value))


def _seconds(value: str) -> str:
    if not value.isdigit() or not 1 <= int(value) <= 3600:
        raise ValueError("a whole number of seconds from 1 to 3600")
    return str(int(value))


def _file(value: str) -> str:
    if not value:
        raise ValueError("a file path")
    if value == "none":
        return value
    return os.path.abspath(os.path.expanduser(value))


def _yes_no(value: str) -> str:
    if value not in ("yes", "no"):
        raise ValueError("yes or no")
    return value


def _text(value: str) -> str:
    if not value.strip() or "\0" in value:
        raise ValueError("non-empty shell text")
    return value


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting of an ssh remote: what it means, and the check that normalizes a value."""

    meaning: str
    check: Callable[[str], str]
    default: str | None = None


SETTINGS: dict[str, Setting] = {
    "host": Setting("the machine's host name or address (required)", _host),
    "username": Setting("the login there [default: ssh's choice]", _word("a user name")),
    "port": Setting("the ssh port [default: ssh's choice, 22]", _port),
    "identity_file": Setting("the private key to log in with (IdentitiesOnly)", _file),
    "known_hosts": Setting(
        "the known_hosts file the host key is checked against [default: ssh's own]", _file
    ),
    "ssh_config": Setting("an ssh_config file instead of ~/.ssh/config, or 'none'", _file),
    "httk_command": Setting("how to run httk there (shell words)", _text, "httk"),
    "prelude": Setting("shell text run before httk there (module load ...)", _text),
    "connect_timeout": Setting("seconds to wait for the connection", _seconds, "20"),
    "check_connectivity": Setting("'yes': configure checks the connection after saving", _yes_no, "no"),
}


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a remote (the rule of workspace names: no ``:`` or ``/``)."""
    return None if looks_like_name(name) else f"invalid remote name {name!r}: {NAME_RULE}"


looks_like_remote = looks_like_name


@dataclass(frozen=True, slots=True)
class Remote:
    """One configured remote."""

    name: str
    template: str
    settings: dict[str, str]
    path: Path

    def get(self, key: str) -> str | None:
        return self.settings.get(key, SETTINGS[key].default)

    def require_host(self) -> str:
        host = self.settings.get("host")
        if host is None:
            raise RemoteError(
                f"remote {self.name!r} has no host; set it with: httk workflow remote configure "
                f"--set host=HOST {self.name}"
            )
        return host

    @property
    def destination(self) -> str:
        """``user@host:port`` as a person reads it (``ssh`` is given them apart)."""
        user, port = self.settings.get("username"), self.settings.get("port")
        return f"{user + '@' if user else ''}{self.settings.get('host', '?')}{':' + port if port else ''}"

    def as_dict(self) -> dict[str, Any]:
        shown = {key: self.get(key) for key in SETTINGS if self.get(key) is not None}
        return {"name": self.name, "template": self.template, "settings": shown, "path": str(self.path)}


def remotes_dir(environ: Mapping[str, str] | None = None) -> Path:
    return config_home(environ) / "remotes"


def _file_of(name: str) -> Path:
    problem = name_problem(name)
    if problem is not None:
        raise RemoteError(problem)
    return remotes_dir() / f"{name}.json"


def add_remote(name: str, template: str) -> Remote:
    """Create remote ``name`` from ``template`` with no settings; refused when the name is taken."""
    path = _file_of(name)
    if template not in TEMPLATES:
        raise RemoteError(f"unknown remote template {template!r}; known: {', '.join(TEMPLATES)}")
    remote = Remote(name, template, {}, path)
    _fsops.make_dirs(path.parent, durable=True)
    temporary = path.with_name(f".{path.name}.tmp.{os.getpid()}.{os.urandom(4).hex()}")
    _fsops.create_file(temporary, _document(remote), durable=True)
    try:
        _fsops.rename(temporary, path, durable=True, noreplace=True)
    except FileExistsError:
        _fsops.unlink(temporary, durable=False, missing_ok=True)
        raise RemoteError(f"a remote named {name!r} exists already ({path})") from None
    return remote


def find_remote(name: str) -> Remote:
    path = _file_of(name)
    remote = _read(path)
    if remote is None:
        raise RemoteError(f"no remote named {name!r} (see: httk workflow remote list)")
    return remote


def lookup_remote(name: str) -> Remote | None:
    """The remote ``name``, or None when there is none (or ``name`` cannot be one)."""
    return _read(remotes_dir() / f"{name}.json") if looks_like_remote(name) else None


def list_remotes() -> list[Remote]:
    try:
        names = sorted(os.listdir(remotes_dir()))
    except FileNotFoundError:
        return []
    found = []
    for file_name in names:
        stem, _dot, suffix = file_name.rpartition(".")
        if suffix == "json" and looks_like_remote(stem) and not file_name.startswith("."):
            remote = _read(remotes_dir() / file_name)
            if remote is not None:
                found.append(remote)
    return found


def configure_remote(name: str, assignments: Mapping[str, str], unset: list[str]) -> Remote:
    """Set and unset settings of ``name``; every key and value is checked before anything is written."""
    remote = find_remote(name)
    settings = dict(remote.settings)
    for key in [*assignments, *unset]:
        if key not in SETTINGS:
            known = ", ".join(sorted(SETTINGS))
            raise RemoteError(f"unknown setting {key!r} of an {remote.template} remote; known: {known}")
    for key, value in assignments.items():
        try:
            settings[key] = SETTINGS[key].check(value)
        except ValueError as exc:
            raise RemoteError(f"remote {name!r}: {key}={value!r} is refused: {exc}") from None
    for key in unset:
        settings.pop(key, None)
    updated = Remote(name, remote.template, settings, remote.path)
    _fsops.write_file_atomic(remote.path, _document(updated), durable=True)
    return updated


def remove_remote(name: str) -> Path:
    """Remove ``name`` without reading it, so a corrupt file can always be cleared."""
    path = _file_of(name)
    if not _fsops.unlink(path, durable=True, missing_ok=True):
        raise RemoteError(f"no remote named {name!r}")
    return path


def _document(remote: Remote) -> bytes:
    document = {
        "format": REMOTE_FORMAT,
        "format_version": 1,
        "name": remote.name,
        "template": remote.template,
        "settings": remote.settings,
        "updated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return dump_pretty(document)


def _read(path: Path) -> Remote | None:
    if not os.path.lexists(path):
        return None
    try:
        document = read_json_object(path, document="remote")
    except WorkflowError as exc:  # an unreadable or non-JSON file: named, with how to clear it
        raise RemoteError(
            f"{path}: {exc} (remove it with: httk workflow remote remove {path.stem})"
        ) from None
    settings = document.get("settings")
    problem = None
    if (document.get("format"), document.get("format_version")) != (REMOTE_FORMAT, 1):
        problem = f"not a {REMOTE_FORMAT} document of format_version 1"
    elif document.get("name") != path.stem:
        problem = f"it names {document.get('name')!r}, not {path.stem!r}"
    elif document.get("template") not in TEMPLATES:
        problem = f"unknown template {document.get('template')!r}"
    elif not isinstance(settings, dict) or not all(
        key in SETTINGS and isinstance(value, str) for key, value in settings.items()
    ):
        problem = "'settings' is not an object of known settings with string values"
    if problem is not None:
        raise RemoteError(
            f"{path}: corrupt remote: {problem} (remove it with: httk workflow remote remove {path.stem})"
        )
    assert isinstance(settings, dict)
    return Remote(path.stem, str(document["template"]), dict(settings), path)
