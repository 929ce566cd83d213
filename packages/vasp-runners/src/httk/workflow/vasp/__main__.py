"""``python -m httk.workflow.vasp``: the Python half of the Bash VASP API, one subcommand per call.

The Bash API (``bash/httk-workflow-vasp.sh``) is a thin shell over these, so the catalog, the remedies,
the restart rules and the bookkeeping in job state are the same code for both languages. Each
subcommand runs inside an attempt (it reads ``HTTK_WORKFLOW_CONTEXT``), never publishes an outcome --
the Bash SDK does that -- and writes what it has to say into the file named by ``--out``, as fields each
ended by a NUL byte (Bash reads them with ``mapfile -d ''``):

=======================  ========================================================================
``bash-api-path``        prints the Bash API's absolute path (for a runner the manager did not give
                         ``HTTK_WORKFLOW_VASP_BASH_API``)
``step WORKFLOW``        one whole attempt of the current step (:func:`~._stage.run_stage`); fields:
                         action, message, next step, reason, failure code, details (compact JSON),
                         and for ``succeed`` the paths of results.json and the final CONTCAR
``prepare STAGE``        write the inputs of ``relax`` or ``static`` into the workdir; field: the
                         provenance (compact JSON)
``check``                the catalog's problems in the workdir's outputs; fields: one per problem
``remedy PROBLEM``       apply the next rung of PROBLEM's ladder (backed up, recorded in job state);
                         field: the remedy's name; exit status 4 when the ladder is spent
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

    from ._inputs import prepare
    from ._stage import load_state, save_state

    attempt = Attempt.load()
    state = load_state(attempt)
    state["prepared"][stage] = prepare(
        stage, attempt.workdir, attempt.job_dir, attempt.inputs, attempt.setting
    )
    save_state(attempt, state)
    _write_fields(out, [_compact(state["prepared"][stage])])
    return 0


def _check(out: str) -> int:
    from httk.workflow.sdk import Attempt

    from ._detect import diagnose
    from ._incar import Incar
    from ._restart import read_outputs

    workdir = Attempt.load().workdir
    incar = Incar.parse((workdir / "INCAR").read_text(), path=str(workdir / "INCAR"))
    _write_fields(out, diagnose(workdir, read_outputs(workdir), None, incar).problems)
    return 0


def _remedy(name: str, out: str) -> int:
    from httk.workflow.sdk import Attempt

    from ._catalog import problem
    from ._incar import Incar
    from ._kpoints import parse_kpoints
    from ._ladder import apply_with_record, back_up, climbed, next_remedy
    from ._remedies import Calculation
    from ._restart import read_outputs, usable_contcar
    from ._stage import load_state, save_state
    from ._structure import parse_poscar

    attempt = Attempt.load()
    workdir = attempt.workdir
    state = load_state(attempt)
    row = problem(name)
    poscar = parse_poscar((workdir / "POSCAR").read_text(), path=str(workdir / "POSCAR"))
    outputs = read_outputs(workdir)
    calculation = Calculation(
        workdir=workdir,
        incar=Incar.parse((workdir / "INCAR").read_text(), path=str(workdir / "INCAR")),
        structure=poscar,
        kpoints=parse_kpoints((workdir / "KPOINTS").read_text(), path=str(workdir / "KPOINTS")),
        contcar=usable_contcar(workdir, poscar),
        ionic_steps=len(outputs.oszicar),
        nbands=outputs.outcar.parameter("nbands") if outputs.outcar else None,
        seed=len(state["remedies"]) + 1,
    )
    chosen = next_remedy(row, state["ladders"], calculation)
    if chosen is None:
        _write_fields(out, [""])
        return EXHAUSTED
    rung, remedy, change = chosen
    record = {"run": len(state["runs"]), "problem": row.name, "remedy": remedy, "rung": rung + 1}
    record.update(back_up(workdir, len(state["remedies"]) + 1, row.name, change))
    state["pending"] = record
    save_state(attempt, state)
    state["remedies"].append(apply_with_record(calculation, change, record))
    state["pending"] = None
    state["ladders"] = climbed(state["ladders"], row.name, rung)
    save_state(attempt, state)
    _write_fields(out, [remedy])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m httk.workflow.vasp", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("bash-api-path")
    for name, argument in (
        ("step", "workflow"),
        ("prepare", "stage"),
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
        if options.command == "check":
            return _check(options.out)
        return _remedy(options.problem, options.out)
    except (VaspError, KeyError, OSError) as exc:
        print(f"python -m httk.workflow.vasp {options.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
