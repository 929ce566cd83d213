"""Typed views of an attempt's documents, for step authors who want them: the pydantic models of ``schemas/``.

A step that imports only :mod:`httk.workflow.sdk` never loads pydantic: a runner pays for every import
on every attempt. This module is the one that does, so importing it is asking for the models; they are
the same classes the engine's contract is written in (:mod:`httk.workflow.models`), generated from the
same schemas.

Examples
--------
>>> from httk.workflow.sdk import step
>>> from httk.workflow.sdk import typed
>>> @step
... def relax(a):
...     context = typed.context(a)  # an AttemptContext
...     if context.attempt_ordinal > 1:
...         ...
...     a.succeed()
"""

from __future__ import annotations

import json
from pathlib import Path

from httk.workflow.models import AttemptContext, Failure, JobDefinition, Outcome

from ._attempt import Attempt
from ._children import BUNDLE_PREFIX
from ._outcome import OUTCOME_FILE, READY_NAME

__all__ = ["AttemptContext", "Failure", "JobDefinition", "Outcome", "children", "context", "job", "outcome"]

_JOB_FILE = "job.json"


def context(attempt: Attempt) -> AttemptContext:
    """The attempt's context.json as an :class:`AttemptContext`."""
    return AttemptContext.model_validate(attempt.context)


def job(attempt: Attempt) -> JobDefinition:
    """The job's job.json as a :class:`JobDefinition`."""
    return JobDefinition.model_validate_json((attempt.job_dir / _JOB_FILE).read_bytes())


def outcome(attempt: Attempt) -> Outcome | None:
    """The outcome the attempt published, as an :class:`Outcome`; ``None`` before it published one."""
    path = attempt.control_dir / READY_NAME / OUTCOME_FILE
    return Outcome.model_validate_json(path.read_bytes()) if path.is_file() else None


def children(attempt: Attempt) -> list[JobDefinition]:
    """The job definitions of the children the attempt's published outcome carries, in job-key order."""
    jobs = attempt.control_dir / READY_NAME / Path(BUNDLE_PREFIX)
    if not jobs.is_dir():
        return []
    return [
        JobDefinition.model_validate(json.loads((bundle / _JOB_FILE).read_bytes()))
        for bundle in sorted(jobs.iterdir())
        if (bundle / _JOB_FILE).is_file()
    ]
