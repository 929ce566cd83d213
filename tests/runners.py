"""A data-driven test runner, and helpers to submit it, wait on real conditions and read what it left.

The runner is one Bash script (bash, coreutils and the manager's Python only to *read* the context and
job.json). Each step's behaviour comes from the job's ``inputs.steps[<step>]`` object, so one stored
runner covers every case a test needs:

==================  ===========================================================================
member              meaning
==================  ===========================================================================
``action``          ``advance`` ``succeed`` ``fail`` ``retry`` ``pause`` (publish that outcome),
                    ``exit`` (exit without an outcome) or ``kill`` (SIGKILL itself); default
                    ``succeed``
``exit``            the exit status (after publishing, or instead of it); default 0
``reason``          the ``retry``/``pause`` reason
``outcome``         members that override the composed outcome (a wrong ``attempt_id``, ...)
``stdout``          text printed to standard output before acting (``stderr`` likewise)
``write``           ``{"name": ..., "text": ...}``: a file written into the workdir
``require_file``    a workdir file that must exist, else exit 7 (persistent workdir reuse)
``wait_for``        an absolute path to wait for (bounded) before acting
``linger_for``      an absolute path to wait for (bounded) after publishing, before exiting
``ignore_term``     trap SIGTERM: record it as ``term.<n>`` in the workdir and keep going
``launch_log``      a directory; the runner appends its ``label`` there by exclusive creation
``attempts``        a list of such objects chosen by ``attempt_ordinal`` (the last one repeats)
==================  ===========================================================================

``next_step``, ``failure``, ``priority``, ``message`` and ``runner_steps`` are copied into the outcome as
given. A step without a script exits 64.

Every attempt first records a copy of context.json and its environment (the ``HTTK_*`` variables and
``PWD``) into its workdir as ``httk-record.<total-attempts>.context.json`` / ``.env``, each renamed into
place, the ``.env`` last. Outcomes are published by hand exactly as the specification says: ``mkdir
outcome.tmp.<nonce>``, write ``outcome.json`` (synchronized when ``HTTK_WORKFLOW_DURABLE=1``), ``mv -T``
to ``outcome.ready``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, init, probe_marker
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.engine.publish._submit import JobSpec, SubmitResult, Submitter, submit_jobs

from tests.conftest import minimal_job

RUNNER_NAME = "scripted"
RECORD_PREFIX = "httk-record."
WAIT_SECONDS = 30.0
"""How long a test waits for a real condition before failing loudly (generous: CI machines are slow)."""

_PLAN = r"""
import json, sys
context = json.load(open(sys.argv[1]))
job = json.load(open(sys.argv[2]))
steps = (job.get("inputs") or {}).get("steps") or {}
script = steps.get(context["step"], {"action": "exit", "exit": 64, "stderr": "no script for this step\n"})
attempts = script.get("attempts")
if attempts:
    script = attempts[min(context["attempt_ordinal"], len(attempts)) - 1]
action = script.get("action", "succeed")
outcome = ""
mode = action if action in ("exit", "kill") else "publish"
if mode == "publish":
    document = {"format": "httk-workflow-outcome", "format_version": 1, "action": action}
    for member in ("job_id", "activation_id", "attempt_id"):
        document[member] = context[member]
    for member in ("next_step", "failure", "priority", "message", "runner_steps"):
        if member in script:
            document[member] = script[member]
    if action in ("retry", "pause"):
        document[action] = {"reason": script.get("reason", "asked by the test")}
    document.update(script.get("outcome") or {})
    outcome = json.dumps(document, indent=2)
write = script.get("write") or {}
fields = [
    mode, str(script.get("exit", 0)), outcome, script.get("stdout", ""), script.get("stderr", ""),
    script.get("require_file", ""), write.get("name", ""), write.get("text", ""),
    script.get("wait_for", ""), script.get("linger_for", ""), "1" if script.get("ignore_term") else "",
    script.get("launch_log", ""), script.get("label", ""), "%03d" % context["total_attempts"],
]
sys.stdout.write("".join(field + "\0" for field in fields))
"""

_QUOTED_PLAN = _PLAN.replace("'", "'\\''")

RUNNER_SCRIPT = f"""#!/usr/bin/env bash
# The scripted test runner of tests/runners.py: one step's behaviour comes from job.json inputs.steps.
set -euo pipefail

wait_file() {{  # wait_file PATH: wait (bounded) until PATH exists; exit 99 if it never does
  local i
  for ((i = 0; i < 6000; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.02 || :  # a trapped SIGTERM also reaches sleep; keep waiting
  done
  echo "gave up waiting for $1" >&2
  exit 99
}}

python=${{HTTK_WORKFLOW_PYTHON:-python3}}
mapfile -d '' -t plan < <("$python" -c '{_QUOTED_PLAN}' "$HTTK_WORKFLOW_CONTEXT" \\
  "$HTTK_WORKFLOW_JOB_DIR/job.json")
if ((${{#plan[@]}} != 14)); then
  echo "could not read the step's script" >&2
  exit 65
fi
mode=${{plan[0]}} status=${{plan[1]}} outcome=${{plan[2]}}
record="$HTTK_WORKFLOW_WORKDIR/{RECORD_PREFIX}${{plan[13]}}"
# The trap is set before the record is written: a test that saw the record may signal at once.
if [[ -n ${{plan[10]}} ]]; then
  terms=0
  trap 'terms=$((terms + 1)); : >"$HTTK_WORKFLOW_WORKDIR/term.$terms"' TERM
fi

cp "$HTTK_WORKFLOW_CONTEXT" "$record.context.json.tmp"
mv -T "$record.context.json.tmp" "$record.context.json"
env | grep -E '^(HTTK_|PWD=)' | sort >"$record.env.tmp"
mv -T "$record.env.tmp" "$record.env"  # last: a test that sees the .env file sees the whole record
printf '%s' "${{plan[3]}}"
printf '%s' "${{plan[4]}}" >&2
if [[ -n ${{plan[11]}} ]]; then
  n=0
  until (set -o noclobber && printf '%s\\n' "${{plan[12]}}" >"${{plan[11]}}/$(printf %04d "$n")") \\
    2>/dev/null; do
    n=$((n + 1))
  done
fi
if [[ -n ${{plan[5]}} && ! -e ${{plan[5]}} ]]; then
  echo "the file ${{plan[5]}} is missing from the workdir" >&2
  exit 7
fi
[[ -z ${{plan[6]}} ]] || printf '%s' "${{plan[7]}}" >"${{plan[6]}}"
[[ -z ${{plan[8]}} ]] || wait_file "${{plan[8]}}"

case $mode in
  exit) exit "$status" ;;
  kill) kill -KILL $$ ;;
esac
draft="$HTTK_WORKFLOW_CONTROL_DIR/outcome.tmp.$$.$RANDOM"
mkdir "$draft"
printf '%s\\n' "$outcome" >"$draft/outcome.json"
[[ ${{HTTK_WORKFLOW_DURABLE:-0}} != 1 ]] || sync "$draft/outcome.json" "$draft"
mv -T "$draft" "$HTTK_WORKFLOW_CONTROL_DIR/outcome.ready"
[[ ${{HTTK_WORKFLOW_DURABLE:-0}} != 1 ]] || sync "$HTTK_WORKFLOW_CONTROL_DIR"
[[ -z ${{plan[9]}} ]] || wait_file "${{plan[9]}}"
exit "$status"
"""


def write_runner(path: Path) -> Path:
    """Write the scripted runner to ``path`` as an executable file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RUNNER_SCRIPT)
    path.chmod(0o755)
    return path


def publish_scripted_runner(ws: Workspace, scratch: Path) -> dict[str, Any]:
    """Store the runner in the workspace runner store; return the job.json ``runner`` member."""
    source = write_runner(scratch / "scripted-runner-source")
    published = publish_runner(ws, RUNNER_NAME, source)
    return {"backend": "path", **published.reference(), "arguments": []}


@pytest.fixture(name="ws")
def ws_fixture(tmp_path: Path) -> Iterator[Workspace]:
    """A fresh non-durable workspace in ``tmp_path/ws``, closed after the test."""
    workspace = init(tmp_path / "ws", durable=False)
    yield workspace
    workspace.close()


@pytest.fixture(name="runner")
def runner_fixture(ws: Workspace, tmp_path: Path) -> dict[str, Any]:
    """The scripted runner published into ``ws``'s runner store: a job.json ``runner`` member."""
    return publish_scripted_runner(ws, tmp_path)


PAYLOAD_RUNNER = {"backend": "path", "source": "payload", "path": "files/runner", "arguments": []}


def scripted_job(
    steps: Mapping[str, Any],
    runner: Mapping[str, Any],
    *,
    retry_on: list[str] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """minimal_job running ``runner`` with ``inputs.steps``; ``retry_on`` replaces the policy's list."""
    job = minimal_job(runner=dict(runner), inputs={"steps": dict(steps)}, **overrides)
    if retry_on is not None:
        job["retry_policy"] = {**job["retry_policy"], "retry_on": retry_on}
    return job


def submit(ws: Workspace, job: Mapping[str, Any], placement: str = "p") -> SubmitResult:
    [result] = submit_jobs(ws, [JobSpec(job, placement)])
    return result


def submit_with_payload_runner(ws: Workspace, job: Mapping[str, Any], scratch: Path, placement: str) -> Path:
    """Submit ``job`` with the runner as the executable payload file ``files/runner``; return the payload."""
    source = scratch / f"payload-{job['id']}"
    source.mkdir(parents=True)
    (source / "job.json").write_text(json.dumps(job, indent=2))
    write_runner(source / "files" / "runner")
    Submitter(ws).submit_payload(source, placement)
    return ws.payload_path(placement, job_key(job))


def job_key(job: Mapping[str, Any]) -> str:
    return f"{job['tag']}--{job['id']}" if job.get("tag") else str(job["id"])


def current_marker(ws: Workspace, job: Mapping[str, Any], placement: str = "p") -> MarkerLocation:
    marker = probe_marker(ws, placement, job_key(job))
    assert marker is not None, f"job {job['id']} has no marker"
    return marker


def frame_chain(ws: Workspace, marker: MarkerLocation) -> list[dict[str, Any]]:
    """Every state frame of the job, oldest first, by walking ``previous_record_ref`` from ``marker``."""
    frames: list[dict[str, Any]] = []
    ref = None if marker.name.ref is None else str(marker.name.ref)
    while ref is not None:
        frame = ws.reader.read(ref)
        frames.append(frame)
        ref = frame["previous_record_ref"]
    return frames[::-1]


@dataclass(frozen=True)
class Record:
    """What one attempt recorded at its start: its HTTK_* environment and its context.json."""

    env: dict[str, str]
    context: dict[str, Any]
    workdir: Path


def records(payload: Path) -> list[Record]:
    """Every attempt's record below the payload's workdirs, in attempt order (total_attempts)."""
    found: list[Record] = []
    for env_file in payload.glob(f"run*/{RECORD_PREFIX}*.env"):
        base = env_file.with_suffix("")
        env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
        context = json.loads(base.with_name(base.name + ".context.json").read_text())
        found.append(Record(env, context, env_file.parent))
    return sorted(found, key=lambda record: int(record.context["total_attempts"]))


T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], what: str, timeout: float = WAIT_SECONDS) -> T:
    """Poll ``condition`` until it returns something truthy; fail loudly naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {what}")
        time.sleep(0.01)


def run_bounded(manager: Manager) -> RunSummary:
    """Run ``manager``, draining it if it has not stopped by the deadline (a test must never hang)."""
    watchdog = threading.Timer(WAIT_SECONDS, manager.request_drain)
    watchdog.start()
    try:
        return manager.run()
    finally:
        watchdog.cancel()


def markers_of(ws: Workspace, kind: str) -> list[Path]:
    directory = ws.state_dir(kind)
    return sorted(p for p in directory.rglob("*") if p.is_file()) if directory.exists() else []


def age_heartbeats(ws: Workspace) -> list[str]:
    """Rewrite every manager heartbeat's ``updated_at`` into the distant past; return the manager ids.

    Only for managers that are dead: it stands in for the time a lease takes to expire.
    """
    ids: list[str] = []
    for path in sorted(ws.managers_dir.glob("*/heartbeat.json")):
        heartbeat = json.loads(path.read_text())
        heartbeat["updated_at"] = "2000-01-01T00:00:00.000000Z"
        scratch = path.with_name("heartbeat.json.aged")
        scratch.write_text(json.dumps(heartbeat))
        os.replace(scratch, path)
        ids.append(path.parent.name)
    return ids
