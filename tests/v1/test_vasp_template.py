"""A v1 relaxation template in the style of httk v1's batch templates (tests/v1/templates/vasp-relax),
instantiated with ``v1 new`` and run to finished by the real manager against the mock VASP: a ZPOTRF
remedied by VASP_INPUTS_FIX_ERROR, relax2 repeated until the energy rule holds, cleanup, compression."""

from __future__ import annotations

import bz2
from pathlib import Path

from httk.workflow.v1 import new_task

from tests.v1.v1jobs import V1Workspace
from tests.v1.vaspkit import MOCK, SILICON, needs_vasp, pseudo_library

TEMPLATE = Path(__file__).with_name("templates") / "vasp-relax"


@needs_vasp
def test_the_v1_relaxation_template_runs_to_finished_with_a_zpotrf_remedied(
    tmp_path: Path, v1ws: V1Workspace
) -> None:
    library = pseudo_library(tmp_path / "potpaw", "Si", "Si_sv", "Si_h")
    structure = tmp_path / "Si.POSCAR"
    structure.write_text(SILICON)
    made = new_task(v1ws.path, TEMPLATE, structure)
    env = {"VASP_EXECUTE": str(MOCK), "VASP_PSEUDOLIB": str(library), "HTTK_MOCK_VASP_FAULTS": "zpotrf*1"}
    v1ws.run(env=env)
    shown = v1ws.show(made.job_key)
    assert shown["kind"] == "succeeded", shown
    (task_dir,) = (v1ws.path / made.placement / made.job_key / "task").glob("ht.task.*")
    (archive,) = task_dir.glob("ht.run.2*")
    log = bz2.decompress((archive / "ht.taskmgr.stdout.bz2").read_bytes()).decode()
    assert "VASP_INPUTS_FIX_ERROR: zpotrf: no_symmetry (rung 1 of 4)" in log
    runs = [line for line in log.splitlines() if line.startswith("VASP_RUN_CONTROLLED:")]
    assert runs[0].endswith("problems: zpotrf (vasp.out: LAPACK: Routine ZPOTRF failed); returns 2")
    assert all(line.endswith("problems: none; returns 0") for line in runs[1:]) and len(runs) >= 4
    assert (archive / "ht.remedy.zpotrf").read_text() == "0 1 no_symmetry\nISYM=0\n"

    def text(name: str) -> str:
        return bz2.decompress((archive / f"{name}.bz2").read_bytes()).decode()

    assert "ISYM = 0\n" in text("INCAR") and "SYSTEM = relax\n" in text("INCAR")  # the remedy lasted
    assert "TITEL  = PAW_PBE Si_sv mock" in text("POTCAR")  # v1's choice: _sv before the bare element
    runlog = text("ht.RUNLOG")
    assert "converged: |" in runlog and "relax-final (E0 = " in runlog
    names = {p.name for p in archive.iterdir()}
    assert {"OUTCAR.cleaned.relax-final.bz2", "OSZICAR.relax1.bz2", "POTCAR.summary.bz2"} <= names
    assert not any(n.endswith(".last") or n in ("ht.vars", "ht.controlled.msgs", "WAVECAR") for n in names)
    assert all(n.endswith(".bz2") or n.startswith("ht.") for n in names)  # HT_TASK_COMPRESS
    assert v1ws.views() == ["ht.task.any.Si.cleanup.0.unclaimed.3.finished"]
