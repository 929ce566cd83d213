"""A workspace for v1 tests: submit a v1 task the way the importer does, run the real manager, look.

:meth:`V1Workspace.submit` places one task as its job (a copy of the task directory in ``task/`` of a
payload with its job.json from :func:`plan_job`) through the engine's public :class:`Submitter`;
:meth:`V1Workspace.run` runs ``httk workflow run WS --pool any`` as a real process until it is idle;
:meth:`V1Workspace.show` is ``httk workflow job show --json`` (in this process: only the manager needs to be
a process of its own, and every ``httk`` started from source pays its imports again).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.cli._app import app
from httk.workflow.engine import Submitter, Workspace
from httk.workflow.v1._jobdoc import WORKDIR, JobPlan, plan_job
from httk.workflow.v1._reader import read_tree
from typer.testing import CliRunner

HTTK = str(Path(sys.executable).with_name("httk"))
RUN_SECONDS = 120


def _httk(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@dataclass
class V1Workspace:
    path: Path
    workspace: Workspace

    def submit(self, task: Path, *, root: Path | None = None, attempts: int = 10) -> JobPlan:
        """Submit the top-level task directory ``task`` of the tree ``root`` (default: its parent)."""
        root = task.parent if root is None else root
        (found,) = [t for t in read_tree(root).tasks if t.path == task]
        plan = plan_job(found, root=root, prefix="v1", attempts=attempts)
        staged = self.workspace.tmp_dir / f"test.{plan.job_id}"
        shutil.copytree(task, staged / WORKDIR / task.name, symlinks=True)
        (staged / "job.json").write_bytes(plan.data)
        Submitter(self.workspace).submit_payload(staged, plan.placement, move=True)
        return plan

    def run(self, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """One foreground manager serving pool ``any`` until it has nothing left to do."""
        result = subprocess.run(
            [HTTK, "workflow", "run", str(self.path), "--pool", "any", *args],
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result

    def show(self, job: JobPlan | str) -> dict[str, Any]:
        """``httk workflow job show WS JOB --json``, in this process (the manager is the real process)."""
        key = str(job.key) if isinstance(job, JobPlan) else job
        shown: dict[str, Any] = json.loads(_httk("workflow", "job", "show", str(self.path), key, "--json"))
        return shown

    def show_text(self, job: JobPlan | str) -> str:
        """``httk workflow job show WS JOB``, the text a person reads."""
        key = str(job.key) if isinstance(job, JobPlan) else str(job)
        return _httk("workflow", "job", "show", str(self.path), key)

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every job of the workspace (``httk workflow job list --json``; one page is enough here)."""
        jobs: list[dict[str, Any]] = json.loads(_httk("workflow", "job", "list", str(self.path), "--json"))[
            "jobs"
        ]
        return jobs

    def kind(self, job: JobPlan | str) -> str:
        return str(self.show(job)["kind"])

    def payload(self, job: JobPlan) -> Path:
        return self.path / job.placement / str(job.key)

    def task(self, job: JobPlan) -> Path:
        """The task directory of a top-level task's job: ``task/<its v1 name now>`` in the payload."""
        (found,) = (self.payload(job) / WORKDIR).glob("ht.task.*")
        return found

    def views(self, placement: str = "v1") -> list[str]:
        """The status views of the top-level tasks of a placement: their task directories' names."""
        return sorted(
            view.name
            for payload in (self.path / placement).iterdir()
            if payload.is_dir() and not payload.is_symlink()
            for view in (payload / WORKDIR).glob("ht.task.*")
        )

    def log(self, job: JobPlan) -> str:
        """What the job's attempts printed: ``logs/stdio.log``, then the stdout of retained attempts (a
        failed job keeps its last attempt's control directory)."""
        payload = self.payload(job)
        paths = [payload / "logs" / "stdio.log", *sorted(payload.glob(".httk-attempt.*/stdout.log"))]
        return "".join(path.read_text() for path in paths if path.exists())
