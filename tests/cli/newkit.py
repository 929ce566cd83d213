"""Helpers of the ``job new``, ``workflows`` and ``extension`` tests: the real ``httk`` as a process.

:func:`httk` runs the installed executable in a chosen directory (file inputs are read relative to it);
:func:`snapshot` records every path below a workspace with its mode and bytes, so a refusal can be shown
to have written nothing at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
SILICON = "Si2\n5.43\n0.0 0.5 0.5\n0.5 0.0 0.5\n0.5 0.5 0.0\nSi\n2\nDirect\n0 0 0\n0.25 0.25 0.25\n"
TRANSACTIONAL = "transactional-data-v1"


def httk(
    *args: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``httk ARGS...`` as a process (not debugging: errors are one line)."""
    base = {k: v for k, v in os.environ.items() if k != "HTTK_WORKFLOW_DEBUG"} if env is None else env
    return subprocess.run(
        [str(BIN / "httk"), *(str(arg) for arg in args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(base),
        timeout=120,
        check=False,
    )


def init(root: Path, *extensions: str) -> Path:
    """A non-durable workspace made by ``httk workflow workspace init`` with ``extensions``."""
    words = [word for extension in extensions for word in ("--extension", extension)]
    result = httk("workflow", "workspace", "init", root, "--no-durable", *words)
    assert result.returncode == 0, result.stderr
    return root


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path below ``root``: its mode, and a file's bytes."""
    found: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        found[path.relative_to(root).as_posix()] = (mode, path.read_bytes() if path.is_file() else None)
    return found


def markers(root: Path, kind: str) -> list[Path]:
    state = root / ".httk-workflow" / "state" / kind
    return sorted(path.relative_to(state) for path in state.rglob("*") if path.is_file())


def placed_job(root: Path, made: Mapping[str, Any]) -> dict[str, Any]:
    """The job.json ``job new --json`` reported placing."""
    job: dict[str, Any] = json.loads((root / made["placement"] / made["job_key"] / "job.json").read_text())
    return job
