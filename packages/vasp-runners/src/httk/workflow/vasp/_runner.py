"""The Python runner of the packaged VASP workflows: ``python -m httk.workflow.vasp._runner WORKFLOW``.

(The installed runner, ``runners/vasp``, calls :func:`run`, which ends the process without tearing the
interpreter down.)

The steps are ``relax`` and ``static``; each runs :func:`~._stage.run_stage` and publishes its decision
through the SDK's ``Attempt`` -- the results of a finished workflow into the job's transactional
``data/`` (``results.json`` and the final ``CONTCAR``), in the same transaction as its ``succeed``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from httk.workflow.sdk import Attempt, Registry

from ._stage import Decision, run_stage

STEPS = {"vasp-relax": ("relax",), "vasp-static": ("static",), "vasp-relax-static": ("relax", "static")}
RESULTS = "results.json"
STRUCTURE = "CONTCAR"


def publish(attempt: Attempt, decision: Decision) -> None:
    """Publish one decision as the attempt's outcome."""
    if decision.action == "succeed":
        transaction = attempt.transaction()
        transaction.put_file(RESULTS, decision.results or b"")
        transaction.put_file(STRUCTURE, decision.structure or b"")
        attempt.succeed(message=decision.message)
    elif decision.action == "advance":
        attempt.advance(decision.next_step or attempt.step, message=decision.message)
    elif decision.action == "retry":
        attempt.retry(decision.reason or decision.message, message=decision.message)
    else:
        attempt.fail(decision.code or "vasp.unrecoverable", decision.message, decision.details)


def registry(workflow: str) -> Registry:
    """The steps of ``workflow``, each publishing its stage's decision."""
    steps = Registry(workflow)
    for name in STEPS[workflow]:

        def stage(attempt: Attempt) -> None:
            publish(attempt, run_stage(attempt, workflow))

        steps.register(stage, name)
    return steps


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if len(arguments) != 1 or arguments[0] not in STEPS:
        print(f"usage: python -m httk.workflow.vasp._runner {{{','.join(STEPS)}}}", file=sys.stderr)
        return 64
    return registry(arguments[0]).dispatch()


def run() -> None:
    """:func:`main` as the installed runner calls it: the process ends once its output is flushed.

    By then the outcome is published and every file the step wrote is closed; what is left is the
    interpreter's teardown of some two hundred modules, which would cost each attempt several
    milliseconds (a tenth of its own overhead) for nothing.
    """
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    raise SystemExit(main())
