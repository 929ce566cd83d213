"""The public face of httk.workflow.vasp: exactly these names, documented, and cheap to import."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from httk.workflow import vasp
from httk.workflow.sdk.packaged import runner_file

from tests.sdk.attempts import make_attempt
from tests.vasp.vaspkit import MOCK, SILICON, pseudo_library

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


# What an attempt of the installed runner must never import: each costs every attempt a share of a bare
# interpreter start (pathlib with urllib.parse a third, ctypes's type system an eighth, contextlib a
# fifteenth; benchmarks/vasp.py counts them), for conveniences the runner does without.
NEVER_ON_THE_RUNNER_PATH = ("pathlib", "ctypes", "contextlib", "importlib")


def _runner_code(out: Path) -> str:
    """The installed runner's Python line, ending by listing its modules in ``out`` instead of exiting."""
    text = runner_file("pkg:httk.workflow.vasp/runners/vasp").read_text()
    line = re.search(r"-c \\\n\s*'([^']*)'", text)
    assert line is not None, "the runner's python line was not found"
    assert line.group(1).endswith("; run()"), line.group(1)
    listing = f"open({str(out)!r}, 'w').write(chr(10).join(sys.modules))"  # sys is loaded: it costs nothing
    start = line.group(1).removesuffix("run()").replace("import run", "import main")
    return f"import sys; {start}status = main(); {listing}; raise SystemExit(status)"


def test_importing_the_runners_entry_module_loads_none_of_the_conveniences() -> None:
    code = "import sys\nimport httk.workflow.vasp._runner\nprint(' '.join(sys.modules))"
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, check=True, text=True)
    loaded = set(done.stdout.split())
    assert "httk.workflow.vasp._runner" in loaded
    assert [name for name in NEVER_ON_THE_RUNNER_PATH if name in loaded] == []


def test_a_whole_static_attempt_loads_none_of_the_conveniences(tmp_path: Path) -> None:
    """A real attempt of vasp-static (the mock VASP, results published in a transaction), as the manager
    starts it, has never imported them when it ends."""
    library = pseudo_library(tmp_path / "potcars", "Si")
    inputs = {"structure": "files/POSCAR", "vasp.command": MOCK, "vasp.pseudo_library": str(library)}
    layout = make_attempt(
        tmp_path, step="static", inputs=inputs, data_generation=0, data_dir=str(tmp_path / "data")
    )
    (layout.job_dir / "files").mkdir()
    (layout.job_dir / "files" / "POSCAR").write_text(SILICON)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HTTK_")}
    out = tmp_path / "modules.txt"
    subprocess.run(
        [sys.executable, "-P", "-c", _runner_code(out), "vasp-static"],
        env={**environ, **layout.environ(HTTK_WORKFLOW_PYTHON=sys.executable)},
        cwd=layout.workdir,
        check=True,
    )
    assert json.loads(layout.outcome_bytes())["action"] == "succeed"
    assert (layout.control_dir / "outcome.ready" / "transaction").is_dir()
    loaded = set(out.read_text().split())
    assert "httk.workflow.vasp._decide" in loaded
    assert [name for name in NEVER_ON_THE_RUNNER_PATH if name in loaded] == []


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
