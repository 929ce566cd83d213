"""What a run leaves, judged and archived; VASP started, watched and stopped as a real process."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from httk.workflow.vasp import (
    VaspCommandError,
    archive_outputs,
    chgcar_complete,
    command_argv,
    judge_restart_files,
    parse_poscar,
    run_vasp,
    stop_leftover,
    usable_contcar,
    wavecar_complete,
)
from httk.workflow.vasp._process import process_identity, still_running

from tests.vasp.vaspkit import MOCK, calculation, run_mock


def test_complete_and_truncated_restart_files_are_told_apart(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    assert run_mock(run).returncode == 0
    assert wavecar_complete(run / "WAVECAR") and chgcar_complete(run / "CHGCAR")
    poscar = parse_poscar((run / "POSCAR").read_text())
    assert usable_contcar(run, poscar) is not None
    assert run_mock(run, "crash@2").returncode == 174  # dies writing CONTCAR, WAVECAR and CHGCAR
    assert not wavecar_complete(run / "WAVECAR") and not chgcar_complete(run / "CHGCAR")
    assert usable_contcar(run, poscar) is None
    assert judge_restart_files(run) == {"WAVECAR": "removed (incomplete)", "CHGCAR": "removed (incomplete)"}
    assert not (run / "WAVECAR").exists() and not (run / "CHGCAR").exists()
    (run / "WAVECAR").write_bytes(b"\0" * 10)
    assert not wavecar_complete(run / "WAVECAR")


def test_archiving_moves_the_outputs_and_copies_the_inputs(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    assert run_mock(run).returncode == 0
    outcar, vasprun = (run / "OUTCAR").read_bytes(), (run / "vasprun.xml").read_bytes()
    relative = archive_outputs(run, 3, "relax")
    folder = run / relative
    assert relative == "runs/03-relax"
    assert {p.name for p in folder.iterdir()} >= {
        "OUTCAR.gz",
        "vasprun.xml.gz",
        "OSZICAR",
        "CONTCAR",
        "INCAR",
        "POSCAR",
    }
    assert not (run / "OUTCAR").exists() and (run / "INCAR").exists() and (run / "WAVECAR").exists()
    with gzip.open(folder / "OUTCAR.gz") as stream:  # what any gzip reader reads
        assert stream.read() == outcar
    assert gzip.decompress((folder / "vasprun.xml.gz").read_bytes()) == vasprun


def test_vasp_command_becomes_an_argument_vector() -> None:
    assert command_argv("srun -n {procs} 'vasp std'", 8) == ["srun", "-n", "8", "vasp std"]
    for command, code in (
        (None, "vasp.command_missing"),
        ("  ", "vasp.command_missing"),
        ("a {nodes}", "vasp.command_unavailable"),
        ("a 'b", "vasp.command_unavailable"),
        (3, "vasp.command_unavailable"),
    ):
        with pytest.raises(VaspCommandError) as raised:
            command_argv(command, 1)
        assert raised.value.code == code


def test_a_command_that_cannot_start_is_unavailable(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    with pytest.raises(VaspCommandError, match="cannot be started") as raised:
        run_vasp([str(tmp_path / "nope")], run, timeout=None, stop_grace=1, kill_grace=1, poll_seconds=0.05)
    assert raised.value.code == "vasp.command_unavailable"


# The stage expected to work has a generous grace and the stages before it a short one, which the fault
# spends in full: how long the mock takes to obey under load cannot move a case to the next stage.
@pytest.mark.parametrize(
    ("fault", "graces", "stage", "status"),
    [
        ("--step-seconds=0.05", (30, 30), "stopcar", 0),  # reads STOPCAR at every electronic step
        ("--fault=hang@1", (0.5, 30), "sigterm", -signal.SIGTERM),  # hangs before its first STOPCAR check
        ("--fault=hang-hard@1", (0.5, 0.5), "sigkill", -signal.SIGKILL),  # and ignores SIGTERM there
    ],
)
def test_a_timeout_stops_vasp_at_the_first_stage_that_works(
    tmp_path: Path, fault: str, graces: tuple[float, float], stage: str, status: int
) -> None:
    run = calculation(tmp_path / "run")

    def in_its_hang() -> None:
        """The timeout counts from here: a slow start must not reach SIGTERM before the mock ignores it."""
        if fault.startswith("--fault=hang-hard"):
            pid = json.loads((run / ".httk-vasp" / "process.json").read_text())["pid"]
            deadline = time.monotonic() + 30
            while not _ignores_sigterm(pid):
                assert time.monotonic() < deadline
                time.sleep(0.01)

    stop_grace, kill_grace = graces
    report = run_vasp(
        [MOCK, fault],
        run,
        timeout=1.0,
        stop_grace=stop_grace,
        kill_grace=kill_grace,
        poll_seconds=0.05,
        on_start=in_its_hang,
    )
    assert (report.stopped, report.stop_stage, report.status) == ("timeout", stage, status)
    assert not (run / ".httk-vasp" / "process.json").exists()


def test_the_monitor_stops_vasp_for_a_problem(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    seen = []

    def monitor() -> str | None:
        seen.append(len((run / "OSZICAR").read_text()) if (run / "OSZICAR").exists() else 0)
        return "brmix" if seen[-1] else None

    report = run_vasp(
        [MOCK, "--step-seconds=0.05"],
        run,
        timeout=None,
        stop_grace=5,
        kill_grace=5,
        poll_seconds=0.05,
        monitor=monitor,
    )
    assert (report.stopped, report.stop_stage, report.status) == ("error:brmix", "stopcar", 0)


def test_a_runner_signal_stops_vasp_and_is_reported(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    script = (
        "import sys; from pathlib import Path; from httk.workflow.vasp import run_vasp\n"
        f"r = run_vasp([{MOCK!r}, '--step-seconds=0.05'], Path({str(run)!r}), timeout=None, stop_grace=5,"
        " kill_grace=5, poll_seconds=0.05)\n"
        "print(r.runner_signal, r.stopped, r.stop_stage)\n"
    )
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (run / "OSZICAR").exists() or "DAV" not in (run / "OSZICAR").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=30)
    assert out.split() == [str(int(signal.SIGTERM)), "signal", "stopcar"]


def _ignores_sigterm(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_a_leftover_vasp_is_found_and_stopped(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    leftover = subprocess.Popen(
        [MOCK, "--fault=hang-hard@1"],
        cwd=run,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        process_group=0,
    )
    try:
        (run / ".httk-vasp").mkdir()
        deadline = time.monotonic() + 30
        while not _ignores_sigterm(leftover.pid):  # in its hang, where SIGTERM is ignored
            assert time.monotonic() < deadline
            time.sleep(0.01)
        identity = process_identity(leftover.pid)
        (run / ".httk-vasp" / "process.json").write_text(json.dumps(identity))
        assert still_running(identity) is True
        assert stop_leftover(run, grace=0.2) == "stopped"
        assert leftover.wait(timeout=30) == -signal.SIGKILL
        assert not still_running(identity) and not (run / ".httk-vasp" / "process.json").exists()
    finally:
        if leftover.poll() is None:
            os.killpg(leftover.pid, signal.SIGKILL)
            leftover.wait()
    assert stop_leftover(run, grace=0.2) is None
    (run / ".httk-vasp" / "process.json").write_text(json.dumps({**identity, "host": "elsewhere"}))
    assert stop_leftover(run, grace=0.2) == "elsewhere"
