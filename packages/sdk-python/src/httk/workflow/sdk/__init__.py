"""The Python SDK of httk-workflow: write a workflow runner as decorated step functions.

A runner is an executable the task manager starts once per attempt. Each step is a function that takes
the :class:`Attempt` and ends it with exactly one outcome -- ``advance``, ``succeed``, ``fail``, ``retry``
or ``pause`` -- which the SDK publishes exactly as the workflow filesystem protocol says (the same bytes
as the Bash API, see docs/outcome-documents.md), synchronized when the workspace is durable. The
``Attempt`` also carries the context (step, restart flags, workdir, resources, join children), the job's
inputs, layered application settings, job state that outlives attempts, observed declarations, and
runner-reported events an operator reads back (:func:`read_events`, docs/runner-events.md). A step
may spawn child jobs (``Attempt.spawn``) and wait for them (``Attempt.wait``); the step after the join
reads their results through ``Attempt.children``.

Importing the SDK is cheap (the standard library's ``json``, ``os`` and ``pathlib``): a runner pays for
its imports on every attempt.

Examples
--------
A two-step runner, ``runner.py`` in the job's payload (``chmod +x``)::

    #!/usr/bin/env python3
    from httk.workflow.sdk import Attempt, dispatch, step

    @step
    def prepare(a: Attempt) -> None:
        a.save_state({"kpoints": a.inputs.get("kpoints", 4)})
        a.advance("collect")

    @step
    def collect(a: Attempt) -> None:
        command = a.setting("vasp.command", "vasp_std")
        a.succeed(message=f"ran {command} with {a.state['kpoints']} k-points")

    if __name__ == "__main__":
        raise SystemExit(dispatch())
"""

from __future__ import annotations

from ._attempt import Attempt
from ._errors import (
    ContextError,
    OutcomeAlreadyPublishedError,
    OutcomeError,
    SdkError,
    SettingNameError,
    SettingNotFoundError,
    StateError,
    StepDefinitionError,
)
from ._events import read_events
from ._steps import Registry, StepFunction, dispatch, step
from ._transaction import Transaction, TransactionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._children import ChildRef

__all__ = [
    "Attempt",
    "ChildRef",
    "ContextError",
    "OutcomeAlreadyPublishedError",
    "OutcomeError",
    "Registry",
    "SdkError",
    "SettingNameError",
    "SettingNotFoundError",
    "StateError",
    "StepDefinitionError",
    "StepFunction",
    "Transaction",
    "TransactionError",
    "dispatch",
    "read_events",
    "step",
]


def __getattr__(name: str) -> object:
    """``ChildRef`` loads on first use, with the child machinery a runner that never spawns does not need."""
    if name == "ChildRef":
        from ._children import ChildRef

        return ChildRef
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
