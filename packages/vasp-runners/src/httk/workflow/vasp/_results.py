"""results.json: what a finished VASP workflow computed, and how, in one document.

The document (``schemas/vasp-results.schema.json``, generated model ``VaspResults``) describes the final
calculation -- energies (free, sigma -> 0, without entropy, per atom), forces, stress, magnetization,
final structure, convergence flags -- and the history that led to it: every ionic step of every run
(across repeats and remedies, which is what ``httk workflow vasp plot`` draws), every run, every remedy.
Its provenance names the VASP version and build line from OUTCAR, the final INCAR, the POTCAR datasets
(file, SHA-256, TITEL), the k-point mesh and how it was chosen, the command, and this package's version.

Values come from vasprun.xml when it is complete and from OUTCAR otherwise (``provenance.source`` says
which); magnetization comes from OUTCAR and OSZICAR, which report it per site and in total. What the
results lack is said in ``warnings`` (values from OUTCAR, no VASP version, an unconverged final
electronic minimization), which ``httk workflow collect`` shows as the reasons a record is degraded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from ._restart import Outputs
from ._structure import Structure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FORMAT = "httk-workflow-vasp-results"
FORMAT_VERSION = 1
PACKAGE_VERSION = "0.1.0"


def structure_document(structure: Structure) -> dict[str, Any]:
    """A structure as results.json holds it: lattice in Å, fractional positions, species and counts."""
    return {
        "comment": structure.comment,
        "lattice": [list(row) for row in structure.lattice],
        "species": list(structure.species),
        "counts": list(structure.counts),
        "positions": [list(p) for p in structure.positions],
        "volume": structure.volume,
    }


def _final_values(outputs: Outputs) -> tuple[dict[str, Any], str]:
    """Energies, forces and stress of the last ionic step, and the file they came from."""
    run = outputs.vasprun
    if run is not None and run.complete and run.steps:
        last = run.steps[-1]
        energies = {
            "free_energy": last.free_energy,
            "energy": last.energy,
            "energy_without_entropy": last.energy_wo_entropy,
        }
        return {"energies": energies, "forces": run.forces, "stress": run.stress}, "vasprun.xml"
    outcar = outputs.outcar
    if outcar is None or not outcar.steps:
        return {"energies": {}, "forces": None, "stress": None}, "none"
    last_step = outcar.steps[-1]
    energies = {
        "free_energy": last_step.free_energy,
        "energy": last_step.energy,
        "energy_without_entropy": last_step.energy_wo_entropy,
    }
    stress = None
    if outcar.stress is not None:
        xx, yy, zz, xy, yz, zx = outcar.stress
        stress = [[xx, xy, zx], [xy, yy, yz], [zx, yz, zz]]
    forces = [list(f) for f in outcar.forces] if outcar.forces is not None else None
    return {"energies": energies, "forces": forces, "stress": stress}, "OUTCAR"


def results_document(
    *,
    workflow: str,
    job_id: str,
    stage: str,
    outputs: Outputs,
    structure: Structure,
    initial: Structure,
    state: Mapping[str, Any],
    incar: Mapping[str, object],
    argv: Sequence[str],
    relaxation: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The results document of a finished workflow (see the module docstring)."""
    values, source = _final_values(outputs)
    natoms = structure.natoms
    energies = values["energies"]
    forces = values["forces"]
    stress = values["stress"]
    energy = energies.get("energy")
    outcar = outputs.outcar
    magnetization = None
    last = outputs.oszicar[-1] if outputs.oszicar else None
    if last is not None and last.magnetization is not None:
        sites = outcar.magnetization if outcar is not None else None
        magnetization = {"total": last.magnetization, "sites": sites}
    prepared = state.get("prepared", {}).get(stage, {})
    electronic = "nelm" not in (state.get("runs") or [{}])[-1].get("problems", [])
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "workflow": workflow,
        "job_id": job_id,
        "calculation": stage,
        "energy": {
            "free_energy": energies.get("free_energy"),
            "energy": energy,
            "energy_without_entropy": energies.get("energy_without_entropy"),
            "energy_per_atom": None if energy is None else energy / natoms,
        },
        "forces": forces,
        "max_force": None if not forces else max(math.sqrt(sum(x * x for x in f)) for f in forces),
        "stress": stress,
        "pressure": None if not stress else (stress[0][0] + stress[1][1] + stress[2][2]) / 3.0,
        "magnetization": magnetization,
        "structure": structure_document(structure),
        "initial_structure": structure_document(initial),
        "convergence": {
            "electronic": electronic,
            "ionic": None if relaxation is None else bool(relaxation.get("converged")),
            "relaxation": None if relaxation is None else dict(relaxation),
        },
        "ionic_steps": [
            {"run": run["index"], "stage": run["stage"], **step}
            for run in state.get("runs", [])
            for step in run.get("ionic_steps", [])
        ],
        "runs": [
            {key: value for key, value in run.items() if key != "ionic_steps"}
            for run in state.get("runs", [])
        ],
        "remedies": list(state.get("remedies", [])),
        "provenance": {
            "vasp_version": outcar.version if outcar is not None else None,
            "vasp_build": outcar.version_line if outcar is not None else None,
            "incar": dict(incar),
            "potcar": prepared.get("potcar", {}).get("datasets", []),
            "kpoints": prepared.get("kpoints"),
            "source": source,
            "command": list(argv),
            "runner": f"httk-workflow-vasp {PACKAGE_VERSION}",
        },
        "warnings": warnings(source, outcar is not None and outcar.version is not None, electronic),
    }


def warnings(source: str, versioned: bool, electronic: bool) -> list[str]:
    """What the results lack, one sentence each (``collect`` marks such a record degraded)."""
    said = []
    if source == "OUTCAR":
        said.append(
            "vasprun.xml was incomplete: the final values are OUTCAR's (fewer digits, no per-step data)"
        )
    elif source == "none":
        said.append("neither vasprun.xml nor OUTCAR held an ionic step: there are no final values")
    if not versioned:
        said.append("OUTCAR names no VASP version")
    if not electronic:
        said.append("the final electronic minimization reached NELM without converging")
    return said


def encoded(document: Mapping[str, Any]) -> bytes:
    """results.json's bytes: indented UTF-8 JSON with a trailing newline (read by people as well)."""
    return (json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
