"""The typed views of an attempt's documents: the contract's own models, loaded only when asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from httk.workflow.models import AttemptContext, JobDefinition, Outcome
from httk.workflow.sdk import Attempt, typed

from tests.conftest import minimal_job
from tests.sdk.attempts import JOB_ID, make_attempt


def _importtime(statement: str) -> set[str]:
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True, check=True
    )
    return {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in completed.stderr.splitlines()}


def test_a_plain_step_never_loads_pydantic_and_the_typed_views_do() -> None:
    assert "pydantic" not in _importtime("import httk.workflow.sdk")
    assert "pydantic" in _importtime("import httk.workflow.sdk.typed")
    assert typed.AttemptContext is AttemptContext and typed.JobDefinition is JobDefinition


def test_the_context_the_job_the_outcome_and_the_children_as_models(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    document = minimal_job(id=JOB_ID, runner={"backend": "path", "path": "runner.py"})
    (layout.job_dir / "job.json").write_text(json.dumps(document))
    (layout.job_dir / "runner.py").write_text("print('hi')\n")
    attempt = Attempt.load(layout.context_path, environ=layout.environ())
    assert typed.job(attempt).id == JOB_ID
    context = typed.context(attempt)
    assert isinstance(context, AttemptContext) and context.attempt_id == attempt.attempt_id
    assert typed.outcome(attempt) is None and typed.children(attempt) == []

    attempt.spawn("relax", label="kid")
    attempt.advance("gather")
    published = typed.outcome(attempt)
    assert isinstance(published, Outcome) and published.action == "advance"
    [child] = typed.children(attempt)
    assert isinstance(child, JobDefinition) and child.initial_step == "relax"
