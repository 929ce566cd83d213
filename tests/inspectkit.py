"""A workspace worth inspecting: real jobs run to every common end by the real manager, and ways to damage it.

:func:`build` submits scripted jobs (``tests/runners.py``) at three placements and runs a real
:class:`Manager` until it is idle, then submits one more job that no manager has seen:

==============  ==========================================================================  ============
label           what it does                                                                ends
==============  ==========================================================================  ============
``two_steps``   prepare (prints, advances) then collect (prints to stderr, succeeds)        succeeded
``flaky``       first attempt exits 3 without an outcome (retried), second succeeds         succeeded
``broken``      fails with ``bad_input`` (not retried); its attempt directory is kept        failed
``paused``      pauses itself                                                               paused
``gpu``         needs pool ``gpu``, which the manager does not serve                        ready
``late``        submitted after the manager stopped                                         submitted
==============  ==========================================================================  ============

:func:`snapshot` lists everything below a directory with its type, size and modification time, so a test
can assert that a read command changed nothing at all.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import MarkerLocation, attach, init
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig

from tests.runners import current_marker, job_key, publish_scripted_runner, scripted_job, submit

PLACEMENTS = {
    "two_steps": "proj-a/00",
    "flaky": "proj-a/00",
    "broken": "proj-a/01",
    "paused": "proj-a/01",
    "gpu": "proj-b",
    "late": "proj-b",
}


def _steps(runner: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "two_steps": scripted_job(
            {
                "prepare": {
                    "action": "advance",
                    "next_step": "collect",
                    "runner_steps": ["prepare", "collect"],
                    "stdout": "preparing\n",
                },
                "collect": {"action": "succeed", "stderr": "collected\n", "stdout": "collecting\n"},
            },
            runner,
            tag="two-steps",
        ),
        "flaky": scripted_job(
            {"prepare": {"attempts": [{"action": "exit", "exit": 3, "stdout": "crashing\n"}, {}]}},
            runner,
            tag="flaky",
        ),
        "broken": scripted_job(
            {
                "prepare": {
                    "action": "fail",
                    "failure": {"code": "bad_input", "message": "the structure is unphysical"},
                    "stdout": "checking the input\n",
                    "stderr": "unphysical!\n",
                }
            },
            runner,
            tag="broken",
            retry_on=["lease_lost"],
        ),
        "paused": scripted_job(
            {"prepare": {"action": "pause", "reason": "look at me"}}, runner, tag="paused"
        ),
        "gpu": scripted_job({}, runner, tag="gpu", claim={"pool": "gpu", "required_capabilities": []}),
        "late": scripted_job({}, runner, tag="late", priority=100),
    }


@dataclass(frozen=True)
class Built:
    """The built workspace and its jobs by label."""

    root: Path
    jobs: dict[str, dict[str, Any]]

    def key(self, label: str) -> str:
        return job_key(self.jobs[label])

    def job_id(self, label: str) -> str:
        return str(self.jobs[label]["id"])

    def placement(self, label: str) -> str:
        return PLACEMENTS[label]

    def payload(self, label: str) -> Path:
        return self.root / PLACEMENTS[label] / self.key(label)

    def marker(self, label: str) -> MarkerLocation:
        return current_marker(attach(self.root, writable=False), self.jobs[label], PLACEMENTS[label])


def build(root: Path, scratch: Path) -> Built:
    """Run the jobs of the module docstring to their ends in a fresh non-durable workspace at ``root``."""
    ws = init(root, durable=False)
    runner = publish_scripted_runner(ws, scratch)
    jobs = _steps(runner)
    for label, job in jobs.items():
        if label != "late":
            submit(ws, job, PLACEMENTS[label])
    Manager(ws, ManagerConfig(lease_seconds=30.0)).run()
    submit(attach(root, durable=False), jobs["late"], PLACEMENTS["late"])  # the manager closed ``ws``
    return Built(root, jobs)


def copy(built: Built, destination: Path) -> Built:
    """A copy of the built workspace (to damage or re-label without touching the shared one)."""
    shutil.copytree(built.root, destination, symlinks=True)
    return Built(destination, built.jobs)


def set_format_member(root: Path, member: str, value: Any) -> None:
    """Edit format.json in place, by hand, the way an operator or a newer version might have."""
    path = root / ".httk-workflow" / "format.json"
    document = json.loads(path.read_text())
    document[member] = value
    path.write_text(json.dumps(document, indent=2))


def set_visibility_deadline(root: Path, seconds: float) -> None:
    path = root / ".httk-workflow" / "format.json"
    document = json.loads(path.read_text())
    document["policy"]["visibility_deadline_seconds"] = seconds
    path.write_text(json.dumps(document, indent=2))


Entry = tuple[str, str, int, int]


def snapshot(root: Path) -> list[Entry]:
    """(relative path, type, size, mtime ns) of ``root`` and everything below it; links not followed."""
    entries: list[Entry] = []
    for directory, dirnames, filenames in os.walk(root):
        for name in ["", *dirnames, *filenames]:
            path = os.path.join(directory, name) if name else directory
            info = os.lstat(path)
            kind = "d" if os.path.isdir(path) and not os.path.islink(path) else "f"
            size = 0 if kind == "d" else info.st_size
            entries.append((os.path.relpath(path, root), kind, size, info.st_mtime_ns))
    return sorted(set(entries))
