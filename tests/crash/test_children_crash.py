"""A commit that registers children, stopped after each of its mutations in turn, converges exactly once.

The template is a parent in ``running`` (its manager long dead) whose attempt published a ``wait`` with
three child bundles. The reference run — a fresh interpreter committing that outcome through
:func:`_recovery.on_claimed_or_running` — is traced once to learn its mutations: the committing frame
and rename, then for each child the placement directories, the bundle rename, the staged marker and its
rename, then the waiting frame and rename. Then for EVERY k a copy of the template is committed by a
process stopped right after mutation k (``HTTK_WORKFLOW_CRASH_AFTER``), and a fresh manager state in
this process recovers whatever marker the parent has. Each time: the parent has exactly one marker, in
``waiting``, with a readable chain; each child has exactly one marker and one payload, identical to
the bundle it came from; no bundle is left behind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._fsops import CRASH_EXIT_STATUS
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import attach, probe_marker
from httk.workflow.engine.manager import _recovery

from tests.crash._scenarios import chain, manager_environment, markers_by_job, single_marker
from tests.joinkit import PARENT_PLACEMENT, fresh_workspace, join_of, manager_state, running_parent

SHARDS = 2
COMMIT = """
import sys
from httk.workflow.engine.manager import _recovery
from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.core._workspace import probe_marker
from httk.workflow.engine.core._workspace import attach
ws = attach(sys.argv[1])
state = ManagerState(ws, ManagerConfig(), SYSTEM_CLOCK)
assert _recovery.on_claimed_or_running(state, probe_marker(ws, sys.argv[2], sys.argv[3])) is True
"""


@dataclass(frozen=True)
class Template:
    root: Path
    parent_key: str
    children: dict[str, tuple[str, bytes]]  # job key -> (placement, job.json bytes)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("children-crash") / "ws"
    ws = fresh_workspace(root, ManualClock(datetime(2000, 1, 1, tzinfo=UTC)))  # its claim expired long ago
    pub = running_parent(manager_state(ws, ManualClock(datetime(2000, 1, 1, tzinfo=UTC))))
    bundles = [pub.bundle(label) for label in ("alpha", "beta", "gamma")]
    pub.publish(pub.outcome("wait", next_step="gather", join=join_of(bundles)), bundles)
    ws.close()
    children = {b.key: (b.placement, json.dumps(b.job).encode()) for b in bundles}
    return Template(root, pub.key, children)


def commit_process(root: Path, key: str, *, crash_after: int | None = None, trace: Path | None = None) -> int:
    result = subprocess.run(
        [sys.executable, "-c", COMMIT, str(root), PARENT_PLACEMENT, key],
        env=manager_environment(crash_after, trace),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if result.returncode not in (0, CRASH_EXIT_STATUS):
        raise AssertionError(result.stderr)
    return result.returncode


def recover(root: Path, key: str) -> None:
    ws = attach(root)
    try:
        state = manager_state(ws)  # a fresh manager: the crashed one never heartbeat
        marker = probe_marker(ws, PARENT_PLACEMENT, key)
        assert marker is not None
        if marker.kind is Kind.RUNNING:
            assert _recovery.on_claimed_or_running(state, marker) is True
        elif marker.kind is Kind.COMMITTING:
            assert _recovery.on_committing(state, marker) is True
    finally:
        ws.close()


def check_converged(template: Template, root: Path) -> None:
    ws = attach(root, writable=False)
    parent = single_marker(ws, template.parent_key)
    frames = chain(ws, parent)
    assert parent.kind is Kind.WAITING, (parent.kind, frames[0])
    assert [child["label"] for child in frames[0]["join"]["children"]] == ["alpha", "beta", "gamma"]
    grouped = markers_by_job(ws)
    for key, (placement, job_bytes) in template.children.items():
        [marker] = grouped[key]  # exactly one marker: registered once
        assert (marker.kind, marker.placement) == (Kind.SUBMITTED, placement)
        assert (ws.payload_path(placement, key) / "job.json").read_bytes() == job_bytes
    assert len(grouped) == 1 + len(template.children), sorted(grouped)
    attempt = next((root / PARENT_PLACEMENT / template.parent_key).glob(".httk-attempt.*"))
    assert list((attempt / "outcome.ready" / "children" / "jobs").iterdir()) == []


@pytest.fixture(scope="module")
def mutations(template: Template, tmp_path_factory: pytest.TempPathFactory) -> int:
    """Trace the uncrashed commit once; check that it converges too."""
    scratch = tmp_path_factory.mktemp("reference")
    root = scratch / "ws"
    shutil.copytree(template.root, root, symlinks=True)
    trace = scratch / "trace"
    assert commit_process(root, template.parent_key, trace=trace) == 0
    check_converged(template, root)
    lines = trace.read_text().splitlines()
    renamed = [line for line in lines if "\trename\t" in line and "/.httk-workflow/" not in line]
    assert len(renamed) == len(template.children), lines  # one bundle rename per child
    return len(lines)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_crash_during_child_registration_converges(
    template: Template, mutations: int, tmp_path: Path, shard: int
) -> None:
    failures: list[str] = []
    for after in range(1 + shard, mutations + 1, SHARDS):
        root = tmp_path / f"k{after}" / "ws"
        shutil.copytree(template.root, root, symlinks=True)
        try:
            status = commit_process(root, template.parent_key, crash_after=after)
            assert status == (CRASH_EXIT_STATUS if after < mutations else status)
            recover(root, template.parent_key)
            check_converged(template, root)
        except AssertionError as exc:
            failures.append(f"crash after mutation {after}: {exc}")
    assert not failures, "\n".join(failures)
