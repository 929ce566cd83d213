"""The installed v1 runner: the ``runner/`` tree of this package, named and pinned the way job.json needs.

Jobs name it as ``{"source": "installed", "path": "pkg:httk.workflow/v1/runner", "sha256": ...}``. The
``pkg:`` module is the ``httk.workflow`` namespace package, which every manager allows by default
(``--runner-module``), and the resource ``v1/runner`` is found below this package's directory in it. A
manager copies the tree below each attempt's control directory, checks the copy against ``sha256`` and
starts its top-level ``run``; that directory is what the runner exports as ``HTTK_DIR``.

The digest is the canonical tree digest of DECISIONS D11, computed here rather than imported from the
engine, whose digest helpers are private: SHA-256 over every entry in bytewise order of its relative
POSIX path, a directory contributing ``D\\0<path>\\0``, a regular file ``F\\0<path>\\0`` and its bytes.
An upgrade of this package changes the digest, so a manager refuses (``runner_mismatch``) jobs imported
before it: import again, or keep the old package while they run.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

RUNNER_PATH = "pkg:httk.workflow/v1/runner"
API_RELATIVE = "Execution/tasks/ht_tasks_api.sh"


def runner_root() -> Path:
    """The installed runner tree (the ``HTTK_DIR`` old step scripts source the v1 API from)."""
    return Path(__file__).resolve().with_name("runner")


@functools.cache
def runner_sha256() -> str:
    """The canonical tree digest (D11) of :func:`runner_root`, which ``runner.sha256`` pins."""
    root = runner_root()
    entries: list[tuple[bytes, Path | None]] = []
    for directory, dirnames, filenames in os.walk(root):
        base = Path(directory)
        relative = base.relative_to(root)
        for name in dirnames:
            entries.append((_key(relative / name), None))
        for name in filenames:
            entries.append((_key(relative / name), base / name))
    hasher = hashlib.sha256()
    for key, path in sorted(entries, key=lambda entry: entry[0]):
        if path is None:
            hasher.update(b"D\0" + key + b"\0")
        else:
            hasher.update(b"F\0" + key + b"\0")
            hasher.update(path.read_bytes())
    return hasher.hexdigest()


def runner_reference() -> dict[str, Any]:
    """The job.json ``runner`` member of a v1 job."""
    return {
        "backend": "path",
        "source": "installed",
        "path": RUNNER_PATH,
        "sha256": runner_sha256(),
        "arguments": [],
    }


def _key(relative: Path) -> bytes:
    return os.fsencode(relative.as_posix())
