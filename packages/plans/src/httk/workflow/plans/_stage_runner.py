"""The runner of a checked stage: the work as its one child, then the stage's check as its last step.

A stage whose ``success_criteria`` has a ``check`` command runs as a job of this runner (see
:mod:`._stages`): ``work`` spawns the stage's real job (a packaged workflow or a runner, its template in
the inputs and its payload files below ``work/``) and waits for it; ``check`` runs the command with the
work's payload as its current directory -- exit status 0 completes the stage, anything else fails it
with ``plans.check_failed`` and the end of what the command printed; ``work_failed`` fails the stage with
the work's own failure when the work did not succeed.

Imports: the SDK and the standard library only.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any

from httk.workflow.sdk import Attempt, Registry

from ._spawn import spawn_template

WORK_FILES = "work"
OUTPUT_TAIL = 2000
"""How many characters of the check's output a failure keeps."""

steps = Registry("httk.workflow.plans.stage")


@steps.step
def work(a: Attempt) -> None:
    """Spawn the stage's work and wait for it to succeed."""
    template: Mapping[str, Any] = a.inputs["work"]
    base = a.job_dir / WORK_FILES
    files = {relative: (base / relative).read_bytes() for relative in a.inputs.get("work_files", [])}
    spawn_template(a, template, files, label="work", tag=a.job_key.split("--", 1)[0])
    a.wait("check", on_impossible="work_failed", message="waiting for the stage's work")


@steps.step
def check(a: Attempt) -> None:
    """Run the check command in the work's payload; its exit status decides the stage."""
    [child] = a.children
    command = [str(word) for word in a.inputs["check"]]
    try:
        completed = subprocess.run(
            command,
            cwd=a.workspace_dir / child["payload_path"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        )
    except OSError as exc:
        a.fail("plans.check_failed", f"the check {command[0]!r} could not run: {exc.strerror or exc}")
        return
    if completed.returncode == 0:
        a.succeed(message=f"the check {' '.join(command)} passed")
        return
    output = (completed.stdout + completed.stderr).strip()[-OUTPUT_TAIL:]
    a.fail(
        "plans.check_failed",
        f"the check {' '.join(command)} exited {completed.returncode}" + (f": {output}" if output else ""),
        details={"command": command, "exit_status": completed.returncode},
    )


@steps.step
def work_failed(a: Attempt) -> None:
    """Fail the stage with its work's failure."""
    [child] = a.children
    failure = child.get("failure") or {}
    a.fail(
        "plans.work_failed",
        f"the stage's work {child['job_key']} ended {child['kind']}: {failure.get('message', 'no message')}",
        details={"work": child["job_key"], "failure": failure or None},
    )


def run() -> None:
    """The stage runner's entry point (``runners/stage``)."""
    raise SystemExit(steps.dispatch())
