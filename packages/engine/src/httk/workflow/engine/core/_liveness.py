"""Liveness evidence: other managers' heartbeats and manifests, and whether a recorded process still runs.

Nothing is recovered while its owner is alive, so every recoverer, collector and diagnosis judges the
same evidence, read here and never assumed.

**Managers.** ``managers/<id>/manager.json`` says what a manager serves; ``heartbeat.json`` beside it is
its lease evidence. A manager is *live* when its heartbeat is readable and younger than the lease it
records — the same clock comparison a recovering manager makes before it touches another manager's
claim. Anything else is *stale*: an old heartbeat, an unreadable one, or a directory without a manifest.
One more piece of evidence is cheap and only ever makes a manager look *less* alive: the manifest records
the manager's process identity (host and pid, and its ``process``: start time in clock ticks, boot id,
pid namespace), and when that process provably no longer exists on this host the manager has *exited*
(:func:`manager_gone`) — a manager that was killed a moment ago still has a fresh heartbeat. That is
DECISIONS D17: a manager known dead is dead now, its lease counts as expired at once. The start time
tells a recycled pid from the manager, and another host, boot or pid namespace proves nothing, so the
evidence is never invented. The manifest is what the manager said it serves; a manager that is not live
serves nothing.

**Processes.** An attempt's process is recorded in ``process.json`` (and its running frame) with enough
identity to tell it from a recycled pid or another machine: host, pid, process group, the start time in
clock ticks (field 22 of ``/proc/<pid>/stat``), the kernel boot id and the pid namespace.
:func:`process_alive` answers only for an identity recorded on this host in this boot and namespace.

**Host.** :func:`hostname` is the name recorded and compared; ``HTTK_WORKFLOW_TEST_HOSTNAME`` replaces
the kernel's, for tests only (a test that plays a manager on another node sets it). Nothing else may,
since a wrong host name defeats the liveness proof every persistent-workdir takeover rests on.

**The batch system.** A manager inside a Slurm job records :func:`current_job` in its manifest;
:func:`job_end` (``squeue -h -j ID -o %e``), :func:`job_report` (``scontrol -o show job ID``) and
:func:`config_value` (``scontrol show config``) ask Slurm, one short subprocess each.
:class:`SlurmOracle` judges a recorded job: ended (a terminal state, or no longer known at all, which
on the cluster that ran it means ended long enough ago to be purged) and whether that proves every
process of it gone (``proctrack/cgroup``: Slurm kills the job's whole cgroup before calling it ended;
under ``proctrack/linuxproc`` a process that left the job's tree escapes, so it is evidence, not
proof; DECISIONS D17). ``COMPLETING`` is not ended, and a question Slurm cannot answer is never
"ended". It remembers: an ended job stays ended; one that has not ended is asked about again only after
:data:`RECHECK_SECONDS`, because a manager's passes run several times a second and slurmctld is shared.

Cost: one listing of ``managers/`` and two small reads per manager directory for :func:`list_managers`;
one ``/proc`` read per process probe (:func:`manager_gone` is one such probe).
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

from httk.workflow.protocol import InvalidDocumentError
from httk.workflow.protocol._jsonio import dump_compact, read_json_object

from . import _fsops
from ._workspace import Workspace

MAX_MANIFEST_BYTES = 256 * 1024

MANIFEST_LISTS = (
    "pools",
    "capabilities",
    "executors",
    "runner_modules",
    "runner_search_paths",
    "placement_prefixes",
)


HOSTNAME_OVERRIDE = "HTTK_WORKFLOW_TEST_HOSTNAME"


def hostname() -> str:
    """This host's name (see the module docstring for the test-only override)."""
    return os.environ.get(HOSTNAME_OVERRIDE) or socket.gethostname()


@dataclass(frozen=True, slots=True)
class ManagerView:
    """One manager directory as read now."""

    manager_id: str
    manifest: dict[str, Any] | None
    heartbeat: HeartbeatView
    age_seconds: float | None
    manifest_problem: str | None = None
    exited: bool = False

    @property
    def lease_seconds(self) -> float:
        return self.heartbeat.lease_seconds

    @property
    def live(self) -> bool:
        fresh = self.age_seconds is not None and self.age_seconds <= self.lease_seconds
        return fresh and not self.exited

    @property
    def state(self) -> str:
        """``live``, ``exited`` (its process is gone from this host) or ``stale``."""
        if self.live:
            return "live"
        return "exited" if self.exited else "stale"

    def member(self, name: str) -> Any:
        return None if self.manifest is None else self.manifest.get(name)

    def as_dict(self) -> dict[str, Any]:
        manifest = self.manifest or {}
        report: dict[str, Any] = {
            "manager_id": self.manager_id,
            "state": self.state,
            "heartbeat_age_seconds": None if self.age_seconds is None else round(self.age_seconds, 3),
            "lease_seconds": self.lease_seconds,
            "heartbeat_readable": self.heartbeat.readable,
            "label": manifest.get("manager_label"),
            "host": manifest.get("host", self.heartbeat.host),
            "pid": manifest.get("pid"),
            "started_at": manifest.get("started_at"),
            "workers": manifest.get("workers"),
            "resources": manifest.get("resources", {}),
            "batch": manifest.get("batch"),
            "software_version": manifest.get("software_version"),
        }
        for name in MANIFEST_LISTS:
            report[name] = list(manifest.get(name) or [])
        report["manifest_problem"] = self.manifest_problem
        return report


def list_managers(workspace: Workspace, *, now: datetime | None = None) -> list[ManagerView]:
    """Every directory below ``managers/``: live ones first, then by start time and id."""
    moment = workspace.clock.now() if now is None else now
    try:
        names = os.listdir(workspace.managers_dir)
    except FileNotFoundError:
        return []
    views: list[ManagerView] = []
    for name in names:
        directory = workspace.managers_dir / name
        if not directory.is_dir() or directory.is_symlink():
            continue
        manifest: dict[str, Any] | None = None
        problem: str | None = None
        try:
            manifest = read_json_object(
                directory / "manager.json", document="manager.json", max_bytes=MAX_MANIFEST_BYTES
            )
        except InvalidDocumentError as exc:
            problem = "no manager.json" if isinstance(exc.__cause__, FileNotFoundError) else exc.rule
        heartbeat = read_heartbeat(workspace, name)
        exited = manifest is not None and manager_gone(manifest)
        views.append(ManagerView(name, manifest, heartbeat, heartbeat.age(moment), problem, exited))
    views.sort(key=lambda view: (not view.live, str(view.member("started_at") or ""), view.manager_id))
    return views


def manager_gone(manifest: Mapping[str, Any]) -> bool:
    """Whether the manager a manifest describes provably no longer runs (DECISIONS D17).

    True only for a manifest naming this host whose recorded ``process`` (start ticks, boot id, pid
    namespace) is gone, a zombie, or a recycled pid (another start time). A manifest without a start
    time, or from another host, boot or pid namespace, proves nothing either way.
    """
    pid = manifest.get("pid")
    process = manifest.get("process")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(process, Mapping):
        return False
    if process.get("start_ticks") is None:
        return False
    return process_alive({**process, "host": manifest.get("host"), "pid": pid}) is False


def read_manifest(workspace: Workspace, manager_id: object) -> dict[str, Any] | None:
    """The manager's manifest, or ``None`` when it is absent or unreadable (no evidence either way)."""
    if not isinstance(manager_id, str) or not manager_id or "/" in manager_id or manager_id.startswith("."):
        return None
    try:
        return read_json_object(
            workspace.managers_dir / manager_id / "manager.json",
            document="manager.json",
            max_bytes=MAX_MANIFEST_BYTES,
        )
    except InvalidDocumentError:
        return None


@dataclass(frozen=True, slots=True)
class HeartbeatView:
    """Another manager's heartbeat as read now."""

    manager_id: str
    updated_at: datetime | None
    lease_seconds: float
    host: str | None
    readable: bool

    def age(self, now: datetime) -> float | None:
        return None if self.updated_at is None else (now - self.updated_at).total_seconds()


def read_heartbeat(workspace: Workspace, manager_id: str) -> HeartbeatView:
    """The heartbeat of ``manager_id``; an absent or unreadable one has no ``updated_at`` (infinitely old)."""
    path = workspace.managers_dir / manager_id / "heartbeat.json"
    try:
        document = read_json_object(path, document="heartbeat.json", max_bytes=64 * 1024)
        updated = datetime.fromisoformat(str(document["updated_at"]).replace("Z", "+00:00"))
        return HeartbeatView(
            manager_id,
            updated,
            float(document.get("lease_seconds", workspace.policy.lease_seconds)),
            str(document.get("host")),
            True,
        )
    except (InvalidDocumentError, KeyError, ValueError, TypeError):
        return HeartbeatView(manager_id, None, workspace.policy.lease_seconds, None, False)


def recorded_batch(workspace: Workspace, manager_id: object) -> dict[str, Any] | None:
    """The ``batch`` member of a manager's manifest: the batch job it ran in, if any."""
    manifest = read_manifest(workspace, manager_id)
    batch = None if manifest is None else manifest.get("batch")
    return batch if isinstance(batch, dict) else None


def read_manifests(workspace: Workspace) -> list[dict[str, Any]]:
    """Every readable manager manifest in the workspace (live or not)."""
    manifests: list[dict[str, Any]] = []
    try:
        entries = sorted(os.listdir(workspace.managers_dir))
    except FileNotFoundError:
        return manifests
    for name in entries:
        try:
            manifests.append(
                read_json_object(workspace.managers_dir / name / "manager.json", document="manager.json")
            )
        except InvalidDocumentError:
            continue
    return manifests


PROCESS_FILE = "process.json"


PROCESS_FORMAT = "httk-workflow-process"


_DEAD_STATES = frozenset({"Z", "X", "x"})


class ProcessIdentity(TypedDict):
    """What process.json records: enough to tell the same process from a recycled pid or another host."""

    host: str
    pid: int
    pgid: int
    start_ticks: int | None
    boot_id: str | None
    pid_namespace: str | None


# -- process identity ------------------------------------------------------------------------------
def identity_of(pid: int) -> ProcessIdentity:
    """The identity of this host's process ``pid`` as process.json records it (it leads its own group)."""
    stat = proc_stat(pid)
    return ProcessIdentity(
        host=hostname(),
        pid=pid,
        pgid=pid,  # a new session: the gate leads its own process group
        start_ticks=None if stat is None else stat[2],
        boot_id=_boot_id(),
        pid_namespace=_pid_namespace(),
    )


def proc_stat(pid: int) -> tuple[str, int, int] | None:
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
    if identity.get("host") != hostname() or _boot_id() is None:
        return None
    if identity.get("boot_id") != _boot_id() or identity.get("pid_namespace") != _pid_namespace():
        return None
    pid, ticks = _as_int(identity.get("pid")), _as_int(identity.get("start_ticks"))
    if pid is None or ticks is None or pid <= 0:
        return None
    stat = proc_stat(pid)
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
        stat = proc_stat(pid)
        if stat is not None and stat[1] == pgid and stat[0] not in _DEAD_STATES:
            return True
    return False


# -- process.json ----------------------------------------------------------------------------------
def write_process_file(
    control_dir: Path, identity: ProcessIdentity, durable: bool, owed: _fsops.OwedSyncs | None = None
) -> Path:
    """Record the gated process in ``<control>/process.json``; synchronized before it returns if durable
    (its directory by the batch ``owed``, when given: :func:`._fsops.write_file_atomic`)."""
    path = control_dir / PROCESS_FILE
    document = {"format": PROCESS_FORMAT, "format_version": 1, **identity}
    _fsops.write_file_atomic(path, dump_compact(document), durable=durable, owed=owed)
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


# -- the batch system --------------------------------------------------------------------------------
ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
SUFFICIENT_PROCTRACK = "proctrack/cgroup"
QUERY_SECONDS = 20.0
RECHECK_SECONDS = 30.0
"""How long a job Slurm did not report ended is taken as still not ended: a manager's passes run
several times a second, and slurmctld is shared by every user of the cluster."""


def current_job(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The batch job this process runs in, as a manifest records it; ``None`` outside Slurm."""
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id or not job_id.isdigit():
        return None
    record = {"system": "slurm", "job_id": job_id}
    for key, name in (("cluster", "SLURM_CLUSTER_NAME"), ("node", "SLURMD_NODENAME")):
        if environ.get(name):
            record[key] = environ[name]
    return record


def _query(*argv: str) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        result = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=QUERY_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def job_end(job_id: str) -> datetime | None:
    """When the job's time limit runs out (local time of the controller, naive), if Slurm knows it."""
    text = _query("squeue", "-h", "-j", job_id, "-o", "%e")
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None  # "N/A", "Unknown", or a job without a limit


def job_report(job_id: str) -> dict[str, str] | None:
    """``scontrol -o show job``'s fields; ``{}`` when Slurm no longer knows the job; ``None`` unanswered."""
    if shutil.which("scontrol") is None:
        return None
    try:
        result = subprocess.run(
            ["scontrol", "-o", "show", "job", job_id],
            capture_output=True,
            text=True,
            timeout=QUERY_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return {} if "Invalid job id" in result.stderr else None
    fields = dict(word.split("=", 1) for word in result.stdout.split() if "=" in word)
    return fields if fields.get("JobId") == job_id else None


def config_value(name: str) -> str | None:
    text = _query("scontrol", "show", "config")
    for line in (text or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == name:
            return value.strip()
    return None


@dataclass
class SlurmOracle:
    """Slurm's answers for one manager, remembered: the cluster's name and process tracking once,
    each job's terminal state once it is terminal (a job never leaves one), and that a job has not
    ended for :data:`RECHECK_SECONDS` (by ``monotonic``, a clock's)."""

    monotonic: Callable[[], float] = time.monotonic
    _config: dict[str, str | None] = field(default_factory=dict)
    _ended: dict[str, dict[str, Any]] = field(default_factory=dict)
    _not_ended: dict[str, float] = field(default_factory=dict)

    def setting(self, name: str) -> str | None:
        if name not in self._config:
            self._config[name] = config_value(name)
        return self._config[name]

    def evidence(self, batch: Mapping[str, Any]) -> dict[str, Any] | None:
        """What Slurm says about the batch job a manifest recorded; ``None`` when it cannot say it ended.

        The record names the job, its state, the cluster's process tracking and ``sufficient``: whether
        that proves every process of the job gone.
        """
        job_id = batch.get("job_id")
        if batch.get("system") != "slurm" or not isinstance(job_id, str):
            return None
        if job_id in self._ended:
            return self._ended[job_id]
        asked = self._not_ended.get(job_id)
        if asked is not None and self.monotonic() - asked < RECHECK_SECONDS:
            return None
        self._not_ended[job_id] = self.monotonic()
        cluster = self.setting("ClusterName")
        if cluster is None or batch.get("cluster") not in (None, cluster):
            return None  # another cluster's job id means nothing here
        report = job_report(job_id)
        if report is None:
            return None
        state = report.get("JobState", "PURGED") if report else "PURGED"
        if state not in ENDED_STATES and state != "PURGED":
            return None
        tracking = self.setting("ProctrackType")
        found = {
            "system": "slurm",
            "job_id": job_id,
            "cluster": cluster,
            "job_state": state,
            "proctrack": tracking,
            "sufficient": tracking == SUFFICIENT_PROCTRACK,
        }
        if report.get("EndTime"):
            found["end_time"] = report["EndTime"]
        self._ended[job_id] = found
        del self._not_ended[job_id]
        return found
