"""The public face of httk.workflow.vasp: exactly these names, documented, and cheap to import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
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


# Everything a vasp-static attempt imports, before VASP starts and after it ends.
RUNNER_PATH = ("_runner", "_inputs", "_decide", "_results", "_ladder", "_remedies")
HEAVY = (
    "typing",
    "dataclasses",
    "inspect",
    "subprocess",
    "xml",
    "pyexpat",
    "pydantic",
    "jsonschema",
    "httk.workflow.models",
)


def test_the_runners_modules_load_nothing_heavy() -> None:
    """A runner pays for every import on every attempt (benchmarks/vasp.py measures it)."""
    code = (
        "import sys, json\n"
        + "".join(f"import httk.workflow.vasp.{module}\n" for module in RUNNER_PATH)
        + "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout)
    assert [name for name in loaded if name.startswith(HEAVY)] == []


def test_class_syntax_named_tuples_are_named_tuples_without_typing() -> None:
    from httk.workflow.vasp._record import NamedTuple

    class Point(NamedTuple):
        """A point."""

        x: float
        y: float = 0.0

        @property
        def norm(self) -> float:
            return float((self.x**2 + self.y**2) ** 0.5)

    point = Point(3.0, 4.0)
    assert (point, point.norm, Point(1.0), point._replace(y=0.0)) == ((3.0, 4.0), 5.0, (1.0, 0.0), (3.0, 0.0))
    assert (Point._fields, Point.__doc__, Point.__module__) == (("x", "y"), "A point.", __name__)
    assert isinstance(point, tuple) and Point.__annotations__ == {"x": "float", "y": "float"}
    with pytest.raises(TypeError, match="field b without a default follows one with a default"):

        class Wrong(NamedTuple):
            a: int = 1
            b: int  # type: ignore[misc]  # what the test is about
