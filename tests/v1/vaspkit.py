"""Running v1's VASP helpers in a directory, and the VASP package they stand on when it is installed.

:func:`helpers` runs a Bash snippet with ``ht_tasks_api.sh`` and ``vasptools.sh`` sourced from the
installed runner tree, as a step script does. The VASP package (httk-workflow-vasp, on its own branch
until it merges) is optional: :data:`needs_vasp` skips a test without it, with the reason.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from httk.workflow.v1._runner import runner_root

BIN = Path(sys.executable).parent
MOCK = BIN / "httk-mock-vasp"
TASKS = runner_root() / "Execution" / "tasks"


def _vasp_installed() -> bool:
    try:
        module = importlib.import_module("httk.workflow.vasp")
    except ImportError:
        return False
    return hasattr(module, "CATALOG") and MOCK.is_file()


VASP_INSTALLED = _vasp_installed()
needs_vasp = pytest.mark.skipif(
    not VASP_INSTALLED,
    reason="the VASP package (httk-workflow-vasp: its error catalog and httk-mock-vasp) is not installed",
)

SILICON = """Si2 rattled
5.6
0.0 0.5 0.5
0.5 0.0 0.5
0.5 0.5 0.0
Si
2
Direct
0.01 0.02 0.00
0.25 0.24 0.26
"""


def _argv(script: str) -> list[str]:
    return ["bash", "-c", f'. "{TASKS}/ht_tasks_api.sh"\n. "{TASKS}/vasp/vasptools.sh"\n{script}']


def _environment(env: dict[str, str]) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HTTK_MOCK_VASP", "HTTK_VASP"))}
    return {**environment, "HTTK_DIR": str(runner_root()), "HTTK_WORKFLOW_PYTHON": sys.executable, **env}


def helpers(cwd: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run SCRIPT in CWD after sourcing the v1 API and vasptools.sh, as a step script does."""
    return subprocess.run(
        _argv(script),
        cwd=cwd,
        env=_environment(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def started_helpers(cwd: Path, script: str, **env: str) -> subprocess.Popen[str]:
    """:func:`helpers` started, not waited for (its stdout a pipe)."""
    return subprocess.Popen(_argv(script), cwd=cwd, env=_environment(env), stdout=subprocess.PIPE, text=True)


def pseudo_library(directory: Path, *choices: str) -> Path:
    """A synthetic POTCAR library the mock writes (datasets titled ``mock``)."""
    subprocess.run([str(MOCK), "pseudo-library", str(directory), *choices], check=True, capture_output=True)
    return directory


def calculation(directory: Path, *, incar: str, kpoints: str = "k\n0\nGamma\n4 4 4\n0 0 0\n") -> Path:
    """DIRECTORY with a silicon POSCAR, INCAR, KPOINTS and a mock POTCAR: what VASP_RUN_CONTROLLED runs on."""
    directory.mkdir(parents=True, exist_ok=True)
    library = pseudo_library(directory.parent / f"{directory.name}.potcars", "Si")
    (directory / "POSCAR").write_text(SILICON)
    (directory / "INCAR").write_text(incar)
    (directory / "KPOINTS").write_text(kpoints)
    shutil.copy(library / "Si" / "POTCAR", directory / "POTCAR")
    return directory
