"""The mock VASP as a real process: what it writes, how it relaxes, how it obeys STOPCAR, and every fault."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from httk.workflow.vasp._errors import VaspInputError
from httk.workflow.vasp._oszicar import read_oszicar
from httk.workflow.vasp._outcar import read_outcar
from httk.workflow.vasp._structure import parse_poscar
from httk.workflow.vasp._vasprun import read_vasprun
from httk.workflow.vasp.mock._faults import BEHAVIOURS, MESSAGES, Fault

from tests.vasp.vaspkit import MOCK, STATIC_INCAR, calculation, run_mock

DEADLINE = 30.0


def test_a_relaxation_takes_several_ionic_steps_and_writes_every_output(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    done = run_mock(run)
    assert done.returncode == 0, done.stderr
    steps = read_oszicar(run / "OSZICAR")
    assert len(steps) > 3
    assert all(later.energy < earlier.energy for earlier, later in itertools.pairwise(steps))
    outcar = read_outcar(run / "OUTCAR")
    assert outcar.finished and outcar.reached_accuracy
    assert outcar.version == "6.4.2" and "mock" in (outcar.version_line or "")
    assert outcar.titels == ["PAW_PBE Si mock"]
    assert outcar.parameter("nsw") == 40 and outcar.parameter("nions") == 2
    assert [round(s.energy or 0, 6) for s in outcar.steps] == [round(s.energy, 6) for s in steps]
    vasprun = read_vasprun(run / "vasprun.xml")
    assert vasprun.complete and len(vasprun.steps) == len(steps)
    last = (run / "vasprun.xml").read_text().rsplit("<calculation>", 1)[1]
    assert last.count("<scstep>") == steps[-1].electronic_steps  # the parser leaves them to OSZICAR
    assert vasprun.forces is not None and max(abs(f) for row in vasprun.forces for f in row) < 0.01
    contcar = parse_poscar((run / "CONTCAR").read_text())
    assert contcar.natoms == 2 and contcar.volume < parse_poscar((run / "POSCAR").read_text()).volume
    assert (run / "WAVECAR").stat().st_size > 0 and (run / "CHGCAR").stat().st_size > 0
    assert " reached required accuracy - stopping structural energy minimisation" in done.stdout


def test_a_cell_relaxation_far_from_equilibrium_needs_repeats_whose_energies_converge(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    finals = []
    for _ in range(4):
        assert run_mock(run).returncode == 0
        finals.append(read_oszicar(run / "OSZICAR")[-1].energy)
        (run / "POSCAR").write_text((run / "CONTCAR").read_text())
    changes = [abs(b - a) for a, b in itertools.pairwise(finals)]
    assert changes[0] > 0.02  # the first repeat still moves by more than 0.01 eV per atom
    assert changes == sorted(changes, reverse=True)
    assert changes[-1] < 0.02


def test_the_same_inputs_give_the_same_bytes(tmp_path: Path) -> None:
    first, second = calculation(tmp_path / "a"), calculation(tmp_path / "b")
    assert run_mock(first).returncode == run_mock(second).returncode == 0
    for name in ("OSZICAR", "CONTCAR", "vasprun.xml", "WAVECAR", "CHGCAR"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_a_static_run_has_one_ionic_step_and_no_relaxation_verdict(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run", incar=STATIC_INCAR)
    done = run_mock(run)
    assert done.returncode == 0
    assert len(read_oszicar(run / "OSZICAR")) == 1
    outcar = read_outcar(run / "OUTCAR")
    assert outcar.finished and not outcar.reached_accuracy


def test_a_spin_polarized_run_reports_moments(tmp_path: Path) -> None:
    from tests.vasp.vaspkit import IRON_OXIDE

    run = calculation(tmp_path / "run", poscar=IRON_OXIDE, incar=STATIC_INCAR + "ISPIN = 2\nMAGMOM = 5 1\n")
    assert run_mock(run).returncode == 0
    assert read_oszicar(run / "OSZICAR")[-1].magnetization == pytest.approx(2.2)
    outcar = read_outcar(run / "OUTCAR")
    assert outcar.magnetization == pytest.approx([2.2, 0.0]) and outcar.total_magnetization == pytest.approx(
        2.2
    )


@pytest.mark.parametrize(("verdict", "ionic_steps"), [("LABORT", 1), ("LSTOP", 1)])
def test_stopcar_ends_the_run_with_complete_outputs(tmp_path: Path, verdict: str, ionic_steps: int) -> None:
    run = calculation(tmp_path / "run")
    (run / "STOPCAR").write_text(f"{verdict} = .TRUE.\n")
    done = run_mock(run)
    assert done.returncode == 0
    steps = read_oszicar(run / "OSZICAR")
    assert len(steps) == ionic_steps
    if verdict == "LABORT":
        assert steps[0].electronic_steps == 1
    assert read_outcar(run / "OUTCAR").finished and read_vasprun(run / "vasprun.xml").complete
    assert parse_poscar((run / "CONTCAR").read_text()).natoms == 2


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_every_error_is_reported_as_vasp_words_it(tmp_path: Path, name: str) -> None:
    run = calculation(tmp_path / "run")
    message = MESSAGES[name]
    done = run_mock(run, f"{name}@2")
    first_line = message.text.splitlines()[0].strip()
    assert first_line in done.stdout
    if message.boxed:
        assert first_line in (run / "OUTCAR").read_text()
        assert "I REFUSE TO CONTINUE WITH THIS SICK JOB" in done.stdout
    outcar = read_outcar(run / "OUTCAR")
    if message.fatal:
        assert done.returncode == message.status
        assert not outcar.finished and len(outcar.steps) == 1
        assert not read_vasprun(run / "vasprun.xml").complete
    else:
        assert done.returncode == 0 and outcar.finished
        assert done.stdout.count(first_line) > 2  # a warning is repeated while the run goes on


def test_nelm_leaves_the_electronic_minimization_unconverged(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run", incar="IBRION = 2\nISIF = 2\nNSW = 5\nNELM = 30\nEDIFF = 1E-6\n")
    done = run_mock(run, "nelm@2")
    assert done.returncode == 0
    steps = read_oszicar(run / "OSZICAR")
    assert steps[0].electronic_steps < 30 and all(s.electronic_steps == 30 for s in steps[1:])
    assert (run / "OUTCAR").read_text().count("aborting loop EDIFF was not reached") == len(steps) - 1
    assert "The electronic self-consistency was not achieved in the given" in done.stdout


def test_nsw_uses_up_the_ionic_steps(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run", incar="IBRION = 2\nISIF = 3\nNSW = 6\nEDIFFG = -0.001\n")
    assert run_mock(run, "nsw").returncode == 0
    outcar = read_outcar(run / "OUTCAR")
    assert len(outcar.steps) == 6 and outcar.finished and not outcar.reached_accuracy


def test_a_crash_leaves_truncated_files_and_exits_as_intel_fortran_does(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    done = run_mock(run, "crash@3")
    assert done.returncode == 174
    assert "forrtl: severe (174): SIGSEGV, segmentation fault occurred" in done.stderr
    with pytest.raises(VaspInputError):
        parse_poscar((run / "CONTCAR").read_text())
    assert not read_outcar(run / "OUTCAR").finished
    assert not read_vasprun(run / "vasprun.xml").complete
    assert len(read_vasprun(run / "vasprun.xml").steps) == 3


def test_walltime_prints_the_schedulers_words_and_dies_by_sigterm(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    done = run_mock(run, "walltime@2")
    assert done.returncode == -signal.SIGTERM
    assert (
        "DUE TO TIME LIMIT" in done.stderr and "forrtl: error (78): process killed (SIGTERM)" in done.stderr
    )
    assert len(read_oszicar(run / "OSZICAR")) == 1
    assert parse_poscar((run / "CONTCAR").read_text()).natoms == 2  # the last completed step's


def _signal_mask(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1], 16)
    raise AssertionError(field)


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.mark.parametrize("fault", ["hang", "hang-hard"])
def test_a_hang_stops_writing_until_killed(tmp_path: Path, fault: str) -> None:
    run = calculation(tmp_path / "run")
    process = subprocess.Popen(
        [MOCK, f"--fault={fault}@2"], cwd=run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_for(lambda: (run / "OSZICAR").exists() and " F= " in (run / "OSZICAR").read_text(), "step 1")
        term = 1 << (signal.SIGTERM - 1)
        # The hang is in the sleep at the start of step 2; its disposition of SIGTERM says what it will do.
        _wait_for(
            lambda: (
                bool(_signal_mask(process.pid, "SigIgn") & term) == (fault == "hang-hard")
                and (fault == "hang-hard" or bool(_signal_mask(process.pid, "SigCgt") & term))
            ),
            "the SIGTERM disposition",
        )
        assert process.poll() is None
        process.send_signal(signal.SIGTERM if fault == "hang" else signal.SIGKILL)
        assert process.wait(timeout=DEADLINE) == (-signal.SIGTERM if fault == "hang" else -signal.SIGKILL)
        assert len(read_oszicar(run / "OSZICAR")) == 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_fault_limited_to_one_run_strikes_once(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    assert run_mock(run, "zpotrf*1").returncode == 1
    assert run_mock(run, "zpotrf*1").returncode == 0


def test_faults_come_from_the_variable_and_the_fault_file(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    assert "ZPOTRF" in run_mock(run, env={"HTTK_MOCK_VASP_FAULTS": "zpotrf"}).stdout
    (run / "MOCK_FAULTS").write_text("pricel\n")
    assert "PRICEL" in run_mock(run).stdout
    other = tmp_path / "faults.txt"
    other.write_text("posmap")
    assert "POSMAP" in run_mock(run, env={"HTTK_MOCK_VASP_FAULT_FILE": str(other)}).stdout


def test_an_unknown_fault_is_refused_with_the_list(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    done = run_mock(run, "gremlins")
    assert done.returncode == 2 and "unknown fault 'gremlins'" in done.stderr and "zpotrf" in done.stderr


def test_missing_or_mismatched_inputs_are_refused_as_vasp_does(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    (run / "POTCAR").write_text((run / "POTCAR").read_text() * 2)
    done = run_mock(run)
    assert done.returncode == 1 and "incompatible with number of species" in done.stdout
    (run / "POTCAR").unlink()
    done = run_mock(run)
    assert done.returncode == 1 and "POTCAR is missing" in done.stdout


def test_fault_specifications() -> None:
    assert Fault.parse("zpotrf@3*2") == Fault("zpotrf", 3, 2)
    assert Fault.parse("crash") == Fault("crash", 1, None)
    with pytest.raises(ValueError, match="NAME"):
        Fault.parse("crash@x")
    assert set(BEHAVIOURS) == {"nelm", "nsw", "crash", "hang", "hang-hard", "walltime"}


def test_the_mock_lists_its_faults() -> None:
    listed = subprocess.run(
        [MOCK, "faults"], capture_output=True, text=True, check=True, env=dict(os.environ)
    ).stdout
    assert {line.split()[0] for line in listed.splitlines()} == set(MESSAGES) | set(BEHAVIOURS)
