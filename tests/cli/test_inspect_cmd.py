"""The read commands from the command line: output, selectors, paging, following, and that they write nothing.

The workspace is built once per module by the real manager (``tests/inspectkit.py``); every test that
damages or relabels it works on a copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.manager._landlock import landlock

from tests.cli.conftest import Invoke
from tests.conftest import minimal_job
from tests.inspectkit import Built, build, copy, set_format_member, set_visibility_deadline, snapshot
from tests.runners import WAIT_SECONDS, job_key, publish_scripted_runner, scripted_job, submit, wait_until


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("inspect-cli")
    return build(base / "ws", base / "scratch")


def ok(result: Any) -> str:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return str(result.stdout)


def as_json(result: Any) -> Any:
    return json.loads(ok(result))


# -- workspace status / managers ----------------------------------------------------------------------
def test_status_text_and_json(built: Built, invoke: Invoke) -> None:
    text = ok(invoke("workspace", "status", built.root))
    assert "succeeded   2" in text and "total       6" in text
    report = as_json(invoke("workflow", "workspace", "status", "--workspace", built.root, "--json"))
    assert report["kinds"]["failed"] == 1 and report["total"] == 6
    assert report["workspace_id"] == attach(built.root, writable=False).workspace_id


def test_status_by_placement(built: Built, invoke: Invoke) -> None:
    report = as_json(invoke("workspace", "status", built.root, "--by-placement", "--json"))
    assert report["by_placement"] == {
        "depth": 1,
        "placements": {
            "proj-a": {"paused": 1, "succeeded": 2, "failed": 1},
            "proj-b": {"submitted": 1, "ready": 1},
        },
    }
    deeper = as_json(invoke("workspace", "status", built.root, "--depth", "2", "--json"))
    assert set(deeper["by_placement"]["placements"]) == {"proj-a/00", "proj-a/01", "proj-b"}
    text = ok(invoke("workspace", "status", built.root, "--by-placement"))
    assert "placement (depth 1)" in text and "proj-b" in text


def test_the_taskmanager_alias_has_status(built: Built) -> None:
    from httk.workflow.cli._app import taskmanager_app
    from typer.testing import CliRunner

    result = CliRunner().invoke(taskmanager_app, ["status", str(built.root), "--json"])
    assert json.loads(ok(result))["total"] == 6


def test_managers_lists_the_manager_that_ran(built: Built, invoke: Invoke) -> None:
    [manager] = as_json(invoke("workspace", "managers", built.root, "--json"))
    assert manager["pools"] == ["default"] and manager["executors"] == ["path"]
    assert manager["state"] in ("exited", "live", "stale")
    text = ok(invoke("workspace", "managers", "--workspace", built.root))
    assert manager["manager_id"] in text and "runner modules" in text


def test_managers_of_a_workspace_without_any(tmp_path: Path, invoke: Invoke) -> None:
    init(tmp_path / "ws", durable=False)
    result = invoke("workspace", "managers", tmp_path / "ws")
    assert result.exit_code == 0 and "no manager" in result.stderr


# -- job list ------------------------------------------------------------------------------------------
def test_list_pages_follow_next_after(built: Built, invoke: Invoke) -> None:
    whole = as_json(invoke("job", "list", built.root, "--json"))
    assert whole["next_after"] is None and len(whole["jobs"]) == 6
    seen: list[str] = []
    after: list[str] = []
    while True:
        page = as_json(invoke("job", "list", "--workspace", built.root, "--limit", "4", "--json", *after))
        seen += [row["job_key"] for row in page["jobs"]]
        if page["next_after"] is None:
            break
        after = ["--after", page["next_after"]]
    assert seen == [row["job_key"] for row in whole["jobs"]]


def test_list_text_says_how_to_continue(built: Built, invoke: Invoke) -> None:
    result = invoke("job", "list", built.root, "--limit", "2")
    assert ok(result).splitlines()[0].split() == ["kind", "priority", "gen", "placement", "job"]
    assert "more: --after submitted/" not in result.stderr
    assert "more: --after ready/proj-b/" in result.stderr


def test_list_filters(built: Built, invoke: Invoke) -> None:
    rows = as_json(invoke("job", "list", built.root, "--kind", "succeeded", "--kind", "failed", "--json"))[
        "jobs"
    ]
    assert [row["kind"] for row in rows] == ["succeeded", "succeeded", "failed"]
    rows = as_json(invoke("job", "list", built.root, "--placement", "proj-a/01", "--json"))["jobs"]
    assert {row["job_key"] for row in rows} == {built.key("broken"), built.key("paused")}
    rows = as_json(invoke("job", "list", built.root, "--tag-contains", "step", "--json"))["jobs"]
    assert [row["job_key"] for row in rows] == [built.key("two_steps")]


def test_list_refuses_a_cursor_of_an_unselected_kind(built: Built, invoke: Invoke) -> None:
    cursor = f"failed/proj-a/01/{built.key('broken')}"
    result = invoke("job", "list", built.root, "--kind", "ready", "--after", cursor)
    assert result.exit_code == 2
    assert (
        result.stderr.startswith("error: invalid cursor") and "not among the selected kinds" in result.stderr
    )


# -- job show / log ----------------------------------------------------------------------------------
def test_show_in_both_spellings(built: Built, invoke: Invoke) -> None:
    first = as_json(invoke("workflow", "job", "show", built.root, built.job_id("broken"), "--json"))
    second = as_json(invoke("job", "show", "--workspace", built.root, "broken", "--json"))
    assert first == second and first["failure"]["code"] == "bad_input"
    text = ok(invoke("job", "show", built.root, built.key("two_steps")))
    assert "succeeded (generation 9, priority 500)" in text and "runner steps  prepare,collect" in text


def test_show_refuses_an_ambiguous_or_unknown_selector(built: Built, invoke: Invoke) -> None:
    ambiguous = invoke("job", "show", built.root, "proj-a")
    assert ambiguous.exit_code == 2 and "matches 4 jobs" in ambiguous.stderr
    assert len(ambiguous.stderr.splitlines()) == 1
    unknown = invoke("job", "show", built.root, "no-such-job")
    assert unknown.exit_code == 2 and "matches no job" in unknown.stderr


def test_log_text_and_json(built: Built, invoke: Invoke) -> None:
    lines = ok(invoke("job", "log", built.root, "flaky")).splitlines()
    assert len(lines) == 8
    assert "submitted -> ready" in lines[0] and "committing -> succeeded" in lines[-1]
    assert "after=process_failure" in lines[3]
    entries = as_json(invoke("job", "log", built.root, "two-steps", "--json", "--limit", "2"))
    assert [e["generation"] for e in entries] == [8, 9]
    late = invoke("job", "log", built.root, built.job_id("late"))
    assert late.exit_code == 0 and "has no transition yet" in late.stderr


def test_log_output(built: Built, invoke: Invoke) -> None:
    text = ok(invoke("job", "log", built.root, "two-steps", "--output"))
    assert "preparing\n" in text and "-- stderr --\ncollected\n" in text
    failed = ok(invoke("job", "log", built.root, "broken", "--output"))
    assert "retained control directory" in failed and "unphysical!" in failed
    report = as_json(invoke("job", "log", built.root, "broken", "--output", "--json"))
    assert report["stdio_log"] is None and report["retained_attempts"][0]["stderr"] == "unphysical!\n"
    none = invoke("job", "log", built.root, "gpu", "--output")
    assert none.exit_code == 0 and "no captured output" in none.stderr


def test_log_reports_a_damaged_frame_in_place(built: Built, tmp_path: Path, invoke: Invoke) -> None:
    damaged = copy(built, tmp_path / "ws")
    set_visibility_deadline(damaged.root, 0.05)
    marker = damaged.marker("paused")
    assert marker.name.ref is not None
    segment = damaged.root / ".httk-workflow" / "journal" / marker.name.ref.writer / "0.hwj"
    with open(segment, "r+b") as handle:
        handle.seek(marker.name.ref.offset + 8 + 2)
        handle.write(b"#")

    lines = ok(invoke("job", "log", damaged.root, "paused")).splitlines()
    shown = as_json(invoke("job", "show", damaged.root, "paused", "--json"))

    assert lines == [lines[0]] and "UNREADABLE checksum_mismatch" in lines[0]
    assert shown["frame_problem"]["code"] == "checksum_mismatch"
    assert "NOT READABLE: checksum_mismatch" in ok(invoke("job", "show", damaged.root, "paused"))


def test_usage_errors_of_log(built: Built, invoke: Invoke) -> None:
    assert invoke("job", "log", built.root, "gpu", "--output", "--follow").exit_code == 2
    assert invoke("job", "log", built.root, "gpu", "--follow-timeout", "1").exit_code == 2


def test_follow_with_a_time_limit_prints_the_history_and_stops(built: Built, invoke: Invoke) -> None:
    started = time.monotonic()
    lines = ok(invoke("job", "log", built.root, "gpu", "--follow", "--follow-timeout", "0.3")).splitlines()
    assert len(lines) == 1 and "submitted -> ready" in lines[0]
    assert time.monotonic() - started < WAIT_SECONDS
    rows = ok(invoke("job", "log", built.root, "gpu", "--follow", "--follow-timeout", "0", "--json"))
    assert json.loads(rows.splitlines()[0])["kind"] == "ready"


# -- read-only -------------------------------------------------------------------------------------------
READS = [
    ["workspace", "status", "{ws}"],
    ["workspace", "status", "{ws}", "--json", "--depth", "2"],
    ["workspace", "managers", "{ws}"],
    ["workspace", "managers", "{ws}", "--json"],
    ["job", "list", "{ws}"],
    ["job", "list", "{ws}", "--json", "--limit", "2", "--kind", "succeeded"],
    ["job", "show", "{ws}", "two-steps"],
    ["job", "show", "{ws}", "broken", "--json"],
    ["job", "show", "{ws}", "proj-b/{gpu}"],
    ["job", "show", "{ws}", "late"],
    ["job", "log", "{ws}", "flaky"],
    ["job", "log", "{ws}", "two", "--json"],
    ["job", "log", "{ws}", "two", "--output"],
    ["job", "log", "{ws}", "broken", "--output", "--json"],
    ["job", "log", "{ws}", "gpu", "--follow", "--follow-timeout", "0.1"],
    ["job", "show", "{ws}", "nothing-matches-this"],
]


def run_every_read(invoke: Invoke, root: Path, gpu_key: str) -> list[int]:
    codes = []
    for words in READS:
        args = [word.format(ws=root, gpu=gpu_key) for word in words]
        codes.append(invoke(*args).exit_code)
    return codes


def test_no_read_command_changes_anything(built: Built, invoke: Invoke) -> None:
    before = snapshot(built.root)
    codes = run_every_read(invoke, built.root, built.key("gpu"))
    assert codes == [0] * (len(READS) - 1) + [2]
    assert snapshot(built.root) == before


def test_reads_work_and_write_nothing_on_a_workspace_this_version_may_not_mutate(
    built: Built, tmp_path: Path, invoke: Invoke
) -> None:
    foreign = copy(built, tmp_path / "ws")
    set_format_member(foreign.root, "extensions", ["relocation-v1"])
    assert invoke("job", "submit", foreign.root, tmp_path, "--placement", "x").exit_code == 3
    before = snapshot(foreign.root)

    codes = run_every_read(invoke, foreign.root, foreign.key("gpu"))

    assert codes == [0] * (len(READS) - 1) + [2]
    assert snapshot(foreign.root) == before
    report = as_json(invoke("workspace", "status", foreign.root, "--json"))
    assert "relocation-v1" in report["read_only_reason"]


def test_reads_as_real_processes_write_nothing(built: Built) -> None:
    before = snapshot(built.root)
    for words in (["workspace", "status", "--json"], ["job", "show", built.job_id("flaky"), "--json"]):
        argv = [*HTTK, words[0], words[1], str(built.root), *words[2:]]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT_SECONDS, check=False)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)
    assert snapshot(built.root) == before


# -- following a job a real manager runs -------------------------------------------------------------------
HTTK = [sys.executable, "-c", "from httk.workflow.cli._app import main; main()"]
MANAGER = """
import sys
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
Manager(sys.argv[1], ManagerConfig(lease_seconds=30.0)).run()
"""


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Any], Path]]:
    """A workspace whose one job waits in its first step for a flag file; a real manager runs it."""
    ws = init(tmp_path / "ws", durable=False)
    flag = tmp_path / "go"
    job = scripted_job(
        {"prepare": {"action": "advance", "next_step": "collect", "wait_for": str(flag)}, "collect": {}},
        publish_scripted_runner(ws, tmp_path),
        tag="followed",
    )
    submit(ws, job, "f")
    ws.close()
    yield ws.root, job, flag
    flag.touch()  # release a runner a failed test left waiting


def test_follow_prints_each_transition_until_the_job_succeeds(
    running: tuple[Path, dict[str, Any], Path], invoke: Invoke
) -> None:
    root, job, flag = running
    follower = subprocess.Popen(
        [*HTTK, "job", "log", str(root), job["id"], "--follow", "--follow-timeout", str(WAIT_SECONDS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    manager = subprocess.Popen([sys.executable, "-c", MANAGER, str(root)])
    try:
        wait_until((root / ".httk-workflow" / "state" / "running" / "f").is_dir, "the job to run")
        shown = as_json(invoke("job", "show", root, job_key(job), "--json"))
        assert shown["kind"] == "running" and shown["owner"]["manager_live"] is True
        assert shown["owner"]["process"]["pid"] > 0
        assert shown["owner"]["manager_process_gone"] is False
        abi = landlock().abi
        confinement = shown["confinement"]
        assert confinement["enforced"] is (abi is not None) and confinement.get("abi") == abi
        text = ok(invoke("job", "show", root, job_key(job)))
        expected = "unavailable: " if abi is None else f"landlock ABI {abi}"
        assert any(line.startswith("confinement") and expected in line for line in text.splitlines()), text
        assert "launched" in ok(invoke("job", "log", root, "followed"))
        flag.touch()
        out, err = follower.communicate(timeout=WAIT_SECONDS)
    finally:
        flag.touch()
        manager.wait(timeout=WAIT_SECONDS)
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    lines = out.splitlines()
    assert "has no transition yet" in err or "submitted -> ready" in lines[0]
    assert [line.split()[1] for line in lines] == [f"g{n}" for n in range(1, 10)]
    assert "committing -> succeeded" in lines[-1]


def test_read_commands_import_nothing_heavy(built: Built) -> None:
    for words in (["workspace", "status"], ["job", "show"], ["job", "log"], ["job", "list"]):
        extra = ["two-steps"] if words[0] == "job" and words[1] != "list" else []
        code = f"import sys; sys.argv = {['httk', *words, str(built.root), *extra]!r}; "
        code += "from httk.workflow.cli._app import main; main()"
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert sorted(m for m in modules if m.split(".")[0] in ("jsonschema", "pydantic", "rich")) == []


DECLARING_RUNNER = """#!/usr/bin/env bash
set -euo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"
main() {
  httk_workflow_declare relax '{"outputs":{"energy":-5.4,"unit":"eV"}}'
  httk_workflow_declare found '{"files":["OUTCAR"]}'
  httk_workflow_succeed
}
httk_workflow_register_step main
httk_workflow_dispatch
"""


def test_show_puts_declared_and_observed_declarations_side_by_side(tmp_path: Path) -> None:
    """A job declares two documents in job.json; its runner observes one of them and one of its own."""
    root = tmp_path / "ws"
    init(root, durable=False).close()
    payload = tmp_path / "payload"
    payload.mkdir()
    (payload / "run.sh").write_text(DECLARING_RUNNER)
    (payload / "run.sh").chmod(0o755)
    declared = {"relax": {"inputs": {"structure": "POSCAR"}}, "method": {"code": "vasp"}}
    job = {
        **minimal_job(runner={"backend": "path", "path": "run.sh", "arguments": []}, initial_step="main"),
        "declarations": declared,
    }
    (payload / "job.json").write_text(json.dumps(job))
    httk = str(Path(sys.executable).with_name("httk"))
    for words in (["job", "submit", root, payload, "--placement", "decl"], ["run", root]):
        done = subprocess.run(
            [httk, "workflow", *map(str, words)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    key = job_key(job)
    observed_dir = root / "decl" / key / ".httk-job" / "declarations"
    (observed_dir / "broken.json").write_text("{not json")

    shown = subprocess.run(
        [httk, "workflow", "job", "show", str(root), key, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    declarations = json.loads(shown.stdout)["declarations"]
    broken = declarations[0]
    assert broken["name"] == "broken" and broken["declared"] is None and broken["observed"] is None
    assert broken["observed_problem"].startswith(
        f"invalid observed declaration {observed_dir / 'broken.json'}"
    )
    assert declarations[1:] == [
        {"name": "found", "declared": None, "observed": {"files": ["OUTCAR"]}, "observed_problem": None},
        {"name": "method", "declared": {"code": "vasp"}, "observed": None, "observed_problem": None},
        {
            "name": "relax",
            "declared": {"inputs": {"structure": "POSCAR"}},
            "observed": {"outputs": {"energy": -5.4, "unit": "eV"}},
            "observed_problem": None,
        },
    ]
    text = subprocess.run(
        [httk, "workflow", "job", "show", str(root), key], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    rows = {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in text}
    assert rows["declared relax"] == '{"inputs": {"structure": "POSCAR"}}'
    assert rows["observed relax"] == '{"outputs": {"energy": -5.4, "unit": "eV"}}'
    assert rows["declared found"] == "-" and rows["observed method"] == "-"
    assert rows["observed broken"].startswith("UNREADABLE: invalid observed declaration")
