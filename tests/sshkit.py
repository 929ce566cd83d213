"""A real OpenSSH server for the tests: ``sshd -D`` on 127.0.0.1, keys and state in a temp dir under /tmp.

:func:`start_server` installs Debian's ``openssh-server``, ``openssh-client`` and ``rsync`` when a program
is missing (as root, through apt-get, which is what CI is), makes a directory directly under ``/tmp``
(a ControlMaster socket's path must fit a ``sockaddr_un``) holding a generated ed25519 host key, a
generated user key, the ``authorized_keys`` that admits it and a ``known_hosts`` that names the host key
at ``[127.0.0.1]:PORT``, writes an ``sshd_config`` that allows public-key logins of this user only,
starts ``sshd -D`` on a free port (its own session, its log in ``sshd.log``) and polls, with a deadline,
until the port accepts connections. :meth:`SshServer.stop` ends every connection process the daemon
forked (sshd does not end them itself when its listener stops, by design) and then the daemon, by pid.

A test process may die without stopping it, so every server has a **watchdog** (``python -m
tests.sshkit watch OWNER ROOT``, in a session of its own, like ``tests/slurmkit.py``'s): it waits on a
pidfd for the owner to exit, then stops the server recorded in ``ROOT/server.json`` and removes ``ROOT``.
A server starts in well under a second, so each test that needs one gets its own (the ``sshd``
fixture): no state is shared between tests, and a test may change the host key
(:meth:`SshServer.change_host_key`) or kill connections without disturbing another.

``python -m tests.sshkit install`` only installs the packages (``./dev test`` runs it up front).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.aptkit import apt_install
from tests.daemonkit import CHILDREN, end, spawn_watchdog, wait_for, wait_for_owner
from tests.slurmkit import free_ports

PACKAGES = ("openssh-server", "openssh-client", "rsync")
PROGRAMS = ("sshd", "ssh", "ssh-keygen", "rsync")
START_SECONDS = 30.0
STOP_SECONDS = 15.0
RECORD = "server.json"
WATCHDOG = "watchdog"
PRIVSEP_DIR = Path("/run/sshd")  # Debian's sshd refuses to start without its privilege-separation dir


class SshUnavailableError(RuntimeError):
    """OpenSSH cannot be installed or started here; the message says why (and the daemon's log)."""


def _search_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin"])


def missing_programs() -> list[str]:
    return [program for program in PROGRAMS if shutil.which(program, path=_search_path()) is None]


def install() -> None:
    """Install OpenSSH and rsync with apt-get when a program is missing (root only)."""
    missing = missing_programs()
    if missing:
        try:
            apt_install(PACKAGES, SshUnavailableError)
        except SshUnavailableError as exc:
            raise SshUnavailableError(f"missing {', '.join(missing)}: {exc}") from None


def _program(name: str) -> str:
    found = shutil.which(name, path=_search_path())
    if found is None:
        raise SshUnavailableError(f"{name} is not installed")
    return found


@dataclass
class SshServer:
    """One running sshd; the files a client needs to reach it are below ``root``."""

    root: Path
    port: int
    user: str
    pids: dict[str, int] = field(default_factory=dict)

    host = "127.0.0.1"

    @property
    def identity_file(self) -> Path:
        return self.root / "client" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "client" / "known_hosts"

    @property
    def config(self) -> Path:
        return self.root / "sshd_config"

    @property
    def host_key(self) -> Path:
        return self.root / "host" / "ssh_host_ed25519_key"

    def settings(self) -> dict[str, str]:
        """What ``remote configure --set`` needs to reach this server."""
        return {
            "host": self.host,
            "port": str(self.port),
            "username": self.user,
            "identity_file": str(self.identity_file),
            "known_hosts": str(self.known_hosts),
        }

    def ssh(self, command: str, *, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on the server with the system ssh client and this kit's keys."""
        argv = [
            _program("ssh"),
            *("-F", "none", "-p", str(self.port), "-i", str(self.identity_file), "-l", self.user),
            *("-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes"),
            *("-o", f"UserKnownHostsFile={self.known_hosts}", self.host, command),
        ]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def as_json(self) -> str:
        return json.dumps({"root": str(self.root), "port": self.port, "user": self.user, "pids": self.pids})

    @classmethod
    def from_json(cls, text: str) -> SshServer:
        document = json.loads(text)
        pids = {name: int(pid) for name, pid in document["pids"].items()}
        return cls(Path(document["root"]), int(document["port"]), str(document["user"]), pids)

    def connections(self) -> list[int]:
        """The pids of every process the daemon forked (one tree per connection), deepest last."""
        return _descendants(self.pids.get("sshd"))

    def change_host_key(self) -> None:
        """Restart the daemon on the same port with a new host key (``known_hosts`` keeps the old one)."""
        self._stop_daemon()
        for path in (self.host_key, self.host_key.with_name(self.host_key.name + ".pub")):
            path.unlink()
        _keygen(self.host_key)
        _start_daemon(self)

    def stop(self) -> None:
        """End the watchdog, every connection, then the daemon."""
        watchdog = self.pids.pop(WATCHDOG, None)
        if watchdog is not None:
            end(watchdog, STOP_SECONDS)
        self._stop_daemon()

    def _stop_daemon(self) -> None:
        for pid in reversed(self.connections()):
            end(pid, STOP_SECONDS)
        daemon = self.pids.pop("sshd", None)
        if daemon is not None:
            end(daemon, STOP_SECONDS)
        _record(self)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.root / "sshd.log").read_text(errors="replace")
        except FileNotFoundError:
            return "(no sshd.log)"
        return "\n".join(text.splitlines()[-lines:])


def _descendants(root: int | None) -> list[int]:
    """Every live descendant of ``root``, parents before their children."""
    if root is None:
        return []
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(text[text.rindex(")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop(0)
        for child in children.get(pid, []):
            found.append(child)
            frontier.append(child)
    return found


def _keygen(path: Path) -> None:
    subprocess.run(
        [_program("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", "httk-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _record(server: SshServer) -> None:
    """``ROOT/server.json``, replaced whole after every change: what the watchdog stops."""
    partial = server.root / f".{RECORD}.partial"
    with contextlib.suppress(FileNotFoundError):  # the watchdog removed the directory: nothing to record
        partial.write_text(server.as_json())
        partial.replace(server.root / RECORD)


def _write_config(server: SshServer) -> None:
    lines = [
        f"Port {server.port}",
        f"ListenAddress {server.host}",
        f"HostKey {server.host_key}",
        f"PidFile {server.root / 'sshd.pid'}",
        f"AuthorizedKeysFile {server.root / 'authorized_keys'}",
        f"AllowUsers {server.user}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",  # the keys live below /tmp, which is world-writable with the sticky bit
        "PrintMotd no",
        "MaxSessions 64",
        "MaxStartups 64",
        "LogLevel VERBOSE",
        "Subsystem sftp internal-sftp",
    ]
    server.config.write_text("\n".join(lines) + "\n")


def _start_daemon(server: SshServer) -> None:
    log = server.root / "sshd.log"
    argv = [_program("sshd"), "-D", "-f", str(server.config), "-E", str(log)]
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    server.pids["sshd"] = process.pid
    CHILDREN[process.pid] = process
    _record(server)

    def accepting() -> bool:
        if process.poll() is not None:
            raise SshUnavailableError(f"sshd exited {process.returncode}:\n{server.log_tail()}")
        with socket.socket() as probe:
            return probe.connect_ex((server.host, server.port)) == 0

    try:
        wait_for(accepting, f"sshd to accept connections on port {server.port}", START_SECONDS, 0.02)
    except TimeoutError as exc:
        raise SshUnavailableError(f"{exc}\n{server.log_tail()}") from None
    public = server.host_key.with_name(server.host_key.name + ".pub").read_text().split()
    server.known_hosts.write_text(f"[{server.host}]:{server.port} {public[0]} {public[1]}\n")


def _start_watchdog(server: SshServer, owner: int) -> None:
    process = spawn_watchdog("tests.sshkit", owner, server.root, server.root / "watchdog.log")
    server.pids[WATCHDOG] = process.pid
    CHILDREN[process.pid] = process
    _record(server)


def watch(owner: int, root: Path) -> None:
    """Wait for ``owner`` to exit, then stop the server recorded in ``root`` and remove ``root``."""
    wait_for_owner(owner)
    record = root / RECORD
    if record.exists():
        server = SshServer.from_json(record.read_text())
        server.pids.pop(WATCHDOG, None)
        server.stop()
    shutil.rmtree(root, ignore_errors=True)


def start_server(*, owner: int | None) -> SshServer:
    """Install what is missing and start sshd; stop it with :meth:`SshServer.stop`.

    A watchdog stops it once process ``owner`` has exited; with no owner only a caller stops it.
    """
    install()
    if os.geteuid() == 0 and not PRIVSEP_DIR.is_dir():
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="httk-sshd-", dir="/tmp"))
    (root / "host").mkdir()
    (root / "client").mkdir(mode=0o700)
    server = SshServer(root, free_ports(1)[0], pwd.getpwuid(os.geteuid()).pw_name)
    try:
        _keygen(server.host_key)
        _keygen(server.identity_file)
        public = server.identity_file.with_name("id_ed25519.pub").read_text()
        (root / "authorized_keys").write_text(public)
        _write_config(server)
        if owner is not None:
            _start_watchdog(server, owner)
        _start_daemon(server)
    except BaseException:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server


@contextlib.contextmanager
def running_server() -> Iterator[SshServer]:
    server = start_server(owner=os.getpid())
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        install()
    elif len(sys.argv) == 4 and sys.argv[1] == "watch":
        watch(int(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit("usage: python -m tests.sshkit install | watch OWNER_PID ROOT")
