"""Packaged VASP workflows for httk-workflow, and the library they are made of.

Four workflows, registered as entry points (``httk.workflow.workflows``): ``vasp-relax``,
``vasp-static``, ``vasp-relax-static`` and ``vasp-relax-bash`` (the relaxation written with the Bash VASP
API). Each prepares VASP's inputs from a structure (INCAR defaults the user's tags override, a k-point
mesh from a density, a POTCAR from the pseudopotential library), runs VASP under supervision in the
job's persistent ``run/``, validates what an interrupted run left, repeats a relaxation from its CONTCAR
until consecutive runs agree, detects errors with a catalog of signatures and climbs each error's
ladder of remedies, and stores results.json in the job's transactional ``data/``.

The library underneath is public, for other runners (the httk v1 helpers among them): input files
(:class:`Structure`, :class:`Incar`, :class:`Kpoints`, POTCARs), streaming parsers of OUTCAR, OSZICAR
and vasprun.xml, the error :data:`CATALOG` with its :data:`REMEDIES` and :func:`diagnose`, restart-file
validation, the supervised :func:`run_vasp`, and :func:`run_stage`, a whole VASP step. Names load on
first use, so a runner imports only what its step needs.

Examples
--------
>>> from httk.workflow.vasp import CATALOG, parse_poscar
>>> [row.name for row in CATALOG][:3]
['tet', 'inv_rot_mat', 'brmix']
>>> parse_poscar("Si\\n1\\n3 0 0\\n0 3 0\\n0 0 3\\nSi\\n1\\nDirect\\n0 0 0\\n").natoms
1
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._catalog import CATALOG, Problem, Rung
    from ._detect import Diagnosis, TextScanner, diagnose
    from ._errors import PseudoLibraryError, VaspCommandError, VaspError, VaspInputError, VaspOutputError
    from ._incar import Incar
    from ._inputs import prepare
    from ._kpoints import Kpoints, mesh_for_density, parse_kpoints
    from ._ladder import next_remedy
    from ._oszicar import OszicarStep, read_oszicar
    from ._outcar import Outcar, read_outcar
    from ._potcar import PotcarDataset, assemble_potcar, parse_potcar
    from ._process import RunReport, command_argv, run_vasp, stop_leftover
    from ._remedies import REMEDIES, Calculation, Change, apply_change
    from ._restart import (
        Outputs,
        archive_outputs,
        chgcar_complete,
        judge_restart_files,
        read_outputs,
        usable_contcar,
        wavecar_complete,
    )
    from ._results import results_document
    from ._stage import Decision, run_stage
    from ._structure import Structure, format_poscar, parse_poscar
    from ._vasprun import Vasprun, read_vasprun
    from ._workflows import VASP_RELAX, VASP_RELAX_BASH, VASP_RELAX_STATIC, VASP_STATIC, WORKFLOWS

_HOMES = {
    "CATALOG": "_catalog",
    "Calculation": "_remedies",
    "Change": "_remedies",
    "Decision": "_stage",
    "Diagnosis": "_detect",
    "Incar": "_incar",
    "Kpoints": "_kpoints",
    "Outcar": "_outcar",
    "OszicarStep": "_oszicar",
    "Outputs": "_restart",
    "PotcarDataset": "_potcar",
    "Problem": "_catalog",
    "PseudoLibraryError": "_errors",
    "REMEDIES": "_remedies",
    "RunReport": "_process",
    "Rung": "_catalog",
    "Structure": "_structure",
    "TextScanner": "_detect",
    "VASP_RELAX": "_workflows",
    "VASP_RELAX_BASH": "_workflows",
    "VASP_RELAX_STATIC": "_workflows",
    "VASP_STATIC": "_workflows",
    "Vasprun": "_vasprun",
    "VaspCommandError": "_errors",
    "VaspError": "_errors",
    "VaspInputError": "_errors",
    "VaspOutputError": "_errors",
    "WORKFLOWS": "_workflows",
    "apply_change": "_remedies",
    "archive_outputs": "_restart",
    "assemble_potcar": "_potcar",
    "chgcar_complete": "_restart",
    "command_argv": "_process",
    "diagnose": "_detect",
    "format_poscar": "_structure",
    "judge_restart_files": "_restart",
    "mesh_for_density": "_kpoints",
    "next_remedy": "_ladder",
    "parse_kpoints": "_kpoints",
    "parse_poscar": "_structure",
    "parse_potcar": "_potcar",
    "prepare": "_inputs",
    "read_oszicar": "_oszicar",
    "read_outcar": "_outcar",
    "read_outputs": "_restart",
    "read_vasprun": "_vasprun",
    "results_document": "_results",
    "run_stage": "_stage",
    "run_vasp": "_process",
    "stop_leftover": "_process",
    "usable_contcar": "_restart",
    "wavecar_complete": "_restart",
}

__all__ = [
    "CATALOG",
    "Calculation",
    "Change",
    "Decision",
    "Diagnosis",
    "Incar",
    "Kpoints",
    "OszicarStep",
    "Outcar",
    "Outputs",
    "PotcarDataset",
    "Problem",
    "PseudoLibraryError",
    "REMEDIES",
    "RunReport",
    "Rung",
    "Structure",
    "TextScanner",
    "VASP_RELAX",
    "VASP_RELAX_BASH",
    "VASP_RELAX_STATIC",
    "VASP_STATIC",
    "VaspCommandError",
    "VaspError",
    "VaspInputError",
    "VaspOutputError",
    "Vasprun",
    "WORKFLOWS",
    "apply_change",
    "archive_outputs",
    "assemble_potcar",
    "bash_api_path",
    "chgcar_complete",
    "command_argv",
    "diagnose",
    "format_poscar",
    "judge_restart_files",
    "mesh_for_density",
    "next_remedy",
    "parse_kpoints",
    "parse_poscar",
    "parse_potcar",
    "prepare",
    "read_oszicar",
    "read_outcar",
    "read_outputs",
    "read_vasprun",
    "results_document",
    "run_stage",
    "run_vasp",
    "stop_leftover",
    "usable_contcar",
    "wavecar_complete",
]


def bash_api_path() -> str:
    """The absolute path of the Bash VASP API, ``httk-workflow-vasp.sh`` (what a manager exports).

    The manager finds this function through the entry point group ``httk.workflow.bash_apis`` and
    exports its result as ``HTTK_WORKFLOW_VASP_BASH_API``.

    Examples
    --------
    >>> from httk.workflow.vasp import bash_api_path
    >>> bash_api_path().endswith("/httk-workflow-vasp.sh")
    True
    """
    return os.path.join(os.path.dirname(os.path.realpath(__file__)), "bash", "httk-workflow-vasp.sh")


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # the runner imports its modules by name: only a public name's first use needs this

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
