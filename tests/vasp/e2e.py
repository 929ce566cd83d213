"""End-to-end helpers: a real workspace, jobs of the packaged workflows, the real manager.

Everything goes through the product's own front doors: the workspace is created by ``httk workflow
workspace init --extension transactional-data-v1``, settings are set with ``httk workflow workspace
settings set``, jobs are made and submitted by ``httk workflow job new --workflow NAME``, and ``httk
workflow run`` runs a manager until it is idle. VASP is the mock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.sdk.packaged import PackagedWorkflow

from tests.vasp.vaspkit import MOCK, SILICON, pseudo_library

HTTK = str(Path(sys.executable).parent / "httk")
RUN_OPTIONS = ("--runner-module", "httk.workflow.vasp")


@dataclass
class Job:
    """A submitted job: where its payload is and how to read what it left."""

    workspace: Path
    placement: str
    key: str
    id: str

    @property
    def payload(self) -> Path:
        return self.workspace / self.placement / self.key

    @property
    def run(self) -> Path:
        return self.payload / "run"

    def kind(self) -> str:
        state = self.workspace / ".httk-workflow" / "state"
        found = [m.relative_to(state).parts[0] for m in state.glob(f"*/{self.placement}/{self.key}.p*")]
        assert len(found) == 1, found
        return found[0]

    def results(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((self.payload / "data" / "results.json").read_text())
        return document

    def state(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((self.payload / ".httk-job" / "state.json").read_text())
        vasp: dict[str, Any] = document["vasp"]
        return vasp

    def show(self) -> dict[str, Any]:
        """What ``httk workflow job show --json`` says of the job."""
        shown: dict[str, Any] = json.loads(
            httk("job", "show", str(self.workspace), self.key, "--json").stdout
        )
        return shown

    def events(self) -> list[dict[str, Any]]:
        from httk.workflow.sdk import read_events

        return read_events(self.payload)

    def confinements(self) -> list[dict[str, Any]]:
        """What confinement each attempt ran under: the ``confinement`` of every running frame."""
        from httk.workflow.engine import attach
        from httk.workflow.engine.core._workspace import probe_marker

        from tests.runners import frame_chain

        attached = attach(self.workspace, writable=False)
        marker = probe_marker(attached, self.placement, self.key)
        assert marker is not None
        return [f["confinement"] for f in frame_chain(attached, marker) if f["kind"] == "running"]


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HTTK_VASP", "HTTK_MOCK_VASP"))}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.update(extra)
    return env


def httk(
    *arguments: str, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [HTTK, "workflow", *arguments],
        capture_output=True,
        text=True,
        env=dict(env or environment()),
        check=False,
    )
    if check and completed.returncode != 0:
        raise AssertionError(
            f"httk workflow {' '.join(arguments)}: {completed.returncode}\n{completed.stderr}"
        )
    return completed


def workspace(
    root: Path, *, command: str | None = None, settings: Mapping[str, object] | None = None
) -> Path:
    """A durable-off workspace with transactional data, the mock as vasp.command and a POTCAR library."""
    path = root / "ws"
    httk("workspace", "init", str(path), "--no-durable", "--extension", "transactional-data-v1")
    library = pseudo_library(root / "potcars")
    values: dict[str, object] = {
        "vasp.command": MOCK if command is None else command,
        "vasp.pseudo_library": str(library),
        "vasp.poll_seconds": 0.05,
        "vasp.stop_grace": 5,
        "vasp.kill_grace": 5,
        **(settings or {}),
    }
    for name, value in values.items():
        if value == "":
            continue  # not set at all
        httk("workspace", "settings", "set", str(path), name, json.dumps(value))
    return path


def mock_command(*faults: str, step_seconds: float | None = None) -> str:
    """A vasp.command running the mock with ``faults`` (and a pause before each electronic step)."""
    words = [MOCK, *(f"--fault={fault}" for fault in faults)]
    if step_seconds is not None:
        words.append(f"--step-seconds={step_seconds}")
    return " ".join(words)


def submit(
    ws: Path,
    workflow: PackagedWorkflow,
    scratch: Path,
    *,
    placement: str = "vasp",
    tag: str | None = None,
    poscar: str = SILICON,
    inputs: Mapping[str, object] | None = None,
) -> Job:
    """Make a job of ``workflow`` with ``job new`` (the structure written to a file first)."""
    scratch.mkdir(parents=True, exist_ok=True)
    structure = scratch / f"POSCAR.{len(list(scratch.iterdir()))}"
    structure.write_text(poscar)
    given = {"structure": str(structure), **(inputs or {})}
    words = [f"--input={k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in given.items()]
    words += ["--placement", placement, *(["--tag", tag] if tag else [])]
    made = json.loads(httk("job", "new", str(ws), "--workflow", workflow.name, *words, "--json").stdout)
    assert made["workflow"] == workflow.name and made["status"] == "submitted", made
    return Job(ws, placement, made["job_key"], made["job_id"])


def run_manager(
    ws: Path, *options: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A manager in the foreground until nothing is left to do."""
    return httk("run", str(ws), *RUN_OPTIONS, *options, env=env)
