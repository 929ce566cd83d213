"""``httk workflow monitor`` in a real terminal (tmux) over a live workspace with a running manager.

The monitor, the manager and the runners are real processes; tmux is the terminal (``tests/tmuxkit.py``):
keys go in with ``send-keys`` and the screen comes out with ``capture-pane``, polled for what is expected
with a deadline. Without a terminal the command refuses with exit status 2. The pure helpers the screen
draws with (the filter, the marks of sampled counts) are tested on their own.
"""

from __future__ import annotations

import inspect
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.cli._monitor_app import count_text, filter_text, parse_filter
from httk.workflow.cli._monitor_cmd import NO_TERMINAL, monitor
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.engine.ops._monitor import BUDGET, Certainty, JobQuery
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import InvalidNameError

from tests.cli.conftest import Invoke
from tests.conftest import minimal_job
from tests.runners import (
    WAIT_SECONDS,
    current_marker,
    frame_chain,
    job_key,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)
from tests.tmuxkit import WAIT_SECONDS as SCREEN_SECONDS
from tests.tmuxkit import Terminal

BIN = Path(sys.executable).parent


def environment() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("SLURM_", "HTTK_"))}
    return {**env, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


@pytest.fixture
def gated(ws: Workspace, runner: dict[str, Any], tmp_path: Path) -> dict[str, dict[str, Any]]:
    """Three jobs whose single step waits for its own gate file; alpha has the best priority."""
    jobs = {}
    layout = (("alpha", "proj-0/a", 100), ("beta", "proj-1/a", 500), ("gamma", "proj-0/a", 500))
    for label, placement, priority in layout:
        steps = {"prepare": {"wait_for": str(tmp_path / f"gate-{label}"), "stdout": f"hello from {label}\n"}}
        jobs[label] = scripted_job(steps, runner, tag=label, priority=priority)
        submit(ws, jobs[label], placement)
    return jobs


@pytest.fixture
def manager(ws: Workspace, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A real manager serving the workspace until the test ends (one worker, kept alive while idle)."""
    process = subprocess.Popen(
        [str(BIN / "httk"), "workflow", "run", str(ws.root), "--idle", "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    try:
        yield process
    finally:
        for gate in ("alpha", "beta", "gamma"):  # let every runner still waiting finish
            (tmp_path / f"gate-{gate}").touch()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=WAIT_SECONDS)


StartTerminal = Callable[..., Terminal]


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[StartTerminal]:
    """``terminal(*words)``: ``httk *words`` in a real terminal of its own, closed after the test."""
    opened: list[Terminal] = []

    def start(*words: str) -> Terminal:
        opened.append(
            Terminal(tmp_path / f"tmux-{len(opened)}", [str(BIN / "httk"), *words], env=environment())
        )
        return opened[-1]

    yield start
    for each in opened:
        each.close()


def question(action: str, key: str) -> str:
    """The confirmation of ``action`` (a pattern) for the job ``key``: the question, then the key."""
    return rf"Really {action} the job[^\n]*\n[^\n]*{key}\?"


def counted(kind: str, count: int) -> str:
    """The counts table's row of ``kind`` with ``count`` jobs in total (a job row has a 3-digit priority)."""
    return rf"^\s*{kind}\s+{count}\s"


def test_the_monitor_follows_a_live_workspace_and_pauses_a_job_through_its_confirmation(
    ws: Workspace,
    gated: dict[str, dict[str, Any]],
    tmp_path: Path,
    terminal: StartTerminal,
    request: pytest.FixtureRequest,
) -> None:
    screen = terminal("workflow", "monitor", str(ws.root), "--interval", "0.3", "--operator", "monitor-test")
    screen.wait_for(counted("submitted", 3), "the three submitted jobs to be counted")
    screen.wait_for(r"counts exact", "the counts to say they are exact")
    screen.wait_for(r"no manager has registered", "the managers table to say there is none")

    # A manager starts: the counts move, and the manager shows with its heartbeat.
    request.getfixturevalue("manager")
    screen.wait_for(counted("running", 1), "alpha to run")
    screen.wait_for(counted("ready", 2), "beta and gamma to wait in ready")
    screen.wait_for(r"managers 1 live", "the live manager in the summary")
    screen.wait_for(r"\blive\s+\d+\.\ds\s+\d+s", "the manager's row with its heartbeat age and lease")

    # The filter narrows the page to beta.
    beta, alpha, gamma = (job_key(gated[label]) for label in ("beta", "alpha", "gamma"))
    screen.send("/")
    screen.wait_for(r"editing the filter", "the filter to take the keys")
    screen.type("tag:beta")
    screen.send("Enter")
    screen.wait_for(r"jobs: tag:beta · page 1 · 1 shown", "the page under the filter")
    shown = screen.wait_for(rf"ready\s+500\s+1\s+proj-1/a\s+{beta}", "beta's row").string
    assert alpha not in shown and gamma not in shown

    # Enter opens beta: its show, then its log, then why.
    screen.send("Enter")
    screen.wait_for(rf"job {beta}: ready at proj-1/a \(generation 1\)", "beta's screen")
    screen.wait_for(r"counters\s+activations \d+/50", "job show's counters")
    screen.send("2")
    screen.wait_for(r"g1\s+submitted -> ready\s+step=prepare", "job log's first transition")
    screen.send("3")
    screen.wait_for(r"answer: ", "job why's answer")

    # p asks first; Enter confirms; the manager applies the request and the screen follows the job.
    screen.send("p")
    screen.wait_for(question("pause", beta), "the confirmation")
    screen.wait_for(r"reason, for the journal", "the reason field")
    screen.type("look closer")
    screen.send("Enter")
    said = rf"requested pause of {beta} \(ready at generation 1\): request (?P<id>[0-9a-f-]{{36}})"
    request_id = screen.wait_for(said, "the request's publication")["id"]
    wait_until(lambda: current_marker(ws, gated["beta"], "proj-1/a").kind is Kind.PAUSED, "beta to pause")
    paused = frame_chain(ws, current_marker(ws, gated["beta"], "proj-1/a"))[-1]
    assert paused["request_id"] == request_id
    assert (paused["operator"], paused["operator_reason"]) == ("monitor-test", "look closer")
    screen.wait_for(rf"job {beta}: paused at proj-1/a \(generation 2\)", "beta's screen to show it paused")
    screen.wait_for(r"answer: paused: look closer", "job why to say why")

    # Back on the dashboard the counts follow the manager: alpha finishes and gamma runs.
    screen.send("Escape")
    screen.wait_for(counted("paused", 1), "the paused count")
    screen.wait_for(said, "the summary to keep what came of the request")
    (tmp_path / "gate-alpha").touch()
    screen.wait_for(counted("succeeded", 1), "alpha to succeed")
    screen.wait_for(counted("running", 1), "gamma to run")
    screen.wait_for(counted("ready", 0), "nothing left ready")

    screen.send("q")
    assert screen.wait_for_exit() == 0


def test_a_request_the_job_refuses_is_reported_and_nothing_is_published(
    ws: Workspace, gated: dict[str, dict[str, Any]], terminal: StartTerminal
) -> None:
    screen = terminal("workflow", "monitor", str(ws.root), "--interval", "0.3")
    alpha = job_key(gated["alpha"])
    screen.wait_for(counted("submitted", 3), "the jobs to be counted")
    screen.wait_for(rf"submitted\s+100\s+0\s+proj-0/a\s+{alpha}", "alpha's row, first on the page")

    screen.send("c")  # continue applies to failed or paused jobs only
    screen.wait_for(question(r"continue \(retry the current activation of\)", alpha), "the question")
    screen.send("Enter")
    refusal = (
        rf"continue refused: {alpha}: continue applies only to a failed or paused job; the job is submitted"
    )
    screen.wait_for(refusal, "the refusal")
    assert not list((ws.requests_dir / "ready").glob("*.json"))

    screen.send("x")  # and Escape at the question publishes nothing
    screen.wait_for(question("cancel", alpha), "the question")
    screen.send("Escape")
    screen.wait_for(rf"nothing requested for {alpha}", "the cancelled question")
    assert not list((ws.requests_dir / "ready").glob("*.json"))
    assert current_marker(ws, gated["alpha"], "proj-0/a").kind is Kind.SUBMITTED
    screen.send("q")
    assert screen.wait_for_exit() == 0


def test_a_count_larger_than_the_budget_is_shown_partial_then_sampled(
    tmp_path: Path, terminal: StartTerminal
) -> None:
    big = init(tmp_path / "big", durable=False, name="big")
    submit_jobs(big, [JobSpec(minimal_job(tag=f"bulk-{n}"), f"bulk/{n % 3}") for n in range(300)])
    big.close()
    small = init(tmp_path / "small", durable=False, name="small")
    small.close()
    # A refresh every minute: each further one is asked for with r, so every step is seen.
    screen = terminal(
        "workflow", "monitor", str(big.root), str(small.root), "--budget", "64", "--interval", "60"
    )
    screen.wait_for(r"^\s*submitted\s+>=\d+\s", "a partial count of the first refresh")
    screen.wait_for(r">= partial: submitted \(the first count is not finished\)", "the summary saying so")
    screen.wait_for(r"^\s*total\s+>=\d+", "a partial total")
    deadline = time.monotonic() + SCREEN_SECONDS
    while not re.search(r"^\s*submitted\s+~300\s+~300\s", screen.screen(), re.MULTILINE):
        assert time.monotonic() < deadline, screen.screen()
        screen.send("r")
        time.sleep(0.2)
    screen.wait_for(r"~ sampled: submitted \(more than one refresh's 64 entries", "the summary saying so")
    screen.wait_for(r"^\s*ready\s+0\s+0\s", "an exact count beside it")

    screen.send("w")
    screen.wait_for(r"workspace small .*\(\[1\] big  \[2\*\] small; w switches\)", "the second workspace")
    screen.wait_for(r"^\s*total\s+0\b", "its own counts")
    screen.wait_for(r"counts exact", "exact, being small")
    screen.send("q")
    assert screen.wait_for_exit() == 0


def test_the_command_line_counts_with_the_engine_s_budget() -> None:
    assert inspect.signature(monitor).parameters["budget"].default == BUDGET


def test_without_a_terminal_the_monitor_says_so_and_exits_2(ws: Workspace) -> None:
    done = subprocess.run(
        [str(BIN / "httk"), "workflow", "monitor", str(ws.root)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
        env=environment(),
    )
    assert done.returncode == 2
    assert done.stderr == f"error: {NO_TERMINAL}\n"
    assert done.stdout == ""


def test_the_monitor_needs_a_workspace(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("workflow", "monitor")
    assert result.exit_code == 2
    assert f"no workspace: {tmp_path} is not inside one" in result.stderr


def test_a_missing_workspace_is_refused_before_the_screen_opens(
    tmp_path: Path, terminal: StartTerminal
) -> None:
    screen = terminal("workflow", "monitor", str(tmp_path / "nowhere"))
    assert screen.wait_for_exit() == 3
    assert "error: " in screen.screen()


def test_loading_the_command_line_does_not_load_textual(tmp_path: Path) -> None:
    code = (
        "import sys, httk.workflow.cli._app; print(sorted(m for m in sys.modules if m.startswith('textual')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout == "[]\n"


# -- what the screen draws with -------------------------------------------------------------------------
def test_the_filter_is_read_word_by_word() -> None:
    query = parse_filter("kind:failed,ready tag:si placement:proj-a/00", limit=20)
    assert query == JobQuery((Kind.READY, Kind.FAILED), "si", "proj-a/00", None, 20)
    assert parse_filter("silicon", limit=5).tag_contains == "silicon"
    assert parse_filter("", limit=5) == JobQuery(limit=5)
    assert filter_text(query) == "kind:ready,failed tag:si placement:proj-a/00"
    with pytest.raises(InvalidNameError, match="is not kind:K, tag:TEXT or placement:P"):
        parse_filter("owner:me", limit=5)
    with pytest.raises(InvalidNameError, match="state kind"):
        parse_filter("kind:sleeping", limit=5)


@pytest.mark.parametrize(
    ("certainty", "text"), [(Certainty.EXACT, "12"), (Certainty.SAMPLED, "~12"), (Certainty.PARTIAL, ">=12")]
)
def test_a_count_says_how_sure_it_is(certainty: Certainty, text: str) -> None:
    assert count_text(certainty, 12) == text
    assert re.fullmatch(r"(~|>=)?12", text)
