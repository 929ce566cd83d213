"""``httk-mock-vasp``: a stand-in for VASP that every test and the demo run instead of the real program.

It reads INCAR, POSCAR, KPOINTS and POTCAR in its working directory and writes what VASP writes there --
OUTCAR, OSZICAR, vasprun.xml, CONTCAR, WAVECAR, CHGCAR and its standard output -- for a model energy
landscape (:mod:`._model`): a relaxation takes several ionic steps, and one that changes the cell volume
needs repeats from its CONTCAR before consecutive runs agree. It honours STOPCAR and dies on SIGTERM like
VASP. Faults are injected on request (:mod:`._faults`): every error of the runner's catalog as VASP words
it, NELM reached, NSW reached, a crash that leaves truncated files, a hang, a walltime SIGTERM.

Usage::

    httk-mock-vasp [--fault NAME[@STEP][*RUNS]]... [--step-seconds S] [--procs N]
    httk-mock-vasp pseudo-library DIR CHOICE...     write a synthetic POTCAR library (Si, Fe_pv, ...)
    httk-mock-vasp faults                           list the faults

``--step-seconds`` (or ``HTTK_MOCK_VASP_STEP_SECONDS``) sleeps before every electronic step, so a test can
catch a run in the middle and a benchmark can give it a duration. Nothing here is VASP: the version line
says so, and the synthetic POTCARs are titled ``mock``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ._faults import BEHAVIOURS, MESSAGES, requested


def pseudo_library(directory: Path, choices: Sequence[str]) -> None:
    """Write a synthetic POTCAR for each choice (``Si``, ``Fe_pv``) into ``directory/<choice>/POTCAR``.

    The datasets carry what a POTCAR reader needs -- title, ``TITEL``, ``ZVAL`` and the closing line --
    with ``mock`` in the title, so no one mistakes them for real pseudopotentials.
    """
    from ._model import cohesive_energy

    for choice in choices:
        element = choice.split("_", 1)[0]
        zval = float(1 + int(-cohesive_energy(element) * 10) % 11)
        title = f"PAW_PBE {choice} mock"
        folder = directory / choice
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "POTCAR").write_text(
            f"  {title}\n {zval:.15f}\n parameters from PSCTR are:\n   VRHFIN ={element}: mock\n"
            f"   TITEL  = {title}\n   POMASS =    1.000; ZVAL   = {zval:8.3f}    mass and valenz\n"
            f"   ENMAX  =  300.000; ENMIN  =  225.000 eV\n End of Dataset\n",
            encoding="ascii",
        )


def main(argv: Sequence[str] | None = None) -> int:
    """The ``httk-mock-vasp`` command."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["pseudo-library"]:
        if len(arguments) < 3:
            print("usage: httk-mock-vasp pseudo-library DIR CHOICE...", file=sys.stderr)
            return 2
        pseudo_library(Path(arguments[1]), arguments[2:])
        return 0
    if arguments[:1] == ["faults"]:
        for name in sorted(MESSAGES):
            print(f"{name:16s} {MESSAGES[name].text.splitlines()[0]}")
        for name, meaning in sorted(BEHAVIOURS.items()):
            print(f"{name:16s} {meaning}")
        return 0
    parser = argparse.ArgumentParser(prog="httk-mock-vasp", description="A model stand-in for VASP.")
    parser.add_argument("--fault", action="append", default=[], metavar="NAME[@STEP][*RUNS]")
    parser.add_argument("--step-seconds", type=float, default=None)
    parser.add_argument("--procs", type=int, default=1)
    options = parser.parse_args(arguments)
    workdir = Path.cwd()
    try:
        faults = requested(options.fault, os.environ, workdir)
    except ValueError as exc:
        parser.error(str(exc))
    step_seconds = options.step_seconds
    if step_seconds is None:
        step_seconds = float(os.environ.get("HTTK_MOCK_VASP_STEP_SECONDS", "0") or 0)
    from . import _faults
    from ._run import MockRun

    striking = _faults.active(faults, workdir)
    return MockRun(workdir, striking, step_seconds=step_seconds, procs=options.procs).run()
