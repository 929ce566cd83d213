"""vasptools.sh on the VASP package: POTCAR assembly, VASP_RUN_CONTROLLED's return codes and messages
against the mock VASP, and VASP_INPUTS_FIX_ERROR and _ADJUST climbing the catalog's ladders inside v1
transactions. Without the VASP package the helpers fail, naming it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.v1.vaspkit import (
    MOCK,
    SILICON,
    VASP_INSTALLED,
    calculation,
    helpers,
    needs_vasp,
    pseudo_library,
    started_helpers,
)

RELAX = "IBRION = 2\nISIF = 3\nNSW = 40\nEDIFF = 1E-6\nEDIFFG = -0.01\n"
QUICK = {"HTTK_VASP_STOP_GRACE": "1", "HTTK_VASP_KILL_GRACE": "1", "HTTK_VASP_POLL_SECONDS": "0.2"}
FIX = "HT_TASK_ATOMIC_SECTION_START; code=0; VASP_INPUTS_FIX_ERROR || code=$?; HT_TASK_ATOMIC_SECTION_END; "
FIX += "HT_TASK_ATOMIC_EXEC; exit $code"


class Run(NamedTuple):
    faults: str
    timeout: str
    code: int
    messages: list[str]
    mock_options: str = ""


@needs_vasp
@pytest.mark.parametrize(
    "case",
    [
        Run("", "0", 0, ["FINISHED"]),
        Run("zpotrf", "0", 2, ["ZPOTRF"]),
        # VASP runs on with BRMIX and the catalog's watch stops it; a pause before each electronic step
        # makes the run last far longer than the watch's poll, so the mock cannot finish on its own first.
        Run("brmix", "0", 2, ["BRMIX", "FINISHED"], "--step-seconds=0.05"),
        Run("nelm", "0", 4, ["LAST BADCONV ELEC (N>=NELM)", "FINISHED"]),
        Run("hang", "2", 99, ["WALLTIME", "TIMEOUT"]),
    ],
    ids=lambda case: case.faults or "clean",
)
def test_run_controlled_returns_v1s_codes_and_writes_its_messages(tmp_path: Path, case: Run) -> None:
    work = calculation(tmp_path / "run", incar=RELAX)
    script = f'VASP_RUN_CONTROLLED {case.timeout} "{MOCK}" {case.mock_options}'
    done = helpers(work, script, HTTK_MOCK_VASP_FAULTS=case.faults, **QUICK)
    assert done.returncode == case.code, done.stdout + done.stderr
    assert (work / "ht.controlled.msgs").read_text().splitlines() == case.messages
    assert f"returns {case.code}" in done.stdout and (work / "vasp.out").is_file()


@needs_vasp
def test_run_controlled_stops_vasp_when_it_is_terminated_and_returns_3(tmp_path: Path) -> None:
    work = calculation(tmp_path / "run", incar=RELAX)
    process = started_helpers(
        work, f'VASP_RUN_CONTROLLED 0 "{MOCK}"; echo "status $?"', HTTK_MOCK_VASP_FAULTS="hang", **QUICK
    )
    deadline = time.monotonic() + 60
    while not (work / ".httk-vasp" / "process.json").is_file():  # VASP is running
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    (helper,) = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    os.kill(int(helper), signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert out.splitlines()[-1] == "status 3"
    assert not (work / ".httk-vasp" / "process.json").exists()  # VASP was stopped and reaped


@needs_vasp
def test_run_controlled_without_a_command_says_so(tmp_path: Path) -> None:
    done = helpers(calculation(tmp_path / "run", incar=RELAX), "VASP_RUN_CONTROLLED 10", VASP_EXECUTE="")
    assert done.returncode == 2 and "VASP_EXECUTE is empty" in done.stderr


@needs_vasp
def test_fix_error_climbs_the_catalogs_zpotrf_ladder_then_gives_up(tmp_path: Path) -> None:
    work = calculation(tmp_path / "run", incar=RELAX)
    assert helpers(work, f'VASP_RUN_CONTROLLED 0 "{MOCK}"', HTTK_MOCK_VASP_FAULTS="zpotrf@3").returncode == 2
    (work / "WAVECAR").write_text("a wavefunction\n")
    codes, remedies = [], []
    for _ in range(5):
        done = helpers(work, FIX)
        codes.append(done.returncode)
        remedies.append((work / "ht.remedy.zpotrf").read_text().splitlines()[0])
    assert codes == [0, 0, 0, 2, 3]  # expand_cell is v1's "expand the cell" (2); then nothing is left
    assert remedies == [
        "0 1 no_symmetry",
        "1 1 halve_potim",
        "2 1 perturb_structure",
        *["3 1 expand_cell"] * 2,
    ]
    assert "zpotrf persists: every remedy of its ladder was tried" in done.stdout
    effects = (work / "ht.remedy.zpotrf").read_text().splitlines()[1:]
    assert effects == ["ISYM=0", "POTIM=0.25"]  # what VASP_PREPARE_INCAR applies to the next INCAR
    incar = (work / "INCAR").read_text()
    assert "ISYM = 0\n" in incar and "POTIM = 0.25\n" in incar  # the remedied INCAR, published
    assert not (work / "WAVECAR").exists()  # perturb_structure's deletion, carried out by the commit
    assert not list(work.glob("ht.*atomic*"))
    assert (work / "POSCAR").read_text() != SILICON  # the perturbed (and CONTCAR-continued) structure


@needs_vasp
def test_fix_error_stops_at_the_tasks_remedy_limit(tmp_path: Path) -> None:
    work = calculation(tmp_path / "run", incar=RELAX)
    (work / "ht.controlled.msgs").write_text("ZPOTRF\n")
    assert helpers(work, FIX, HTTK_VASP_MAX_REMEDIES="1").returncode == 0
    done = helpers(work, FIX, HTTK_VASP_MAX_REMEDIES="1")
    assert done.returncode == 3 and "all 1 remedies of vasp.max_remedies were applied" in done.stdout


@needs_vasp
def test_fix_error_reads_a_real_v1_runs_tokens_and_gives_up_without_a_known_problem(tmp_path: Path) -> None:
    work = calculation(tmp_path / "run", incar="NSW = 1\nNELM = 60\n")
    (work / "ht.controlled.msgs").write_text("BADCONV ELEC (RMSC>=0.7)\nLAST BADCONV ELEC\nFINISHED\n")
    assert helpers(work, FIX).returncode == 0
    assert (work / "ht.remedy.nelm").read_text() == "0 1 more_electronic_steps\nNELM=120\n"
    (work / "ht.controlled.msgs").write_text("CNORMN\nFINISHED\n")  # a v1 token the catalog has no row for
    done = helpers(work, FIX)
    assert done.returncode == 3 and "no problem of the VASP package's catalog" in done.stdout


@needs_vasp
def test_adjust_remedies_an_accepted_run_or_says_there_is_nothing(tmp_path: Path) -> None:
    work = calculation(tmp_path / "run", incar="IBRION = 2\nNSW = 3\nEDIFFG = -0.0001\n")
    assert helpers(work, f'VASP_RUN_CONTROLLED 0 "{MOCK}"').returncode == 4  # NSW used up: LAST BADCONV ION
    adjust = FIX.replace("VASP_INPUTS_FIX_ERROR", "VASP_INPUTS_ADJUST")
    done = helpers(work, adjust)
    assert done.returncode == 0 and "ionic: continue_from_contcar" in done.stdout
    (work / "ht.controlled.msgs").write_text("FINISHED\n")
    assert helpers(work, adjust).returncode == 1


@needs_vasp
def test_prepare_potcar_takes_v1s_choice_of_dataset(tmp_path: Path) -> None:
    library = pseudo_library(tmp_path / "lib", "Si", "Si_sv", "Fe_pv", "Fe_sv", "Ru_pv", "Ru_sv", "O")
    (tmp_path / "POSCAR").write_text(SILICON.replace("Si\n2\n", "Si Fe Ru O\n1 1 1 1\n") + "0 0 0\n0 0 0\n")
    done = helpers(tmp_path, "VASP_PREPARE_POTCAR", VASP_PSEUDOLIB=str(library))
    assert done.returncode == 0, done.stderr
    titles = [
        line.split("=")[1].strip()
        for line in (tmp_path / "POTCAR").read_text().splitlines()
        if "TITEL" in line
    ]
    assert titles == ["PAW_PBE Si_sv mock", "PAW_PBE Fe_pv mock", "PAW_PBE Ru_sv mock", "PAW_PBE O mock"]
    (tmp_path / "POSCAR").write_text(SILICON.replace("Si\n2\n", "Si Ge\n1 1\n"))
    done = helpers(tmp_path, "VASP_PREPARE_POTCAR", VASP_PSEUDOLIB=str(library))
    assert done.returncode == 1 and "has no POTCAR for Ge (tried Ge_3, Ge_2, Ge_d, Ge_pv" in done.stderr
    assert "PAW_PBE Si_sv" in (tmp_path / "POTCAR").read_text()  # the old POTCAR is left as it was


@pytest.mark.skipif(VASP_INSTALLED, reason="checks the helpers when the VASP package is missing")
def test_without_the_vasp_package_the_helpers_fail_naming_it(tmp_path: Path) -> None:
    (tmp_path / "ht.controlled.msgs").write_text("ZPOTRF\n")
    for script, code in (
        ("VASP_INPUTS_FIX_ERROR", 3),
        ("VASP_INPUTS_ADJUST", 1),
        ("VASP_RUN_CONTROLLED 9 true", 2),
    ):
        done = helpers(tmp_path, script)
        assert done.returncode == code and "httk-workflow-vasp" in done.stderr, script
