"""Every exit code of ``ht_steps`` as v1's task manager mapped it (reference §2.3), under the real manager:
2, 3 (with and without subtasks), 4, 10, 99, 0, 43, a signal, any other code, and a program that cannot
be executed (126, 127)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from tests.v1.v1jobs import V1Workspace
from tests.v1.v1trees import scripted, trace

STOPPED = "Task returned non-defined error code"


class Exit(NamedTuple):
    code: str
    kind: str
    failure: str | None
    reason: str | None
    status: str


@pytest.mark.parametrize(
    "case",
    [
        Exit("4", "failed", "declared_failure", "Task gave 'broken' as return code.", "broken"),
        Exit("99", "failed", "timeout", "Task timed out.", "timeout"),
        Exit("0", "failed", "v1.stopped", f"{STOPPED} (0).", "stopped"),
        Exit("1", "failed", "v1.stopped", f"{STOPPED} (1).", "stopped"),
        Exit("5", "failed", "v1.stopped", f"{STOPPED} (5).", "stopped"),
        Exit("43", "failed", "v1.stopped", f"{STOPPED} (43).", "stopped"),
        Exit("kill", "failed", "v1.stopped", f"{STOPPED} (137).", "stopped"),
        Exit("10", "succeeded", None, None, "finished"),
    ],
    ids=lambda case: f"exit-{case.code}",
)
def test_every_exit_code_maps_as_v1_mapped_it(tmp_path: Path, v1ws: V1Workspace, case: Exit) -> None:
    code, kind, failure, reason, status = case
    task = scripted(tmp_path, "ht.task.any.t.relax.0.unclaimed.3.waitstep", {"relax": code, "freeze": "0"})
    (task / "ht.reason").write_text("an earlier reason\n")
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == kind
    payload = v1ws.task(job)
    lines = (payload / "ht.reason").read_text().splitlines()
    if failure is None:
        assert lines == ["an earlier reason"]
    else:
        assert show["failure"]["code"] == failure
        assert show["failure"]["message"].startswith(reason)
        assert lines[0] == "an earlier reason" and lines[1].startswith(str(reason)) and len(lines) == 2
    frozen = status in ("broken", "timeout")
    assert trace(payload) == (["relax", "freeze"] if frozen else ["relax"])
    assert v1ws.views() == [f"ht.task.any.t.relax.0.unclaimed.3.{status}"]


@pytest.mark.parametrize(("exit_code", "next_step"), [("2", "second"), ("3", "second"), ("2", None)])
def test_exits_2_and_3_continue_at_ht_nextstep_or_at_v1s_unknown(
    tmp_path: Path, v1ws: V1Workspace, exit_code: str, next_step: str | None
) -> None:
    first = f"{exit_code} {next_step}" if next_step else exit_code
    plan = {"start": first, "second": "10", "unknown": "10"}
    task = scripted(tmp_path, "ht.task.any.t.start.0.unclaimed.3.waitstart", plan)
    job = v1ws.submit(task)
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == "succeeded" and show["state"]["activation_ordinal"] == 2
    assert trace(v1ws.task(job)) == ["start", next_step or "unknown"]  # 3 without subtasks goes on at once
    assert v1ws.views() == [f"ht.task.any.t.{next_step or 'unknown'}.0.unclaimed.3.finished"]
    assert v1ws.list_jobs()[0]["tag"] == "t" and len(v1ws.list_jobs()) == 1


@pytest.mark.parametrize(
    ("damage", "status"), [("chmod", 126), ("interpreter", 127)], ids=["not-executable", "no-interpreter"]
)
def test_a_program_that_cannot_be_executed_stops_with_the_shells_code(
    tmp_path: Path, v1ws: V1Workspace, damage: str, status: int
) -> None:
    task = scripted(tmp_path, "ht.task.any.t.relax.0.unclaimed.3.waitstep", {"relax": "10"})
    job = v1ws.submit(task)
    program = v1ws.task(job) / "ht_steps"
    if damage == "chmod":
        program.chmod(0o644)  # lost its execute bit after the import
    else:
        program.write_text("#!/nonexistent/bash\nexit 10\n")
    v1ws.run()
    show = v1ws.show(job)
    assert show["kind"] == "failed" and show["failure"]["code"] == "v1.stopped"
    assert show["failure"]["message"].startswith(f"{STOPPED} ({status}).")
    assert show["failure"]["details"]["exit_status"] == status
    log = (v1ws.task(job) / "ht.taskmgr.stdout").read_text()
    assert "ht_steps" in log  # the shell's complaint, where v1 put the program's output
    assert v1ws.views() == ["ht.task.any.t.relax.0.unclaimed.3.stopped"]
