"""Running VASP under supervision: its own process group, a time limit, and a graceful stop.

VASP is started from ``vasp.command`` (split like a shell would, but never run through one; ``{procs}``
becomes the attempt's ``procs`` allocation) in a new process group in the workdir, with its standard
output and error in ``vasp.out`` and ``vasp.err``. Its identity (host, pid, process group, start time,
boot id) is recorded in ``.httk-vasp/process.json`` while it runs, so a later attempt can find and stop
a VASP that outlived its runner; and the kernel kills VASP if the runner dies (``PR_SET_PDEATHSIG``).

Stopping -- at the runner's own ``vasp.timeout`` (the manager applies no attempt timeout to these jobs),
when the runner itself receives SIGTERM or SIGINT, or when the monitor sees an error that VASP would
run on with -- goes in three stages, each waited for in turn: a STOPCAR with ``LABORT = .TRUE.`` (VASP
ends at its next electronic step and writes its outputs), then SIGTERM to the whole process group after
``vasp.stop_grace`` seconds, then SIGKILL after ``vasp.kill_grace``. Whatever ends it, the group is
sent SIGKILL once the main process has exited, so no launched rank keeps writing the workdir.

Where ``vasp.command`` starts VASP through ``srun`` or ``mpirun``, the main process is the launcher: the
STOPCAR reaches VASP's ranks through the filesystem, the signals reach the launcher's group, and the
launcher forwards them to ranks it started on other nodes. The exit the runner can verify is the
launcher's; that Slurm or MPI then ended every remote rank is the launcher's promise, not checked here.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import time
from collections.abc import Callable, Mapping

from ._child import Child, death_signal, spawn
from ._errors import VaspCommandError
from ._files import write_atomically
from ._record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

PROCESS_FILE = ".httk-vasp/process.json"
STOPCAR = "STOPCAR"
STDOUT = "vasp.out"
STDERR = "vasp.err"


class RunReport(Record):
    """How one VASP run ended.

    ``status`` is the exit status, negative for a signal (as ``subprocess`` reports it); ``stopped`` why
    the runner stopped it (``timeout``, ``signal``, or ``error:<problem>``), ``None`` when it ended on its
    own; ``stop_stage`` the stage that ended it (``stopcar``, ``sigterm``, ``sigkill``); ``runner_signal``
    the signal the runner itself received while VASP ran.
    """

    __slots__ = ("argv", "runner_signal", "seconds", "status", "stop_stage", "stopped")

    def __init__(
        self,
        status: int,
        seconds: float,
        argv: list[str],
        *,
        stopped: str | None = None,
        stop_stage: str | None = None,
        runner_signal: int | None = None,
    ) -> None:
        self.status = status
        self.seconds = seconds
        self.argv = argv
        self.stopped = stopped
        self.stop_stage = stop_stage
        self.runner_signal = runner_signal


def command_argv(command: object, procs: int) -> list[str]:
    """The argument vector of ``vasp.command`` with ``{procs}`` substituted.

    Raises
    ------
    VaspCommandError
        ``vasp.command_missing`` when the command is unset or empty; ``vasp.command_unavailable`` when
        it cannot be split or names an unknown placeholder.

    Examples
    --------
    >>> from httk.workflow.vasp import command_argv
    >>> command_argv("srun -n {procs} vasp_std", 32)
    ['srun', '-n', '32', 'vasp_std']
    """
    if command is None or (isinstance(command, str) and not command.strip()):
        raise VaspCommandError(
            "vasp.command is not set: set it for the workspace with 'httk workflow workspace settings set "
            "WORKSPACE vasp.command \"srun -n {procs} vasp_std\"', in HTTK_VASP_COMMAND, or as the job's "
            "vasp.command input",
            code="vasp.command_missing",
        )
    if not isinstance(command, str):
        raise VaspCommandError(
            f"vasp.command must be a string, not {command!r}", code="vasp.command_unavailable"
        )
    try:
        words = shlex.split(command)
        return [word.format_map({"procs": procs}) for word in words]
    except (ValueError, KeyError, IndexError) as exc:
        raise VaspCommandError(
            f"vasp.command {command!r} cannot be used ({exc}); it is split like a shell line and may use "
            "{procs}",
            code="vasp.command_unavailable",
        ) from None


def process_identity(pid: int) -> dict[str, object]:
    """Host, pid, process group, start time (clock ticks since boot) and boot id of a live process.

    The files are read as bytes and decoded as ASCII: a text stream would load the ASCII codec module.
    """
    with open(f"/proc/{pid}/stat", "rb") as stream:
        fields = stream.read().decode("ascii").rsplit(")", 1)[1].split()
    with open("/proc/sys/kernel/random/boot_id", "rb") as stream:
        boot = stream.read().decode("ascii").strip()
    return {
        "host": os.uname().nodename,
        "pid": pid,
        "pgid": int(fields[2]),
        "start": int(fields[19]),
        "boot": boot,
    }


def still_running(identity: Mapping[str, object]) -> bool | None:
    """Whether the recorded process lives: ``None`` when that cannot be told from this host."""
    if identity.get("host") != os.uname().nodename:
        return None
    try:
        current = process_identity(int(identity["pid"]))  # type: ignore[call-overload]
    except (OSError, KeyError, ValueError, IndexError):
        return False
    return current["start"] == identity.get("start") and current["boot"] == identity.get("boot")


def stop_leftover(workdir: StrPath, grace: float) -> str | None:
    """Stop a VASP a dead runner left running (its process.json), before anything touches the workdir.

    Returns what was found: ``None`` (nothing recorded), ``gone``, ``stopped``, or ``elsewhere`` (recorded
    on another host; the manager's takeover evidence that its allocation ended is trusted then).
    """
    path = os.path.join(workdir, PROCESS_FILE)
    try:
        with open(path, "rb") as stream:
            identity = json.loads(stream.read())
    except (OSError, ValueError):
        return None
    alive = still_running(identity)
    verdict = "elsewhere" if alive is None else "stopped" if alive else "gone"
    if alive:
        pgid = int(identity["pgid"])
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            _signal_group(pgid, sig)
            if _wait_gone(identity, wait):
                break
        _signal_group(pgid, signal.SIGKILL)  # whatever else of its group is left
    _remove(path)
    return verdict


def _wait_gone(identity: Mapping[str, object], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while still_running(identity):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _signal_group(pgid: int, sig: int) -> None:
    if pgid <= 1:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):  # gone, or no longer ours to signal
        return


class _Signals:
    """SIGTERM and SIGINT noted, not obeyed at once: the runner stops VASP first, then returns.

    Every signal with a handler wakes :attr:`fd`, SIGCHLD included: the runner sleeps in ``select`` on
    it until VASP ends, a signal comes or the next poll is due (no pidfd, which kernels before 5.3 and
    some sandboxes lack).
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        self._old_fd = signal.set_wakeup_fd(self._write)
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._note)
        self._previous[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._wake)
        return self

    def _note(self, signum: int, frame: object) -> None:
        self.received = signum

    def _wake(self, signum: int, frame: object) -> None:
        """A child ended: the wake-up byte is all that is needed."""

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        signal.set_wakeup_fd(self._old_fd)
        os.close(self._read)
        os.close(self._write)

    @property
    def fd(self) -> int:
        return self._read

    def drain(self) -> None:
        try:
            while os.read(self._read, 64):
                pass
        except BlockingIOError:
            pass


def run_vasp(
    argv: list[str],
    workdir: StrPath,
    *,
    timeout: float | None,
    stop_grace: float,
    kill_grace: float,
    poll_seconds: float,
    monitor: Callable[[], str | None] | None = None,
    on_start: Callable[[], None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunReport:
    """Run VASP in ``workdir`` until it ends, stopping it on time-out, signal or a monitored error.

    ``monitor`` is called every ``poll_seconds``; when it returns a problem name, VASP is stopped and the
    report says ``error:<problem>``. ``on_start`` is called once VASP runs (and its identity is recorded),
    before the runner waits for it: work done there overlaps VASP's.

    Raises
    ------
    VaspCommandError
        ``vasp.command_unavailable`` when the executable cannot be started.
    """
    process_file = os.path.join(workdir, PROCESS_FILE)
    _remove(os.path.join(workdir, STOPCAR))
    _make_dir(os.path.dirname(process_file))
    started = time.monotonic()
    with (
        _Signals() as signals,
        open(os.path.join(workdir, STDOUT), "wb") as out,
        open(os.path.join(workdir, STDERR), "wb") as err,
    ):
        try:
            process = spawn(
                argv,
                workdir,
                stdout=out.fileno(),
                stderr=err.fileno(),
                environ=environ,
                before_exec=death_signal(),
            )
        except OSError as exc:
            raise VaspCommandError(
                f"vasp.command cannot be started: {argv[0]}: {exc.strerror or exc}",
                code="vasp.command_unavailable",
            ) from None
        identity = process_identity(process.pid)
        write_json(process_file, identity)
        report = RunReport(status=0, seconds=0.0, argv=argv)
        try:
            if on_start is not None:
                on_start()
            _supervise(
                process,
                workdir,
                signals,
                report,
                timeout=timeout,
                graces=(stop_grace, kill_grace),
                poll_seconds=poll_seconds,
                monitor=monitor,
            )
        finally:
            _signal_group(process.pid, signal.SIGKILL)  # no launched rank outlives its launcher
            _remove(process_file)
    report.status = process.wait()  # reaped already: _supervise returns once it has ended
    report.seconds = time.monotonic() - started
    report.runner_signal = signals.received
    return report


def _supervise(
    process: Child,
    workdir: StrPath,
    signals: _Signals,
    report: RunReport,
    *,
    timeout: float | None,
    graces: tuple[float, float],
    poll_seconds: float,
    monitor: Callable[[], str | None] | None,
) -> None:
    stop_grace, kill_grace = graces
    deadline = None if timeout is None else time.monotonic() + timeout
    while process.poll() is None:
        wait = poll_seconds if deadline is None else max(0.0, min(poll_seconds, deadline - time.monotonic()))
        select.select([signals.fd], [], [], wait)
        signals.drain()
        if process.poll() is not None:
            break
        reason = None
        if signals.received is not None:
            reason = "signal"
            stop_grace, kill_grace = min(stop_grace, 3.0), min(kill_grace, 2.0)
        elif deadline is not None and time.monotonic() >= deadline:
            reason = "timeout"
        elif monitor is not None and (problem := monitor()) is not None:
            reason = f"error:{problem}"
        if reason is not None:
            report.stopped = reason
            report.stop_stage = _stop(process, workdir, signals, stop_grace, kill_grace)
            return


def _stop(process: Child, workdir: StrPath, signals: _Signals, stop_grace: float, kill_grace: float) -> str:
    """STOPCAR, then SIGTERM, then SIGKILL of the group; the stage that ended the process."""
    with open(os.path.join(workdir, STOPCAR), "w", encoding="ascii") as stopcar:
        stopcar.write("LABORT = .TRUE.\n")
    for stage, action, grace in (
        ("stopcar", None, stop_grace),
        ("sigterm", signal.SIGTERM, kill_grace),
        ("sigkill", signal.SIGKILL, 30.0),
    ):
        if action is not None:
            _signal_group(process.pid, action)
        deadline = time.monotonic() + grace
        while process.poll() is None and time.monotonic() < deadline:
            select.select([signals.fd], [], [], max(0.0, deadline - time.monotonic()))
            signals.drain()
        if process.poll() is not None:
            return stage
    process.wait()
    return "sigkill"


def write_json(path: StrPath, document: object) -> None:
    """A small JSON file through a temporary name and a rename."""
    write_atomically(path, (json.dumps(document, sort_keys=True) + "\n").encode("utf-8"))


def _make_dir(path: str) -> None:
    """Create the directory ``path`` unless it exists (``Path.mkdir(exist_ok=True)``)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def _remove(path: str) -> None:
    """Unlink ``path`` if it exists (``Path.unlink(missing_ok=True)``)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
