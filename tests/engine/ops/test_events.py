"""A runner's reported events in ``job show`` and ``job why``: the generic record, through the real manager.

A Python SDK runner in a payload records events on each attempt -- the first asks for a retry after a
"remedy", the second fails -- one of them with a message made to move a terminal's cursor. The engine
knows nothing of what they mean: it shows the last ones, oldest first, as the runner worded them, with
the control characters escaped in text and carried unchanged in JSON.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, attach, init
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops._events import WHY_LIMIT, event_lines, printable
from httk.workflow.engine.ops._show import show_job
from httk.workflow.engine.ops._why import diagnose
from httk.workflow.engine.publish._submit import Submitter

from tests.conftest import minimal_job
from tests.runners import current_marker, job_key

HTTK = str(Path(sys.executable).parent / "httk")
HOSTILE = "cursor \x1b[2J\x1b[H moved\r and \u2028 split"
RUNNER = f"""#!{sys.executable}
from httk.workflow.sdk import Attempt, dispatch, step


@step
def relax(a: Attempt) -> None:
    if a.attempt_ordinal == 1:
        a.record_event("demo.error", "run 1: the solver diverged", {{"problem": "diverged", "run": 1}})
        digests = {{"before": {{"INPUT": "aa"}}, "after": {{"INPUT": "bb"}}}}
        a.record_event("demo.remedy", "halved the step", digests)
        a.retry("diverged: halved the step")
        return
    for index in range(8):
        a.record_event("demo.progress", f"step {{index}}")
    a.record_event("demo.error", {HOSTILE!r})
    a.fail("demo.unrecoverable", "the solver diverged again")


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("events")
    ws = init(root / "ws", durable=False)
    job = minimal_job(runner={"backend": "path", "path": "runner.py"}, initial_step="relax", tag="diverging")
    source = root / "payload"
    source.mkdir()
    (source / "job.json").write_text(json.dumps(job))
    (source / "runner.py").write_text(RUNNER)
    (source / "runner.py").chmod(stat.S_IRWXU)
    Submitter(ws).submit_payload(source, "demo")
    Manager(ws, ManagerConfig()).run()
    ws.close()
    return root / "ws", job


def _attached(failed: tuple[Path, dict[str, Any]]) -> tuple[Workspace, Any]:
    ws = attach(failed[0], writable=False)
    marker = current_marker(ws, failed[1], "demo")
    assert marker.kind.value == "failed"
    return ws, marker


def test_job_show_reports_the_last_events_oldest_first(failed: tuple[Path, dict[str, Any]]) -> None:
    ws, marker = _attached(failed)
    record = show_job(ws, marker)["events"]
    kinds = [event["kind"] for event in record["events"]]
    assert kinds == ["demo.error", "demo.remedy", *["demo.progress"] * 8, "demo.error"]
    assert record["complete"] and record["skipped"] == 0 and record["problem"] is None
    remedy = record["events"][1]
    assert remedy["details"] == {"before": {"INPUT": "aa"}, "after": {"INPUT": "bb"}}
    assert remedy["attempt_ordinal"] == 1 and record["events"][-1]["attempt_ordinal"] == 2
    assert record["events"][-1]["message"] == HOSTILE  # JSON carries the runner's words unchanged
    last_three = show_job(ws, marker, events=3)["events"]
    assert [e["message"] for e in last_three["events"]][:2] == ["step 6", "step 7"]
    assert not last_three["complete"]


def test_job_why_ends_with_the_latest_events(failed: tuple[Path, dict[str, Any]]) -> None:
    ws, marker = _attached(failed)
    diagnosis = diagnose(ws, marker)
    assert diagnosis.events is not None and len(diagnosis.events.events) == WHY_LIMIT
    lines = diagnosis.lines()
    heading = lines.index(
        f"events: the runner's last {WHY_LIMIT} events (older: httk job show --events N {marker.job_key})"
    )
    shown = lines[heading + 1 : heading + 1 + WHY_LIMIT]
    assert all(line.startswith("  ") and " relax #2  demo." in line for line in shown)
    assert shown[-1].endswith("demo.error  " + printable(HOSTILE))
    assert diagnosis.as_dict()["events"]["events"][-1]["message"] == HOSTILE


def test_a_terminal_never_receives_a_runner_s_control_characters(failed: tuple[Path, dict[str, Any]]) -> None:
    root, job = failed
    for command in (["job", "show"], ["job", "why"]):
        done = subprocess.run(
            [HTTK, "workflow", *command, str(root), job_key(job)], capture_output=True, text=True, check=True
        )
        assert "\x1b" not in done.stdout and "\r" not in done.stdout and "\u2028" not in done.stdout
        assert "cursor \\x1b[2J\\x1b[H moved\\x0d and \\u2028 split" in done.stdout
    shown = subprocess.run(
        [HTTK, "workflow", "job", "show", str(root), job_key(job), "--events", "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "demo.error" not in shown.stdout and "runner event" not in shown.stdout


def test_text_and_headings() -> None:
    assert printable("a\tb\x7fc\x9b") == "a\\x09b\\x7fc\\x9b"
    assert printable("x" * 300) == "x" * 199 + "\N{HORIZONTAL ELLIPSIS}"
    event = {"time": "T", "step": "s", "attempt_ordinal": 1, "kind": "k", "message": "m"}
    record = {"events": [event], "skipped": 2, "complete": False, "problem": None}
    assert event_lines(record, more="older: --events N") == [
        "the runner's last 1 event (older: --events N; 2 damaged or foreign lines skipped)",
        "  T  s #1  k  m",
    ]
    broken = {"events": [], "skipped": 0, "complete": False, "problem": ".httk-job is a symbolic link"}
    assert event_lines(broken, more="") == ["runner events: .httk-job is a symbolic link"]
