"""Running commands on an ssh remote with the system OpenSSH client, over one shared connection.

Every command is ``ssh`` with options that make it safe to run unattended:

- ``BatchMode=yes``: never a password or passphrase prompt a script would hang on (an agent, a key
  without a passphrase or Kerberos is how an unattended login works);
- ``StrictHostKeyChecking=yes`` and, when configured, ``UserKnownHostsFile``: the host key must
  already be known. A changed key is refused as :class:`RemoteUnreachableError` saying so, and an
  unknown one saying how to record it; host-key checking is never turned off;
- connection sharing: :func:`connect` opens a master connection (``ControlMaster``, ``ControlPersist``
  for a minute after its last use) unless one is open, and every command then runs through it
  (``ControlMaster=no``), so a login is paid once for a whole ``transfer send`` or for a ``status``
  after a ``run``. The master is started on its own, with its standard error in a file: a master that
  ssh backgrounds keeps the standard error it started with, and a command's pipe it held would not
  reach end-of-file until the master exits. The control sockets live in a directory private to this
  user (:func:`control_dir`), whose path is short enough for a ``sockaddr_un``; one that is not a
  directory of this user with mode 0700 is refused rather than used.

The remote command is one string the login shell there runs: the remote's ``prelude`` (its own shell
text, under ``set -e``), then ``exec`` of its ``httk_command`` (shell words, default ``httk``) and the
arguments, each quoted with :func:`shlex.quote`. ssh's own failures have exit status 255 (the remote
``httk`` never uses it), and are told apart from the command's by that status.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from httk.workflow.engine.core import _fsops
from httk.workflow.protocol import RemoteError, RemoteUnreachableError

from ._remotes import Remote

SSH_FAILURE = 255
CONTROL_PERSIST_SECONDS = 60


def control_dir() -> Path:
    """This user's private directory of ControlMaster sockets (made on first use)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime and len(runtime) < 40 and os.path.isdir(runtime) else Path("/tmp")
    directory = base / f"httk-ssh-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):  # whatever is there is judged below
        _fsops.make_dir(directory, durable=False, mode=0o700)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) != 0o700:
        raise RemoteError(
            f"{directory} is not a directory of yours with mode 0700, so it cannot hold ssh's shared "
            "connections; remove it (or fix its owner and mode) and try again"
        )
    return directory


def ssh_options(remote: Remote) -> list[str]:
    """The ``ssh`` options (before the host) that reach ``remote``."""
    options = []
    config = remote.get("ssh_config")
    if config is not None:
        options += ["-F", config]
    port, user, identity = remote.get("port"), remote.get("username"), remote.get("identity_file")
    if port is not None:
        options += ["-p", port]
    if user is not None:
        options += ["-l", user]
    if identity is not None:
        options += ["-i", identity, "-o", "IdentitiesOnly=yes"]
    known = remote.get("known_hosts")
    if known is not None:
        options += ["-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=none"]
    options += [
        *("-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"),
        *("-o", f"ConnectTimeout={remote.get('connect_timeout')}"),
        *("-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"),
        *("-o", f"ControlPath={control_dir() / '%C'}"),
        "-T",
    ]
    return options


def connect(remote: Remote) -> None:
    """Open the shared master connection to ``remote`` unless one is open; ssh's failure raises."""
    import tempfile

    host = remote.require_host()
    if shutil.which("ssh") is None:
        raise RemoteUnreachableError("the ssh client is not installed (install OpenSSH's ssh)")
    base = ["ssh", *ssh_options(remote)]
    check = subprocess.run([*base, "-O", "check", "--", host], capture_output=True, check=False)
    if check.returncode == 0:
        return
    master = [*base, "-o", "ControlMaster=auto", "-o", f"ControlPersist={CONTROL_PERSIST_SECONDS}"]
    with tempfile.TemporaryFile() as errors:
        result = subprocess.run(
            [*master, "--", host, "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            check=False,
        )
        if result.returncode != 0:
            errors.seek(0)
            raise unreachable(remote, errors.read().decode(errors="replace"))


def ssh_argv(remote: Remote, command: str) -> list[str]:
    """The ``ssh`` command line that runs the shell text ``command`` on ``remote`` over the shared
    connection (:func:`connect` opens it)."""
    options = [*ssh_options(remote), "-o", "ControlMaster=no"]
    return ["ssh", *options, "--", remote.require_host(), command]


def httk_line(remote: Remote, arguments: Sequence[str]) -> str:
    """The shell text that runs ``httk ARGUMENTS`` on ``remote``, after its prelude."""
    command = f"exec {remote.get('httk_command')} {shlex.join(arguments)}"
    prelude = remote.get("prelude")
    return command if prelude is None else f"set -e\n{prelude}\n{command}"


def run_shell(
    remote: Remote,
    command: str,
    *,
    stdin: bytes | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run shell text on ``remote``; its output and status. ssh's own failure raises."""
    connect(remote)
    argv = ssh_argv(remote, command)
    result = subprocess.run(
        argv, input=stdin if stdin is not None else b"", capture_output=True, timeout=timeout, check=False
    )
    if result.returncode == SSH_FAILURE:
        raise unreachable(remote, result.stderr.decode(errors="replace"))
    return result


def run_httk(
    remote: Remote, arguments: Sequence[str], *, stdin: bytes | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run ``httk ARGUMENTS`` on ``remote``; its output and exit status (ssh's own failure raises)."""
    return run_shell(remote, httk_line(remote, arguments), stdin=stdin, timeout=timeout)


def passthrough(remote: Remote, arguments: Sequence[str]) -> int:
    """Run ``httk ARGUMENTS`` on ``remote`` with this process's standard streams; its exit status."""
    connect(remote)
    argv = ssh_argv(remote, httk_line(remote, arguments))
    process = subprocess.run(argv, check=False)  # the output streams as it comes, the errors too
    if process.returncode == SSH_FAILURE:
        raise RemoteUnreachableError(
            f"remote {remote.name!r} ({remote.destination}): the connection failed (ssh said why above)"
        )
    return process.returncode


def unreachable(remote: Remote, stderr: str) -> RemoteUnreachableError:
    """The error for an ssh failure, worded by what ssh said."""
    where = f"remote {remote.name!r} ({remote.destination})"
    known = remote.get("known_hosts") or "your known_hosts"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr:
        return RemoteUnreachableError(
            f"{where}: the host key is not the one recorded in {known}: the key changed, or this is "
            "another machine; nothing was done. If the change is expected, remove the old key "
            f"(ssh-keygen -R HOST -f {known}) and record the new one after checking its fingerprint"
        )
    if "Host key verification failed" in stderr or "No ED25519 host key is known" in stderr:
        return RemoteUnreachableError(
            f"{where}: its host key is not known in {known}, and host keys are never accepted "
            "unchecked; connect once with ssh and verify the fingerprint, or add the key with ssh-keyscan"
        )
    last = [line for line in stderr.strip().splitlines() if line.strip()]
    said = last[-1] if last else "the connection was lost"
    return RemoteUnreachableError(f"{where}: ssh failed: {said}")


def close_connection(remote: Remote) -> None:
    """End the shared master connection to ``remote`` now, if there is one."""
    argv = ["ssh", *ssh_options(remote), "-O", "exit", "--", remote.require_host()]
    subprocess.run(argv, capture_output=True, check=False)


def check_remote(remote: Remote) -> dict[str, object]:
    """Connect to ``remote`` and report what is there: its httk, and the tools transfers use.

    ``problems`` lists what stops the remote from being used (no httk there); ``advisories`` what a
    user should know (another httk version than this one, no rsync at one end, so tar is used).
    """
    from ._transfer_environment import engine_version  # only a remote check compares versions

    connect(remote)
    report: dict[str, object] = {"remote": remote.name, "destination": remote.destination, "connected": True}
    found = run_httk(remote, ["--version"], timeout=120)
    text = (found.stdout or found.stderr).decode(errors="replace").strip()
    problems: list[str] = []
    advisories: list[str] = []
    local = engine_version()
    if found.returncode == 0:
        report["httk"] = text
        if text != local:
            advisories.append(f"the remote runs {text}, this machine {local}")
    else:
        report["httk"] = None
        problems.append(
            f"running {remote.get('httk_command')!r} there failed with exit status {found.returncode}"
            f" ({text or 'no output'}); set how to run httk there with: httk workflow remote configure "
            f"--set httk_command=... (or --set prelude=...) {remote.name}"
        )
    tools = run_shell(remote, "command -v tar; command -v rsync; true", timeout=60).stdout.decode().split()
    has_tar = any(path.endswith("/tar") for path in tools)
    rsync = {"remote": any(path.endswith("/rsync") for path in tools), "local": bool(shutil.which("rsync"))}
    report["tar"], report["rsync"] = has_tar, rsync
    if not has_tar:
        problems.append("tar is not on the remote's PATH: transfers need it")
    if not all(rsync.values()):
        advisories.append("rsync is not at both ends: transfers stream tar over ssh")
    report["problems"], report["advisories"] = problems, advisories
    return report
