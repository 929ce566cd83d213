"""The workspace runner store: shared runners published once and pinned by digest.

``.httk-workflow/runners/<name>`` holds one file or one tree. Publication stages a copy in the
workspace's tmp area, digests the staged copy (a file's SHA-256, or the canonical tree digest of
DECISIONS D11), and renames it into place. Publishing identical content again changes nothing; different
content under an existing name needs ``replace`` because live jobs pin the stored digest, and such jobs
then fail with ``runner_mismatch`` — loudly, never by running other code.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.protocol import RunnerStoreError
from httk.workflow.protocol._digest import sha256_file, tree_digest

from ._submit import _copy_tree, _refuse_unsafe_tree

_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")


@dataclass(frozen=True, slots=True)
class PublishedRunner:
    name: str
    sha256: str
    kind: str  # "file" or "tree"
    changed: bool

    def reference(self) -> dict[str, Any]:
        """The ``runner`` members to put into job.json (with ``backend`` and ``arguments`` as needed)."""
        return {"source": "workspace", "path": self.name, "sha256": self.sha256}


def runner_digest(path: Path) -> str:
    """The digest that ``runner.sha256`` pins: file bytes, or the canonical tree digest."""
    return tree_digest(path) if path.is_dir() else sha256_file(path)


def publish_runner(
    workspace: Workspace, name: str, source: Path, *, replace: bool = False
) -> PublishedRunner:
    """Store ``source`` (a file or a directory) under ``name`` in the workspace runner store."""
    workspace.require_writable()
    if not _NAME_RE.match(name):
        raise RunnerStoreError(
            f"invalid runner name {name!r}: use 1-128 letters, digits, '.', '_' and '-', "
            "not starting with '.' or '-'"
        )
    source = Path(source)
    mode = os.lstat(source).st_mode if os.path.lexists(source) else 0
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise RunnerStoreError(f"{source}: a runner must be a regular file or a directory (not a symlink)")
    kind = "tree" if stat.S_ISDIR(mode) else "file"
    if kind == "tree":
        _refuse_unsafe_tree(source)
        if not (source / "run").is_file():
            raise RunnerStoreError(
                f"{source}: a runner tree is entered at its top-level 'run' file, which is missing"
            )
    durable = workspace.durable
    _fsops.make_dirs(workspace.runners_dir, durable=durable)
    staged = workspace.tmp_dir / f"runner.{uuid.uuid4().hex}"
    try:
        if kind == "tree":
            _fsops.make_dir(staged, durable=False)
            _copy_tree(source, staged, durable=durable)
        else:
            _fsops.create_file(staged, source.read_bytes(), durable=durable, mode=stat.S_IMODE(mode) | 0o500)
        digest = runner_digest(staged)
        target = workspace.runners_dir / name
        if os.path.lexists(target):
            existing = runner_digest(target)
            if existing == digest:
                return PublishedRunner(name, digest, kind, changed=False)
            if not replace:
                raise RunnerStoreError(
                    f"runner {name!r} is already stored with digest {existing}; jobs pin that digest, so "
                    "replacing it needs --replace (jobs pinned to the old content will then fail with "
                    "runner_mismatch)"
                )
            _retire(workspace, target)
        _fsops.rename(staged, target, durable=durable)
        return PublishedRunner(name, digest, kind, changed=True)
    finally:
        if os.path.lexists(staged):
            if os.path.isdir(staged):
                shutil.rmtree(staged, ignore_errors=True)
            else:
                os.unlink(staged)


def _retire(workspace: Workspace, target: Path) -> None:
    """Move a replaced runner out of the store into tmp (collected later), never deleting in place."""
    _fsops.rename(
        target, workspace.tmp_dir / f"replaced-runner.{uuid.uuid4().hex}", durable=workspace.durable
    )
