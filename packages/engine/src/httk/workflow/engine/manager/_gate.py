"""The launch gate: the runner's process, created blocked, released only once its running marker exists,
and reaped the moment it exits.

:func:`spawn_gated` starts ``/bin/sh -c <gate> httk-gate <workdir> <argv...>`` with ``posix_spawn`` in a
new session (so its process group id is its pid and cancellation can signal the whole group), with
stdout and stderr appended to the control directory's logs and the read end of a pipe as its standard
input. The gate enters the workdir, then reads the one release byte from that pipe (up to end of file,
which follows it at once):

- the release byte: it replaces its standard input with ``/dev/null`` and ``exec``\\ s the runner, so
  the runner keeps the gate's pid, process group and recorded identity;
- end of file alone (the manager closed the pipe, or died, which closes it too): it exits with status
  :data:`GATE_ABORTED` (125) without executing anything.

This is what closes the crash window between recording a process and running it. The manager calls
:func:`~httk.workflow.engine.core._liveness.write_process_file` (synchronized when durable) and commits
its running marker, and only then :meth:`GatedProcess.release`. Invariant: the release byte is written only
after process.json is durable, so an attempt without a process.json never executed its runner
(cancellation evidence ``no_launched_process``). The write end is created close-on-exec and never passed
to any child, so the manager's own death is the only other thing that can close it.

**What the runner inherits.** Its standard streams, and nothing else of ours: Python opens every
descriptor close-on-exec (PEP 446), ``posix_spawn`` puts the pipe and the logs on 0, 1 and 2 and closes
any descriptor someone made inheritable, and the signals Python ignores (``SIGPIPE``, ``SIGXFSZ``) are
reset to their defaults, as ``subprocess`` does.
The environment is the manager's without any protocol variable it inherited, plus the attempt's.

**Why posix_spawn and a pidfd rather than subprocess.** ``Popen`` re-encodes the whole environment in
Python and polls for the exit; a manager with two workers spent a third of a millisecond per attempt in
it. Here the environment is copied as bytes, the gate is spawned by the C library (``vfork`` semantics),
and each process holds a pidfd from its creation, on which :func:`wait_for_exit` sleeps: an exit wakes
the manager at once, with no polling interval and no race with a recycled pid. A gate whose workdir has
vanished is refused by ``posix_spawn`` itself (the workdir is opened as a file action), so it is a
``process_failure`` of the preparation, as before.
"""

from __future__ import annotations

import functools
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._liveness import ProcessIdentity, identity_of
from httk.workflow.engine.publish._runners import RunnerFailure

from ._landlock import Confinement, ConfinementError

GATE_ABORTED = 125
"""Exit status of a gate that was never released (it executed nothing)."""

PROTOCOL_VARIABLES = (
    "HTTK_WORKFLOW_CONTEXT",
    "HTTK_WORKFLOW_CONTROL_DIR",
    "HTTK_WORKFLOW_WORKSPACE_DIR",
    "HTTK_WORKFLOW_JOB_DIR",
    "HTTK_WORKFLOW_WORKDIR",
    "HTTK_WORKFLOW_IS_RESTART",
    "HTTK_WORKFLOW_UNCLEAN_RESTART",
    "HTTK_WORKFLOW_DURABLE",
    "HTTK_WORKFLOW_ATTEMPT_REASON",
    "HTTK_WORKFLOW_STEP",
    "HTTK_WORKFLOW_PYTHON",
    "HTTK_WORKFLOW_BASH_API",
    "HTTK_WORKFLOW_DATA_DIR",
)
"""Every attempt-specific variable of the protocol; none of them is ever inherited from the manager."""

_PROTOCOL_KEYS = frozenset(name.encode() for name in PROTOCOL_VARIABLES)
_RELEASE_BYTE = b"R"
_WORKDIR_PROBE_FD = 3  # where posix_spawn opens the workdir (and closes it again), after the dup2s

# The gate enters the workdir, then reads the release line from its standard input, which is the pipe;
# POSIX ``read`` takes bytes one at a time from a pipe up to the newline, so it never consumes more than
# the release. End of file leaves the variable empty (a manager that closed the pipe, or died): exit
# without running anything. Then standard input becomes /dev/null and the runner replaces the gate in
# the same process.
GATE_SCRIPT = (
    f'cd -- "$1" || exit {GATE_ABORTED}\n'
    "shift\n"
    "IFS= read -r httk_gate\n"
    f'[ "$httk_gate" = {_RELEASE_BYTE.decode()} ] || exit {GATE_ABORTED}\n'
    f"exec </dev/null || exit {GATE_ABORTED}\n"
    'exec "$@"\n'
)


class Launchable(Protocol):
    """What the gate needs of a prepared attempt (``_attempt.PreparedAttempt``)."""

    @property
    def workdir(self) -> Path: ...

    @property
    def argv(self) -> list[str]: ...

    @property
    def env(self) -> dict[str, str]: ...

    @property
    def stdout_path(self) -> Path: ...

    @property
    def stderr_path(self) -> Path: ...


@functools.cache
def _shell() -> str:
    """The POSIX shell that runs the gate: /bin/sh (dash starts in about half the time of bash)."""
    return "/bin/sh" if os.access("/bin/sh", os.X_OK) else shutil.which("bash") or "/bin/bash"


class GatedProcess:
    """One runner process, blocked on its gate until :meth:`release` (or gone after :meth:`abort`)."""

    def __init__(self, pid: int, gate_fd: int) -> None:
        self._pid = pid
        self._gate_fd = gate_fd
        self.state = "gated"  # gated -> released | aborted
        self.returncode: int | None = None
        self._identity = identity_of(pid)
        try:
            self._pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfds here: the manager polls instead
            self._pidfd = -1

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def pidfd(self) -> int:
        """A descriptor that becomes readable when the process exits; -1 where pidfds do not exist."""
        return self._pidfd

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
        """The exit status (negative for a signal, as ``subprocess`` reports it) or ``None`` while running."""
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit status; raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if self.returncode is None and timeout is not None and self._pidfd >= 0:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            if not poller.poll(max(timeout, 0.0) * 1000.0):
                raise subprocess.TimeoutExpired(f"gate {self._pid}", timeout)
        if self.returncode is None and timeout is not None and self._pidfd < 0:
            self._wait_by_polling(timeout)
        if self.returncode is None:
            self._reap(0)
        assert self.returncode is not None
        return self.returncode

    def _wait_by_polling(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"gate {self._pid}", timeout)
            time.sleep(0.005)

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self._pid, flags)
        except ChildProcessError:
            # Reaped by someone else (a handler that waits for any child): the exit happened, its status
            # is lost, and 255 says so to the commit (no outcome and a failing status: process_failure).
            pid, status = self._pid, 255 << 8
        if pid == 0:
            return
        self.returncode = os.waitstatus_to_exitcode(status)
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def terminate_group(self, sig: int = signal.SIGTERM) -> bool:
        """Signal the whole process group (the runner and every child it left in it).

        Returns whether any process received it. Signalling a gated process is safe: it dies in the gate.
        """
        try:
            os.killpg(self._pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _close_gate(self) -> None:
        if self._gate_fd >= 0:
            os.close(self._gate_fd)
            self._gate_fd = -1

    def __repr__(self) -> str:
        return f"<GatedProcess pid={self._pid} state={self.state} returncode={self.returncode}>"


def spawn_gated(
    prepared: Launchable,
    *,
    environ: Mapping[str, str] | None = None,
    confinement: Confinement | None = None,
) -> GatedProcess:
    """Start the prepared runner blocked on its launch gate; nothing of the runner executes yet.

    The environment is ``environ`` (default ``os.environ``) without any inherited protocol variable,
    updated with ``prepared.env``. With ``confinement`` the gate starts inside its ruleset
    (:meth:`._landlock.Confinement.within`). Raises :class:`RunnerFailure` ``process_failure`` when the
    gate cannot be started (a workdir that vanished, say) or confined; a storage error creating its
    output logs is raised as it is."""
    out_fd = _open_log(prepared.stdout_path)  # a storage error here is the manager's, not the job's
    try:
        err_fd = _open_log(prepared.stderr_path)
    except BaseException:
        os.close(out_fd)
        raise
    read_fd, write_fd = os.pipe()  # both close-on-exec; the read end becomes the gate's stdin
    workdir = os.fspath(prepared.workdir)
    try:
        arguments = [_shell(), "-c", GATE_SCRIPT, "httk-gate", workdir, *prepared.argv]
        env = _spawn_environment(prepared.env, environ)

        def start() -> int:
            return os.posix_spawn(
                arguments[0],
                arguments,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_fd, 0),
                    (os.POSIX_SPAWN_DUP2, out_fd, 1),
                    (os.POSIX_SPAWN_DUP2, err_fd, 2),
                    *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_descriptors()),
                    (os.POSIX_SPAWN_OPEN, _WORKDIR_PROBE_FD, workdir, os.O_RDONLY | os.O_DIRECTORY, 0),
                    (os.POSIX_SPAWN_CLOSE, _WORKDIR_PROBE_FD),
                ],
                setsid=True,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                setsigmask=(),
            )

        pid = start() if confinement is None else confinement.within(start)
    except OSError as exc:
        os.close(write_fd)
        what = "confined" if isinstance(exc, ConfinementError) else "started"
        raise RunnerFailure(
            "process_failure",
            f"the runner process could not be {what}: {exc}",
            {"argv0": prepared.argv[0], "workdir": workdir},
        ) from exc
    finally:
        for fd in (read_fd, out_fd, err_fd):
            os.close(fd)
    return GatedProcess(pid, write_fd)


def _inheritable_descriptors() -> list[int]:
    """This process's descriptors above 2 that an exec would pass on (someone made them inheritable:
    a C library, or a caller's ``os.set_inheritable``); the gate closes them, as ``close_fds`` would."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return []
    found = []
    for name in names:
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                found.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return found


def _spawn_environment(env: Mapping[str, str], environ: Mapping[str, str] | None) -> dict[bytes, bytes]:
    """The runner's environment as the bytes ``posix_spawn`` takes: ``environ`` (default ``os.environ``)
    without any protocol variable, then ``env``.

    The manager's own environment is copied from the bytes ``os.environ`` keeps (one C-level dict copy
    instead of decoding and re-encoding every variable for every attempt).
    """
    data: dict[bytes, bytes] | None = getattr(os.environ, "_data", None) if environ is None else None
    if data is None:
        source = os.environ if environ is None else environ
        data = {os.fsencode(name): os.fsencode(value) for name, value in source.items()}
    full = {name: value for name, value in data.items() if name not in _PROTOCOL_KEYS}
    for name, value in env.items():
        full[os.fsencode(name)] = os.fsencode(value)
    return full


def _open_log(path: Path) -> int:
    """Create the log through the mutation seam and open it for appending (an existing one is reused)."""
    return _fsops.open_for_append(path)


def wait_for_exit(processes: Sequence[GatedProcess], timeout: float) -> bool:
    """Block until one of ``processes`` exits, or ``timeout`` seconds pass.

    Sleeps on their pidfds, so a finished runner is noticed at once instead of at the next poll; returns
    ``False`` without waiting where one has no pidfd, and the caller then sleeps its poll interval.
    """
    if not processes or any(process.pidfd < 0 and process.returncode is None for process in processes):
        return False
    poller = select.poll()
    for process in processes:
        if process.returncode is not None:
            return True  # reaped already (a wait elsewhere): the loop handles it now
        poller.register(process.pidfd, select.POLLIN)
    poller.poll(max(timeout, 0.0) * 1000.0)
    return True
