"""A real Slurm cluster for the tests: munged, slurmctld and slurmd on 127.0.0.1, state in a temp dir.

:func:`start_cluster` installs Debian's ``slurm-wlm`` and ``munge`` when they are missing (as root,
through apt-get, which is what CI is), writes a ``slurm.conf`` with one node (this host, reached at
127.0.0.1, declared with 8 CPUs and 8 GiB through ``config_overrides`` so that several managers fit on a
2-core machine), a munge key and spool, state and log directories under one temporary directory, picks
free ports, starts the three daemons in the foreground (each in its own session, stdout and stderr to
``log/``), and waits — polling with a deadline — until the node is idle. :meth:`SlurmCluster.stop`
cancels every job, waits for the queue to empty and ends the daemons it started, by pid.

Process tracking is ``proctrack/cgroup`` where this machine's cgroups allow it (a cgroup v1 freezer
hierarchy this process may create a directory in, or a writable cgroup v2 root) and
``proctrack/linuxproc`` otherwise, or when slurmd does not come up under cgroups; ``proctrack`` says
which one a test got, because the takeover evidence depends on it.

One cluster serves a whole pytest session, every xdist worker included (:func:`shared_cluster`): the
first process that asks starts it under a file lock in a directory the controller made
(``HTTK_TEST_SLURM_SHARED``) and records it in ``cluster.json``; later ones attach to it; the controller
stops it when the session ends (:func:`stop_shared`). A session that is killed never gets there, so every
cluster has a **watchdog** (``python -m tests.slurmkit watch OWNER ROOT``, in a session of its own): it
waits on a pidfd for the cluster's owner — the pytest controller for the shared cluster, the starting
process otherwise — to exit, then stops the cluster from its record ``ROOT/cluster.json`` and removes
``ROOT``. :meth:`SlurmCluster.stop` ends the watchdog first. Tests on different workers then share the node
(declared with 8 CPUs, every test's jobs asking for little), and each test cancels only its own jobs —
those whose working directory lies below its temporary directory — when it ends. Every cluster has
its own name, node name and first job id, so even two sessions at once never share a cgroup or a job
id. A second partition, ``closable``, is for the one test that closes a partition.

``HTTK_TEST_SLURM_PROCTRACK=linuxproc`` forces ``proctrack/linuxproc`` (to run the tests that branch on
it the other way). ``python -m tests.slurmkit install`` only installs the packages (``./dev test`` runs
it up front).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.aptkit import apt_install
from tests.daemonkit import CHILDREN, end, running, spawn_watchdog, wait_for, wait_for_owner

PACKAGES = ("slurm-wlm", "munge")
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo")
START_SECONDS = 60.0
STOP_SECONDS = 30.0
WATCHDOG = "watchdog"
RECORD = "cluster.json"
NODE_CPUS = 8
NODE_MEMORY_MB = 8192
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING"}
)


class SlurmUnavailableError(RuntimeError):
    """Slurm cannot be installed or started here; the message says why and where the logs are."""


def missing_programs() -> list[str]:
    return [program for program in PROGRAMS if shutil.which(program, path=_search_path()) is None]


def _search_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin"])


def install() -> None:
    """Install Slurm and munge with apt-get when a program is missing (root only)."""
    missing = missing_programs()
    if missing:
        try:
            apt_install(PACKAGES, SlurmUnavailableError)
        except SlurmUnavailableError as exc:
            raise SlurmUnavailableError(f"missing {', '.join(missing)}: {exc}") from None


@dataclass
class SlurmCluster:
    """One running cluster; ``env`` is what a process needs to reach it (``SLURM_CONF``, ``PATH``)."""

    root: Path
    name: str
    node: str
    proctrack: str
    env: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps(
            {
                "root": str(self.root),
                "name": self.name,
                "node": self.node,
                "proctrack": self.proctrack,
                "env": self.env,
                "pids": self.pids,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> SlurmCluster:
        document = json.loads(text)
        return cls(
            root=Path(document["root"]),
            name=document["name"],
            node=document["node"],
            proctrack=document["proctrack"],
            env=dict(document["env"]),
            pids={name: int(pid) for name, pid in document["pids"].items()},
        )

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def run(
        self, *argv: str, check: bool = True, timeout: float = 30.0, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster."""
        result = subprocess.run(
            list(argv),
            check=False,
            cwd=cwd,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
        return result

    def sbatch(self, script: Path, *options: str) -> str:
        """Submit ``script`` from its directory (the job's working directory); its job id."""
        result = self.run("sbatch", "--parsable", *options, str(script), cwd=script.parent)
        return result.stdout.strip().split(";")[0]

    def job_state(self, job_id: str) -> str | None:
        """The job's state (``RUNNING``, ``COMPLETED``, ...), or ``None`` once Slurm forgot it."""
        result = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        for word in result.stdout.split():
            if word.startswith("JobState="):
                return word.removeprefix("JobState=")
        return None

    def wait_job(self, job_id: str, states: frozenset[str], timeout: float = 60.0) -> str:
        """Poll until the job is in one of ``states``; that state."""
        seen: list[str | None] = [None]

        def reached() -> bool:
            seen[0] = self.job_state(job_id)
            return seen[0] in states

        wait_for(reached, f"job {job_id} to reach {sorted(states)} (last seen {seen[0]})", timeout, 0.2)
        assert seen[0] is not None
        return seen[0]

    def active_jobs(self) -> list[str]:
        result = self.run("squeue", "-h", "-o", "%i %T", check=False)
        return [
            line.split()[0] for line in result.stdout.splitlines() if line.split()[1:2][0] in ACTIVE_STATES
        ]

    def jobs_below(self, directory: Path) -> list[str]:
        """Active jobs whose working directory is ``directory`` or below it (one test's jobs)."""
        result = self.run("squeue", "-h", "-o", "%i %T %Z", check=False)
        found = []
        for row in (line.split(maxsplit=2) for line in result.stdout.splitlines()):
            if len(row) == 3 and row[1] in ACTIVE_STATES and Path(row[2]).is_relative_to(directory):
                found.append(row[0])
        return found

    def cancel_below(self, directory: Path, timeout: float = STOP_SECONDS) -> None:
        """Cancel the jobs working below ``directory`` and wait until they ended."""
        jobs = self.jobs_below(directory)
        if jobs:
            self.run("scancel", "--full", "--quiet", *jobs, check=False)
            wait_for(lambda: not self.jobs_below(directory), f"jobs {jobs} to end", timeout, 0.2)

    def cancel_all(self, timeout: float = STOP_SECONDS) -> None:
        """Cancel every job and wait until none is active."""
        if not self.active_jobs():
            return
        self.run("scancel", "--full", "--quiet", "-u", _user(), check=False)
        wait_for(lambda: not self.active_jobs(), "every job to end", timeout, 0.2)

    def stop(self) -> None:
        """Cancel the jobs, then end slurmd, slurmctld and munged, each by the pid this kit recorded."""
        watchdog = self.pids.pop(WATCHDOG, None)
        if watchdog is not None:
            end(watchdog, STOP_SECONDS)
        if running(self.pids.get("slurmctld")):
            with contextlib.suppress(Exception):
                self.cancel_all()
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.pop(name, None)
            if pid is not None:
                end(pid, STOP_SECONDS)
        _remove_cgroups(self.node)

    def log_tail(self, lines: int = 20) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts)


def _short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def _remove_cgroups(node: str) -> None:
    """The (empty) cgroup directories slurmd left for this node, deepest first."""
    for top in Path("/sys/fs/cgroup").glob(f"*/slurm_{node}"):
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now (all held open together, so they are distinct)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def cgroup_flavour() -> str | None:
    """``v1`` or ``v2`` when this process may create cgroups Slurm can track jobs in, else ``None``."""
    freezer = Path("/sys/fs/cgroup/freezer")
    if os.path.ismount(freezer) and _can_make_child(freezer):
        return "v1"
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").is_file() and _can_make_child(root):
        return "v2"
    return None


def _can_make_child(directory: Path) -> bool:
    probe = directory / f"httk-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def write_config(root: Path, name: str, node: str, ports: list[int], cgroup: str | None) -> None:
    """slurm.conf and cgroup.conf for one node; every path under ``root``."""
    first_job = 1000 + secrets.randbelow(600) * 100_000  # MaxJobId is 67,043,328
    settings = {
        "ClusterName": name,
        "SlurmctldHost": f"{_short_hostname()}(127.0.0.1)",  # slurmctld must recognise its own host
        "SlurmctldPort": ports[0],
        "SlurmdPort": ports[1],
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={root / 'munge' / 'munge.socket'}",
        "SlurmUser": _user(),
        "SlurmdUser": "root",
        "StateSaveLocation": root / "state",
        "SlurmdSpoolDir": root / "spool",
        "SlurmctldPidFile": root / "run" / "slurmctld.pid",
        "SlurmdPidFile": root / "run" / "slurmd.pid",
        "SlurmctldLogFile": root / "log" / "slurmctld.log",
        "SlurmdLogFile": root / "log" / "slurmd.log",
        "ProctrackType": "proctrack/linuxproc" if cgroup is None else "proctrack/cgroup",
        "TaskPlugin": "task/none",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_CPU_Memory",
        "DefMemPerCPU": 100,
        "SchedulerType": "sched/backfill",
        "SchedulerParameters": "sched_interval=1",
        "ReturnToService": 2,
        "SlurmdParameters": "config_overrides",
        "MpiDefault": "none",
        "MailProg": "/bin/true",
        "AccountingStorageType": "accounting_storage/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "JobCompType": "jobcomp/none",
        "FirstJobId": first_job,
        "InactiveLimit": 0,
        "KillWait": 5,
        "OverTimeLimit": 0,
        "MinJobAge": 300,
        "MessageTimeout": 10,
        "SlurmctldTimeout": 30,
        "SlurmdTimeout": 30,
    }
    lines = [f"{key}={value}" for key, value in settings.items()]
    lines.append(
        f"NodeName={node} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 "
        f"CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN"
    )
    lines.append(f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP")
    lines.append(f"PartitionName=closable Nodes={node} MaxTime=INFINITE State=UP")
    (root / "slurm.conf").write_text("\n".join(lines) + "\n")
    cgroup_lines = [
        f"CgroupPlugin=cgroup/{cgroup or 'v1'}",
        "CgroupMountpoint=/sys/fs/cgroup",
        "CgroupAutomount=no",
        "ConstrainCores=no",
        "ConstrainRAMSpace=no",
        "ConstrainDevices=no",
    ]
    (root / "cgroup.conf").write_text("\n".join(cgroup_lines) + "\n")


def _spawn(cluster: SlurmCluster, name: str, argv: list[str]) -> None:
    log = (cluster.root / "log" / f"{name}.out").open("ab")
    with log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **cluster.env},
            start_new_session=True,
        )
        cluster.pids[name] = process.pid
        CHILDREN[process.pid] = process
    _record(cluster)


def _record(cluster: SlurmCluster) -> None:
    """``ROOT/cluster.json``, replaced whole after every start: what the watchdog stops."""
    partial = cluster.root / f".{RECORD}.partial"
    partial.write_text(cluster.as_json())
    partial.replace(cluster.root / RECORD)


def _start_watchdog(cluster: SlurmCluster, owner: int) -> None:
    process = spawn_watchdog("tests.slurmkit", owner, cluster.root, cluster.root / "log" / "watchdog.out")
    cluster.pids[WATCHDOG] = process.pid
    CHILDREN[process.pid] = process
    _record(cluster)


def watch(owner: int, root: Path) -> None:
    """Wait for ``owner`` to exit, then stop the cluster recorded in ``root`` and remove ``root``."""
    wait_for_owner(owner)
    record = root / RECORD
    if record.exists():
        cluster = SlurmCluster.from_json(record.read_text())
        cluster.pids.pop(WATCHDOG, None)
        cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


def _start_munge(cluster: SlurmCluster) -> None:
    keys, sockets = cluster.root / "munge-key", cluster.root / "munge"
    keys.mkdir(mode=0o700)
    sockets.mkdir(mode=0o755)
    key = keys / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    socket_path = sockets / "munge.socket"
    _spawn(
        cluster,
        "munged",
        [
            _program("munged"),
            "--foreground",
            "--force",
            f"--socket={socket_path}",
            f"--key-file={key}",
            f"--log-file={cluster.root / 'log' / 'munged.log'}",
            f"--pid-file={keys / 'munged.pid'}",
            f"--seed-file={keys / 'munged.seed'}",
        ],
    )
    _wait_alive(cluster, "munged", socket_path.exists, f"the munge socket {socket_path}")


def _program(name: str) -> str:
    found = shutil.which(name, path=_search_path())
    if found is None:
        raise SlurmUnavailableError(f"{name} is not installed")
    return found


def _wait_alive(cluster: SlurmCluster, name: str, condition: Callable[[], bool], what: str) -> None:
    process = CHILDREN[cluster.pids[name]]

    def ready() -> bool:
        if process.poll() is not None:
            raise SlurmUnavailableError(f"{name} exited {process.returncode}:\n{cluster.log_tail()}")
        return condition()

    try:
        wait_for(ready, what, START_SECONDS, 0.05)
    except TimeoutError as exc:
        raise SlurmUnavailableError(f"{exc}\n{cluster.log_tail()}") from None


def _node_idle(cluster: SlurmCluster) -> bool:
    result = cluster.run("sinfo", "-h", "-n", cluster.node, "-o", "%T", check=False)
    return result.returncode == 0 and result.stdout.strip() == "idle"


def _start_slurm(cluster: SlurmCluster) -> None:
    conf = str(cluster.conf)
    _spawn(cluster, "slurmctld", [_program("slurmctld"), "-D", "-i", "-f", conf])
    _wait_alive(
        cluster,
        "slurmctld",
        lambda: cluster.run("scontrol", "ping", check=False).stdout.count("UP") > 0,
        "slurmctld to answer",
    )
    _spawn(cluster, "slurmd", [_program("slurmd"), "-D", "-N", cluster.node, "-f", conf])
    _wait_alive(cluster, "slurmd", lambda: _node_idle(cluster), f"node {cluster.node} to be idle")


def start_cluster(*, owner: int | None) -> SlurmCluster:
    """Install what is missing and start a one-node cluster; stop it with :meth:`SlurmCluster.stop`.

    A watchdog stops it once process ``owner`` has exited; with no owner only a caller stops it.
    """
    install()
    # Always directly under /tmp: the munge socket's path must fit a sockaddr_un (108 bytes), which a
    # pytest tmp_path does not, and munged wants every directory above its socket searchable by all.
    root = Path(tempfile.mkdtemp(prefix="httk-slurm-", dir="/tmp"))
    for directory in ("state", "spool", "log", "run"):
        (root / directory).mkdir()
    tag = secrets.token_hex(3)
    cgroup = None if os.environ.get("HTTK_TEST_SLURM_PROCTRACK") == "linuxproc" else cgroup_flavour()
    for attempt in (cgroup, None) if cgroup is not None else (None,):
        cluster = SlurmCluster(
            root=root,
            name=f"httk{tag}",
            node=f"httk{tag}",
            proctrack="proctrack/linuxproc" if attempt is None else "proctrack/cgroup",
            env={"SLURM_CONF": str(root / "slurm.conf"), "PATH": _search_path()},
        )
        write_config(root, cluster.name, cluster.node, free_ports(2), attempt)
        try:
            if owner is not None:
                _start_watchdog(cluster, owner)
            _start_munge(cluster)
            _start_slurm(cluster)
        except BaseException:
            cluster.stop()
            if attempt is None:
                shutil.rmtree(root, ignore_errors=True)  # the error carries the logs' tails
                raise
            _reset(root)  # slurmd refused cgroups after all: the next try tracks processes by /proc
            continue
        return cluster
    raise AssertionError("unreachable")


def _reset(root: Path) -> None:
    for directory in ("state", "spool", "run", "munge", "munge-key"):
        shutil.rmtree(root / directory, ignore_errors=True)
    for directory in ("state", "spool", "run"):
        (root / directory).mkdir()


@contextlib.contextmanager
def running_cluster() -> Iterator[SlurmCluster]:
    cluster = start_cluster(owner=os.getpid())
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


SHARED_VARIABLE = "HTTK_TEST_SLURM_SHARED"
"""The directory the session's processes share the cluster through (made by the pytest controller)."""


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    import fcntl

    with (directory / "cluster.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def shared_cluster(directory: Path) -> SlurmCluster:
    """The session's cluster: attached when a live one is recorded in ``directory``, started otherwise."""
    record = directory / "cluster.json"
    with _locked(directory):
        if record.exists():
            cluster = SlurmCluster.from_json(record.read_text())
            if all(running(pid) for pid in cluster.pids.values()):
                return cluster
            cluster.stop()  # a daemon died: start afresh rather than share a broken cluster
            shutil.rmtree(cluster.root, ignore_errors=True)
        cluster = start_cluster(owner=session_owner(directory))
        record.write_text(cluster.as_json())
        return cluster


def own_session(directory: Path) -> None:
    """Record this process (the pytest controller) as the owner of the session's cluster."""
    (directory / "owner").write_text(f"{os.getpid()}\n")


def session_owner(directory: Path) -> int | None:
    """The process whose exit ends the session's cluster; none when whoever made the directory is not
    a pytest controller of this suite (it then stops the cluster itself)."""
    try:
        return int((directory / "owner").read_text())
    except FileNotFoundError:
        return None


def stop_shared(directory: Path) -> None:
    """Stop the cluster recorded in ``directory`` (if any) and remove its state."""
    record = directory / "cluster.json"
    with _locked(directory):
        if record.exists():
            cluster = SlurmCluster.from_json(record.read_text())
            cluster.stop()
            shutil.rmtree(cluster.root, ignore_errors=True)
            record.unlink()


def environment_without_slurm(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` without the variables of any allocation this process runs in (a test's own sbatch)."""
    base = os.environ if environ is None else environ
    return {name: value for name, value in base.items() if not name.startswith("SLURM_")}


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        install()
    elif len(sys.argv) == 4 and sys.argv[1] == "watch":
        watch(int(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit("usage: python -m tests.slurmkit install | watch OWNER_PID ROOT")
