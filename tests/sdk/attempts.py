"""A real attempt on disk, laid out the way the manager lays it out, for SDK tests.

:func:`make_attempt` writes ``<root>/ws/<placement>/<job-key>/`` with a job.json, the attempt's control
directory ``.httk-attempt.<attempt-id>/`` holding a pretty-printed context.json with every member the
manager's ``prepare_attempt`` writes, and the persistent workdir ``run/``. Identities are fixed so that
expected outcome bytes can be written out by hand.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKSPACE_ID = "b588833b-87ea-4da2-b860-1c9e768cfbc1"
JOB_ID = "01234567-89ab-cdef-0123-456789abcdef"
JOB_KEY = f"silicon-relax--{JOB_ID}"
ACTIVATION_ID = "e7f86a0e-34d6-45a7-b92d-3f4b2dc98c54"
ATTEMPT_ID = "a6c2c973-29e1-44e2-9649-ae419e340ac4"
PREVIOUS_ATTEMPT_ID = "31fa431e-e01c-49aa-8fa8-e8af23b73c52"
PLACEMENT = "project-17/0/03a"

HEAD = (
    '{"format":"httk-workflow-outcome","format_version":1,'
    f'"job_id":"{JOB_ID}","activation_id":"{ACTIVATION_ID}","attempt_id":"{ATTEMPT_ID}",'
)
"""The bytes every outcome of the standard attempt starts with, up to and including its ``attempt_id``."""


@dataclass(frozen=True)
class Layout:
    """Where :func:`make_attempt` put things."""

    workspace_dir: Path
    job_dir: Path
    control_dir: Path
    workdir: Path
    context_path: Path
    context: dict[str, Any]

    @property
    def outcome_path(self) -> Path:
        return self.control_dir / "outcome.ready" / "outcome.json"

    def outcome_bytes(self) -> bytes:
        return self.outcome_path.read_bytes()

    def outcome(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.outcome_bytes())
        return document

    def environ(self, **extra: str) -> dict[str, str]:
        """The protocol variables the manager would export for this attempt, plus ``extra``."""
        context = self.context
        return {
            "HTTK_WORKFLOW_CONTEXT": str(self.context_path),
            "HTTK_WORKFLOW_CONTROL_DIR": str(self.control_dir),
            "HTTK_WORKFLOW_WORKSPACE_DIR": str(self.workspace_dir),
            "HTTK_WORKFLOW_JOB_DIR": str(self.job_dir),
            "HTTK_WORKFLOW_WORKDIR": str(self.workdir),
            "HTTK_WORKFLOW_IS_RESTART": "1" if context["is_restart"] else "0",
            "HTTK_WORKFLOW_UNCLEAN_RESTART": "1" if context["is_unclean_restart"] else "0",
            "HTTK_WORKFLOW_DURABLE": "1" if context["durable"] else "0",
            "HTTK_WORKFLOW_ATTEMPT_REASON": context["attempt_reason"],
            "HTTK_WORKFLOW_STEP": context["step"],
            **extra,
        }

    def files(self) -> list[str]:
        """Every path below the job directory, relative and sorted (to spot leftovers)."""
        return sorted(str(path.relative_to(self.job_dir)) for path in self.job_dir.rglob("*"))


def make_attempt(
    root: Path,
    *,
    step: str = "prepare",
    durable: bool = False,
    inputs: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> Layout:
    """Lay out one prepared attempt below ``root``; ``overrides`` replace or add context members."""
    workspace = root / "ws"
    (workspace / ".httk-workflow").mkdir(parents=True, exist_ok=True)
    job_dir = workspace / PLACEMENT / JOB_KEY
    control = job_dir / f".httk-attempt.{overrides.get('attempt_id', ATTEMPT_ID)}"
    workdir = job_dir / "run"
    control.mkdir(parents=True)
    workdir.mkdir(exist_ok=True)
    job: dict[str, Any] = {"format": "httk-workflow-job", "format_version": 1, "id": JOB_ID}
    if inputs is not None:
        job["inputs"] = dict(inputs)
    (job_dir / "job.json").write_text(json.dumps(job) + "\n")
    context: dict[str, Any] = {
        "format": "httk-workflow-attempt-context",
        "format_version": 1,
        "workspace_id": WORKSPACE_ID,
        "job_id": JOB_ID,
        "job_key": JOB_KEY,
        "placement": PLACEMENT,
        "step": step,
        "activation_id": ACTIVATION_ID,
        "activation_ordinal": 1,
        "activation_reason": "initial",
        "attempt_id": ATTEMPT_ID,
        "attempt_ordinal": 1,
        "total_attempts": 1,
        "is_restart": False,
        "is_unclean_restart": False,
        "attempt_reason": "initial",
        "previous_attempt_id": None,
        "workdir_mode": "persistent",
        "workdir_reused": False,
        "data_generation": None,
        "durable": durable,
        "priority": 500,
        "resources": {},
        "settings": dict(settings or {}),
        "join": None,
        "children": [],
        "workspace_dir": str(workspace),
        "job_dir": str(job_dir),
        "control_dir": str(control),
        "workdir": str(workdir),
        "data_dir": None,
    }
    context.update(overrides)
    context_path = control / "context.json"
    context_path.write_text(json.dumps(context, indent=2, ensure_ascii=False) + "\n")
    return Layout(workspace, job_dir, control, workdir, context_path, context)


def fd_path(fd: int) -> str:
    """The path an open file descriptor refers to (Linux ``/proc``)."""
    return os.readlink(f"/proc/self/fd/{fd}")


def ascii_and_hostile() -> Iterator[str]:
    """Strings that stress JSON escaping: every control character, quotes, backslashes, non-ASCII."""
    yield "".join(chr(code) for code in range(0x20))
    yield '"quoted" \\back\\slash\\ /slash/ \x7f delete'
    yield "line one\nline two\r\n\ttabbed\b\f"
    yield "Grüße, ½ µm, 日本語, \u2028\u2029 separators"
    yield "astral 🧪🔬 \U0001f600 \U00010348"
    yield "\\u0041 is not A, \\n is not a newline"
    yield "\u0000 leading NUL and trailing \u001f"
