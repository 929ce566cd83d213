"""Progress bars of long commands (``cli/_progress.py``): drawn on a terminal, nothing anywhere else.

Each command runs as a real process twice: once with a pseudo-terminal as its standard input, output
and error (what an operator's terminal is), and once with pipes. On the terminal the bar's drawing
(its description and the terminal's control sequences) is in what the process wrote, and the command's
own output follows it; through pipes, and with ``--json`` even on the terminal, the output is exactly
what it is without a bar.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from httk.workflow.cli._progress import Bar, progress_bar, wanted
from httk.workflow.engine.maintenance._gc import PHASES

from tests.cli.conftest import spec_job, write_payload
from tests.v1.v1trees import fixture_tree

BIN = Path(sys.executable).parent
JOBS = 201  # one more than job submit's BIG_BATCH: the batch that gets a bar
ESCAPE = "\x1b["
WAIT_SECONDS = 120.0


HOMES = ("HTTK_CONFIG_HOME", "HTTK_DATA_HOME")  # the test's own (conftest.user_homes), never the user's


def environment() -> dict[str, str]:
    drop = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in drop and (name in HOMES or not name.startswith("HTTK_"))
    }
    return {**env, "TERM": "xterm-256color"}


def on_a_terminal(*words: str | Path) -> tuple[int, str]:
    """Run ``httk *words`` with a 120x40 pseudo-terminal as stdin, stdout and stderr; status and output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [str(BIN / "httk"), *map(str, words)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=environment(),
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        status = process.wait(timeout=WAIT_SECONDS)
    finally:
        os.close(leader)
        process.kill()
        process.wait()
    return status, b"".join(chunks).decode("utf-8", "replace")


def through_pipes(*words: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "httk"), *map(str, words)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
        env=environment(),
    )


@pytest.fixture(scope="module")
def payloads(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("payloads")
    return [write_payload(root / f"p{index:03d}", spec_job()) for index in range(JOBS)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    done = through_pipes("workspace", "init", root, "--no-durable")
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def submitted(workspace: Path, payloads: list[Path]) -> Path:
    done = through_pipes("job", "submit", workspace, *payloads, "--placement", "big")
    assert done.returncode == 0, done.stderr
    return workspace


# -- job submit ---------------------------------------------------------------------------------------
def test_submitting_many_payloads_draws_a_bar_on_a_terminal(workspace: Path, payloads: list[Path]) -> None:
    status, shown = on_a_terminal("job", "submit", workspace, *payloads, "--placement", "big")
    assert status == 0, shown
    assert "submitting" in shown and ESCAPE in shown
    assert f"{JOBS} jobs at big: {JOBS} submitted" in shown


def test_submitting_many_payloads_into_a_pipe_prints_only_the_summary(
    workspace: Path, payloads: list[Path]
) -> None:
    done = through_pipes("job", "submit", workspace, *payloads, "--placement", "big")
    assert done.returncode == 0
    assert done.stdout == f"{JOBS} jobs at big: {JOBS} submitted\n"
    assert done.stderr == ""


def test_json_on_a_terminal_gets_no_bar(workspace: Path, payloads: list[Path]) -> None:
    status, shown = on_a_terminal("job", "submit", workspace, *payloads, "--placement", "big", "--json")
    assert status == 0, shown
    assert ESCAPE not in shown and "submitting" not in shown
    assert len(json.loads(shown.replace("\r\n", "\n"))) == JOBS


# -- workspace fsck and gc ----------------------------------------------------------------------------
def test_fsck_draws_a_bar_on_a_terminal_and_nothing_into_a_pipe(submitted: Path) -> None:
    status, shown = on_a_terminal("workspace", "fsck", submitted)
    assert status == 0, shown
    assert ESCAPE in shown and "counting always-safe leftovers" in shown  # its last phase, drawn last
    assert f"{JOBS} markers checked: clean" in shown

    done = through_pipes("workspace", "fsck", submitted)
    assert done.returncode == 0
    assert done.stdout.startswith(f"{JOBS} markers checked: clean\n")
    assert done.stderr == "" and ESCAPE not in done.stdout

    status, shown = on_a_terminal("workspace", "fsck", submitted, "--json")
    assert status == 0 and ESCAPE not in shown
    assert json.loads(shown.replace("\r\n", "\n"))["markers_checked"] == JOBS


def test_gc_draws_a_bar_on_a_terminal_and_nothing_into_a_pipe(submitted: Path) -> None:
    status, shown = on_a_terminal("workspace", "gc", submitted, "--dry-run")
    assert status == 0, shown
    assert ESCAPE in shown
    assert re.search("|".join(map(re.escape, PHASES)), shown), shown
    assert "dry run: would remove" in shown

    done = through_pipes("workspace", "gc", submitted, "--dry-run")
    assert done.returncode == 0
    assert done.stderr == "" and ESCAPE not in done.stdout
    assert not any(phase in done.stdout for phase in PHASES)


# -- v1 import ---------------------------------------------------------------------------------------
def test_v1_import_draws_a_bar_on_a_terminal_and_nothing_into_a_pipe(workspace: Path, tmp_path: Path) -> None:
    tree = tmp_path / "Runs"
    fixture_tree(tree)  # it holds a task a live v1 manager may own: the import leaves it, exit status 1
    status, shown = on_a_terminal("workflow", "v1", "import", workspace, tree, "--dry-run")
    assert status == 1, shown
    assert ESCAPE in shown and "importing v1 tasks" in shown and "5 would import" in shown

    done = through_pipes("workflow", "v1", "import", workspace, tree, "--dry-run")
    assert done.returncode == 1, done.stderr
    assert done.stderr == "" and ESCAPE not in done.stdout and "importing v1 tasks" not in done.stdout

    status, shown = on_a_terminal("workflow", "v1", "import", workspace, tree, "--dry-run", "--json")
    assert status == 1 and ESCAPE not in shown and "importing v1 tasks" not in shown
    assert json.loads(shown.replace("\r\n", "\n"))["dry_run"] is True


# -- the helper ---------------------------------------------------------------------------------------
def test_a_bar_is_wanted_only_on_a_terminal_and_without_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert wanted(as_json=False) is True
    assert wanted(as_json=True) is False
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert wanted(as_json=False) is False


def test_a_disabled_bar_counts_and_draws_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("checking", enabled=False) as bar:
        assert isinstance(bar, Bar)
        bar.advance()
        assert bar.done == 1
        bar.report("checking", 10)
        bar.advance(5)
        assert bar.done == 15
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")
