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
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._liveness import ProcessIdentity, identity_of
from httk.workflow.engine.publish._runners import RunnerFailure

from ._attempt import PROTOCOL_VARIABLES, PreparedAttempt

GATE_ABORTED = 125
"""Exit status of a gate that was never released (it executed nothing)."""

_RELEASE_BYTE = b"R"
_LOG_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


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
        self._identity = identity_of(popen.pid)

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
