"""A collection interrupted after any one of its mutations is finished by the next, and loses nothing.

One workspace holds garbage of every category beside what must be kept (a heartbeating manager, jobs in
several kinds, a dead manager's history). A collection is run once with a mutation trace to count its
mutations; then, for every k, a fresh copy is collected in a process stopped right after mutation k, and
a second, uninterrupted collection follows. Its result must be exactly what one uninterrupted
collection leaves (journal writers created by collections aside), and nothing protected may be gone.

The second collection judges ages three leases later: what an interrupted rmdir leaves behind (an
emptied writer or manager directory) has just been modified and is collected once it is one lease old.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach
from httk.workflow.engine.maintenance._gc import collect_garbage

from tests.crashkit import count_mutations, run_crashing
from tests.engine.maintenance.test_gc import (
    AGGRESSIVE,
    attempt_dir,
    make_old_tree,
    publish_record,
    set_retention,
    silence,
    small_segment_workspace,
)
from tests.jobkinds import job_in, new_state

LEASE = 60.0
SCENARIO = """
from httk.workflow.engine.maintenance._gc import collect_garbage
from httk.workflow.engine.core._workspace import Workspace, attach
collect_garbage(attach({root!r}))
"""


def build(tmp_path: Path) -> tuple[Path, set[str]]:
    """The template workspace and the relative paths that every collection must keep."""
    root = small_segment_workspace(tmp_path)
    ws = attach(root)
    ws.update_document({"policy": {**ws.document["policy"], "lease_seconds": LEASE}})
    dead, live, gone = new_state(root), new_state(root), new_state(root)
    for manager in (dead, gone):
        publish_record(manager)
    publish_record(live, lease_seconds=1e6)  # still heartbeating three leases from now
    keep: set[Path] = {ws.managers_dir / live.manager_id / "heartbeat.json"}
    history = {
        kind: job_in(dead, kind, placement=f"dead/{kind.value}") for kind in (Kind.WAITING, Kind.FAILED)
    }
    active = {
        kind: job_in(live, kind, placement=f"live/{kind.value}") for kind in (Kind.RUNNING, Kind.PAUSED)
    }
    for manager in (dead, gone):
        silence(ws, manager.manager_id)
    keep |= {marker.path(ws) for marker in (history[Kind.WAITING], *active.values())}
    keep |= set(ws.journal_dir.glob(f"{live.writer_id}/*.hwj"))
    keep |= _garbage_beside(ws, history[Kind.FAILED], active[Kind.PAUSED])
    orphan = job_in(live, Kind.READY, placement="orphan")
    shutil.rmtree(ws.payload_path(orphan.placement, orphan.job_key))
    make_old_tree(root)
    set_retention(ws, **AGGRESSIVE)
    ws.close()
    return root, {os.path.relpath(path, root) for path in keep}


def _garbage_beside(ws: Workspace, failed: MarkerLocation, paused: MarkerLocation) -> set[Path]:
    """Garbage of the payload, scratch and request categories; return two paths beside it to keep."""
    attempt_dir(ws, failed, str(uuid.uuid4()), 1)  # older: collected
    newest = attempt_dir(ws, failed, str(uuid.uuid4()), 2)
    trash = attempt_dir(ws, paused, str(uuid.uuid4()), 1) / "outcome.ready/transaction/trash/op"
    (trash / "removed").mkdir(parents=True)
    (trash / "removed" / "data").write_text("old")
    (ws.tmp_dir / "staging" / "files").mkdir(parents=True)
    (ws.tmp_dir / "staging" / "files" / "a").write_text("a")
    for kind in ("claimed/0d1e0d1e-0000-4000-8000-000000000000", "retired"):
        (ws.requests_dir / kind).mkdir(exist_ok=True)
    (ws.requests_dir / "claimed/0d1e0d1e-0000-4000-8000-000000000000/r.json").write_text("{}")
    (ws.requests_dir / "retired/q.json").write_text("{}")
    (ws.requests_dir / "retired/q.json.retirement").write_text("{}")
    (ws.marker_dir(Kind.SUCCEEDED, "empty/deeper")).mkdir(parents=True)
    kept = _transfer_garbage(ws.control / "transfers")
    return {newest / "context.json", ws.payload_path(paused.placement, paused.job_key) / "job.json", *kept}


def _transfer_garbage(transfers: Path) -> set[Path]:
    """A retired bundle, its acknowledgement and a delivered import record (collected); the ledger, an
    undelivered import record and a bundle awaiting acknowledgement (kept)."""
    retired_id, undelivered_id, waiting_id = (str(uuid.uuid4()) for _ in range(3))
    bundle = transfers / "retired" / retired_id / "job--x"
    (bundle / "data").mkdir(parents=True)
    (bundle / "data" / "big").write_text("old")
    ledger = transfers / "retired" / f"{retired_id}.json"
    ledger.write_text(json.dumps({"outcome": "imported"}))
    for where in ("acks", "imported", "outgoing"):
        (transfers / where).mkdir()
    (transfers / "acks" / f"{retired_id}.json").write_text("{}")
    (transfers / "imported" / f"{retired_id}.json").write_text(json.dumps({"delivered_at": "then"}))
    undelivered = transfers / "imported" / f"{undelivered_id}.json"
    undelivered.write_text("{}")
    waiting = transfers / "outgoing" / waiting_id / "job--y" / ".httk-transfer"
    waiting.mkdir(parents=True)
    (waiting / "manifest.json").write_text("{}")
    return {ledger, undelivered, waiting / "manifest.json"}


def tree(root: Path, template_writers: set[str]) -> set[str]:
    """Every path below ``root`` but the journal writers collections created."""
    found: set[str] = set()
    for directory, dirnames, filenames in os.walk(root):
        relative = os.path.relpath(directory, root)
        found |= {os.path.normpath(os.path.join(relative, name)) for name in [*dirnames, *filenames]}
    return {path for path in found if not _new_writer(path, template_writers)}


def _new_writer(path: str, template_writers: set[str]) -> bool:
    parts = Path(path).parts
    return len(parts) >= 3 and parts[:2] == (".httk-workflow", "journal") and parts[2] not in template_writers


@pytest.mark.slow
def test_every_interrupted_collection_is_finished_by_the_next(tmp_path: Path) -> None:
    template, keep = build(tmp_path / "template")
    writers = {path.name for path in (template / ".httk-workflow" / "journal").iterdir()}

    reference = tmp_path / "reference"
    shutil.copytree(template, reference, symlinks=True)
    trace = count_mutations(SCENARIO.format(root=str(reference)), tmp_path / "trace")
    expected = tree(reference, writers)
    assert not keep - expected, "the reference collection removed something protected"
    assert len(trace) >= 15, trace  # every category removed something
    later = SYSTEM_CLOCK.now() + timedelta(seconds=3 * LEASE)

    for k in range(1, len(trace) + 1):
        copy = tmp_path / f"crash-{k}"
        shutil.copytree(template, copy, symlinks=True)
        run_crashing(SCENARIO.format(root=str(copy)), k)
        assert not keep - tree(copy, writers), (k, trace[k - 1], "protected entry removed")
        workspace = attach(copy)
        collect_garbage(workspace, now=later)
        workspace.close()
        assert tree(copy, writers) == expected, (k, trace[k - 1])
        shutil.rmtree(copy)


def test_the_scenario_covers_every_category(tmp_path: Path) -> None:
    template, _keep = build(tmp_path / "template")
    report = collect_garbage(attach(template, writable=False), dry_run=True)
    assert [name for name, count in report.categories.items() if count.candidates == 0] == []
