"""The local executor: a runner process started behind a one-byte launch gate.

:func:`spawn_gated` starts ``/bin/sh -c <gate> httk-gate <argv...>`` in a new session (so its process
group id is its pid and cancellation can signal the whole group), in the attempt's workdir, with stdout
and stderr appended to the control directory's logs and the read end of a pipe as its standard input.
The gate reads the one release byte from that pipe (up to end of file, which follows it at once):

- the release byte: it replaces its standard input with ``/dev/null`` and ``exec``\\ s the runner, so
  the runner keeps the gate's pid, process group and recorded identity, and inherits no descriptor of
  ours;
- end of file alone (the manager closed the pipe, or died, which closes it too): it exits with status
  :data:`GATE_ABORTED` (125) without executing anything.

This is what closes the crash window between recording a process and running it. The manager calls
:func:`write_process_file` (synchronized when durable) and commits its running marker, and only then
:meth:`GatedProcess.release`. Invariant: the release byte is written only after process.json is durable,
so an attempt without a process.json never executed its runner (cancellation evidence
``no_launched_process``). The write end is created close-on-exec and never passed to any child, so the
manager's own death is the only other thing that can close it.

A POSIX shell is the gate because it starts in under a millisecond (dash; bash where /bin/sh is
missing); a Python gate would add tens of milliseconds to every attempt. Process identity comes from
``/proc``: the pid's start time in clock ticks (field 22 of ``/proc/<pid>/stat``) detects a recycled pid,
the kernel boot id a reboot, and the pid namespace a container that shares the host name.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.publish._runner_staging import RunnerFailure
from httk.workflow.protocol import InvalidDocumentError
from httk.workflow.protocol._jsonio import dump_pretty, read_json_object

from ._attempt import PROTOCOL_VARIABLES, PreparedAttempt

GATE_ABORTED = 125
"""Exit status of a gate that was never released (it executed nothing)."""

PROCESS_FILE = "process.json"
PROCESS_FORMAT = "httk-workflow-process"
_RELEASE_BYTE = b"R"
_DEAD_STATES = frozenset({"Z", "X", "x"})
_LOG_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


class ProcessIdentity(TypedDict):
    """What process.json records: enough to tell the same process from a recycled pid or another host."""

    host: str
    pid: int
    pgid: int
    start_ticks: int | None
    boot_id: str | None
    pid_namespace: str | None


# The gate reads the release line from its standard input, which is the pipe; POSIX ``read`` takes bytes
# one at a time from a pipe up to the newline, so it never consumes more than the release. End of file
# leaves the variable empty (a manager that closed the pipe, or died): exit without running anything.
# Then standard input becomes /dev/null and the runner replaces the gate in the same process.
GATE_SCRIPT = (
    "IFS= read -r httk_gate\n"
    f'[ "$httk_gate" = {_RELEASE_BYTE.decode()} ] || exit {GATE_ABORTED}\n'
    f"exec </dev/null || exit {GATE_ABORTED}\n"
    'exec "$@"\n'
)


@functools.cache
def _shell() -> str:
    """The POSIX shell that runs the gate: /bin/sh (dash starts in about half the time of bash)."""
    return "/bin/sh" if os.access("/bin/sh", os.X_OK) else shutil.which("bash") or "/bin/bash"


class GatedProcess:
    """One runner process, blocked on its gate until :meth:`release` (or gone after :meth:`abort`)."""

    def __init__(self, popen: subprocess.Popen[bytes], gate_fd: int) -> None:
        self._popen = popen
        self._gate_fd = gate_fd
        self.state = "gated"  # gated -> released | aborted
        self._identity = _identity(popen.pid)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(**self._identity)

    def release(self) -> bool:
        """Let the runner execute; ``False`` when the gate was already gone (it then ran nothing)."""
        if self.state != "gated":
            raise RuntimeError(f"cannot release a gate that is {self.state}")
        self.state = "released"
        try:
            os.write(self._gate_fd, _RELEASE_BYTE)
        except BrokenPipeError:
            return False
        finally:
            self._close_gate()
        return True

    def abort(self) -> bool:
        """Close the gate without releasing it: the process exits with 125. Idempotent once aborted."""
        if self.state == "released":
            return False
        self.state = "aborted"
        self._close_gate()
        return True

    def poll(self) -> int | None:
        """The exit status (negative for a signal, as Popen reports it) or ``None`` while running."""
        return self._popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit status; raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        return self._popen.wait(timeout)

    def terminate_group(self, sig: int = signal.SIGTERM) -> bool:
        """Signal the whole process group (the runner and every child it left in it).

        Returns whether any process received it. Signalling a gated process is safe: it dies in the gate.
        """
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _close_gate(self) -> None:
        if self._gate_fd >= 0:
            os.close(self._gate_fd)
            self._gate_fd = -1

    def __repr__(self) -> str:
        return f"<GatedProcess pid={self.pid} state={self.state} returncode={self._popen.returncode}>"


def spawn_gated(prepared: PreparedAttempt, *, environ: Mapping[str, str] | None = None) -> GatedProcess:
    """Start the prepared runner blocked on its launch gate; nothing of the runner executes yet.

    The environment is ``environ`` (default ``os.environ``) without any inherited protocol variable,
    updated with ``prepared.env``. Raises :class:`RunnerFailure` ``process_failure`` when the gate
    process cannot be started (for example a workdir that vanished).
    """
    read_fd, write_fd = os.pipe()  # both close-on-exec; the read end becomes the gate's stdin
    out_fd = err_fd = -1
    try:
        out_fd = _open_log(prepared.stdout_path)
        err_fd = _open_log(prepared.stderr_path)
        popen = subprocess.Popen(
            [_shell(), "-c", GATE_SCRIPT, "httk-gate", *prepared.argv],
            cwd=prepared.workdir,
            env=runner_environment(prepared, environ),
            stdin=read_fd,
            stdout=out_fd,
            stderr=err_fd,
            start_new_session=True,
        )
    except OSError as exc:
        os.close(write_fd)
        raise RunnerFailure(
            "process_failure",
            f"the runner process could not be started: {exc}",
            {"argv0": prepared.argv[0], "workdir": str(prepared.workdir)},
        ) from exc
    finally:
        for fd in (read_fd, out_fd, err_fd):
            if fd >= 0:
                os.close(fd)
    return GatedProcess(popen, write_fd)


def runner_environment(prepared: PreparedAttempt, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The runner's full environment: the manager's, minus stale protocol variables, plus the attempt's."""
    base = os.environ if environ is None else environ
    env = {name: value for name, value in base.items() if name not in PROTOCOL_VARIABLES}
    env.update(prepared.env)
    return env


def _open_log(path: Path) -> int:
    """Create the log through the mutation seam and open it for appending (an existing one is reused)."""
    try:
        return _fsops.create_for_append(path)
    except FileExistsError:
        return os.open(path, _LOG_FLAGS)


# -- process identity ------------------------------------------------------------------------------
def _identity(pid: int) -> ProcessIdentity:
    stat = _proc_stat(pid)
    return ProcessIdentity(
        host=socket.gethostname(),
        pid=pid,
        pgid=pid,  # a new session: the gate leads its own process group
        start_ticks=None if stat is None else stat[2],
        boot_id=_boot_id(),
        pid_namespace=_pid_namespace(),
    )


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start time in clock ticks) from ``/proc/<pid>/stat``; None when absent."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError):
        return None
    try:
        text = os.read(fd, 4096).decode("ascii", "replace")  # one read: the kernel renders it whole
    except ProcessLookupError:
        return None
    finally:
        os.close(fd)
    # The command name (field 2) may hold spaces and parentheses: the fields resume after the last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[2]), int(fields[19])


@functools.cache
def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


@functools.cache
def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_alive(identity: Mapping[str, Any]) -> bool | None:
    """Whether a recorded process still runs: ``None`` when that cannot be proven here.

    ``True``/``False`` only for an identity recorded on this host in this boot and pid namespace.
    ``False`` when the pid is gone, is a zombie (it can no longer write), or belongs to a process that
    started at another tick (a recycled pid). Another host, another boot id (a different machine with
    the same host name cannot be told from a reboot) or a malformed identity give ``None``.
    """
    if identity.get("host") != socket.gethostname() or _boot_id() is None:
        return None
    if identity.get("boot_id") != _boot_id() or identity.get("pid_namespace") != _pid_namespace():
        return None
    pid, ticks = _as_int(identity.get("pid")), _as_int(identity.get("start_ticks"))
    if pid is None or ticks is None or pid <= 0:
        return None
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in _DEAD_STATES and stat[2] == ticks


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` on this host still has a member that is not a zombie.

    Meaningful only for a group recorded on this host (check :func:`process_alive` first). A group whose
    members are all unreaped zombies counts as gone: they can no longer write, and a container whose
    init never reaps orphans would otherwise keep a cancellation waiting forever. Cost: one ``kill``;
    when it finds the group, one read of ``/proc/<pid>/stat`` per process on the host.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # the group exists under another user
    return _group_has_live_member(pgid)


def _group_has_live_member(pgid: int) -> bool:
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True  # no /proc: cannot look closer, so believe kill
    for pid in pids:
        stat = _proc_stat(pid)
        if stat is not None and stat[1] == pgid and stat[0] not in _DEAD_STATES:
            return True
    return False


# -- process.json ----------------------------------------------------------------------------------
def write_process_file(control_dir: Path, identity: ProcessIdentity, durable: bool) -> Path:
    """Record the gated process in ``<control>/process.json``; synchronized before it returns if durable."""
    path = control_dir / PROCESS_FILE
    document = {"format": PROCESS_FORMAT, "format_version": 1, **identity}
    _fsops.write_file_atomic(path, dump_pretty(document), durable=durable)
    return path


def read_process_file(control_dir: Path) -> dict[str, Any] | None:
    """The recorded identity, or ``None`` when no process.json exists (the runner never executed).

    A damaged file raises :class:`InvalidDocumentError`: it proves a process was recorded, so it must
    never be mistaken for "no launched process".
    """
    try:
        return read_json_object(control_dir / PROCESS_FILE, document=PROCESS_FILE)
    except InvalidDocumentError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise


def wait_for_exit(pids: Sequence[int], timeout: float) -> bool:
    """Block until one of ``pids`` (children of this process) exits, or ``timeout`` seconds pass.

    Uses Linux pidfds, so a finished runner is noticed at once instead of at the next poll; returns
    ``False`` without waiting where pidfds are unavailable, and the caller then sleeps its poll interval.
    """
    opener = getattr(os, "pidfd_open", None)
    if opener is None or not pids:
        return False
    import select

    poller = select.poll()
    descriptors: list[int] = []
    try:
        for pid in pids:
            try:
                fd = opener(pid)
            except ProcessLookupError:
                return True  # already gone: reap it now
            except OSError:
                return False
            descriptors.append(fd)
            poller.register(fd, select.POLLIN)
        poller.poll(max(timeout, 0.0) * 1000.0)
        return True
    finally:
        for fd in descriptors:
            os.close(fd)
