"""Stage plans for httk-workflow: a declared DAG of stages that one coordinator job runs.

A plan document (``schemas/stage-plan.schema.json``) lists stages with ``depends_on``, each a packaged
workflow or a runner. ``httk workflow plan submit`` checks it whole and submits one coordinator job
(:mod:`._coordinator`, a runner written with the SDK) that spawns every stage whose dependencies
completed as a labelled child, waits for them, and keeps spec/04's ``progress.log`` and
``workflow-state.json`` in its workdir. See DESIGN.md, "Stage plans".

The public names, loaded on first use (a coordinator process imports only what its step needs):

* :func:`read_plan`, :func:`check_plan`, :class:`PlanError` -- the document and its rules;
* :func:`submit_stage_plan`, :class:`SubmittedPlan` -- ``plan submit``;
* :func:`plan_status`, :class:`PlanStatus`, :class:`StageRow`, :func:`list_plans` -- the status view;
* :func:`amend_plan` -- ``plan amend`` (spec/04's amendments);
* :func:`retry_stage`, :func:`close_plan`, :func:`log_path`, :func:`read_lines` -- operator commands;
* :data:`STATUSES` -- spec/04's nine stage statuses; :func:`find_cycle`, :func:`critical_path_length`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._amend import amend_plan
    from ._control import PlanControlError, close_plan, log_path, read_lines, retry_stage
    from ._document import PlanError, check_plan, read_plan
    from ._graph import critical_path_length, find_cycle
    from ._status import NotAPlanError, PlanStatus, StageRow, list_plans, plan_status
    from ._statuses import STATUSES
    from ._submit import SubmittedPlan, submit_stage_plan

_HOMES = {
    "amend_plan": "_amend",
    **dict.fromkeys(("PlanControlError", "close_plan", "log_path", "read_lines", "retry_stage"), "_control"),
    **dict.fromkeys(("PlanError", "check_plan", "read_plan"), "_document"),
    **dict.fromkeys(("critical_path_length", "find_cycle"), "_graph"),
    **dict.fromkeys(("NotAPlanError", "PlanStatus", "StageRow", "list_plans", "plan_status"), "_status"),
    "STATUSES": "_statuses",
    **dict.fromkeys(("SubmittedPlan", "submit_stage_plan"), "_submit"),
}

__all__ = [
    "NotAPlanError",
    "PlanControlError",
    "PlanError",
    "PlanStatus",
    "STATUSES",
    "StageRow",
    "SubmittedPlan",
    "amend_plan",
    "check_plan",
    "close_plan",
    "critical_path_length",
    "find_cycle",
    "list_plans",
    "log_path",
    "plan_status",
    "read_lines",
    "read_plan",
    "retry_stage",
    "submit_stage_plan",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
