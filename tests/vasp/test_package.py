"""The public face of httk.workflow.vasp: exactly these names, documented, and cheap to import."""

from __future__ import annotations

import json
import subprocess
import sys

from httk.workflow import vasp

EXPECTED = [
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


def test_all_is_exact_sorted_and_every_name_resolves_with_a_docstring() -> None:
    assert vasp.__all__ == EXPECTED == sorted(EXPECTED)
    for name in EXPECTED:
        value = getattr(vasp, name)
        if callable(value) and not isinstance(value, type(vasp.CATALOG)):
            assert getattr(value, "__doc__", None), name


def test_importing_the_package_loads_none_of_its_modules() -> None:
    code = (
        "import sys, json, httk.workflow.vasp\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('httk.workflow.vasp.'))))"
    )
    assert (
        json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout) == []
    )
