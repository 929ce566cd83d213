"""``httk workflow transfer detach|import|list|show|abort`` as an operator types them, in real processes."""

from __future__ import annotations

import json
from pathlib import Path

from httk.workflow.engine.core._workspace import attach

from tests.cli.newkit import httk
from tests.runners import job_key
from tests.transferkit import EXTENSION, jobs_in, run_manager


def _workspaces(tmp_path: Path) -> tuple[Path, Path, Path]:
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    assert httk("workflow", "workspace", "init", a, "--no-durable", "--extension", EXTENSION).returncode == 0
    assert httk("workflow", "workspace", "init", b, "--no-durable").returncode == 0
    enabled = httk("workflow", "workspace", "extension", "enable", b, EXTENSION)
    assert enabled.returncode == 0, enabled.stderr
    out.mkdir()
    return a, b, out


def test_a_job_goes_out_and_comes_in_through_the_command_line(tmp_path: Path) -> None:
    a, b, out = _workspaces(tmp_path)
    ws = attach(a)
    [job] = jobs_in(ws, tmp_path, 1)
    ws.close()
    run_manager(a)
    key = job_key(job)

    detached = httk("workflow", "transfer", "detach", a, key, "--to", out, "--json")
    assert detached.returncode == 0, detached.stderr
    [row] = json.loads(detached.stdout)
    assert (row["job_key"], row["prior_kind"], row["bundle"]) == (key, "succeeded", str(out / key))
    listed = httk("workflow", "transfer", "list", a, "--json")
    assert [r["state"] for r in json.loads(listed.stdout)] == ["detached"]

    imported = httk("workflow", "transfer", "import", b, out / key, "--placement", "in")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == f"imported {key} (succeeded at in); acknowledged to its source\n"
    shown = json.loads(httk("workflow", "transfer", "show", a, row["transfer_id"]).stdout)
    assert shown["retired"]["outcome"] == "imported"
    log = httk("workflow", "job", "log", b, key, "--json")
    assert log.returncode == 0, log.stderr
    assert "transfer_detach" in log.stdout and "transfer_import" in log.stdout


def test_refusals_are_one_error_line_with_the_bad_input_status(tmp_path: Path) -> None:
    a, b, out = _workspaces(tmp_path)
    missing = httk("workflow", "transfer", "import", b, out / "nothing", "--placement", "in")
    assert missing.returncode == 2
    placed = b / "in" / "nothing"
    expected = f"error: {out / 'nothing'}: no such bundle (nor one placed at {placed} by an earlier import)\n"
    assert missing.stderr == expected
    no_dir = httk("workflow", "transfer", "detach", a, "x", "--to", tmp_path / "absent")
    assert no_dir.returncode == 2 and "the --to directory does not exist" in no_dir.stderr
    aborted = httk("workflow", "transfer", "abort", a, "0f0f0f0f-0000-4000-8000-000000000000")
    assert aborted.returncode == 2 and aborted.stderr.startswith("error: ")
