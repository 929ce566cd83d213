"""``python -m httk.workflow.vasp``: the Python half of the Bash VASP API, one subcommand per call.

The Bash API (``bash/httk-workflow-vasp.sh``) is a thin shell over these, so the catalog, the remedies,
the restart rules and the bookkeeping in job state are the same code for both languages. Each
subcommand runs inside an attempt (it reads ``HTTK_WORKFLOW_CONTEXT``), never publishes an outcome --
the Bash SDK does that -- keeps job state exactly as the step does (so a Bash author who composes
``prepare``, ``run``, ``check`` and ``remedy`` leaves the same record of runs, remedies and events as one
``step``), and writes what it has to say into the file named by ``--out``, as fields each
ended by a NUL byte (Bash reads them with ``mapfile -d ''``):

=======================  ========================================================================
``bash-api-path``        prints the Bash API's absolute path (for a runner the manager did not give
                         ``HTTK_WORKFLOW_VASP_BASH_API``)
``step WORKFLOW``        one whole attempt of the current step (:func:`~._stage.run_stage`); fields:
                         action, message, next step, reason, failure code, details (compact JSON),
                         and for ``succeed`` the paths of results.json and the final CONTCAR
``prepare STAGE``        write the inputs of ``relax`` or ``static`` into the workdir and record their
                         provenance as the step does; field: the provenance (compact JSON)
``run``                  run VASP once for the current step, supervised, and record the run as the
                         step does (parsed, diagnosed, archived); fields: one per problem
``check``                record the run whose outputs are in the workdir (one its author started) as
                         ``run`` would, or, when there is none, read the last recorded run; fields:
                         one per problem
``remedy PROBLEM``       apply the next rung of PROBLEM's ladder to the last recorded run (backed up,
                         recorded in job state and in the run's record as the step does); field: the
                         remedy's name; exit status 4 when the ladder or vasp.max_remedies is spent
=======================  ========================================================================

Exit status 0 on success, 2 for a wrong call, 4 for an exhausted ladder, 1 otherwise (the message on
stderr names what failed).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from . import bash_api_path

OUTCOME_DIR = ".httk-vasp/outcome"
EXHAUSTED = 4


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _write_fields(path: str, fields: Sequence[str]) -> None:
    Path(path).write_bytes(b"".join(field.encode("utf-8") + b"\0" for field in fields))


def _step(workflow: str, out: str) -> int:
    from httk.workflow.sdk import Attempt

    from ._files import write_atomically
    from ._runner import RESULTS, STEPS, STRUCTURE
    from ._stage import run_stage

    if workflow not in {*STEPS, "vasp-relax-bash"}:
        print(
            f"unknown workflow {workflow!r}; one of {', '.join([*STEPS, 'vasp-relax-bash'])}", file=sys.stderr
        )
        return 2
    attempt = Attempt.load()
    decision = run_stage(attempt, workflow)
    files = ["", ""]
    if decision.action == "succeed":
        folder = attempt.workdir / OUTCOME_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for index, (name, data) in enumerate(((RESULTS, decision.results), (STRUCTURE, decision.structure))):
            write_atomically(folder / name, data or b"")
            files[index] = str(folder / name)
    fields = [
        decision.action,
        decision.message,
        decision.next_step or "",
        decision.reason or "",
        decision.code or "",
        _compact(decision.details) if decision.action == "fail" else "",
        *files,
    ]
    _write_fields(out, fields)
    return 0


def _prepare(stage: str, out: str) -> int:
    from httk.workflow.sdk import Attempt

    from ._stage import load_state, prepare_stage, save_state

    attempt = Attempt.load()
    state = load_state(attempt)
    prepared = prepare_stage(attempt, state, stage, digest=True)  # the author gets it whole
    save_state(attempt, state)
    _write_fields(out, [_compact(prepared)])
    return 0


def _run(out: str) -> int:
    from httk.workflow.sdk import Attempt

    from ._decide import record_run
    from ._knobs import resolve
    from ._stage import load_state, recover, run_once, save_state

    attempt = Attempt.load()
    state = load_state(attempt)
    if attempt.step not in state["prepared"]:
        print(
            f"the inputs of {attempt.step} are not prepared: call httk_workflow_vasp_prepare", file=sys.stderr
        )
        return 1
    knobs = resolve(attempt.setting, int(attempt.resources.get("procs", 1) or 1))
    recover(attempt, state, attempt.step, knobs.kill_grace)
    index, report = run_once(attempt, state, knobs)
    record, _, _ = record_run(attempt, state, index, report)
    save_state(attempt, state)
    _write_fields(out, record["problems"])
    return 0


def _check(out: str) -> int:
    from httk.workflow.sdk import Attempt

    from ._decide import record_run
    from ._stage import load_state, save_state

    attempt = Attempt.load()
    state = load_state(attempt)
    running = state["running"]
    if running is not None or (attempt.workdir / "OUTCAR").exists():  # a run not yet recorded
        index = running["run"] if running else len(state["runs"]) + 1
        record, _, _ = record_run(attempt, state, index, None)
        save_state(attempt, state)
    elif state["runs"]:
        record = state["runs"][-1]
    else:
        print("no VASP run to check: the workdir has no OUTCAR and job state records none", file=sys.stderr)
        return 1
    _write_fields(out, record["problems"])
    return 0


def _remedy(name: str, out: str) -> int:
    from httk.workflow.sdk import Attempt

    from ._catalog import problem
    from ._decide import recorded_calculation, remedy
    from ._knobs import resolve_max_remedies
    from ._stage import load_state, save_state

    problem(name)  # an unknown problem is refused before anything is read
    attempt = Attempt.load()
    state = load_state(attempt)
    if not state["runs"]:
        print("no VASP run is recorded: call httk_workflow_vasp_run or _check first", file=sys.stderr)
        return 1
    record = state["runs"][-1]
    calculation = recorded_calculation(attempt, record)
    limit = resolve_max_remedies(attempt.setting)
    decision = remedy(attempt, state, record, calculation, limit, problem=name)
    save_state(attempt, state)
    if decision.action != "retry":
        print(decision.message, file=sys.stderr)
        _write_fields(out, [""])
        return EXHAUSTED
    _write_fields(out, [record["remedy"] or ""])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m httk.workflow.vasp", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("bash-api-path")
    for name, argument in (
        ("step", "workflow"),
        ("prepare", "stage"),
        ("run", None),
        ("check", None),
        ("remedy", "problem"),
    ):
        command = commands.add_parser(name)
        if argument is not None:
            command.add_argument(argument)
        command.add_argument("--out", required=True, help="the file the NUL-ended fields are written to")
    options = parser.parse_args(argv)
    if options.command == "bash-api-path":
        print(bash_api_path())
        return 0
    from ._errors import VaspError

    try:
        if options.command == "step":
            return _step(options.workflow, options.out)
        if options.command == "prepare":
            if options.stage not in ("relax", "static"):
                parser.error(f"the stage must be relax or static, not {options.stage!r}")
            return _prepare(options.stage, options.out)
        if options.command == "run":
            return _run(options.out)
        if options.command == "check":
            return _check(options.out)
        return _remedy(options.problem, options.out)
    except (VaspError, KeyError, OSError) as exc:
        print(f"python -m httk.workflow.vasp {options.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
