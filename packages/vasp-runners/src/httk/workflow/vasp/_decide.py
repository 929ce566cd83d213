"""After a VASP run: what it did, what went wrong, and what the attempt publishes.

The run is recorded (ionic steps, energies, problems, archive) and then exactly one of:

* a **problem** from the catalog: the next rung of its ladder is applied and the attempt asks for a
  ``retry``; an exhausted ladder, or the job's ``vasp.max_remedies``, fails the job with the row's code
  (``vasp.unrecoverable``, ``vasp.nonconvergent``, ``vasp.interrupted``) and details naming every
  problem seen and every remedy tried;
* a **relaxation not yet converged**: the CONTCAR becomes the POSCAR and the step ``advance``\\ s to
  itself -- a new activation, a repeat -- at most ``vasp.max_repeats`` times (then
  ``vasp.nonconvergent``). A relaxation has converged when VASP reached EDIFFG within NSW steps and
  either needed a single ionic step or its final energy is within ``vasp.energy_tolerance`` eV per atom
  of the previous clean run's (so |ΔE| <= 0.01 eV x atoms by default, v1's relax rule);
* a **stage done**: a relaxation of a relax-then-static job advances to ``static``; otherwise the job
  succeeds with results.json and the final CONTCAR staged into its transaction, after WAVECAR, CHGCAR and
  CHG are removed from the workdir (unless ``vasp.keep_wavefunctions``).

Every decision is also recorded as a runner-reported event, for ``job show`` and ``job why``.
"""

from __future__ import annotations

import os
import signal

from httk.workflow.sdk import Attempt

from ._detect import diagnose
from ._files import read_text, write_atomically
from ._incar import Incar
from ._knobs import Knobs
from ._kpoints import parse_kpoints
from ._process import RunReport
from ._record import NamedTuple
from ._remedies import Calculation
from ._restart import Outputs, archive_outputs, read_outputs, usable_contcar
from ._stage import Decision, failure, record_event, save_state
from ._structure import Structure, format_poscar, parse_poscar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    Parsed = TypeVar("Parsed")

AFTER_RELAX = {"vasp-relax-static": "static"}
RESTART_FILES = ("WAVECAR", "CHGCAR", "CHG")


def run_record(
    attempt: Attempt, index: int, stage: str, outputs: Outputs, report: RunReport | None
) -> dict[str, Any]:
    """What job state keeps of one run."""
    steps = [
        {
            "step": s.index,
            "energy": s.energy,
            "free_energy": s.free_energy,
            "electronic_steps": s.electronic_steps,
            "magnetization": s.magnetization,
        }
        for s in outputs.oszicar
    ]
    return {
        "index": index,
        "stage": stage,
        "activation_id": attempt.activation_id,
        "attempt_id": attempt.attempt_id,
        "finished": outputs.finished,
        "status": None if report is None else report.status,
        "stopped": None if report is None else report.stopped,
        "seconds": None if report is None else round(report.seconds, 3),
        "energy": steps[-1]["energy"] if steps else None,
        "nbands": outputs.outcar.parameter("nbands") if outputs.outcar else None,
        "ionic_steps": steps,
        "problems": [],
        "remedy": None,
        "outcome": None,
    }


class _Run(NamedTuple):
    """Everything the decision after one run looks at."""

    attempt: Attempt
    workflow: str
    state: dict[str, Any]
    record: dict[str, Any]
    calculation: Calculation
    outputs: Outputs
    knobs: Knobs


def record_run(
    attempt: Attempt, state: dict[str, Any], index: int, report: RunReport | None
) -> tuple[dict[str, Any], Calculation, Outputs]:
    """Record run ``index``, whose outputs are in the workdir: parsed, diagnosed, archived.

    What the step does after every run, and the Bash API's ``check`` after a run its author started:
    the run joins job state's ``runs`` (its ionic steps, problems and evidence, its archive in
    ``runs/<NN>-<stage>/``) and is no longer ``running``. Returns the record, what a remedy may look at
    (read before the outputs were archived), and the parsed outputs.
    """
    workdir = attempt.directory("workdir")
    poscar = _read_input(workdir, "POSCAR", parse_poscar)
    incar = _read_input(workdir, "INCAR", Incar.parse)
    outputs = read_outputs(workdir)
    diagnosis = diagnose(workdir, outputs, report, incar)
    record = run_record(attempt, index, attempt.step, outputs, report)
    record["problems"] = diagnosis.problems
    record["evidence"] = diagnosis.evidence
    calculation = Calculation(
        workdir=workdir,
        incar=incar,
        structure=poscar,
        kpoints=_read_input(workdir, "KPOINTS", parse_kpoints),
        contcar=usable_contcar(workdir, poscar),
        ionic_steps=len(outputs.oszicar),
        nbands=record["nbands"],
        seed=index,
    )
    record["archive"] = archive_outputs(workdir, index, attempt.step)
    state["runs"].append(record)
    state["running"] = None
    return record, calculation, outputs


def _read_input(workdir: str, name: str, parse: Callable[..., Parsed]) -> Parsed:
    """The input file ``name`` of the workdir, parsed (errors name its path)."""
    path = os.path.join(workdir, name)
    return parse(read_text(path), path=path)


def recorded_calculation(attempt: Attempt, record: dict[str, Any]) -> Calculation:
    """What a remedy may look at for a run recorded earlier: the workdir's inputs, the archive's CONTCAR."""
    workdir = attempt.directory("workdir")
    poscar = _read_input(workdir, "POSCAR", parse_poscar)
    archive = record.get("archive")
    return Calculation(
        workdir=workdir,
        incar=_read_input(workdir, "INCAR", Incar.parse),
        structure=poscar,
        kpoints=_read_input(workdir, "KPOINTS", parse_kpoints),
        contcar=usable_contcar(os.path.join(workdir, archive), poscar) if archive else None,
        ionic_steps=len(record["ionic_steps"]),
        nbands=record.get("nbands"),
        seed=record["index"],
    )


def after_run(
    attempt: Attempt, workflow: str, state: dict[str, Any], index: int, *, report: RunReport, knobs: Knobs
) -> Decision:
    """Record the run that just ended, archive its outputs, and decide (see the module docstring)."""
    record, calculation, outputs = record_run(attempt, state, index, report)
    run = _Run(attempt, workflow, state, record, calculation, outputs, knobs)
    if report.runner_signal is not None:
        decision = _stopped(run, report)
    elif record["problems"]:
        decision = remedy(attempt, state, record, calculation, knobs.max_remedies)
    elif attempt.step == "relax":
        decision = _relaxed(run) or _done(
            run, calculation.contcar or calculation.structure, state["relaxation"]
        )
    else:
        decision = _done(run, calculation.structure, state.get("relaxation"))
    save_state(attempt, state)
    return decision


def _stopped(run: _Run, report: RunReport) -> Decision:
    name = signal.Signals(report.runner_signal or signal.SIGTERM).name
    run.record["outcome"] = "stopped"
    calculation = run.calculation
    if calculation.contcar is not None and calculation.relaxation and calculation.ionic_steps >= 1:
        write_atomically(os.path.join(calculation.workdir, "POSCAR"), format_poscar(calculation.contcar))
    message = (
        f"the runner received {name} and stopped VASP ({report.stop_stage}); it continues from its CONTCAR"
    )
    details = {"run": run.record["index"], "signal": name, "stage": report.stop_stage}
    record_event(run.attempt, "vasp.stopped", message, details)
    return Decision("retry", message, reason=f"stopped by {name}")


def remedy(
    attempt: Attempt,
    state: dict[str, Any],
    record: dict[str, Any],
    calculation: Calculation,
    max_remedies: int,
    *,
    problem: str | None = None,
) -> Decision:
    """The next rung of ``problem``'s ladder (the run's first problem by default), applied and recorded.

    The inputs a remedy rewrites are backed up first and the fix is kept in job state (``pending``
    while it is applied, then ``remedies``); the run's record names it. A ``retry``, or a ``fail`` with
    the row's code when the ladder or the job's ``vasp.max_remedies`` is spent.
    """
    # Imported only when a run went wrong: a clean step does not pay for the ladder machinery.
    from ._catalog import problem as catalog_row
    from ._ladder import apply_with_record, back_up, climbed, next_remedy

    row = catalog_row(problem or record["problems"][0])
    record["outcome"] = "error"
    details = {"problems": record["problems"], "evidence": record["evidence"], "run": record["index"]}
    summary = f"run {record['index']}: {', '.join(record['problems']) or row.name} ({row.meaning})"
    record_event(attempt, "vasp.error", summary, details)
    tried = [{"problem": r["problem"], "remedy": r["remedy"], "run": r["run"]} for r in state["remedies"]]
    if len(state["remedies"]) >= max_remedies:
        message = f"{row.name}: the job has used all {max_remedies} remedies it may apply (vasp.max_remedies)"
        return failure(attempt, row.failure, message, {**details, "remedies": tried})
    chosen = next_remedy(row, state["ladders"], calculation)
    if chosen is None:
        message = f"{row.name} persists: every remedy of its ladder was tried ({row.meaning})"
        return failure(attempt, row.failure, message, {**details, "remedies": tried})
    rung, name, change = chosen
    number = len(state["remedies"]) + 1
    fix = {"run": record["index"], "problem": row.name, "remedy": name, "rung": rung + 1}
    fix.update(back_up(calculation.workdir, number, row.name, change))
    state["pending"] = fix
    save_state(attempt, state)
    fix = apply_with_record(calculation, change, fix)
    state["pending"] = None
    state["remedies"].append(fix)
    state["ladders"] = climbed(state["ladders"], row.name, rung)
    record["remedy"] = name
    reason = f"{row.name}: {change.description}"
    event = {
        "problem": row.name,
        "remedy": name,
        "rung": rung + 1,
        "backup": fix["backup"],
        "before": fix["before"],
        "after": fix["after"],
    }
    record_event(attempt, "vasp.remedy", f"{reason} (rung {rung + 1} of {len(row.ladder)})", event)
    return Decision("retry", f"run {record['index']}: {reason}", reason=reason)


def _relaxed(run: _Run) -> Decision | None:
    """A repeat, the next stage or a failure; ``None`` when the relaxation is the job's last stage, done."""
    state, record, calculation = run.state, run.record, run.calculation
    energy = record["energy"]
    clean = [
        r for r in state["runs"][:-1] if r["stage"] == "relax" and r.get("outcome") in ("repeat", "converged")
    ]
    previous = clean[-1]["energy"] if clean else None
    threshold = run.knobs.energy_tolerance * calculation.structure.natoms
    change = None if previous is None or energy is None else abs(energy - previous)
    converged = len(run.outputs.oszicar) <= 1 or (change is not None and change <= threshold)
    relaxation = {
        "converged": converged,
        "runs": len(clean) + 1,
        "energy_change": change,
        "tolerance": threshold,
    }
    write_atomically(
        os.path.join(calculation.workdir, "POSCAR"),
        format_poscar(calculation.contcar or calculation.structure),
    )
    if converged:
        record["outcome"] = "converged"
        state["relaxation"] = relaxation
        record_event(
            run.attempt, "vasp.converged", f"the relaxation converged in run {record['index']}", relaxation
        )
        next_stage = AFTER_RELAX.get(run.workflow)
        if next_stage is None:
            return None
        return Decision(
            "advance", f"relaxed in {relaxation['runs']} runs; now {next_stage}", next_step=next_stage
        )
    repeats = sum(1 for r in state["runs"] if r["stage"] == "relax" and r.get("outcome") == "repeat")
    if repeats >= run.knobs.max_repeats:
        record["outcome"] = "nonconvergent"
        message = (
            f"the relaxation did not converge in {repeats} repeats "
            f"(last |ΔE| = {change or 0.0:.4g} eV > {threshold:.4g} eV)"
        )
        return failure(run.attempt, "vasp.nonconvergent", message, {"relaxation": relaxation})
    record["outcome"] = "repeat"
    text = "first run" if change is None else f"|ΔE| = {change:.4g} eV > {threshold:.4g} eV"
    message = f"repeat {repeats + 1} of at most {run.knobs.max_repeats} from CONTCAR ({text})"
    record_event(run.attempt, "vasp.repeat", message, relaxation)
    return Decision("advance", message, next_step="relax")


def _done(run: _Run, structure: Structure, relaxation: dict[str, Any] | None) -> Decision:
    from ._inputs import job_structure
    from ._results import encoded, results_document

    attempt = run.attempt
    run.record["outcome"] = run.record["outcome"] or "converged"
    document = results_document(
        workflow=run.workflow,
        job_id=attempt.job_id,
        stage=attempt.step,
        outputs=run.outputs,
        structure=structure,
        initial=job_structure(attempt.directory("job_dir"), attempt.inputs),
        state=run.state,
        incar=run.calculation.incar.typed(),
        argv=run.knobs.argv,
        relaxation=relaxation,
    )
    removed = []
    if not run.knobs.keep_wavefunctions:
        workdir = attempt.directory("workdir")
        for name in RESTART_FILES:
            if os.path.exists(path := os.path.join(workdir, name)):
                os.unlink(path)
                removed.append(name)
    energy = document["energy"]["energy"]
    message = (
        f"{attempt.step} finished: E0 = {energy:.6f} eV" if energy is not None else f"{attempt.step} finished"
    )
    record_event(attempt, "vasp.succeeded", message, {"run": run.record["index"], "removed": removed})
    return Decision(
        "succeed", message, results=encoded(document), structure=format_poscar(structure).encode()
    )
