"""Transactional data/ end to end: a Python SDK runner's transactions replayed by the real manager.

Step ``write`` puts a file and makes a directory and advances; step ``rework`` reads committed ``data/``
through the context, replaces a tree, removes the file and succeeds. The data generation advances with
each committed change. A second job publishes a transaction against a stale data generation: its
outcome is unusable (``protocol_error``) and ``data/`` keeps what the first step committed.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init, probe_marker
from httk.workflow.engine.manager import _commit
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job
from tests.runners import frame_chain

RUNNER = f"""#!{sys.executable}
import json
import os
from pathlib import Path

from httk.workflow.sdk import Attempt, dispatch, step
from httk.workflow.sdk._files import compact_json
from httk.workflow.sdk._transaction import Transaction, stage_transaction


@step
def write(a: Attempt) -> None:
    assert a.data_generation == 0
    tx = a.transaction()
    assert a.transaction() is tx
    tx.make_dir("results")
    tx.put_file("results/energy.json", b"-10.8\\n")
    tx.make_dir("tree")
    a.advance("rework")


@step
def rework(a: Attempt) -> None:
    data = a.data_dir
    assert data is not None and str(data) == os.environ["HTTK_WORKFLOW_DATA_DIR"]
    assert a.data_generation == 1
    if (data / "results/energy.json").read_bytes() != b"-10.8\\n":
        a.fail("test.unexpected_data", "data/results/energy.json is not what step write committed")
        return
    if a.inputs.get("stale"):
        # Publish by hand with a wrong expected_data_generation (the SDK always writes the right one).
        tx = Transaction()
        tx.remove("results/energy.json")
        tx.put_file("stale.txt", b"stale\\n")
        draft = a.control_dir / "outcome.tmp.by-hand"
        draft.mkdir()
        stage_transaction(draft, tx, expected_data_generation=7, durable=False)
        outcome = {{
            "format": "httk-workflow-outcome",
            "format_version": 1,
            "job_id": a.job_id,
            "activation_id": a.activation_id,
            "attempt_id": a.attempt_id,
            "action": "succeed",
            "expected_data_generation": 7,
        }}
        (draft / "outcome.json").write_bytes(compact_json(outcome))
        os.rename(draft, a.control_dir / "outcome.ready")
        return
    new_tree = a.workdir / "new-tree"
    (new_tree / "sub").mkdir(parents=True)
    (new_tree / "sub" / "x.txt").write_text("x\\n")
    tx = a.transaction()
    tx.replace_tree("tree", new_tree)
    tx.remove("results/energy.json")
    a.succeed(message=json.dumps(sorted(p.name for p in data.iterdir())))


@step
def deep(a: Attempt) -> None:
    # DECISIONS D15: no make_dir; the puts create their parents inside a data/ that does not exist yet.
    assert a.data_dir is not None and not a.data_dir.exists()
    tree = a.workdir / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "WAVECAR").write_bytes(b"waves\\n")
    tx = a.transaction()
    tx.put_file("results/relax/energy.json", b"-10.8\\n")
    tx.put_tree("restart/run1", tree)
    a.succeed()


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""


def submit_transactional(
    ws: Workspace,
    runner: str,
    placement: str,
    name: str,
    inputs: Mapping[str, Any],
    *,
    initial_step: str = "write",
) -> dict[str, Any]:
    """Submit a transactional job tagged ``name`` whose payload carries ``runner`` as its runner script."""
    job = minimal_job(
        tag=name,
        runner={"backend": "path", "path": "runner", "arguments": []},
        data={"mode": "transactional"},
        initial_step=initial_step,
        inputs=dict(inputs),
    )
    spec = JobSpec(job, placement, files={"runner": runner.encode()}, executables=frozenset({"runner"}))
    submit_jobs(ws, [spec])
    return job


def _frames(ws: Workspace, job: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The job's frames, oldest first; the marker must be ``kind``."""
    marker = probe_marker(ws, "tx", f"{job['tag']}--{job['id']}")
    assert marker is not None and marker.kind.value == kind, marker
    return frame_chain(ws, marker)


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


def test_transactions_are_replayed_into_data_and_advance_the_generation(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=True, extensions=("transactional-data-v1",))
    good = submit_transactional(ws, RUNNER, "tx", "good", {})
    stale = submit_transactional(ws, RUNNER, "tx", "stale", {"stale": True})
    Manager(ws, ManagerConfig(workers=2)).run()

    frames = _frames(ws, good, "succeeded")
    data = ws.root / "tx" / f"good--{good['id']}" / "data"
    assert _tree(data) == {"results": None, "tree": None, "tree/sub": None, "tree/sub/x.txt": b"x\n"}
    committing = [frame for frame in frames if frame["kind"] == "committing"]
    assert [frame["outcome"]["has_transaction"] for frame in committing] == [True, True]
    assert [frame["outcome"]["expected_data_generation"] for frame in committing] == [0, 1]
    assert [(frame["kind"], frame["data_generation"]) for frame in frames] == [
        ("ready", 0),
        ("claimed", 0),
        ("running", 0),
        ("committing", 0),
        ("ready", 1),
        ("claimed", 1),
        ("running", 1),
        ("committing", 1),
        ("succeeded", 2),
    ]
    assert "failure" not in frames[-1]

    frames = _frames(ws, stale, "failed")
    failure = frames[-1]["failure"]
    assert failure["code"] == "protocol_error"
    assert "expected_data_generation" in failure["message"]
    assert [(frame["kind"], frame["data_generation"]) for frame in frames[-2:]] == [
        ("committing", 1),
        ("failed", 1),
    ]
    assert frames[-2]["outcome"] is None
    data = ws.root / "tx" / f"stale--{stale['id']}" / "data"
    assert _tree(data) == {"results": None, "results/energy.json": b"-10.8\n", "tree": None}


def test_puts_into_a_fresh_data_directory_create_their_parents(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=True, extensions=("transactional-data-v1",))
    job = submit_transactional(ws, RUNNER, "tx", "deep", {}, initial_step="deep")
    Manager(ws, ManagerConfig()).run()
    frames = _frames(ws, job, "succeeded")
    data = ws.root / "tx" / f"deep--{job['id']}" / "data"
    assert _tree(data) == {
        "restart": None,
        "restart/run1": None,
        "restart/run1/sub": None,
        "restart/run1/sub/WAVECAR": b"waves\n",
        "results": None,
        "results/relax": None,
        "results/relax/energy.json": b"-10.8\n",
    }
    assert frames[-1]["data_generation"] == 1


def test_a_replay_interrupted_by_an_io_error_is_retried_by_its_own_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the committing manager heartbeats nobody else may finish its commit: it must retry it."""
    ws = init(tmp_path / "ws", durable=False, extensions=("transactional-data-v1",))
    good = submit_transactional(ws, RUNNER, "tx", "good", {})
    real = _commit.apply_transaction
    failures: list[str] = []

    def flaky(*args: Any, **kwargs: Any) -> tuple[bool, dict[str, Any] | None]:
        if not failures:
            failures.append("once")
            raise OSError(errno.EIO, "Input/output error (injected once)")
        return real(*args, **kwargs)

    monkeypatch.setattr(_commit, "apply_transaction", flaky)
    summary = Manager(ws, ManagerConfig(workers=1)).run()

    assert failures == ["once"]
    frames = _frames(ws, good, "succeeded")
    assert [frame["kind"] for frame in frames].count("committing") == 2
    assert {frame["manager_id"] for frame in frames if frame["kind"] != "ready"} == {summary.manager_id}
    data = ws.root / "tx" / f"good--{good['id']}" / "data"
    assert _tree(data) == {"results": None, "tree": None, "tree/sub": None, "tree/sub/x.txt": b"x\n"}
