"""Scaffolding shared by the crash and race tests: a fast recording runner, workspaces, managers, oracles.

The runner is a few lines of Bash. Before anything else it records its execution in an *execution log*
outside the workspace, with exclusive creates (``noclobber`` opens with ``O_EXCL``):

- ``attempt.<activation-id>.<attempt-id>``: a second execution of one attempt finds the name taken,
  leaves ``DUPLICATE.<activation-id>.<attempt-id>.<pid>`` and exits without publishing anything;
- ``activation.<activation-id>``: a later attempt of the same activation finds it taken and leaves
  ``RELAUNCH.<activation-id>.<attempt-id>`` (legitimate only after a justified retry).

It then publishes the outcome its *plan* (second argument) names for the current step, by hand: a draft
directory, ``outcome.json``, one ``mv -T`` onto ``outcome.ready`` (synchronized when durable).

The oracles read the workspace without the engine's scanners: every regular file below ``state/`` is a
marker, and a job's history is the chain of frames from its marker back through ``previous_record_ref``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._liveness import group_alive
from httk.workflow.engine.core._states import TERMINAL_KINDS, Kind
from httk.workflow.engine.core._workspace import Workspace, attach, init
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import Submitter
from httk.workflow.protocol import MarkerName

from tests.conftest import minimal_job

LEASE_SECONDS = 600.0
"""Long enough that no manager here beats twice on its own, so a run's mutation list is exact."""

PLACEMENT = "proj/a"

PLANS = ("advance", "succeed", "fail", "retry", "pause", "block")
"""What the runner does, per plan and step.

``advance``  prepare advances to collect, collect succeeds
``succeed``  prepare succeeds                ``fail``   prepare declares a failure
``pause``    prepare pauses                  ``retry``  prepare requests one retry, then succeeds
``block``    the first attempt blocks until killed; a restarted one succeeds
"""

RUNNER = r"""#!/bin/bash
# Arguments: EXEC_LOG PLAN. Records this execution exclusively, then publishes what PLAN says.
log=$1
plan=$2
ctl=$HTTK_WORKFLOW_CONTROL_DIR
attempt=${ctl##*/.httk-attempt.}
activation=
job=
while IFS= read -r line; do
  case $line in
    *'"activation_id": "'*) activation=${line#*'"activation_id": "'}; activation=${activation%%'"'*} ;;
    *'"job_id": "'*) job=${line#*'"job_id": "'}; job=${job%%'"'*} ;;
  esac
done < "$HTTK_WORKFLOW_CONTEXT"
set -o noclobber
if ! { printf '%s %s\n' "$HTTK_WORKFLOW_STEP" "$HTTK_WORKFLOW_ATTEMPT_REASON" \
    > "$log/attempt.$activation.$attempt"; } 2>/dev/null; then
  : > "$log/DUPLICATE.$activation.$attempt.$$"
  exit 3
fi
{ : > "$log/activation.$activation"; } 2>/dev/null || : > "$log/RELAUNCH.$activation.$attempt"
set +o noclobber

publish() {
  local draft=$ctl/outcome.tmp.$$
  local head='"format":"httk-workflow-outcome","format_version":1'
  mkdir "$draft" || exit 70
  printf '{%s,"job_id":"%s","activation_id":"%s","attempt_id":"%s",%s}\n' \
    "$head" "$job" "$activation" "$attempt" "$1" > "$draft/outcome.json" || exit 71
  if [ "$HTTK_WORKFLOW_DURABLE" = 1 ]; then sync -- "$draft/outcome.json" "$draft" || exit 72; fi
  mv -T -- "$draft" "$ctl/outcome.ready" || exit 73
  if [ "$HTTK_WORKFLOW_DURABLE" = 1 ]; then sync -- "$ctl" || exit 74; fi
}

case $plan:$HTTK_WORKFLOW_STEP in
  advance:prepare) publish '"action":"advance","next_step":"collect"' ;;
  advance:collect | succeed:*) publish '"action":"succeed"' ;;
  fail:*) publish '"action":"fail","failure":{"code":"test.declared","message":"the step failed"}' ;;
  pause:*) publish '"action":"pause","pause":{"reason":"inspect me"}' ;;
  retry:*)
    # Once per job, whatever the attempt: the persistent workdir remembers the request.
    if [ -e retry-requested ]; then
      publish '"action":"succeed"'
    else
      : > retry-requested && publish '"action":"retry","retry":{"reason":"try once more"}'
    fi ;;
  block:*)
    if [ "$HTTK_WORKFLOW_IS_RESTART" = 1 ]; then publish '"action":"succeed"'; else exec sleep 3600; fi ;;
  *) exit 64 ;;
esac
"""

_MANAGER_CODE = """
import json, os, sys, time
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
manager = Manager({root!r}, ManagerConfig(workers={workers}, lease_seconds={lease!r}, confine={confine!r}))
barrier = {barrier!r}
if barrier is not None:
    manager.start()
    open({ready!r}, "x").close()
    deadline = time.monotonic() + 60.0
    while not os.path.exists(barrier):
        if time.monotonic() > deadline:
            sys.exit("the barrier never appeared")
        time.sleep(0.001)
summary = manager.run()
print(json.dumps({{"launched": summary.launched, "exit": summary.exit_reason}}))
"""


def manager_code(
    root: Path,
    *,
    workers: int = 1,
    lease: float = LEASE_SECONDS,
    barrier: Path | None = None,
    ready: Path | None = None,
    confine: bool = True,
) -> str:
    """A manager program for ``python -c``; with ``barrier`` it starts, creates ``ready``, then waits;
    ``confine=False`` runs its runners without a Landlock ruleset (``--no-confine``)."""
    return _MANAGER_CODE.format(
        root=str(root),
        workers=workers,
        lease=lease,
        confine=confine,
        barrier=None if barrier is None else str(barrier),
        ready=None if ready is None else str(ready),
    )


def manager_environment(crash_after: int | None = None, trace: Path | None = None) -> dict[str, str]:
    """This environment for a manager interpreter, with crash injection and tracing as asked.

    Hundreds of interpreters start here, so their bytecode is cached outside the repository even where
    the environment disables writing it (PYTHONDONTWRITEBYTECODE): a fifth of every start-up.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if name
        not in ("HTTK_WORKFLOW_CRASH_AFTER", "HTTK_WORKFLOW_MUTATION_TRACE", "PYTHONDONTWRITEBYTECODE")
    }
    env.setdefault(
        "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / f"httk-tests-pycache-{os.getuid()}")
    )
    if crash_after is not None:
        env["HTTK_WORKFLOW_CRASH_AFTER"] = str(crash_after)
    if trace is not None:
        env["HTTK_WORKFLOW_MUTATION_TRACE"] = str(trace)
    return env


def run_manager_process(
    root: Path, *, crash_after: int | None = None, trace: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one manager (one worker) in a fresh interpreter until idle, or until crash-stopped."""
    return subprocess.run(
        [sys.executable, "-c", manager_code(root)],
        env=manager_environment(crash_after, trace),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def start_manager_process(root: Path, **options: Any) -> subprocess.Popen[str]:
    """Start one manager in a fresh interpreter without waiting for it (``options`` as manager_code)."""
    return subprocess.Popen(
        [sys.executable, "-c", manager_code(root, **options)],
        env=manager_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- building workspaces with jobs -------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One fresh workspace with one submitted job, and the runner's execution log beside it."""

    root: Path
    exec_log: Path
    job_key: str


def write_runner(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RUNNER)
    path.chmod(0o755)
    return path


def job_document(
    exec_log: Path, plan: str, *, workdir_mode: str = "persistent", runner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A job whose runner gets ``exec_log`` and ``plan``; by default the payload's ``files/runner``."""
    assert plan in PLANS, plan
    reference = dict(runner or {"backend": "path", "path": "files/runner"})
    workdir = {"mode": "persistent", "path": "run"} if workdir_mode == "persistent" else {"mode": "isolated"}
    return minimal_job(runner={**reference, "arguments": [str(exec_log), plan]}, workdir=workdir)


def new_case(base: Path, plan: str, *, durable: bool = False, workdir_mode: str = "persistent") -> Case:
    """A workspace at ``base/ws`` holding one submitted job whose payload runner follows ``plan``."""
    base.mkdir(parents=True)
    exec_log = base / "exec-log"
    exec_log.mkdir()
    workspace = init(base / "ws", durable=durable)
    payload = base / "payload"
    payload.mkdir()
    (payload / "job.json").write_text(json.dumps(job_document(exec_log, plan, workdir_mode=workdir_mode)))
    write_runner(payload / "files" / "runner")
    result = Submitter(workspace).submit_payload(payload, PLACEMENT)
    workspace.close()
    return Case(workspace.root, exec_log, result.job_key)


# -- recovery ----------------------------------------------------------------------------------------
def expire_heartbeats(workspace: Workspace, age_seconds: float = 10 * 365 * 86400.0) -> list[str]:
    """Make every recorded manager's heartbeat ``age_seconds`` old; return those managers' ids.

    Stands in for elapsed time, and is honest only because these managers are dead: nobody will write
    their heartbeats again. A manager that died before its first heartbeat has none, which reads as
    infinitely old.
    """
    rewritten: list[str] = []
    updated = utc_timestamp(datetime.now(UTC) - timedelta(seconds=age_seconds))
    for directory in sorted(workspace.managers_dir.iterdir()):
        path = directory / "heartbeat.json"
        if not path.is_file():
            continue
        document = json.loads(path.read_text())
        document["updated_at"] = updated
        scratch = directory / "heartbeat.json.test-rewrite"
        scratch.write_text(json.dumps(document))
        os.replace(scratch, path)
        rewritten.append(directory.name)
    return rewritten


def recover_until_settled(
    root: Path, job_key: str, config: ManagerConfig, *, deadline_seconds: float = 30.0
) -> list[RunSummary]:
    """Run fresh managers in this process until the job's marker is terminal or paused.

    One manager may legitimately stop while the job is still running: a dead manager's runner still
    alive on this host is killed first and its attempt recovered on a later pass, and a manager with
    nothing else to do in between is idle. The loop ends on that condition, bounded by a deadline.
    """
    summaries: list[RunSummary] = []
    end = time.monotonic() + deadline_seconds
    while True:
        summaries.append(Manager(attach(root), config).run())
        marker = single_marker(attach(root, writable=False), job_key)
        if marker.kind in TERMINAL_KINDS or marker.kind is Kind.PAUSED:
            return summaries
        assert time.monotonic() < end, f"{job_key} still {marker.kind} after {len(summaries)} managers"


# -- oracles -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Marker:
    kind: Kind
    placement: str
    name: MarkerName
    path: Path


def all_markers(workspace: Workspace) -> list[Marker]:
    """Every regular file below ``state/``, parsed; an entry that does not parse fails the test."""
    state = workspace.control / "state"
    found: list[Marker] = []
    for directory, _dirs, files in os.walk(state):
        for name in files:
            path = Path(directory) / name
            relative = path.relative_to(state).parts
            found.append(Marker(Kind(relative[0]), "/".join(relative[1:-1]), MarkerName.parse(name), path))
    return found


def markers_by_job(workspace: Workspace) -> dict[str, list[Marker]]:
    grouped: dict[str, list[Marker]] = defaultdict(list)
    for marker in all_markers(workspace):
        grouped[str(marker.name.key)].append(marker)
    return dict(grouped)


def single_marker(workspace: Workspace, job_key: str) -> Marker:
    found = markers_by_job(workspace).get(job_key, [])
    assert len(found) == 1, f"{job_key} has {len(found)} markers: {[str(m.path) for m in found]}"
    return found[0]


def chain(workspace: Workspace, marker: Marker) -> list[dict[str, Any]]:
    """The job's frames from its marker back to its submission, newest first, every link checked.

    Each frame names this job and the generation one below its successor's; the oldest was written
    from the ``g0.init`` submission marker (generation 1, no predecessor).
    """
    frames: list[dict[str, Any]] = []
    expected = marker.name.generation
    assert marker.name.ref is not None, f"{marker.path} is still the submission marker"
    ref: str | None = str(marker.name.ref)
    while ref is not None:
        frame = workspace.reader.read(ref)
        assert frame["job_key"] == str(marker.name.key), (ref, frame)
        assert frame["state_generation"] == expected, (ref, frame["state_generation"], expected)
        frames.append(frame)
        ref = frame["previous_record_ref"]
        expected -= 1
    assert expected == 0, f"the chain of {marker.path} ends at generation {expected + 1}, not at g0.init"
    assert frames[0]["kind"] == marker.kind.value, (frames[0]["kind"], marker.kind)
    return frames


@dataclass
class Executions:
    """What the runner recorded: per activation, the attempts that executed, in no particular order."""

    attempts: dict[str, list[str]] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)  # one attempt executed twice: never allowed
    relaunches: list[str] = field(default_factory=list)  # an activation executed again: needs a reason

    @property
    def total(self) -> int:
        return sum(len(attempts) for attempts in self.attempts.values())


def read_executions(exec_log: Path) -> Executions:
    result = Executions()
    for name in sorted(os.listdir(exec_log)):
        what, _, rest = name.partition(".")
        if what == "attempt":
            activation, attempt = rest.split(".")
            result.attempts.setdefault(activation, []).append(attempt)
        elif what == "DUPLICATE":
            result.duplicates.append(rest)
        elif what == "RELAUNCH":
            result.relaunches.append(rest)
        else:
            assert what == "activation", name
    return result


JUSTIFIED_TAKEOVER_RULES = frozenset({"process_gone"})
"""Takeover rules after which a crash test may see an activation execute again."""


def check_reexecutions(frames: list[dict[str, Any]], executions: Executions, *, requested: int) -> None:
    """Every executed attempt is on the chain; an activation executes again only after a justified retry.

    Justified: a retry the step itself requested (exactly ``requested`` of them), or a ``lease_lost`` retry
    whose takeover evidence proves the old process gone. A crash whose outcome should have been
    committed, yet whose activation ran again, fails here.
    """
    assert not executions.duplicates, f"an attempt executed twice: {executions.duplicates}"
    claimed = {f["attempt_id"]: f for f in frames if f["kind"] == "claimed"}
    running = {f["attempt_id"] for f in frames if f["kind"] == "running"}
    retries: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for frame in frames:
        if frame["kind"] == "ready" and frame.get("reason") == "retry":
            retries[frame["activation_id"]].append(frame)
    requested_seen = 0
    for activation, attempts in executions.attempts.items():
        for attempt in attempts:
            assert attempt in claimed and attempt in running, f"attempt {attempt} executed off the chain"
            assert claimed[attempt]["activation_id"] == activation, (attempt, activation)
        justified = 0
        for frame in retries.get(activation, []):
            reason = frame.get("attempt_reason")
            if reason == "requested_retry":
                requested_seen += 1
            else:
                assert reason == "lease_lost", f"unexpected retry of {activation}: {frame}"
                rule = (frame.get("takeover") or {}).get("rule")
                assert rule in JUSTIFIED_TAKEOVER_RULES, f"lease_lost retry admitted by {rule!r}: {frame}"
            justified += 1
        assert len(attempts) <= 1 + justified, (
            f"activation {activation} executed {len(attempts)} times after {justified} justified retries"
        )
    assert len(executions.relaunches) <= sum(len(r) for r in retries.values()), executions.relaunches
    assert requested_seen == requested, f"{requested_seen} requested retries, the scenario makes {requested}"


# -- mutation traces ---------------------------------------------------------------------------------
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HWREF = re.compile(r"w[0-9a-f]{32}-s[0-9a-z]+-o[0-9a-z]+-l[0-9a-z]+-h[0-9a-f]{32}")
_SCRATCH = re.compile(r"\.tmp\.\d+\.[0-9a-f]+")


def normalized_trace(trace: Path, root: Path) -> list[str]:
    """The traced operations, with the workspace root, ids, references and scratch suffixes abstracted.

    Two runs of one scenario give equal lists exactly when they mutate the same names in the same order,
    which is what makes "crash after mutation k" the same point in every run.
    """
    lines: list[str] = []
    for line in trace.read_text().splitlines():
        _count, operation, path = line.split("\t", 2)
        path = path.replace(str(root), "<ws>")
        path = _HWREF.sub("<ref>", path)
        path = _UUID.sub("<id>", path)
        path = _SCRATCH.sub(".tmp.<n>", path)
        lines.append(f"{operation} {path}")
    return lines


def crash_points(count: int, shard: int, shards: int) -> Iterator[int]:
    """The crash points of ``shard``: together the shards hold every k in 1..count exactly once."""
    return iter(range(1 + shard, count + 1, shards))


# -- processes ---------------------------------------------------------------------------------------
def wait_for(condition: Callable[[], bool], what: str, *, deadline_seconds: float = 30.0) -> None:
    """Poll ``condition()`` until it holds; fail naming ``what`` once the deadline has passed."""
    end = time.monotonic() + deadline_seconds
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.002)


def kill_group(pgid: int) -> None:
    """SIGKILL the process group of a runner this test's manager started, and wait until it is gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_for(lambda: not group_alive(pgid), f"process group {pgid} to die")
