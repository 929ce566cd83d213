"""Reading a plan document and checking it whole: its schema, then the rules a schema cannot state.

The schema (``schemas/stage-plan.schema.json``) says what each member is; :func:`check_plan` adds what
needs the whole document: stage ids are unique, every ``depends_on`` names a stage of the plan, a stage
names exactly one of ``workflow`` and ``runner`` (and ``step`` only with a runner), an input taken from
a dependency's output names one of the stage's dependencies (:mod:`._outputs`), and the dependencies
have no cycle -- the error names it, ``a -> b -> a``. Every refusal is a :class:`PlanError` naming the
member at fault; nothing is written by this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from httk.workflow.protocol import InvalidDocumentError

from ._graph import find_cycle
from ._outputs import problems

DOCUMENT = "stage plan"
MAX_PLAN_BYTES = 64 << 20


class PlanError(InvalidDocumentError):
    """A plan document is refused: ``member`` is the JSON path of what is wrong (``stages[2].depends_on``).

    Examples
    --------
    >>> str(PlanError("stages", "the dependencies have a cycle: a -> b -> a", "plan.json"))
    "invalid stage plan plan.json: member 'stages': the dependencies have a cycle: a -> b -> a"
    """

    def __init__(self, member: str, rule: str, path: Path | str | None = None) -> None:
        super().__init__(DOCUMENT, member, rule, path)


def read_plan(path: Path) -> dict[str, Any]:
    """The plan document at ``path``, checked by :func:`check_plan`; :class:`PlanError` when refused."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise PlanError("", f"cannot be read: {exc.strerror or exc}", path) from exc
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError("", f"is larger than {MAX_PLAN_BYTES} bytes", path)
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise PlanError("", f"is not UTF-8 JSON: {exc}", path) from exc
    check_plan(document, path)
    return document  # type: ignore[no-any-return]


def check_plan(document: object, path: Path | str | None = None) -> None:
    """Refuse ``document`` with a :class:`PlanError` unless it is a plan that can run.

    Examples
    --------
    >>> plan = {"format": "httk-workflow-stage-plan", "format_version": 1, "workflow_id": "w",
    ...         "stages": [{"id": "a", "runner": "r", "depends_on": ["b"]},
    ...                    {"id": "b", "runner": "r", "depends_on": ["a"]}]}
    >>> try:
    ...     check_plan(plan)
    ... except PlanError as error:
    ...     print(error.rule)
    the dependencies have a cycle: a -> b -> a
    """
    _check_schema(document, path)
    assert isinstance(document, dict)
    stages: list[Mapping[str, Any]] = document["stages"]
    index: dict[str, int] = {}
    for number, stage in enumerate(stages):
        where = f"stages[{number}]"
        if stage["id"] in index:
            raise PlanError(
                f"{where}.id",
                f"stage id {stage['id']!r} is also the id of stages[{index[stage['id']]}]",
                path,
            )
        index[stage["id"]] = number
        if ("workflow" in stage) == ("runner" in stage):
            raise PlanError(
                where, f"stage {stage['id']!r} must name exactly one of workflow and runner", path
            )
        if "step" in stage and "runner" not in stage:
            raise PlanError(
                f"{where}.step", "a step is given only with a runner (a workflow has its own)", path
            )
    for number, stage in enumerate(stages):
        for need in stage.get("depends_on", []):
            if need not in index:
                raise PlanError(
                    f"stages[{number}].depends_on",
                    f"stage {stage['id']!r} depends on {need!r}, which is not a stage of the plan",
                    path,
                )
            if need == stage["id"]:
                raise PlanError(f"stages[{number}].depends_on", f"stage {need!r} depends on itself", path)
        for member, rule in problems(stage):
            raise PlanError(f"stages[{number}].{member}", rule, path)
    cycle = find_cycle({stage["id"]: stage.get("depends_on", []) for stage in stages})
    if cycle is not None:
        raise PlanError("stages", f"the dependencies have a cycle: {' -> '.join(cycle)}", path)


def _check_schema(document: object, path: Path | str | None) -> None:
    from httk.workflow.models import validator

    errors = sorted(
        validator("stage-plan").iter_errors(document), key=lambda error: list(error.absolute_path)
    )
    if errors:
        first = errors[0]
        member = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in first.absolute_path
        ).lstrip(".")
        raise PlanError(member, first.message, path)
