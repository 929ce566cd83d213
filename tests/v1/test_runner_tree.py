"""The installed runner tree: what it holds, the digest jobs pin, and that managers reach it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from httk.workflow.engine import init, publish_runner
from httk.workflow.v1._runner import RUNNER_PATH, runner_reference, runner_root, runner_sha256

from tests.v1.v1jobs import V1Workspace, _httk
from tests.v1.v1trees import make_task


def test_the_pinned_digest_is_the_engines_canonical_tree_digest(tmp_path: Path) -> None:
    stored = publish_runner(init(tmp_path / "ws", name="digest", durable=False), "v1", runner_root())
    assert stored.kind == "tree" and runner_sha256() == stored.sha256
    assert runner_reference()["sha256"] == runner_sha256()


def test_the_tree_holds_the_runner_its_libraries_and_the_v1_api() -> None:
    root = runner_root()
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [
        "Execution/tasks/ht_tasks_api.sh",
        "Execution/tasks/vasp/vasptools.sh",
        "lib/apply.sh",
        "lib/atomic.sh",
        "lib/finish.sh",
        "lib/rare.sh",
        "lib/spawn.sh",
        "lib/step.sh",
        "lib/task.sh",
        "run",
    ]
    assert os.access(root / "run", os.X_OK)
    assert not any(p.is_symlink() for p in root.rglob("*"))


def test_precheck_finds_the_runner_a_default_manager_stages(tmp_path: Path, v1ws: V1Workspace) -> None:
    module, _, resource = RUNNER_PATH.removeprefix("pkg:").partition("/")
    assert module == "httk.workflow"  # in every manager's default --runner-module allowlist
    assert resource == "v1/runner" and runner_root().parts[-3:] == ("workflow", "v1", "runner")
    v1ws.submit(make_task(tmp_path, "ht.task.any.t.start.0.unclaimed.3.waitstart", script="#!/bin/bash\n"))
    report = json.loads(_httk("workflow", "precheck", str(v1ws.path), "--json"))
    assert report["checked"] == 1 and report["counts"] == {"failing": 0, "indeterminate": 0, "ok": 1}
