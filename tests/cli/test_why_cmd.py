"""``job why`` and ``precheck`` on the command line: spellings, output, exit status, and writing nothing.

The workspace is built once per module by the real manager (``tests/inspectkit.py``); its manager's
heartbeat is then aged, so that manager is stale and the tests decide which managers are live.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import attach

from tests.cli.conftest import Invoke
from tests.inspectkit import Built, build, copy, snapshot
from tests.runners import WAIT_SECONDS, age_heartbeats
from tests.whykit import register


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("why-cli")
    made = build(base / "ws", base / "scratch")
    age_heartbeats(attach(made.root, durable=False))
    return made


def run(invoke: Invoke, *args: Any, code: int = 0) -> str:
    result = invoke(*args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return str(result.stdout)


# -- job why -----------------------------------------------------------------------------------------
def test_why_in_every_spelling(built: Built, invoke: Invoke) -> None:
    outputs = [
        run(invoke, "job", "why", built.root, "broken"),
        run(invoke, "job", "why", "--workspace", built.root, "broken"),
        run(invoke, "workflow", "job", "why", built.root, built.job_id("broken")),
    ]
    assert outputs[0] == outputs[1] == outputs[2]
    lines = outputs[0].splitlines()
    assert lines[0] == f"{built.key('broken')}: failed at proj-a/01 (generation 5)"
    assert lines[1] == "answer: failed: bad_input: the structure is unphysical"
    assert "next: httk job request continue --reason ... JOB (retries the current step)" in lines


def test_why_json_is_one_diagnosis_or_one_object_of_diagnoses(built: Built, invoke: Invoke) -> None:
    one = json.loads(run(invoke, "job", "why", built.root, "gpu", "--json"))
    assert (one["kind"], one["answer"], one["blocked"]) == ("ready", "no manager is live", True)
    assert one["history"]["line"] == "0 attempts across 1 activation at step 'prepare'; 0 after unclean exits"

    several = json.loads(run(invoke, "job", "why", built.root, "proj-a", "late", "--json"))
    keys = [diagnosis["job_key"] for diagnosis in several["diagnoses"]]
    assert sorted(keys) == sorted(
        built.key(label) for label in ("two_steps", "flaky", "broken", "paused", "late")
    )


def test_why_names_the_live_managers_unmet_requirement(built: Built, tmp_path: Path, invoke: Invoke) -> None:
    served = copy(built, tmp_path / "ws")
    register(attach(served.root, durable=False), "cpu-node")

    text = run(invoke, "job", "why", served.root, "gpu")

    assert (
        "answer: no live manager can claim it: manager cpu-node lacks pool 'gpu' (it serves default)" in text
    )
    assert text.rstrip().endswith("next: run a manager with --pool gpu")


def test_why_refuses_a_selector_that_names_nothing(built: Built, invoke: Invoke) -> None:
    result = invoke("job", "why", built.root, "nothing-matches-this")
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    assert invoke("job", "why", built.root).exit_code == 2  # no JOB


# -- precheck ----------------------------------------------------------------------------------------
def test_precheck_passes_without_live_managers_and_fails_on_an_unclaimable_job(
    built: Built, tmp_path: Path, invoke: Invoke
) -> None:
    text = run(invoke, "workflow", "precheck", built.root)
    assert "WARNING managers: no manager is live" in text
    assert text.rstrip().endswith("ok: 0 failing, 0 indeterminate, 2 ok")

    served = copy(built, tmp_path / "ws")
    register(attach(served.root, durable=False), "cpu-node")
    report = json.loads(run(invoke, "workflow", "precheck", "--workspace", served.root, "--json", code=1))
    assert report["status"] == "failing" and report["checked"] == 2
    [job] = report["jobs"]
    assert job["job_key"] == served.key("gpu")
    assert job["findings"][-1]["text"].startswith("no live manager can claim it: manager cpu-node lacks pool")


def test_precheck_takes_runner_search_paths_and_has_a_taskmanager_alias(built: Built, tmp_path: Path) -> None:
    from httk.workflow.cli._app import taskmanager_app
    from typer.testing import CliRunner

    result = CliRunner().invoke(
        taskmanager_app, ["precheck", str(built.root), "--runner-search-path", str(tmp_path), "--json"]
    )

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counts"] == {"failing": 0, "indeterminate": 0, "ok": 2}


# -- read-only -----------------------------------------------------------------------------------------
READS = [
    ["job", "why", "{ws}", "broken"],
    ["job", "why", "{ws}", "proj-a", "--json"],
    ["job", "why", "{ws}", "gpu"],
    ["job", "why", "{ws}", "late", "--json"],
    ["workflow", "precheck", "{ws}"],
    ["workflow", "precheck", "{ws}", "--json", "--runner-search-path", "/nonexistent"],
]


def test_why_and_precheck_write_nothing(built: Built, invoke: Invoke) -> None:
    before = snapshot(built.root)
    for words in READS:
        run(invoke, *[word.format(ws=built.root) for word in words])
    assert snapshot(built.root) == before


def test_as_real_processes_they_write_nothing_and_import_nothing_heavy(built: Built) -> None:
    before = snapshot(built.root)
    for words in (
        ["job", "why", str(built.root), "gpu"],
        ["workflow", "precheck", str(built.root), "--json"],
    ):
        code = f"import sys; sys.argv = {['httk', *words]!r}; from httk.workflow.cli._app import main; main()"
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            capture_output=True,
            text=True,
            timeout=WAIT_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert sorted(m for m in modules if m.split(".")[0] in ("jsonschema", "pydantic", "rich")) == []
    assert snapshot(built.root) == before
