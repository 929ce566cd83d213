"""Launchers: what starts task managers, and the named bundles that select one for a workspace.

A launcher is given a :class:`LaunchRequest` — the manager's complete argument vector (``manager run
--inline ...`` with every option the caller gave), the workspace, a count and the workspace settings —
starts that many managers, and returns a :class:`LaunchReport` of what it started (pids, or batch job
ids and the script that runs them). Two templates exist: ``process`` (detached local processes,
:class:`ProcessLauncher`, below) and ``slurm`` (one batch script submitted once per manager,
:mod:`._slurm`). They are found through the entry point group ``httk.workflow.launchers``, so
another package can add a template without touching the engine.

A *bundle* names a template: ``launcher add --template slurm NAME`` writes
``.httk-workflow/launchers/NAME.json`` in one workspace, or with ``--global`` the same file below the
user's configuration directory (``launchers/`` in ``$HTTK_CONFIG_HOME``, else in
``$XDG_CONFIG_HOME/httk``, ``~/.config/httk`` by default). The
workspace setting ``manager.launch`` names the bundle ``run`` and ``manager run`` use; the workspace's
own bundle wins over a global one of the same name, and the name ``process`` always means the built-in
process launcher. A bundle is launcher configuration, not protocol state: it is written atomically but
never journalled.

The command a launcher runs: without ``environment.prelude`` a
launcher runs ``program + arguments`` as given, so a manager started from a virtual environment runs
under that environment's interpreter. With one, the prelude (shell text the operator wrote, for
``module load`` and friends) runs under ``set -e`` and the manager is then ``manager.command`` (default
``httk``) resolved on the ``PATH`` the prelude left, so a module-loaded environment selects its own
``httk``. The manager is ``exec``\\ ed, never run as a child: a batch system's signal must reach the
manager itself, and its exit status is the job's. Every word the engine puts into a script is quoted
with :func:`shlex.quote`; only the prelude is shell text, and it is the operator's own.

**The process launcher** (:class:`ProcessLauncher`): each manager gets its id from the launcher
(``--manager-id``), so its standard output and error go to ``.httk-workflow/managers/<id>/output.log``
from the first byte, beside the log and heartbeat the manager writes there itself; each runs in its
own session (a terminal's Ctrl-C or hang-up does not reach it; ``manager stop`` or the caller's
forwarded signal does); several started together split the injected host capacities
(``--host-share I/N``).

**Stopping** (:func:`stop_managers`, ``manager stop``): A manager drains on SIGTERM (stop claiming, stop
its attempts, commit them, exit 0). This finds the live managers named (``--manager ID``) or all of them
(``--all``) from their manifests and delivers it:

- a manager in a Slurm job (its manifest's ``batch``): ``scancel --batch --signal=TERM JOB``, which
  signals the batch step only — the manager, since the batch script ``exec``\\ s it — and leaves the
  job to end when the manager exits, rather than killing it;
- a manager on this host: ``kill -TERM`` by its recorded pid, after checking that the process with
  that pid started at the recorded clock tick in this boot (the manifest's ``process``), so a pid
  the kernel has since given to another program is never signalled;
- anything else (another host, no verifiable identity, not live): reported, not touched.

Nothing in the workspace is written: the signal is the whole request.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._liveness import ManagerView, hostname, list_managers, process_alive
from httk.workflow.engine.core._user_dirs import config_home
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol import InvalidDocumentError, LauncherError, LaunchError
from httk.workflow.protocol._jsonio import dump_pretty, read_json_object

ENTRY_POINT_GROUP = "httk.workflow.launchers"
BUNDLE_FORMAT = "httk-workflow-launcher"
BUILT_IN = "process"
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}\Z")


@dataclass(frozen=True)
class LaunchRequest:
    """What a launcher is asked to start: ``count`` managers running ``program + arguments``.

    ``program`` is how the caller runs ``httk`` (its own interpreter: ``python -m httk.workflow.cli``);
    ``arguments`` the manager's complete argument vector after it (``workflow manager run --inline
    ... --workspace WS``). With an ``environment.prelude`` the ``manager.command`` setting replaces
    ``program``, resolved on the ``PATH`` the prelude leaves (:func:`shell_script`).
    """

    program: tuple[str, ...]
    arguments: tuple[str, ...]
    workspace: Path
    count: int
    settings: Mapping[str, Any]
    launcher: str = BUILT_IN  # the bundle name, for the record
    manager_ids: tuple[str, ...] = ()  # ids the launcher may give the managers (the process launcher does)


@dataclass(frozen=True)
class Started:
    """One manager started: its pid or batch job id, and where its standard output goes."""

    kind: str  # "process" or "slurm_job"
    ident: str
    output: Path
    manager_id: str | None = None


@dataclass(frozen=True)
class LaunchReport:
    launcher: str
    template: str
    started: tuple[Started, ...]
    script: Path | None = None
    waits: bool = False  # whether the caller may wait for the managers (local processes)
    processes: tuple[Any, ...] = field(default=(), repr=False, compare=False)  # Popen objects, if any

    def lines(self) -> list[str]:
        """One line per manager, for ``--detach``."""
        lines = []
        for item in self.started:
            what = "pid" if item.kind == "process" else "slurm job"
            manager = f" manager {item.manager_id}" if item.manager_id else ""
            lines.append(f"{what} {item.ident}{manager} output {item.output}")
        if self.script is not None:
            lines.append(f"script {self.script}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "launcher": self.launcher,
            "template": self.template,
            "script": None if self.script is None else str(self.script),
            "started": [
                {"kind": s.kind, "id": s.ident, "output": str(s.output), "manager_id": s.manager_id}
                for s in self.started
            ],
        }


COMMON_SETTINGS = ("manager.count", "manager.workers", "manager.command", "environment.prelude")
"""The workspace settings every template reads (``manager.launch`` chose it)."""


class Launcher(Protocol):
    """A template: starts managers as a :class:`LaunchRequest` asks; ``settings`` are those it reads."""

    template: str
    settings: tuple[str, ...]

    def launch(self, request: LaunchRequest) -> LaunchReport: ...


# -- bundles -----------------------------------------------------------------------------------------
def validate_name(name: str) -> str:
    if not _NAME.match(name):
        raise LauncherError(
            f"invalid launcher name {name!r}: 1-64 of lowercase letters, digits, '.', '_', '-', "
            "starting with a letter or digit"
        )
    return name


def global_directory(environ: Mapping[str, str] | None = None) -> Path:
    return config_home(environ) / "launchers"


def workspace_directory(workspace_root: Path) -> Path:
    return workspace_root / ".httk-workflow" / "launchers"


@dataclass(frozen=True)
class Bundle:
    name: str
    template: str
    scope: str  # "workspace", "global" or "built-in"
    path: Path | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "template": self.template,
            "scope": self.scope,
            "path": None if self.path is None else str(self.path),
        }


BUILT_IN_BUNDLE = Bundle(BUILT_IN, BUILT_IN, "built-in", None)


def add_bundle(directory: Path, name: str, template: str, scope: str) -> Bundle:
    """Write ``NAME.json`` naming ``template``; refuses an unknown template or an existing name."""
    validate_name(name)
    if name == BUILT_IN:
        raise LauncherError(f"{BUILT_IN!r} is the built-in launcher and cannot be redefined")
    known = templates()
    if template not in known:
        raise LauncherError(f"unknown launcher template {template!r}; known: {', '.join(sorted(known))}")
    path = directory / f"{name}.json"
    if path.exists():
        raise LauncherError(f"launcher {name!r} already exists ({path}); remove it first")
    _fsops.make_dirs(directory, durable=True)
    document = {"format": BUNDLE_FORMAT, "format_version": 1, "name": name, "template": template}
    try:
        _fsops.create_file(path, dump_pretty(document), durable=True)
    except FileExistsError:
        raise LauncherError(f"launcher {name!r} already exists ({path})") from None
    return Bundle(name, template, scope, path)


def read_bundle(path: Path, scope: str) -> Bundle:
    try:
        document = read_json_object(path, document="launcher bundle", max_bytes=64 * 1024)
    except InvalidDocumentError as exc:
        raise LauncherError(str(exc)) from None
    template, name = document.get("template"), document.get("name")
    if document.get("format") != BUNDLE_FORMAT or not isinstance(template, str) or name != path.stem:
        raise LauncherError(f"{path}: not a launcher bundle named {path.stem!r}")
    return Bundle(path.stem, template, scope, path)


def list_bundles(workspace_root: Path | None) -> list[Bundle]:
    """The built-in launcher, the workspace's bundles, then the global ones (one per name: nearest wins)."""
    found: dict[str, Bundle] = {BUILT_IN: BUILT_IN_BUNDLE}
    scopes = [("global", global_directory())]
    if workspace_root is not None:
        scopes.insert(0, ("workspace", workspace_directory(workspace_root)))
    for scope, directory in scopes:
        for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
            if path.stem not in found:
                found[path.stem] = read_bundle(path, scope)
    return list(found.values())


def find_bundle(name: str, workspace_root: Path | None) -> Bundle:
    validate_name(name)
    for bundle in list_bundles(workspace_root):
        if bundle.name == name:
            return bundle
    raise LauncherError(
        f"no launcher named {name!r} (add it with: httk workflow launcher add --template TEMPLATE {name})"
    )


def remove_bundle(name: str, directory: Path) -> Path:
    validate_name(name)
    path = directory / f"{name}.json"
    if not _fsops.unlink(path, durable=True, missing_ok=True):
        raise LauncherError(f"no launcher {name!r} in {directory}")
    return path


# -- templates ---------------------------------------------------------------------------------------
def templates() -> dict[str, Any]:
    """Template name → entry point, from the ``httk.workflow.launchers`` group."""
    from importlib.metadata import entry_points

    return {entry.name: entry for entry in entry_points(group=ENTRY_POINT_GROUP)}


def launcher_for(bundle: Bundle) -> Launcher:
    entry = templates().get(bundle.template)
    if entry is None:
        raise LauncherError(
            f"launcher {bundle.name!r} names the template {bundle.template!r}, which no installed "
            f"package provides (known: {', '.join(sorted(templates()))})"
        )
    launcher: Launcher = entry.load()()
    return launcher


def settings_read(template: str) -> list[str]:
    """The workspace settings a template reads, for ``launcher show``."""
    entry = templates().get(template)
    own = () if entry is None else tuple(getattr(entry.load(), "settings", ()))
    return [*COMMON_SETTINGS, *own]


def selected_bundle(settings: Mapping[str, Any], workspace_root: Path) -> Bundle:
    """The bundle ``manager.launch`` names (the built-in process launcher when unset)."""
    name = settings.get("manager.launch")
    if name is None:
        return BUILT_IN_BUNDLE
    if not isinstance(name, str):
        raise LauncherError(f"the setting manager.launch must be a launcher name, not {name!r}")
    return find_bundle(name, workspace_root)


# -- the manager command ----------------------------------------------------------------------------
DEFAULT_COMMAND = "httk"


def prelude(settings: Mapping[str, Any]) -> str | None:
    value = settings.get("environment.prelude")
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise LauncherError(f"the setting environment.prelude must be shell text, not {value!r}")
    return value


def manager_command(settings: Mapping[str, Any]) -> list[str]:
    value = settings.get("manager.command", DEFAULT_COMMAND)
    if not isinstance(value, str) or not value.strip():
        raise LauncherError(f"the setting manager.command must be a command, not {value!r}")
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise LauncherError(f"the setting manager.command {value!r} cannot be split: {exc}") from None
    return words


def needs_shell(settings: Mapping[str, Any]) -> bool:
    return prelude(settings) is not None


def shell_script(program: Sequence[str], arguments: Sequence[str], settings: Mapping[str, Any]) -> str:
    """The shell text that runs the prelude (if any) under ``set -e``, then ``exec``\\ s the manager."""
    text = prelude(settings)
    lines = ["set -e"]
    if text is None:
        lines.append("exec " + shlex.join([*program, *arguments]))
        return "\n".join(lines) + "\n"
    command = manager_command(settings)
    missing = f"httk: manager.command {command[0]!r} is not on PATH after the prelude"
    lines += [
        'trap \'status=$?; echo "httk: environment.prelude failed with status $status" >&2; '
        "exit $status' ERR",
        "# environment.prelude",
        text.rstrip("\n"),
        "# end of environment.prelude",
        "trap - ERR",
        f"if ! command -v {shlex.quote(command[0])} >/dev/null 2>&1; then",
        f"    echo {shlex.quote(missing)} >&2",
        "    exit 127",
        "fi",
        "exec " + shlex.join([*command, *arguments]),
    ]
    return "\n".join(lines) + "\n"


# -- the process launcher ---------------------------------------------------------------------------
OUTPUT_FILE = "output.log"


class ProcessLauncher:
    template = "process"
    settings: tuple[str, ...] = ()

    def launch(self, request: LaunchRequest) -> LaunchReport:
        started: list[Started] = []
        processes: list[subprocess.Popen[bytes]] = []
        ids = list(request.manager_ids) or [str(uuid.uuid4()) for _ in range(request.count)]
        for index, manager_id in enumerate(ids[: request.count]):
            arguments = [*request.arguments, "--manager-id", manager_id]
            if request.count > 1:
                arguments += ["--host-share", f"{index}/{request.count}"]
            try:
                process, output = _start(request, manager_id, arguments)
            except OSError as exc:
                pids = tuple(item.ident for item in started)
                raise LaunchError(
                    f"manager {index + 1} of {request.count} could not be started: {exc}; "
                    f"started: {len(pids)}; pids: [{', '.join(pids)}]",
                    pids,
                ) from exc
            processes.append(process)
            started.append(Started("process", str(process.pid), output, manager_id))
        return LaunchReport(
            request.launcher, self.template, tuple(started), waits=True, processes=tuple(processes)
        )


def _start(
    request: LaunchRequest, manager_id: str, arguments: list[str]
) -> tuple[subprocess.Popen[bytes], Path]:
    directory = request.workspace / ".httk-workflow" / "managers" / manager_id
    _fsops.make_dirs(directory.parent, durable=False)
    _fsops.make_dir(directory, durable=False)  # the id is fresh: an existing directory is an error
    output = directory / OUTPUT_FILE
    if needs_shell(request.settings):
        script = shell_script(request.program, arguments, request.settings)
        argv = ["/bin/bash", "-c", script, "httk-manager"]
    else:
        argv = [*request.program, *arguments]
    fd = _fsops.create_for_append(output)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            cwd=request.workspace,
            start_new_session=True,
        )
    finally:
        os.close(fd)
    return process, output


# -- stopping managers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class StopResult:
    manager_id: str
    signalled: bool
    how: str  # what was done, or why nothing was

    def line(self) -> str:
        return f"manager {self.manager_id}: {self.how}"


def stop_managers(workspace: Workspace, manager_ids: tuple[str, ...] = ()) -> list[StopResult]:
    """Signal the named live managers (every live one when ``manager_ids`` is empty) to drain."""
    views = {view.manager_id: view for view in list_managers(workspace)}
    if manager_ids:
        return [
            _stop(views[manager_id])
            if manager_id in views
            else StopResult(manager_id, False, "no such manager")
            for manager_id in manager_ids
        ]
    return [_stop(view) for view in views.values() if view.live]


def _stop(view: ManagerView) -> StopResult:
    if not view.live:
        return StopResult(view.manager_id, False, f"not live ({view.state}); nothing to stop")
    manifest: dict[str, Any] = view.manifest or {}
    batch = manifest.get("batch")
    if isinstance(batch, dict) and batch.get("system") == "slurm" and str(batch.get("job_id", "")).isdigit():
        return _scancel(view.manager_id, str(batch["job_id"]))
    if manifest.get("host") != hostname():
        return StopResult(
            view.manager_id, False, f"runs on host {manifest.get('host')}; run manager stop there"
        )
    return _kill(view.manager_id, manifest)


def _scancel(manager_id: str, job_id: str) -> StopResult:
    argv = ["scancel", "--batch", "--signal=TERM", job_id]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return StopResult(manager_id, False, f"{' '.join(argv)} could not run: {exc}")
    if result.returncode != 0:
        message = " ".join(result.stderr.split()) or f"exit status {result.returncode}"
        return StopResult(manager_id, False, f"{' '.join(argv)} failed: {message}")
    return StopResult(manager_id, True, f"asked Slurm job {job_id} to drain ({' '.join(argv)})")


def _kill(manager_id: str, manifest: dict[str, Any]) -> StopResult:
    pid, process = manifest.get("pid"), manifest.get("process")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1 or not isinstance(process, dict):
        return StopResult(manager_id, False, "its manifest records no verifiable process; not signalled")
    alive = process_alive({**process, "host": manifest.get("host"), "pid": pid})
    if alive is not True:
        return StopResult(manager_id, False, f"pid {pid} is no longer this manager; not signalled")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return StopResult(manager_id, False, f"pid {pid} exited meanwhile")
    except PermissionError:
        return StopResult(manager_id, False, f"pid {pid} belongs to another user; not signalled")
    return StopResult(manager_id, True, f"sent SIGTERM to pid {pid}: it drains and exits")
