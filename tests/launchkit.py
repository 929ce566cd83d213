"""Launching managers in tests: the installed ``httk``, a workspace set up for the Slurm launcher.

The Slurm cluster itself is ``tests/slurmkit.py``; these helpers configure a workspace the way spec/03
shows (``launcher add --template slurm``, ``manager.launch``, ``slurm.*``) and read what a launch
printed and what its managers recorded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace

BIN = Path(sys.executable).parent
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"})


def httk(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed ``httk`` outside any allocation (the suite's SLURM_CONF names the cluster)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    return subprocess.run(
        [str(BIN / "httk"), *(str(arg) for arg in args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**base, **(env or {})},
    )


def use_slurm(ws: Workspace, **settings: Any) -> None:
    """A workspace launcher ``cluster`` made from the slurm template, selected by manager.launch."""
    added = httk("workflow", "launcher", "add", "--template", "slurm", "--workspace", ws.root, "cluster")
    assert added.returncode == 0, added.stderr
    ws.update_document({"settings": {"manager.launch": "cluster", **settings}})


def launched_jobs(stdout: str) -> tuple[list[str], Path]:
    """The job ids and the script path ``run --detach`` printed."""
    ids = re.findall(r"^slurm job (\d+) output ", stdout, re.MULTILINE)
    (script,) = re.findall(r"^script (\S+)$", stdout, re.MULTILINE)
    return ids, Path(script)


def manifests(ws: Workspace) -> list[dict[str, Any]]:
    """Every complete manager manifest; one still being written (created, then filled) is not yet one."""
    found = []
    for path in sorted(ws.managers_dir.glob("*/manager.json")):
        try:
            found.append(json.loads(path.read_text()))
        except json.JSONDecodeError:
            continue
    return found
