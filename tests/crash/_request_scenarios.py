"""Scenarios of request application and cancellation for the crash tests, and their oracle.

A scenario builds a workspace holding one job and one published request (in the test process), then a
separate interpreter *settles* it: request passes until nothing moves, and the cancelling pass until no
job is left cancelling. :func:`signature` is what must be the same after an uninterrupted settle and
after any crash followed by a fresh settle: the job's marker kind, generation and priority, the reasons
on its chain, how many frames name the request (exactly once applied, never twice), and where the
request file ended up.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.core._frames import Frame, kept_members
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, attach, init, probe_marker
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._cancel import on_cancelling
from httk.workflow.engine.manager._request_apply import handle_requests
from httk.workflow.engine.manager._state import LiveAttempt, ManagerConfig, ManagerState
from httk.workflow.engine.publish._submit import Submitter

from tests.conftest import minimal_job
from tests.jobkinds import chain, frame_of, job_in, new_state, write_raw, write_request

REPO = Path(__file__).resolve().parents[2]
PAYLOAD_RUNNER = {"backend": "path", "source": "payload", "path": "files/runner", "arguments": []}
SETTLE_SECONDS = 30.0

# The runner takes a moment to honour SIGTERM, so a cancellation's mutations come in one fixed order:
# the fence and the claimed file's removal in the request pass, the verified end in a later pass.
SLOW_TO_STOP = """#!/bin/bash
trap 'sleep 0.3; exit 3' TERM
sleep 1000 &
echo $! > child.pid.tmp && mv child.pid.tmp child.pid
wait
"""


def settle(root: Path | str) -> None:
    """Run request passes and cancelling passes with a fresh manager state until nothing is left."""
    state = ManagerState(attach(root), ManagerConfig(cancel_grace_seconds=10.0), SYSTEM_CLOCK)
    end = time.monotonic() + SETTLE_SECONDS
    while True:
        moved = handle_requests(state)
        cancelling = [
            m for m in walk_markers(state.workspace, Kind.CANCELLING) if isinstance(m, MarkerLocation)
        ]
        for marker in cancelling:
            on_cancelling(state, marker)
        if not moved and not cancelling:
            state.workspace.close()
            return
        assert time.monotonic() < end, f"still settling after {SETTLE_SECONDS} s"
        time.sleep(0.02)


def settle_code(root: Path) -> str:
    """The program a crash test runs in a fresh interpreter."""
    return (
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
        f"from tests.crash._request_scenarios import settle\nsettle({str(root)!r})\n"
    )


def age_claims(root: Path, seconds: float = 10 * 86400.0) -> None:
    """Make every claimed directory look untouched for ``seconds``: its manager died (no heartbeat)."""
    for directory in (root / ".httk-workflow" / "requests" / "claimed").iterdir():
        stamp = time.time() - seconds
        os.utime(directory, (stamp, stamp))


@dataclass
class Built:
    root: Path
    job_key: str
    placement: str
    request_id: str
    live: LiveAttempt | None = None  # a runner this process launched, for its owner's "death"


def _simple(kind: Kind, action: str, **members: Any) -> Callable[[Path], Built]:
    def build(base: Path) -> Built:
        state = new_state(init(base / "ws", durable=False).root)
        marker = job_in(state, kind)
        request = write_request(state.workspace, marker, action, **members)
        state.workspace.close()
        return Built(state.workspace.root, marker.job_key, marker.placement, request.stem)

    return build


def _mismatched(base: Path) -> Built:
    state = new_state(init(base / "ws", durable=False).root)
    marker = job_in(state, Kind.READY)
    request = write_request(state.workspace, marker, "pause")
    members = {**kept_members(frame_of(state, marker)), "reason": "moved on"}
    state.move(marker, Frame(Kind.READY, members, 12), Trigger.SET_PRIORITY)
    state.workspace.close()
    return Built(state.workspace.root, marker.job_key, marker.placement, request.stem)


def _malformed(base: Path) -> Built:
    state = new_state(init(base / "ws", durable=False).root)
    marker = job_in(state, Kind.READY)
    name = "00000000-0000-4000-8000-000000000000"
    write_raw(state.workspace, f"{name}.json", b"{not json")
    state.workspace.close()
    return Built(state.workspace.root, marker.job_key, marker.placement, name)


def _running(base: Path) -> Built:
    """A job whose runner (and its child) runs, launched by a manager that then died."""
    root = init(base / "ws", durable=False).root
    owner = new_state(root)
    job = minimal_job(
        runner={"backend": "path", "source": "payload", "path": "files/runner", "arguments": []}
    )
    source = base / "payload"
    (source / "files").mkdir(parents=True)
    (source / "job.json").write_text(json.dumps(job))
    (source / "files" / "runner").write_text(SLOW_TO_STOP)
    (source / "files" / "runner").chmod(0o755)
    submitted = Submitter(owner.workspace).submit_payload(source, "run").marker
    _launch.register(owner, submitted)
    ready = probe_marker(owner.workspace, "run", submitted.job_key)
    assert ready is not None and _launch.claim_and_launch(owner, ready, owner.jobs.get(ready))
    [live] = owner.live.values()
    deadline = time.monotonic() + 30
    while not (live.prepared.workdir / "child.pid").exists():
        assert time.monotonic() < deadline, "the runner never started its child"
        time.sleep(0.01)
    heartbeat = owner.workspace.managers_dir / owner.manager_id / "heartbeat.json"
    heartbeat.parent.mkdir(parents=True)
    heartbeat.write_text(json.dumps({"updated_at": "2000-01-01T00:00:00.000000Z", "lease_seconds": 1.0}))
    running = probe_marker(owner.workspace, "run", submitted.job_key)
    assert running is not None and running.kind is Kind.RUNNING
    request = write_request(owner.workspace, running, "cancel")
    owner.workspace.close()
    return Built(root, running.job_key, "run", request.stem, live)


SCENARIOS: dict[str, Callable[[Path], Built]] = {
    "continue-failed": _simple(Kind.FAILED, "continue"),
    "override-paused": _simple(Kind.PAUSED, "override_step"),
    "set-priority-waiting": _simple(Kind.WAITING, "set_priority"),
    "pause-submitted": _simple(Kind.SUBMITTED, "pause"),
    "cancel-claimed": _simple(Kind.CLAIMED, "cancel"),
    "retire-mismatch": _mismatched,
    "quarantine-malformed": _malformed,
    "cancel-running": _running,
}


def signature(built: Built) -> dict[str, Any]:
    """What any crash followed by a fresh settle must leave exactly as an uninterrupted settle does."""
    ws = attach(built.root, writable=False)
    marker = probe_marker(ws, built.placement, built.job_key)
    assert marker is not None
    frames = chain(ws, marker)
    requests = ws.requests_dir

    def names(directory: Path) -> list[str]:
        found = [p for p in directory.rglob("*") if p.is_file() and ".tmp." not in p.name]
        return sorted(p.name.replace(built.request_id, "REQUEST") for p in found)

    quarantined = sorted(p.suffix or "entry" for p in ws.quarantine_dir.iterdir() if ".tmp." not in p.name)
    return {
        "kind": marker.kind.value,
        "generation": marker.name.generation,
        "priority": marker.name.priority,
        "reasons": [frame["reason"] for frame in frames],
        "request_frames": sum(frame.get("request_id") == built.request_id for frame in frames),
        "verified": (frames[0].get("cancellation") or {}).get("verified"),
        "ready": names(requests / "ready"),
        "claimed": names(requests / "claimed"),
        "retired": names(requests / "retired"),
        "quarantine": quarantined,
    }
