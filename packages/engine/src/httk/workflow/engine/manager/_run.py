"""Running a manager for the command line: its labels and capacities checked, its log routed, a summary.

A manager started here always schedules resources: its capacities are the SLURM allocation's inside
one, this host's processors and memory outside, overridden by ``--worker-resource``.

**Host capacities.** A manager outside a Slurm allocation that was given no ``--worker-resource
procs`` (or ``mem``) advertises the processors it may run on (its CPU affinity, so a ``taskset`` or
container limit is respected) and the host's physical memory in MB. Manager ``I`` of ``N`` started
together on one host (``--host-share I/N``) takes a quotient-plus-remainder part, so together they
advertise the host exactly once; explicit capacities are per manager and never split.

**SLURM capacities** (``spec/03``, "Resources"), only when ``SLURM_JOB_ID`` is set; then, each rule on
its own:

- ``procs`` = ``SLURM_NTASKS``
- ``gpus`` = ``SLURM_GPUS`` (a count, optionally ``TYPE:COUNT``)
- ``nodes`` = ``SLURM_JOB_NUM_NODES``
- ``mem`` = ``SLURM_MEM_PER_CPU * SLURM_CPUS_PER_TASK * SLURM_NTASKS`` (``SLURM_CPUS_PER_TASK`` 1 when
  absent); without ``SLURM_MEM_PER_CPU``, ``SLURM_MEM_PER_NODE * SLURM_JOB_NUM_NODES``

Memory is in MB: a plain integer or one with a trailing ``M``; ``G`` is multiplied by 1024 and ``K``
divided by 1024 (rounded down). A missing variable omits only the capacity that needs it; an invalid one
(not a non-negative integer) omits it too and is reported in one warning per variable. The command
line's ``--worker-resource`` values override same-named derived ones (:func:`merged`).

The capacities are a pure function of the environment mapping given; the caller logs the warnings.

**Through a launcher** (DECISIONS D16): :func:`plan_run` decides what a command line means —
``--inline`` (or the D16 default: no ``manager.launch``, one manager, no ``--detach``) runs one manager
in the calling process; everything else goes to the launcher ``manager.launch`` names, with ``--count``
(else ``manager.count``, else 1) managers. :func:`wait_for_managers` is what a ``run`` without
``--detach`` does with local processes: forward SIGTERM and SIGINT to them (so Ctrl-C drains every
manager), wait, and print the last line each wrote (its summary, or the error that stopped it).

**Logging.** The complete record goes to a file, warnings to the console, optionally as JSON lines.
Every record carries the manager id, so the logs of several managers sharing a file or a collector can
be told apart. The file receives everything at ``level`` (info by default); the console receives
warnings and errors; an explicit ``--log-level`` sets both.

A run routes its log with :func:`routed`, which removes and closes what it installed when the run ends,
however it ends: a manager run in a process that lives on (a test, a library caller, ``job debug``)
must not keep its log file open, nor send the next run's records to it or to a stream that is gone.

The file is bounded as spec/03 bounds the managers' log: when the manager starts, and every 1,000
records after that, a file past 16 MiB is renamed to ``<log>.1`` (replacing an older backup) and a new
one begun, so a manager serving for months keeps at most about 32 MiB of log. Checking the size every
1,000 records instead of on each one keeps the cost off the records a manager writes per job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from httk.workflow.engine.core import _fsops, _states
from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.core._user_dirs import data_home
from httk.workflow.engine.core._workspace import Workspace, attach
from httk.workflow.protocol import (
    InvalidNameError,
    LauncherError,
    validate_capability,
    validate_placement,
    validate_pool,
    validate_uuid,
)
from httk.workflow.protocol._job_rules import MAX_COUNT

from ._detach import DEFAULT_RESCAN_SECONDS, refuse_detached
from ._fleet import Fleet
from ._launchers import BUILT_IN, LaunchReport, LaunchRequest, launcher_for, selected_bundle
from ._manager import Manager, RunSummary
from ._rules import describe
from ._state import Census, ManagerConfig, take_census
from ._watch import WatchRoster, check_targets, member_maker

if TYPE_CHECKING:
    from io import TextIOWrapper

log = logging.getLogger("httk.workflow.manager")


def check_config(config: ManagerConfig) -> None:
    """Refuse malformed labels before anything is written to the workspace."""
    for pool in config.pools:
        validate_pool(pool)
    for capability in config.capabilities:
        validate_capability(capability)
    for prefix in config.placement_prefixes:
        validate_placement(prefix)
    for label, amount in (config.resources or {}).items():
        check_capacity(label, amount)
    if config.manager_id is not None:
        validate_uuid(config.manager_id)  # it names a directory below managers/


def check_capacity(label: str, amount: object) -> None:
    """A capacity is a resource label (job.json's syntax) and an amount from 0 to 2**63 - 1."""
    try:
        validate_capability(label)
    except InvalidNameError as exc:
        raise InvalidNameError("resource name", label, exc.rule) from None
    if type(amount) is not int or not 0 <= amount <= MAX_COUNT:
        raise InvalidNameError(f"amount of resource {label}", amount, "must be a non-negative integer")


def with_capacities(
    config: ManagerConfig, environ: Mapping[str, str], host_share: tuple[int, int] | None = None
) -> tuple[ManagerConfig, list[str]]:
    """``config`` scheduling the allocation's (or this host's) capacities overridden by its own; warnings."""
    if "SLURM_JOB_ID" in environ:
        derived, warnings = slurm_capacities(environ)
    else:
        derived, warnings = host_capacities(host_share), []
    return dataclasses.replace(config, resources=merged(derived, config.resources or {})), warnings


def host_capacities(share: tuple[int, int] | None = None) -> dict[str, int]:
    """``procs`` and ``mem`` (MB) of this host, or manager ``I``'s part of ``N`` when ``share`` is given."""
    try:
        processors: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        processors = os.cpu_count()
    try:
        memory: int | None = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
    except (ValueError, OSError):
        memory = None
    present = {label: amount for label, amount in (("procs", processors), ("mem", memory)) if amount}
    if share is None:
        return present
    index, count = share
    return {label: split(amount, index, count) for label, amount in present.items()}


def split(total: int, index: int, count: int) -> int:
    """Part ``index`` of ``total`` divided ``count`` ways, the remainder going to the first parts."""
    quotient, remainder = divmod(total, count)
    return quotient + (1 if index < remainder else 0)


def unmatched_prefixes(workspace: Workspace, prefixes: Sequence[str]) -> list[str]:
    """The prefixes below which no state kind has a directory: a typo, or work not yet submitted."""
    return [
        prefix
        for prefix in prefixes
        if not any(workspace.marker_dir(kind, prefix).is_dir() for kind in _states.Kind)
    ]


def banner(manager: Manager, log_file: Path) -> str:
    config = manager.config
    return (
        f"httk manager {manager.manager_id} serving {manager.workspace.root} "
        f"(log {log_file}; pools {','.join(config.pools)}; "
        f"capabilities {','.join(config.capabilities) or '-'}; executors path; "
        f"resources {describe(config.resources or {})}; workers {config.workers}; "
        f"confinement {manager.state.confiner.describe()})"
    )


def run_manager(
    workspace: str | Path,
    config: ManagerConfig,
    *,
    log_level: str | None = None,
    log_file: Path | None = None,
    json_logs: bool = False,
    as_json: bool = False,
    echo: Callable[[str], object] = print,
    environ: Mapping[str, str] | None = None,
    host_share: tuple[int, int] | None = None,
    rescan_interval: float = DEFAULT_RESCAN_SECONDS,
) -> RunSummary:
    check_config(config)
    level_number(log_level)  # refused before the manager writes anything
    config, warnings = with_capacities(config, os.environ if environ is None else environ, host_share)
    refuse_detached(Path(workspace))
    manager = Manager(workspace, config)
    manager.start()
    roster = WatchRoster.adopting(manager, rescan_interval)
    path = log_file or manager.workspace.managers_dir / manager.manager_id / "log"
    with routed(manager.manager_id, path, level=log_level, json_logs=json_logs):
        for warning in warnings:
            log.warning("SLURM capacities: %s", warning)
        for prefix in unmatched_prefixes(manager.workspace, config.placement_prefixes):
            log.warning(
                "--placement-prefix %s matches no job in any state yet; this manager serves that subtree "
                "once work arrives there",
                prefix,
            )
        echo(banner(manager, path))
        try:
            summary = manager.run(roster)
        finally:
            roster.close()
    report(summary, as_json=as_json, echo=echo)
    return summary


def report(summary: RunSummary, *, as_json: bool, echo: Callable[[str], object], where: str = "") -> None:
    """The summary line a manager prints when it stops (one per workspace it served), or its JSON."""
    if as_json:
        document = {
            "manager_id": summary.manager_id,
            "exit_reason": summary.exit_reason,
            "launched": summary.launched,
            "committed": summary.committed,
            **summary.census.as_dict(),
            "advice": summary.census.advice(),
        }
        echo(json.dumps({"workspace": where, **document} if where else document))
        return
    if summary.exit_reason == "detached":
        echo(f"{where or 'workspace'}: detached (acknowledged; no longer served by this manager)")
        return
    echo(f"{where}: {summary.census.line()}" if where else summary.census.line())
    if summary.exit_reason == "idle-timeout":
        for line in summary.census.advice():
            echo(f"advice: {line}")


def run_workspaces(
    explicit: Sequence[Path],
    watch_roots: Sequence[Path],
    config: ManagerConfig,
    *,
    rescan_interval: float = DEFAULT_RESCAN_SECONDS,
    log_level: str | None = None,
    log_file: Path | None = None,
    json_logs: bool = False,
    as_json: bool = False,
    echo: Callable[[str], object] = print,
    environ: Mapping[str, str] | None = None,
    host_share: tuple[int, int] | None = None,
) -> list[RunSummary]:
    """One manager process serving several workspaces and watch roots (:mod:`._watch`); a summary each."""
    check_config(config)
    level_number(log_level)
    explicit = [Path(os.path.abspath(path)) for path in explicit]
    watch_roots = [Path(os.path.abspath(path)) for path in watch_roots]
    check_targets(explicit, watch_roots)
    config, warnings = with_capacities(config, os.environ if environ is None else environ, host_share)
    process_id = config.manager_id or str(uuid.uuid4())
    path = log_file or data_home() / "managers" / f"{process_id}.log"
    clock = SYSTEM_CLOCK
    roster = WatchRoster(explicit, watch_roots, config, clock, member_maker(config, clock), rescan_interval)
    summaries: list[tuple[Path, RunSummary]] = []
    reason = "idle"
    with routed(process_id, path, level=log_level, json_logs=json_logs):
        for warning in warnings:
            log.warning("SLURM capacities: %s", warning)
        try:
            roster.refresh()
            if roster.members():
                roster.members()[0].notice_confinement()
            found = roster.discovered()
            echo(
                f"httk manager {process_id} serving {len(found)} workspace(s) "
                f"({', '.join(map(str, found)) or 'none yet'}; watch roots "
                f"{', '.join(map(str, watch_roots)) or '-'}; rescan every {rescan_interval:g} s; log {path}; "
                f"pools {','.join(config.pools)}; resources {describe(config.resources or {})}; "
                f"workers {config.workers} shared)"
            )
            reason = Fleet(roster, config, clock).serve()
            for member in roster.members():
                census = take_census(member.workspace, config)
                summaries.append((member.workspace.root, member.summary(census, reason)))
        finally:
            for member in roster.members():
                member.close()
            roster.close()
    for root, summary in summaries:
        report(summary, as_json=as_json, echo=echo, where=str(root))
    if not summaries:
        report(RunSummary(process_id, Census(), exit_reason=reason), as_json=as_json, echo=echo, where="-")
    return [summary for _, summary in summaries]


# -- through a launcher ----------------------------------------------------------------------------
PROGRAM = (sys.executable, "-m", "httk.workflow.cli")
"""How a launcher starts ``httk``: this interpreter, so a virtual environment's manager stays in it."""


@dataclass(frozen=True)
class RunPlan:
    """How ``manager run`` runs: one manager in this process, or ``count`` through ``bundle_name``."""

    root: Path  # the workspace root, absolute
    inline: bool
    count: int
    settings: Mapping[str, Any]
    bundle_name: str = BUILT_IN

    def workers(self, given: int | None) -> int:
        """Attempts each manager runs at once: ``given`` (``--workers``), else manager.workers, else 1."""
        return given or positive_setting(self.settings, "manager.workers") or 1


def positive_setting(settings: Mapping[str, Any], name: str) -> int | None:
    value = settings.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LauncherError(f"the setting {name} must be a positive integer, not {value!r}")
    return value


def plan_run(root: Path, *, count: int | None, detach: bool, inline: bool) -> RunPlan:
    """Inline, or which launcher and how many managers; refuses ``--inline`` with several managers."""
    workspace = attach(root)
    settings, root = workspace.settings, workspace.root
    workspace.close()
    if inline:  # manager.count is the launch default; an inline manager is always one
        if count not in (None, 1):
            raise LauncherError(f"--inline runs one manager in this process; it cannot run {count}")
        if detach:
            raise LauncherError("--inline runs the manager in this process; it cannot --detach")
        return RunPlan(root, True, 1, settings)
    wanted = count if count is not None else positive_setting(settings, "manager.count") or 1
    if settings.get("manager.launch") is None and wanted == 1 and not detach:
        return RunPlan(root, True, 1, settings)  # D16: the process launcher's one foreground manager
    bundle = selected_bundle(settings, root)
    return RunPlan(root, False, wanted, settings, bundle.name)


def launch_managers(plan: RunPlan, arguments: Sequence[str]) -> LaunchReport:
    """Start ``plan.count`` managers through the selected launcher."""
    root = plan.root
    bundle = selected_bundle(plan.settings, root)
    request = LaunchRequest(
        program=PROGRAM,
        arguments=tuple(arguments),
        workspace=root,
        count=plan.count,
        settings=plan.settings,
        launcher=bundle.name,
    )
    return launcher_for(bundle).launch(request)


def wait_for_managers(report: LaunchReport, echo: Callable[[str], object]) -> int:
    """Wait for the launched processes (signals forwarded); print each one's last line; worst status."""
    processes: Sequence[subprocess.Popen[bytes]] = report.processes

    def forward(signum: int, _frame: object) -> None:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        statuses = [process.wait() for process in processes]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for started, status in zip(report.started, statuses, strict=True):
        last = _last_line(started.output)
        echo(f"manager {started.manager_id} (pid {started.ident}) exited {status}: {last}")
    return max((abs(status) for status in statuses), default=0)


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(no output: {exc})"
    return lines[-1] if lines else "(no output)"


# -- SLURM capacities ------------------------------------------------------------------------------
_INTEGER = re.compile(r"[0-9]+\Z")
_MEMORY = re.compile(r"([0-9]+)([MGK]?)\Z", re.IGNORECASE)
_GPUS = re.compile(r"(?:[^:\s]+:)?([0-9]+)\Z")


def _count(raw: str) -> int | None:
    return int(raw) if _INTEGER.match(raw) else None


def _gpus(raw: str) -> int | None:
    match = _GPUS.match(raw)
    return None if match is None else int(match.group(1))


def _megabytes(raw: str) -> int | None:
    match = _MEMORY.match(raw)
    if match is None:
        return None
    amount, unit = int(match.group(1)), match.group(2).upper()
    return amount * 1024 if unit == "G" else amount // 1024 if unit == "K" else amount


Kind = tuple[Callable[[str], int | None], str]
"""How to read one kind of variable, and what a valid value is (for the warning)."""
COUNT: Kind = (_count, "a non-negative integer")
GPUS: Kind = (_gpus, "a GPU count (optionally TYPE:COUNT)")
MEMORY: Kind = (_megabytes, "an amount of memory in MB (optionally with a K, M or G suffix)")


class _Reader:
    """Reads SLURM variables from one environment, warning about each invalid one once."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.warnings: list[str] = []
        self._read: dict[str, int | None] = {}

    def present(self, name: str) -> bool:
        return name in self.environ

    def get(self, name: str, kind: Kind = COUNT) -> int | None:
        """The variable's value, or ``None`` when it is absent or invalid."""
        if name not in self._read:
            raw = self.environ.get(name)
            value = None if raw is None else kind[0](raw.strip())
            if raw is not None and value is None:
                self.warnings.append(f"ignoring {name}={raw!r}: not {kind[1]}")
            self._read[name] = value
        return self._read[name]


def slurm_capacities(environ: Mapping[str, str]) -> tuple[dict[str, int], list[str]]:
    """The capacities the SLURM allocation in ``environ`` describes, and warnings about invalid input."""
    if "SLURM_JOB_ID" not in environ:
        return {}, []
    reader = _Reader(environ)
    derived: dict[str, int | None] = {
        "procs": reader.get("SLURM_NTASKS"),
        "gpus": reader.get("SLURM_GPUS", GPUS),
        "nodes": reader.get("SLURM_JOB_NUM_NODES"),
        "mem": _memory(reader),
    }
    return {label: amount for label, amount in derived.items() if amount is not None}, reader.warnings


def _memory(reader: _Reader) -> int | None:
    if reader.present("SLURM_MEM_PER_CPU"):
        per_cpu = reader.get("SLURM_MEM_PER_CPU", MEMORY)
        cpus = reader.get("SLURM_CPUS_PER_TASK") if reader.present("SLURM_CPUS_PER_TASK") else 1
        tasks = reader.get("SLURM_NTASKS")
        return None if per_cpu is None or cpus is None or tasks is None else per_cpu * cpus * tasks
    per_node = reader.get("SLURM_MEM_PER_NODE", MEMORY)
    nodes = reader.get("SLURM_JOB_NUM_NODES")
    return None if per_node is None or nodes is None else per_node * nodes


def merged(derived: Mapping[str, int], given: Mapping[str, int]) -> dict[str, int]:
    """The derived capacities with the command line's values replacing same-named ones."""
    return {**derived, **given}


LOGGER = "httk.workflow"


class _ManagerFilter(logging.Filter):
    def __init__(self, manager_id: str) -> None:
        super().__init__()
        self.manager_id = manager_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.manager_id = self.manager_id
        return True


class BoundedFileHandler(logging.FileHandler):
    """A log file replaced by a fresh one past :attr:`max_bytes`, keeping one backup ``<name>.1``."""

    max_bytes = 16 << 20
    check_every = 1000

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8")
        self._records = 0
        self._rotate_if_large()

    def _open(self) -> TextIOWrapper:
        # Created through the seam like every other name the engine makes; its records are appended
        # by logging, not counted: a log line is neither a crash point nor a place a fault is planned.
        return os.fdopen(_fsops.open_for_append(self.baseFilename), "a", encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self._records += 1
        if self._records >= self.check_every:
            self._records = 0
            self._rotate_if_large()  # emit runs under the handler's lock (Handler.handle)

    def _rotate_if_large(self) -> None:
        stream = self.stream
        if stream is None:
            return
        try:
            if os.fstat(stream.fileno()).st_size <= self.max_bytes:
                return
            stream.close()
            _fsops.rename(self.baseFilename, self.baseFilename + ".1", durable=False, noreplace=False)
        except OSError:
            return  # a log that cannot be rotated keeps growing rather than stopping the manager
        finally:
            if stream.closed:
                self.stream = self._open()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, manager id, message."""

    def format(self, record: logging.LogRecord) -> str:
        document = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "manager_id": getattr(record, "manager_id", None),
            "message": record.getMessage(),
        }
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=False)


def level_number(level: str | None) -> int:
    """The numeric level of a ``--log-level`` name (info when absent); an unknown name is bad input."""
    numeric = logging.getLevelName((level or "info").upper())
    if not isinstance(numeric, int):
        raise InvalidNameError("log level", level, "use debug, info, warning or error")
    return numeric


def configure(
    manager_id: str, log_file: Path, *, level: str | None = None, json_logs: bool = False
) -> list[logging.Handler]:
    """Route the ``httk.workflow`` loggers to ``log_file`` and standard error; return the new handlers.

    Without ``level`` the file gets info and the console warnings; a given level sets both. The caller
    owns the returned handlers (:func:`routed` closes them).
    """
    numeric = level_number(level)
    logger = logging.getLogger(LOGGER)
    logger.handlers.clear()
    logger.setLevel(numeric)
    logger.propagate = False
    text = logging.Formatter("%(asctime)s %(levelname)s [%(manager_id)s] %(message)s")
    formatter: logging.Formatter = JsonFormatter() if json_logs else text
    _fsops.make_dirs(log_file.parent, durable=False)
    file_handler = BoundedFileHandler(log_file)
    file_handler.setFormatter(formatter)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(numeric if level is not None else logging.WARNING)
    console.setFormatter(formatter if json_logs else logging.Formatter("%(levelname)s: %(message)s"))
    handlers: list[logging.Handler] = [file_handler, console]
    for handler in handlers:
        handler.addFilter(_ManagerFilter(manager_id))
        logger.addHandler(handler)
    return handlers


@contextlib.contextmanager
def routed(
    manager_id: str, log_file: Path, *, level: str | None = None, json_logs: bool = False
) -> Iterator[None]:
    """:func:`configure` for the duration of the block; then close its handlers and restore the routing
    the ``httk.workflow`` logger had before, also when the block raises."""
    logger = logging.getLogger(LOGGER)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    installed = configure(manager_id, log_file, level=level, json_logs=json_logs)
    try:
        yield
    finally:
        for handler in installed:
            logger.removeHandler(handler)
            handler.close()
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]
