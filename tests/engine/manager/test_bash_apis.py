"""The Bash libraries a manager exports to its runners: the entry point group ``httk.workflow.bash_apis``.

An entry point's name is the variable, its value a callable returning the library's path. The SDK
registers ``HTTK_WORKFLOW_BASH_API`` this way, and an add-on (tests/addonkit.py, installed the way
importlib.metadata reads a distribution) its own; a manager resolves them once and puts every one in
every attempt's environment. An entry point that cannot be used is logged by name and skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.sdk.bash import bash_api_path

from tests.addonkit import ADDON_MODULE, environment, install_addon
from tests.runners import (
    current_marker,
    job_key,
    records,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    ws_fixture,  # noqa: F401 (a fixture)
)

GROUP = "httk.workflow.bash_apis"
HTTK = str(Path(sys.executable).with_name("httk"))
WHERE = f"(group {GROUP}, from fakeaddon 0.1)"


def addon_site(tmp_path: Path) -> Path:
    return install_addon(
        tmp_path / "site",
        {
            GROUP: {
                "HTTK_WORKFLOW_DEMO_BASH_API": f"{ADDON_MODULE}:library",
                "HTTK_WORKFLOW_BROKEN_BASH_API": f"{ADDON_MODULE}:broken_library",
                "HTTK_WORKFLOW_MISSING_BASH_API": f"{ADDON_MODULE}:missing_library",
                "PATH": f"{ADDON_MODULE}:library",
            }
        },
    )


def resolved(site: Path) -> dict[str, Any]:
    code = (
        "import json; from httk.workflow.engine.manager._launch import installed_bash_apis; "
        "found, problems = installed_bash_apis(); print(json.dumps({'found': found, 'problems': problems}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=environment(site, site.parent / "marks"),
    )
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_the_sdk_s_library_and_an_add_on_s_are_found_by_variable(tmp_path: Path) -> None:
    # Other installed packages (the VASP runners) register their libraries too: the add-on adds exactly one.
    bare = tmp_path / "bare"
    bare.mkdir()
    without = resolved(bare)["found"]
    assert without["HTTK_WORKFLOW_BASH_API"] == str(bash_api_path())
    site = addon_site(tmp_path)
    found = resolved(site)["found"]
    assert found == {**without, "HTTK_WORKFLOW_DEMO_BASH_API": str(site / ADDON_MODULE / "demo.sh")}
    assert bash_api_path().is_file()


def test_every_unusable_entry_point_is_named_with_why(tmp_path: Path) -> None:
    problems = resolved(addon_site(tmp_path))["problems"]
    assert problems == [
        f"entry point HTTK_WORKFLOW_BROKEN_BASH_API = {ADDON_MODULE}:broken_library {WHERE} cannot be used: "
        "RuntimeError: the demo library is broken",
        f"entry point HTTK_WORKFLOW_MISSING_BASH_API = {ADDON_MODULE}:missing_library {WHERE} names "
        "/nonexistent/demo.sh, which is not a file",
        f"entry point PATH = {ADDON_MODULE}:library {WHERE}: the name must be a variable such as "
        "HTTK_WORKFLOW_<NAME>_BASH_API",
    ]


def test_a_variable_two_distributions_export_keeps_the_sdk_s(tmp_path: Path) -> None:
    site = install_addon(tmp_path / "site", {GROUP: {"HTTK_WORKFLOW_BASH_API": f"{ADDON_MODULE}:library"}})
    document = resolved(site)
    bare = tmp_path / "bare"
    bare.mkdir()
    assert document["found"] == resolved(bare)["found"]
    assert document["found"]["HTTK_WORKFLOW_BASH_API"] == str(bash_api_path())
    [problem] = document["problems"]
    assert "HTTK_WORKFLOW_BASH_API is exported by another distribution already" in problem


def test_a_manager_gives_every_attempt_every_library_and_logs_the_broken_ones(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    site = addon_site(tmp_path)
    jobs = [scripted_job({"prepare": {"action": "succeed"}}, runner) for _ in range(2)]
    for job in jobs:
        submit(ws, job)
    manager = subprocess.run(
        [HTTK, "workflow", "manager", "run", "--inline", str(ws.root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment(site, tmp_path / "marks"),
    )
    assert manager.returncode == 0, manager.stderr
    assert f"entry point HTTK_WORKFLOW_BROKEN_BASH_API = {ADDON_MODULE}:broken_library" in manager.stderr
    assert manager.stderr.count("its variable is not exported to runners") == 3  # once per manager
    for job in jobs:
        assert current_marker(ws, job).kind.value == "succeeded"
        [record] = records(ws.payload_path("p", job_key(job)))
        assert record.env["HTTK_WORKFLOW_BASH_API"] == str(bash_api_path())
        assert record.env["HTTK_WORKFLOW_DEMO_BASH_API"] == str(site / ADDON_MODULE / "demo.sh")
        assert "HTTK_WORKFLOW_BROKEN_BASH_API" not in record.env
