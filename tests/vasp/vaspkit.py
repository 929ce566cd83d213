"""Shared helpers of the VASP tests: a calculation directory with real input files, the mock VASP command.

The inputs are a rattled two-atom silicon cell, 10 % larger than the mock's equilibrium volume for
silicon wants, so a cell relaxation takes several ionic steps and more than one run; the POTCAR comes
from a synthetic library the mock writes (``httk-mock-vasp pseudo-library``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
MOCK = str(BIN / "httk-mock-vasp")

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

IRON_OXIDE = """FeO rocksalt
4.4
0.0 0.5 0.5
0.5 0.0 0.5
0.5 0.5 0.0
Fe O
1 1
Direct
0.0 0.0 0.0
0.5 0.5 0.5
"""

RELAX_INCAR = "IBRION = 2\nISIF = 3\nNSW = 40\nEDIFF = 1E-6\nEDIFFG = -0.01\n"
STATIC_INCAR = "NSW = 0\nIBRION = -1\nEDIFF = 1E-6\n"
GAMMA_444 = "Automatic mesh\n0\nGamma\n4 4 4\n0 0 0\n"


def pseudo_library(directory: Path, *choices: str) -> Path:
    """A synthetic POTCAR library with the given choices (default Si, Fe, Fe_pv, O)."""
    subprocess.run(
        [MOCK, "pseudo-library", str(directory), *(choices or ("Si", "Fe", "Fe_pv", "O"))], check=True
    )
    return directory


def calculation(
    directory: Path, *, poscar: str = SILICON, incar: str = RELAX_INCAR, kpoints: str = GAMMA_444
) -> Path:
    """A directory holding INCAR, POSCAR, KPOINTS and a matching POTCAR."""
    directory.mkdir(parents=True, exist_ok=True)
    library = pseudo_library(directory.parent / f"{directory.name}.potcars")
    (directory / "INCAR").write_text(incar)
    (directory / "POSCAR").write_text(poscar)
    (directory / "KPOINTS").write_text(kpoints)
    species = poscar.splitlines()[5].split()
    (directory / "POTCAR").write_text("".join((library / s / "POTCAR").read_text() for s in species))
    return directory


def run_mock(
    directory: Path, *faults: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the mock in ``directory`` to its end, stdout and stderr captured."""
    argv = [MOCK, *(f"--fault={fault}" for fault in faults)]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HTTK_MOCK_VASP")}
    environment.update(env or {})
    return subprocess.run(
        argv, cwd=directory, capture_output=True, text=True, env=environment, timeout=timeout, check=False
    )
