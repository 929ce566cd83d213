"""VASP's process as :mod:`httk.workflow.vasp._child` starts it: what the program finds, how it ends."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from httk.workflow.vasp._child import death_signal, spawn


def _status_field(text: str, name: str) -> int:
    [line] = [line for line in text.splitlines() if line.startswith(f"{name}:")]
    return int(line.split()[1], 16)


def test_the_program_runs_in_the_workdir_in_a_group_of_its_own_with_three_descriptors(tmp_path: Path) -> None:
    out = tmp_path / "out"
    leaked = os.open(tmp_path, os.O_RDONLY)  # an inheritable descriptor of the runner's
    os.set_inheritable(leaked, True)
    try:
        script = (
            "import os; print(os.getcwd()); print(os.getpgid(0) == os.getpid());"
            "print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
        )
        with open(out, "wb") as stream:
            child = spawn(
                [sys.executable, "-c", script], tmp_path, stdout=stream.fileno(), stderr=stream.fileno()
            )
            assert child.wait() == 0
    finally:
        os.close(leaked)
    assert out.read_text().splitlines() == [str(tmp_path), "True", "[0, 1, 2, 3]"]  # 3: the listing's
    assert child.poll() == 0 and child.wait() == 0


def test_the_program_gets_the_signal_dispositions_of_a_fresh_process(tmp_path: Path) -> None:
    out = tmp_path / "status"
    with open(out, "wb") as stream:  # Python, the runner, ignores SIGPIPE and SIGXFSZ; cat must not
        assert spawn(["cat", "/proc/self/status"], tmp_path, stdout=stream.fileno(), stderr=2).wait() == 0
    ignored = _status_field(out.read_text(), "SigIgn")
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1))


def _children() -> set[int]:
    """This process's children, zombies included, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(entry.name))
    return found


def test_a_program_that_cannot_be_executed_is_an_oserror_and_leaves_nothing(tmp_path: Path) -> None:
    before = _children()
    with pytest.raises(OSError) as raised:
        spawn([str(tmp_path / "absent")], tmp_path, stdout=1, stderr=2)
    assert raised.value.errno == errno.ENOENT
    (tmp_path / "plain").write_text("not a program\n")
    with pytest.raises(OSError) as raised:
        spawn([str(tmp_path / "plain")], tmp_path, stdout=1, stderr=2)
    assert raised.value.errno == errno.EACCES
    assert _children() == before  # every child was reaped


def test_a_return_code_is_minus_the_signal_that_ended_the_program(tmp_path: Path) -> None:
    child = spawn(["sleep", "60"], tmp_path, stdout=1, stderr=2)
    assert child.poll() is None
    os.killpg(child.pid, signal.SIGTERM)  # its group exists as soon as spawn returns
    assert child.wait() == -signal.SIGTERM


def test_the_program_dies_with_its_runner(tmp_path: Path) -> None:
    """A runner SIGKILLed (nothing of it can stop VASP) takes VASP with it: the kernel's death signal."""
    pid_file = tmp_path / "pid"
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from httk.workflow.vasp._child import death_signal, spawn\n"
            "child = spawn(['sleep', '600'], Path(sys.argv[1]), stdout=1, stderr=2,\n"
            "              before_exec=death_signal())\n"
            "Path(sys.argv[1], 'pid').write_text(str(child.pid)); time.sleep(600)\n",
            str(tmp_path),
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and runner.poll() is None
            time.sleep(0.01)
        pid = int(pid_file.read_text())
        runner.kill()
        runner.wait()
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid):
            assert time.monotonic() < deadline, "the program outlived its runner"
            time.sleep(0.01)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert death_signal() is not None


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n", 1)[0]
    except (OSError, IndexError):
        return "zombie"  # gone while being read


def test_the_death_signal_falls_back_to_ctypes_where_its_extension_differs() -> None:
    """An interpreter whose ``_ctypes`` lacks what :func:`c_function` uses still gets the death signal,
    through ctypes itself: the safety is never dropped for a start-up saving."""
    probe = (
        "import ctypes, signal\n"
        "from httk.workflow.vasp import _child\n"
        "def missing(name):\n"
        "    raise AttributeError('_ctypes has no CFuncPtr')\n"
        "_child.c_function = missing\n"
        "_child.death_signal()()\n"
        "value = ctypes.c_int()\n"
        "ctypes.CDLL(None).prctl(2, ctypes.byref(value), 0, 0, 0)  # PR_GET_PDEATHSIG\n"
        "print(value.value == signal.SIGKILL)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "True"
