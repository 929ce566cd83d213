"""Whether a job's runner can be reached, judged read-only (``job why``, ``precheck``).

:func:`check_runner` resolves the runner the way a manager's staging does (``_runner_staging``: every
component opened without following a symbolic link, the same refusals and messages) but never copies it:
a payload runner must be an executable regular file, a shared one must exist below its root and its
bytes (or canonical tree) must have the digest the job pins. A plain installed reference is resolved
only against search paths given to this command; without one it is ``indeterminate``, because the
search path belongs to the manager's machine. A ``pkg:`` module that is not installed here is
``indeterminate`` for the same reason.

:func:`manager_refusal` is the other half: whether one manager's allowlist and search paths, read from
its manifest, can reach the runner at all. A manager on another host cannot be checked for a plain
installed runner from here, and is then given the benefit of the doubt.

Cost: one open per path component; a shared runner is digested once per (root, path) per
:class:`RunnerChecks` (a campaign of many jobs usually pins one runner).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.publish._runner_staging import (
    PKG_PREFIX,
    RunnerFailure,
    _open_first,
    _package_roots,
    _payload_runner,
)
from httk.workflow.engine.publish._runner_store import runner_digest

from ._why_report import BLOCKED, INDETERMINATE, OK, Finding


@dataclass
class RunnerChecks:
    """Runner verdicts of one invocation, with the digests of shared runners cached by location."""

    workspace: Workspace
    search_path: tuple[Path, ...] = ()
    _digests: dict[str, str | RunnerFailure] = field(default_factory=dict)

    def check(self, runner: Mapping[str, Any], payload: Path) -> Finding:
        """The ``runner`` finding of a job: ``ok``, ``blocked`` (it cannot run) or ``indeterminate``."""
        source = runner.get("source", "payload")
        path = str(runner.get("path", ""))
        where = f"{source} runner {path!r}"
        try:
            if source == "payload":
                _payload_runner(payload, path)
                return Finding("runner", OK, f"{where} is an executable file in the payload")
            roots = self._roots(source, path)
            if roots is None:
                return Finding(
                    "runner",
                    INDETERMINATE,
                    f"{where} resolves against the manager's runner search path; "
                    "give --runner-search-path to check it here",
                )
            found = self._digest(roots, source, path)
        except RunnerFailure as exc:
            return Finding("runner", BLOCKED, f"{exc.code}: {exc.message}", {"code": exc.code})
        except _NotInstalledHereError as exc:
            return Finding("runner", INDETERMINATE, str(exc))
        except OSError as exc:
            return Finding(
                "runner", BLOCKED, f"{where} cannot be read: {exc}", {"code": "runner_unavailable"}
            )
        expected = runner.get("sha256")
        if found != expected:
            text = f"runner_mismatch: {where} has digest {found}, but the job pins {expected}"
            return Finding("runner", BLOCKED, text, {"code": "runner_mismatch"})
        return Finding("runner", OK, f"{where} is present with the pinned digest")

    def _roots(self, source: str, path: str) -> list[tuple[Path, str]] | None:
        if source == "workspace":
            return [(self.workspace.runners_dir, path)]
        if source != "installed":
            raise RunnerFailure("runner_unavailable", f"unknown runner.source {source!r}", {"path": path})
        if path.startswith(PKG_PREFIX):
            module = _pkg_module(path)
            try:
                return _package_roots(path, frozenset({module}))
            except RunnerFailure:
                raise _NotInstalledHereError(
                    f"installed runner {path!r}: module {module!r} is not installed here; "
                    "the manager's machine decides"
                ) from None
        if not self.search_path:
            return None
        return [(root, path) for root in self.search_path]

    def _digest(self, roots: list[tuple[Path, str]], source: str, path: str) -> str:
        fd, location = _open_first(roots, source, path)
        os.close(fd)
        cached = self._digests.get(location)
        if cached is None:
            try:
                cached = runner_digest(Path(location))
            except OSError as exc:
                cached = RunnerFailure("runner_unavailable", f"{location} cannot be read: {exc}")
            self._digests[location] = cached
        if isinstance(cached, RunnerFailure):
            raise cached
        return cached


class _NotInstalledHereError(Exception):
    """A ``pkg:`` runner's module is not importable by this process (it may be on the manager's)."""


def _pkg_module(path: str) -> str:
    return path[len(PKG_PREFIX) :].partition("/")[0]


def manager_refusal(runner: Mapping[str, Any], manifest: Mapping[str, Any]) -> str | None:
    """Why the manager of ``manifest`` cannot reach the runner (allowlist, search paths), or ``None``."""
    if runner.get("source", "payload") != "installed":
        return None  # payload and workspace runners live in the workspace every manager attaches
    path = str(runner.get("path", ""))
    if path.startswith(PKG_PREFIX):
        allowed = [str(module) for module in manifest.get("runner_modules") or ()]
        module = _pkg_module(path)
        if module in allowed:
            return None
        listed = ", ".join(sorted(allowed)) or "empty"
        return f"runner module {module!r} is not in its runner module allowlist ({listed})"
    search = [str(root) for root in manifest.get("runner_search_paths") or ()]
    if not search:
        return f"installed runner {path!r} needs a runner search path, and it has none"
    if manifest.get("host") != socket.gethostname():
        return None  # its search paths are on its own machine: not checkable from here
    if not _found_below(search, path):
        return f"installed runner {path!r} is not below its runner search paths ({', '.join(search)})"
    return None


def _found_below(search: Sequence[str], path: str) -> bool:
    try:
        fd, _ = _open_first([(Path(root), path) for root in search], "installed", path)
    except RunnerFailure:
        return False
    os.close(fd)
    return True
