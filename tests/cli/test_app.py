from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from httk.workflow.cli._reporting import error_line, exit_code
from httk.workflow.protocol import (
    InvalidDocumentError,
    InvalidNameError,
    JournalDamageError,
    JournalError,
    PolicyError,
    RunnerStoreError,
    SubmissionError,
    TransitionError,
    UnsafePathError,
    WorkspaceError,
    WorkspaceFormatError,
)

from tests.cli.conftest import Invoke, MakePayload, format_document

BIN = Path(sys.executable).parent


def command(name: str) -> list[str]:
    """The installed console script, or the same entry point through this interpreter."""
    script = BIN / name
    if script.is_file():
        return [str(script)]
    entry = "main" if name == "httk" else "taskmanager_main"
    return [sys.executable, "-c", f"from httk.workflow.cli._app import {entry}; {entry}()"]


def run(name: str, *args: str | Path, cwd: Path, debug: bool = False) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "HTTK_WORKFLOW_DEBUG"}
    if debug:
        env["HTTK_WORKFLOW_DEBUG"] = "1"
    return subprocess.run(
        [*command(name), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


# -- the exit-status table --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InvalidNameError("placement", "..", "no"), 2),
        (InvalidDocumentError("job.json", "runner.path", "bad"), 2),
        (UnsafePathError("job payload", "x", "symlink"), 2),
        (PolicyError("unknown policy member"), 2),
        (SubmissionError("different definition"), 2),
        (RunnerStoreError("needs --replace"), 2),
        (WorkspaceError("already a workspace"), 3),
        (WorkspaceFormatError("priority-bands-v1"), 3),
        (JournalError("disk full"), 1),
        (JournalDamageError("short_read", "ref", "detail"), 1),
        (TransitionError("lost"), 1),
        (PermissionError(errno.EACCES, "Permission denied", "/ws"), 1),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), None),
        (ValueError("a bug"), None),
    ],
)
def test_exit_codes(error: Exception, code: int | None) -> None:
    assert exit_code(error) == code


def test_an_error_is_one_line_with_its_notes() -> None:
    error = SubmissionError("first\nsecond")
    error.add_note("payload p")
    assert error_line(error) == "error: first second (payload p)"


def test_help_documents_the_groups_and_exit_codes(invoke: Invoke) -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for word in ("workflow", "workspace", "job", "Exit status", "HTTK_WORKFLOW_DEBUG"):
        assert word in result.stdout
    workflow = invoke("workflow", "--help").stdout
    for group in ("workspace", "job", "runner"):
        assert group in workflow


def test_debug_lets_the_error_propagate(tmp_path: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "policy", "show", tmp_path, env={"HTTK_WORKFLOW_DEBUG": "1"})
    assert isinstance(result.exception, WorkspaceFormatError)


def test_both_spellings_reach_the_same_workspace(tmp_path: Path, invoke: Invoke) -> None:
    assert invoke("workspace", "init", "--name", "runs", tmp_path / "a").exit_code == 0
    assert invoke("workflow", "workspace", "init", tmp_path / "b", "--name", "runs").exit_code == 0
    assert format_document(tmp_path / "a")["name"] == format_document(tmp_path / "b")["name"] == "runs"


# -- real processes ---------------------------------------------------------------------------------


def test_end_to_end(tmp_path: Path, make_payload: MakePayload) -> None:
    init = run("httk", "workspace", "init", "--name", "demo", "ws", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert init.stdout.startswith(f"initialized workspace {tmp_path / 'ws'}\n")
    policy = run(
        "httk", "workflow", "workspace", "policy", "set", "ws", "retention.journal_days", "90", cwd=tmp_path
    )
    assert policy.returncode == 0, policy.stderr
    setting = run("httk", "workspace", "settings", "set", "ws", "vasp.command", "vasp_std", cwd=tmp_path)
    assert setting.returncode == 0, setting.stderr
    payloads = [make_payload("a"), make_payload("b")]
    submit = run(
        "httk", "job", "submit", "--workspace", "ws", "--placement", "p/00", *payloads, "--json", cwd=tmp_path
    )
    assert submit.returncode == 0, submit.stderr
    assert [entry["status"] for entry in json.loads(submit.stdout)] == ["submitted", "submitted"]
    document = format_document(tmp_path / "ws")
    assert document["policy"]["retention"] == {"journal_days": 90}
    assert document["settings"] == {"vasp.command": "vasp_std"}


def test_taskmanager_alias(tmp_path: Path, make_payload: MakePayload) -> None:
    init = run("httk-taskmanager", "init", "ws", "--no-durable", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert format_document(tmp_path / "ws")["durable"] is False
    submit = run("httk-taskmanager", "submit", "ws", make_payload("a"), "--placement", "p", cwd=tmp_path)
    assert submit.returncode == 0, submit.stderr
    assert submit.stdout.endswith("\tp\tsubmitted\n")
    helped = run("httk-taskmanager", "--help", cwd=tmp_path)
    assert "init" in helped.stdout and "submit" in helped.stdout


def test_errors_are_one_line_unless_debugging(tmp_path: Path) -> None:
    plain = run("httk", "workspace", "policy", "show", "missing", cwd=tmp_path)
    assert plain.returncode == 3
    assert plain.stderr == f"error: {tmp_path / 'missing'}: not a workspace: no .httk-workflow/format.json\n"
    debug = run("httk", "workspace", "policy", "show", "missing", cwd=tmp_path, debug=True)
    assert debug.returncode == 1
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert f"WorkspaceFormatError: {tmp_path / 'missing'}: not a workspace" in debug.stderr


def test_python_dash_m(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "httk.workflow.cli", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert "Usage: httk" in result.stdout


def test_loading_the_command_line_imports_nothing_heavy(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import httk.workflow.cli._app"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    modules = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "httk.workflow.cli._app" in modules
    heavy = ("jsonschema", "pydantic", "httk.workflow.engine", "rich")
    assert sorted(m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy)) == []
