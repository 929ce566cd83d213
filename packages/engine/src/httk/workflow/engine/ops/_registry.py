"""The per-user workspace registry: names for workspace directories, and the recorded defaults.

The registry is the command line's contract (``spec/03`` "Initialize a workspace"); a library caller still
attaches a workspace by its path. It lives in the user's httk configuration directory
(``$HTTK_CONFIG_HOME``, else ``$XDG_CONFIG_HOME/httk``, else ``~/.config/httk``)::

    workspaces/NAME.json                    one registered name: its absolute path and workspace_id
    defaults/user.json                      the registry default name (``workspace default --user``)
    defaults/projects/SHA256.json           a project directory's default name (``workspace default``)

One small file per name, so concurrent writers never lose each other's entries: a name is registered by
an exclusive rename of a complete temporary file onto ``NAME.json`` (exactly one of two racing writers
wins; the other reads the winner's entry), and a default is replaced by an atomic rename. Nothing is ever
rewritten in place, so a reader sees the old file or the new one, never a torn one. A file that does not
hold what it should is a :class:`RegistryError` naming it; ``workspace forget NAME`` removes an entry
without reading it, so a corrupt one can always be cleared.

A project default is keyed by the SHA-256 of the project directory's absolute path (a path may hold any
byte, a file name may not) and records that path inside, so :meth:`Registry.project_default` walks from
a directory up to ``/`` and reads the first ancestor that has one: one ``open`` per ancestor.

Cost: a name lookup is one file read; ``list`` reads every entry. The registry is configuration, not
protocol state: it is written durably but never journalled.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._user_dirs import config_home
from httk.workflow.protocol import RegistryError

ENTRY_FORMAT = "httk-workflow-registry-entry"
DEFAULT_FORMAT = "httk-workflow-registry-default"
MAX_FILE_BYTES = 64 * 1024

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "1-128 of letters, digits, '.', '_', '-', starting with a letter or digit"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a registered workspace name, or None when it can."""
    return None if _NAME.fullmatch(name) else f"invalid workspace name {name!r}: {NAME_RULE}"


def looks_like_name(word: str) -> bool:
    """Whether ``word`` is spelled as a registered name could be (no ``/``, nothing a path needs)."""
    return _NAME.fullmatch(word) is not None


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """One registered name."""

    name: str
    path: Path
    workspace_id: str | None
    registered_at: str | None

    @property
    def present(self) -> bool:
        """Whether the registered directory still holds ``.httk-workflow/``."""
        return os.path.isdir(self.path / ".httk-workflow")

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": str(self.path),
            "workspace_id": self.workspace_id,
            "registered_at": self.registered_at,
        }


@dataclass(frozen=True, slots=True)
class Registration:
    """What :meth:`Registry.register` did: ``registered``, ``already`` (same directory) or ``taken``."""

    outcome: str
    entry: RegistryEntry

    @property
    def registered(self) -> bool:
        return self.outcome == "registered"


@dataclass(frozen=True, slots=True)
class ProjectDefault:
    """A project directory's recorded default name."""

    project: Path
    name: str
    file: Path


class Registry:
    """The registry below one configuration directory (:func:`config_home` for this user)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.names_dir = home / "workspaces"
        self.user_default_file = home / "defaults" / "user.json"
        self.projects_dir = home / "defaults" / "projects"

    @classmethod
    def for_user(cls, environ: Mapping[str, str] | None = None) -> Registry:
        return cls(config_home(environ))

    def __repr__(self) -> str:
        return f"Registry({str(self.home)!r})"

    name_problem = staticmethod(name_problem)

    # -- names ------------------------------------------------------------------------------------

    def entry_file(self, name: str) -> Path:
        problem = name_problem(name)
        if problem is not None:
            raise RegistryError(problem)
        return self.names_dir / f"{name}.json"

    def lookup(self, name: str) -> RegistryEntry | None:
        """The entry of ``name``, None when it is not registered (or cannot be a name at all)."""
        if not looks_like_name(name):
            return None
        path = self.names_dir / f"{name}.json"
        document = _read(path)
        return None if document is None else _entry(document, path)

    def require(self, name: str) -> RegistryEntry:
        self.entry_file(name)  # refuses a malformed name
        entry = self.lookup(name)
        if entry is None:
            raise RegistryError(f"no workspace named {name!r} is registered (see: workspace list)")
        return entry

    def entries(self) -> list[RegistryEntry]:
        """Every registered name, sorted; a corrupt entry is an error naming its file."""
        try:
            names = sorted(os.listdir(self.names_dir))
        except FileNotFoundError:
            return []
        found = []
        for file_name in names:
            stem, dot, suffix = file_name.rpartition(".")
            if file_name.startswith(".") or not dot or suffix != "json" or not looks_like_name(stem):
                continue  # a writer's temporary file, or nothing of ours
            path = self.names_dir / file_name
            document = _read(path)
            if document is not None:
                found.append(_entry(document, path))
        return found

    def register(self, name: str, root: Path, workspace_id: str | None) -> Registration:
        """Register ``name`` for ``root`` unless it already names a directory; never replaces an entry."""
        path = self.entry_file(name)
        entry = RegistryEntry(name, Path(os.path.abspath(root)), workspace_id, _now())
        document = {"format": ENTRY_FORMAT, "format_version": 1, **entry.as_dict()}
        _fsops.make_dirs(self.names_dir, durable=True)
        temporary = path.with_name(f".{path.name}.tmp.{os.getpid()}.{os.urandom(4).hex()}")
        _fsops.create_file(temporary, _dump(document), durable=True)
        try:
            _fsops.rename(temporary, path, durable=True, noreplace=True)
        except FileExistsError:
            _fsops.unlink(temporary, durable=False, missing_ok=True)
            existing = self.lookup(name)
            if existing is None:  # forgotten between our rename and our read: try once more
                return self.register(name, root, workspace_id)
            same = same_directory(existing.path, entry.path)
            return Registration("already" if same else "taken", existing)
        return Registration("registered", entry)

    def forget(self, name: str) -> Path:
        """Remove ``name``'s entry without reading it (so a corrupt one can be removed too)."""
        path = self.entry_file(name)
        if not _fsops.unlink(path, durable=True, missing_ok=True):
            raise RegistryError(f"no workspace named {name!r} is registered", self.names_dir)
        return path

    def names_of(self, root: Path) -> list[str]:
        """The names registered for the directory ``root`` (reads every entry)."""
        return [entry.name for entry in self.entries() if same_directory(entry.path, root)]

    # -- defaults ---------------------------------------------------------------------------------

    def user_default(self) -> str | None:
        document = _read(self.user_default_file)
        return None if document is None else _default_name(document, self.user_default_file)

    def set_user_default(self, name: str) -> Path:
        self.require(name)
        _write_default(self.user_default_file, {"name": name})
        return self.user_default_file

    def project_file(self, project: Path) -> Path:
        digest = hashlib.sha256(os.fsencode(os.path.abspath(project))).hexdigest()
        return self.projects_dir / f"{digest}.json"

    def project_default(self, start: Path) -> ProjectDefault | None:
        """The default recorded for ``start`` or its closest ancestor that has one."""
        directory = Path(os.path.abspath(start))
        while True:
            file = self.project_file(directory)
            document = _read(file)
            if document is not None:
                name = _default_name(document, file)
                if document.get("project") != str(directory):
                    raise RegistryError(
                        f"corrupt project default: it records {document.get('project')!r}", file
                    )
                return ProjectDefault(directory, name, file)
            if directory.parent == directory:
                return None
            directory = directory.parent

    def set_project_default(self, project: Path, name: str) -> Path:
        self.require(name)
        file = self.project_file(project)
        _write_default(file, {"project": str(Path(os.path.abspath(project))), "name": name})
        return file


def _read(path: Path) -> dict[str, object] | None:
    """The JSON object in ``path``, None when there is no such file; anything else is corrupt."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RegistryError(f"cannot read the workspace registry: {exc.strerror}", path) from None
    if len(data) > MAX_FILE_BYTES:
        raise RegistryError(f"corrupt workspace registry file: larger than {MAX_FILE_BYTES} bytes", path)
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise RegistryError("corrupt workspace registry file: not JSON", path) from None
    if not isinstance(document, dict):
        raise RegistryError("corrupt workspace registry file: not a JSON object", path)
    return document


def _entry(document: dict[str, object], path: Path) -> RegistryEntry:
    name, root, workspace_id = document.get("name"), document.get("path"), document.get("workspace_id")
    problem = None
    if document.get("format") != ENTRY_FORMAT or document.get("format_version") != 1:
        problem = f"not a {ENTRY_FORMAT} document of format_version 1"
    elif name != path.stem:
        problem = f"it names {name!r}, not {path.stem!r}"
    elif not isinstance(root, str) or not os.path.isabs(root):
        problem = "'path' is not an absolute path"
    elif workspace_id is not None and not isinstance(workspace_id, str):
        problem = "'workspace_id' is not a string"
    if problem is not None:
        raise RegistryError(
            f"corrupt workspace registry entry: {problem} (remove it with: workspace forget {path.stem})",
            path,
        )
    registered_at = document.get("registered_at")
    return RegistryEntry(
        path.stem,
        Path(str(root)),
        workspace_id if isinstance(workspace_id, str) else None,
        registered_at if isinstance(registered_at, str) else None,
    )


def _default_name(document: dict[str, object], path: Path) -> str:
    name = document.get("name")
    if document.get("format") != DEFAULT_FORMAT or not isinstance(name, str) or not looks_like_name(name):
        raise RegistryError(
            f"corrupt workspace default: not a {DEFAULT_FORMAT} document naming a workspace", path
        )
    return name


def _write_default(path: Path, members: dict[str, str]) -> None:
    _fsops.make_dirs(path.parent, durable=True)
    document = {"format": DEFAULT_FORMAT, "format_version": 1, **members, "recorded_at": _now()}
    _fsops.write_file_atomic(path, _dump(document), durable=True)


def _dump(document: Mapping[str, object]) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def same_directory(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
