"""``httk workflow collect``: JSON, CSV and a table of the records, and a progress bar on a terminal only."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.ops._collect import collect_results

from tests.collectkit import HTTK, RESULTS, build
from tests.ptykit import ESCAPE, on_a_terminal
from tests.runners import job_key


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    return build(tmp_path_factory.mktemp("collect"))


def test_the_command_prints_json_csv_and_a_table(built: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    root, jobs = built

    def run(*options: str) -> str:
        done = subprocess.run(
            [HTTK, "workflow", "collect", str(root), *options], capture_output=True, text=True, check=True
        )
        assert done.stderr == ""  # no bar, no note: standard error is not a terminal here
        return done.stdout

    printed = json.loads(run("--json"))
    expected = [record.as_dict() for record in collect_results(attach(root, writable=False))]
    assert printed == expected and printed[0]["results"] == RESULTS
    assert json.loads(run("--json", "--placement", "c/x")) == []
    table = list(csv.DictReader(io.StringIO(run("--csv", "--workflow", "demo-a"))))
    assert [row["job_key"] for row in table] == [
        job_key(jobs[label]) for label in ("results", "warned", "not-json", "cancelled")
    ]
    first = table[0]
    assert (first["results.energy.e0"], first["results.energy.unit"], first["results.ok"]) == (
        "-10.5",
        "eV",
        "True",
    )
    assert "results.forces" not in first and first["degraded"] == "False" and first["problems"] == ""
    assert table[2]["results.energy.e0"] == "" and "is not valid JSON" in table[2]["problems"]
    text = run()
    assert re.search(rf"c/a/{job_key(jobs['results'])} +succeeded +demo-a +ok\n", text)
    assert re.search(
        rf"c/b/{job_key(jobs['missing'])} +succeeded +demo-b +data/results.json is missing\n", text
    )
    assert text.splitlines()[-1].startswith("8 finished jobs: 1 with results, 7 degraded (--json for the")
    refused = subprocess.run(
        [HTTK, "workflow", "collect", str(root), "--json", "--csv"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2 and "--json and --csv cannot be combined" in refused.stderr


def test_a_terminal_gets_a_progress_bar_and_json_none(built: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    root, _jobs = built
    status, shown = on_a_terminal(HTTK, "workflow", "collect", root)
    assert status == 0, shown
    assert ESCAPE in shown and "collecting results" in shown and "8 finished jobs" in shown
    status, shown = on_a_terminal(HTTK, "workflow", "collect", root, "--json")
    assert status == 0 and ESCAPE not in shown and "collecting results" not in shown
    assert len(json.loads(shown.replace("\r\n", "\n"))) == 8
