"""VASP's process: forked and executed in a process group of its own, killed by the kernel with the runner.

A runner starts one program per attempt. :mod:`subprocess` would do it, but its import (threading,
selectors, locale and more) costs every attempt about a third of a bare interpreter start for one call;
what a VASP start needs is a fork, a few calls in the child, and an exec, which is what is here:

* the child leaves the runner's process group for its own (``setpgid``, done by both sides so that the
  runner may signal the group as soon as :func:`spawn` returns);
* it asks the kernel for SIGKILL when the runner dies (``prctl(PR_SET_PDEATHSIG)``);
* it restores the signal dispositions a program expects (Python ignores SIGPIPE; the runner's own
  handlers must not hold back a SIGTERM that arrives before the exec);
* it runs in the workdir, its standard input from ``/dev/null``, output and error to the given files,
  and no other descriptor of the runner's (as ``subprocess``'s ``close_fds``).

An exec that fails is reported to the parent through a close-on-exec pipe and raised there as the
``OSError`` it was, so a missing executable is told from a program that ran and failed.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

# Signals whose disposition the child resets before the exec; SIGXFSZ is one Python ignores, as SIGPIPE.
_RESET = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)


class Child:
    """A started program: its ``pid``, and its ``returncode`` once it has been reaped.

    ``returncode`` is the exit status, or minus the signal that ended it, as ``subprocess`` reports it.
    """

    __slots__ = ("pid", "returncode")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The return code if the program has ended (reaping it), else ``None``."""
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self) -> int:
        """Wait for the program to end; its return code."""
        while self.returncode is None:
            self._reap(0)
        return self.returncode

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped by someone else: its status is lost, as subprocess says
            self.returncode = 0
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)


def death_signal() -> Callable[[], None] | None:
    """What the child calls to be killed when the runner dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``).

    The C function is found here, in the parent: loading it between fork and exec would make every VASP
    start wait for an import.
    """
    prctl: Callable[..., int] | None
    try:
        prctl = c_function("prctl")
    except AttributeError:  # an interpreter whose _ctypes differs: ctypes itself, at its import's cost
        prctl = _ctypes_function("prctl")
    except OSError:
        return None
    if prctl is None:
        return None
    kill = int(signal.SIGKILL)

    def die_with_parent() -> None:
        prctl(1, kill, 0, 0, 0)

    return die_with_parent


def c_function(name: str) -> Callable[..., int]:
    """The C library's function ``name`` of C ints, as ``ctypes.CDLL(None, use_errno=True)`` finds it.

    It is made with ``_ctypes``, the extension :mod:`ctypes` is written on, as ctypes would make it: a
    function pointer type with the C calling convention, errno saved, a C int returned. Importing ctypes
    itself defines its whole type system for this one call (valgrind: 5 M instructions, an eighth of a
    bare interpreter start, on every attempt).

    Raises
    ------
    OSError, AttributeError
        The C library or the function cannot be found.
    """
    import _ctypes

    class Int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_int (generic only in typeshed)
        _type_ = "i"

    class Function(_ctypes.CFuncPtr):  # the function type ctypes.CDLL gives its functions
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Int

    program = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # type: ignore[arg-type]  # NULL: the program and libc
    return Function(_ctypes.dlsym(program, name))


def _ctypes_function(name: str) -> Callable[..., int] | None:
    """``name`` through :mod:`ctypes` proper, or None where the C library lacks it."""
    import ctypes

    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    return function


def spawn(
    argv: list[str],
    workdir: StrPath,
    *,
    stdout: int,
    stderr: int,
    environ: Mapping[str, str] | None = None,
    before_exec: Callable[[], None] | None = None,
) -> Child:
    """Start ``argv`` (searched on ``PATH``) as described in the module docstring.

    Raises
    ------
    OSError
        The program could not be executed (the child's exec failed; nothing is left running).
    """
    environment = dict(os.environ if environ is None else environ)
    report_read, report_write = os.pipe2(os.O_CLOEXEC)
    try:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _exec_child(
                argv, workdir, (stdout, stderr), environment, before_exec=before_exec, report=report_write
            )
        os.close(report_write)
        report_write = -1
        _own_group(pid)
        failure = _read_all(report_read)
    finally:
        os.close(report_read)
        if report_write >= 0:
            os.close(report_write)
    if failure:
        os.waitpid(pid, 0)
        number, _, message = failure.decode("utf-8", "replace").partition(":")
        raise OSError(int(number) or None, message)
    return Child(pid)


def _own_group(pid: int) -> None:
    """The parent's ``setpgid`` of the child (both sides set it, so that neither waits for the other)."""
    try:
        os.setpgid(pid, pid)
    except OSError:  # the child has exec'd already, having set it itself
        return


def _exec_child(
    argv: list[str],
    workdir: StrPath,
    outputs: tuple[int, int],
    environment: dict[str, str],
    *,
    before_exec: Callable[[], None] | None,
    report: int,
) -> None:
    """The child's side of :func:`spawn`: prepare, exec, or report why not and exit."""
    try:
        for sig in _RESET:
            signal.signal(sig, signal.SIG_DFL)
        os.setpgid(0, 0)
        if before_exec is not None:
            before_exec()
        os.chdir(workdir)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(outputs[0], 1)
        os.dup2(outputs[1], 2)
        _close_inherited(keep=report)
        os.execvpe(argv[0], argv, environment)
    except BaseException as exc:  # whatever it was, the child must not return
        number = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        strerror = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        os.write(report, f"{number}:{strerror}".encode("utf-8", "replace"))
    finally:
        os._exit(127)


def _close_inherited(keep: int) -> None:
    """Close every descriptor above 2 but ``keep``: those open, from /proc (a loop up to the limit
    could be a million calls), else every number below the limit."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, os.sysconf("SC_OPEN_MAX")))
    for fd in open_fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:  # the directory listing's own, closed already, or never open
                continue


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)
