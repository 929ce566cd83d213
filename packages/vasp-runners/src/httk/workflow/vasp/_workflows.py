"""The four packaged VASP workflows, as data: a runner, its declared inputs, its defaults.

They are registered under the entry point group ``httk.workflow.workflows`` (pyproject.toml), so the
engine's ``job new --workflow NAME`` and ``workflows list`` find them without knowing VASP. Each is a
persistent-workdir (``run/``) job with transactional ``data/`` (results.json and the final CONTCAR), so
it needs a workspace with ``transactional-data-v1``. Their content check refuses, before anything is
written, a structure that does not parse (naming the line), a POSCAR without its species line when no
``species`` is given, and INCAR, KPOINTS or POTCAR files VASP could not read.

Settings the runner reads (:mod:`._knobs`) are declared as inputs too: a job input named exactly like a
setting is that setting's first layer, so ``--input vasp.timeout=86400`` overrides the workspace for one
job.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from httk.workflow.sdk.packaged import PackagedWorkflow, WorkflowInput, WorkflowInputError

from ._errors import VaspInputError
from ._incar import Incar
from ._inputs import species_of
from ._kpoints import STYLES, parse_kpoints
from ._potcar import check_potcar_species, parse_choices, parse_potcar
from ._structure import parse_poscar

RUNNER = "pkg:httk.workflow.vasp/runners/vasp"
BASH_RUNNER = "pkg:httk.workflow.vasp/runners/vasp-relax-bash"
EXTENSIONS = ("transactional-data-v1",)

_STRUCTURE = (
    WorkflowInput(
        "structure",
        "the structure: a VASP 5 POSCAR with its species line (or give species)",
        required=True,
        kind="file",
        destination="POSCAR",
    ),
    WorkflowInput("species", "the species of each POSCAR type, such as 'Fe O' (replaces the species line)"),
    WorkflowInput(
        "incar", "an INCAR whose tags win over the workflow's defaults", kind="file", destination="INCAR"
    ),
    WorkflowInput("kpoints", "a KPOINTS used as it is", kind="file", destination="KPOINTS"),
    WorkflowInput(
        "potcar",
        "a POTCAR used as it is (else one is assembled from vasp.pseudo_library)",
        kind="file",
        destination="POTCAR",
    ),
    WorkflowInput(
        "kpoint_density", "k-points per reciprocal atom, without a KPOINTS", default=1000, value_type="number"
    ),
    WorkflowInput("kpoint_style", "the mesh without a KPOINTS: Gamma or Monkhorst-Pack", default="Gamma"),
)
_SETTINGS = (
    WorkflowInput(
        "vasp.command", "how to start VASP, such as 'srun -n {procs} vasp_std' (overrides the workspace)"
    ),
    WorkflowInput("vasp.pseudo_library", "the POTCAR library directory (overrides the workspace)"),
    WorkflowInput("vasp.pseudopotentials", "per-element POTCAR choices, such as 'Fe=Fe_pv O=O'"),
    WorkflowInput("vasp.timeout", "seconds one VASP run may take before it is stopped", value_type="number"),
    WorkflowInput("vasp.stop_grace", "seconds from the STOPCAR to SIGTERM", default=60, value_type="number"),
    WorkflowInput("vasp.kill_grace", "seconds from SIGTERM to SIGKILL", default=30, value_type="number"),
    WorkflowInput(
        "vasp.poll_seconds",
        "how often VASP's output is checked while it runs",
        default=5,
        value_type="number",
    ),
    WorkflowInput("vasp.max_remedies", "remedies the job may apply in all", default=10, value_type="integer"),
    WorkflowInput(
        "vasp.keep_wavefunctions",
        "keep WAVECAR, CHGCAR and CHG after success",
        default=False,
        value_type="boolean",
    ),
)
_RELAX = (
    WorkflowInput(
        "vasp.max_repeats",
        "relaxation repeats from CONTCAR before giving up",
        default=5,
        value_type="integer",
    ),
    WorkflowInput(
        "vasp.energy_tolerance",
        "eV per atom within which consecutive relaxation runs have converged",
        default=0.01,
        value_type="number",
    ),
)


def _text(data: bytes) -> str:
    return data.decode("ascii", errors="replace")


def check_inputs(inputs: Mapping[str, Any], sources: Mapping[str, Path]) -> None:
    """Refuse inputs VASP or the runner could not use, naming the input (the workflows' check hook).

    A file input's error names the file it was read from (``sources``) and its line.

    Examples
    --------
    >>> text = b"Si\\n1\\n3 0 0\\n0 3 0\\n0 0 3\\n1\\nDirect\\n0 0 0\\n"
    >>> check_inputs({"structure": text}, {"structure": Path("si.vasp")})
    Traceback (most recent call last):
    ...
    httk.workflow.sdk.packaged.WorkflowInputError: input 'structure': si.vasp, line 6: has no species line ...
    """
    try:
        species = species_of(inputs.get("species"))
    except VaspInputError as exc:
        raise WorkflowInputError("species", exc.message) from None
    with _refusing("structure"):
        structure = parse_poscar(_text(inputs["structure"]), path=str(sources["structure"]), species=species)
    for name, parse in (("incar", Incar.parse), ("kpoints", parse_kpoints)):
        if name in inputs:
            with _refusing(name):
                parse(_text(inputs[name]), path=str(sources[name]))
    if "potcar" in inputs:
        path = str(sources["potcar"])
        with _refusing("potcar"):
            datasets = parse_potcar(_text(inputs["potcar"]), path=path)
            check_potcar_species(datasets, structure.species, path=path)
    if inputs.get("kpoint_style", "Gamma") not in STYLES:
        raise WorkflowInputError(
            "kpoint_style", f"must be one of {', '.join(STYLES)}, not {inputs['kpoint_style']!r}"
        )
    density = inputs.get("kpoint_density", 1000)
    if not isinstance(density, int | float) or isinstance(density, bool) or density <= 0:
        raise WorkflowInputError("kpoint_density", f"must be a positive number, not {density!r}")
    choices = inputs.get("vasp.pseudopotentials")
    if isinstance(choices, str):
        try:
            parse_choices(choices)
        except ValueError as exc:
            raise WorkflowInputError("vasp.pseudopotentials", str(exc)) from None


@contextmanager
def _refusing(name: str) -> Iterator[None]:
    """A :class:`VaspInputError` inside as the refusal of the input ``name``."""
    try:
        yield
    except VaspInputError as exc:
        raise WorkflowInputError(name, str(exc)) from None


def _workflow(
    name: str, summary: str, initial: str, *, runner: str = RUNNER, relax: bool = True
) -> PackagedWorkflow:
    return PackagedWorkflow(
        name=name,
        summary=summary,
        runner=runner,
        arguments=(name,) if runner == RUNNER else (),
        initial_step=initial,
        inputs=_STRUCTURE + _SETTINGS + (_RELAX if relax else ()),
        workdir_mode="persistent",
        workdir_path="run",
        data_mode="transactional",
        extensions=EXTENSIONS,
        check=check_inputs,
    )


VASP_RELAX = _workflow(
    "vasp-relax",
    "Relax a structure (ions, cell shape and volume) with VASP, repeating until it converges.",
    "relax",
)
VASP_STATIC = _workflow("vasp-static", "One static VASP calculation of a structure.", "static", relax=False)
VASP_RELAX_STATIC = _workflow(
    "vasp-relax-static",
    "Relax a structure with VASP, then run a static calculation on the relaxed one.",
    "relax",
)
VASP_RELAX_BASH = _workflow(
    "vasp-relax-bash",
    "vasp-relax written with the Bash VASP API: the same documents.",
    "relax",
    runner=BASH_RUNNER,
)
WORKFLOWS = (VASP_RELAX, VASP_STATIC, VASP_RELAX_STATIC, VASP_RELAX_BASH)
