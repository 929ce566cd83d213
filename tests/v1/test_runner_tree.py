"""The installed runner tree: what it holds, the digest jobs pin, and where managers find it."""

from __future__ import annotations

import os
from pathlib import Path

from httk.workflow.engine._runner_staging import _package_roots
from httk.workflow.engine._runner_store import runner_digest
from httk.workflow.v1._runner import RUNNER_PATH, runner_reference, runner_root, runner_sha256


def test_the_pinned_digest_is_the_engines_canonical_tree_digest() -> None:
    assert runner_sha256() == runner_digest(runner_root())
    assert runner_reference()["sha256"] == runner_sha256()


def test_the_tree_holds_the_runner_its_libraries_and_the_v1_api() -> None:
    root = runner_root()
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [
        "Execution/tasks/ht_tasks_api.sh",
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


def test_a_default_manager_resolves_the_pkg_path_to_this_tree() -> None:
    module, _, resource = RUNNER_PATH.removeprefix("pkg:").partition("/")
    assert module == "httk.workflow"  # in every manager's default --runner-module allowlist
    found = [base / relative for base, relative in _package_roots(RUNNER_PATH, frozenset({module}))]
    assert [p for p in found if p.is_dir()] == [runner_root()]
    assert resource == "v1/runner" and Path(found[0]).name == "runner"
