"""``httk workflow workflows list`` and workflows from other distributions, through the real executable.

A workflow is data a distribution registers under ``httk.workflow.workflows``: a test distribution
installed below a temporary site directory (:mod:`tests.addonkit`) adds one, and ``workflows list``,
``job new --workflow`` and a real manager serve it without any change to the engine.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from httk.workflow.vasp import WORKFLOWS

from tests.addonkit import install_addon
from tests.cli.newkit import httk, init, markers

ROOT = Path(__file__).resolve().parents[2]
GROUP = "httk.workflow.workflows"
WORKFLOW_MODULE = "fake_httk_workflows"
WORKFLOW_SOURCE = """
from httk.workflow.sdk.packaged import PackagedWorkflow, WorkflowInput

HELLO = PackagedWorkflow(
    name="fake-hello",
    summary="Say hello with the demo's runner.",
    runner="pkg:fake_httk_workflows/hello.sh",
    initial_step="relax",
    inputs=(WorkflowInput("element", "what to relax", required=True),),
)
MISNAMED = HELLO
NOT_A_WORKFLOW = "a string"
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site directory holding a distribution that registers one workflow and three broken entries."""
    package = tmp_path / "site" / WORKFLOW_MODULE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(WORKFLOW_SOURCE))
    (package / "hello.sh").write_bytes((ROOT / "examples" / "runners" / "hello.sh").read_bytes())
    return tmp_path / "site"


def environment(site: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != "HTTK_WORKFLOW_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_every_packaged_workflow_is_listed_with_its_inputs() -> None:
    result = httk("workflow", "workflows", "list", "--json")
    assert result.returncode == 0, result.stderr
    listed = {entry["name"]: entry for entry in json.loads(result.stdout)}
    for workflow in WORKFLOWS:
        entry = listed[workflow.name]
        assert entry["summary"] == workflow.summary and entry["distribution"] == "httk-workflow-vasp"
        assert entry["inputs"] == [declared.describe() for declared in workflow.inputs]
        assert entry["extensions"] == ["transactional-data-v1"]
    structure = listed["vasp-relax"]["inputs"][0]
    assert structure["name"] == "structure" and structure["required"] is True and structure["kind"] == "file"


def test_the_text_listing_has_one_row_per_input() -> None:
    result = httk("workflow", "workflows", "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    relax = lines.index(f"vasp-relax: {WORKFLOWS[0].summary}")
    assert lines[relax + 1] == (
        "  starts at step relax; data transactional; workspace extensions transactional-data-v1"
    )
    assert lines[relax + 2].split() == ["input", "required", "default", "type", "meaning"]
    assert lines[relax + 4].split()[:4] == ["structure", "yes", "-", "file"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[relax + 4 : relax + 22]}
    assert rows["kpoint_density"] == ["no", "1000", "number"]
    assert rows["kpoint_style"] == ["no", "Gamma", "string"]
    assert rows["vasp.keep_wavefunctions"] == ["no", "false", "boolean"]


def test_a_workflow_another_distribution_adds_is_listed_made_and_run(site: Path, tmp_path: Path) -> None:
    install_addon(site, {GROUP: {"fake-hello": f"{WORKFLOW_MODULE}:HELLO"}}, name="fakeworkflows")
    env = environment(site)
    listed = json.loads(httk("workflow", "workflows", "list", "--json", env=env).stdout)
    [hello] = [entry for entry in listed if entry["name"] == "fake-hello"]
    assert hello["distribution"] == "fakeworkflows" and hello["entry_point"] == f"{WORKFLOW_MODULE}:HELLO"
    ws = init(tmp_path / "ws")

    refused = httk("workflow", "job", "new", ws, "--workflow", "fake-hello", env=env)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: input 'element': is required by workflow 'fake-hello'")
    made = httk("workflow", "job", "new", ws, "--workflow", "fake-hello", "--input", "element=Si", env=env)
    assert made.returncode == 0, made.stderr
    key = made.stdout.split("\t")[0]
    job = json.loads(Path(made.stdout.rstrip("\n").split("\t")[1], "job.json").read_text())
    assert job["inputs"] == {"element": "Si"} and job["runner"]["path"] == "pkg:fake_httk_workflows/hello.sh"

    ran = httk("workflow", "run", ws, "--runner-module", WORKFLOW_MODULE, env=env)
    assert ran.returncode == 0, ran.stderr
    [marker] = markers(ws, "succeeded")
    assert marker.name.startswith(f"{key}.")


def test_an_unusable_entry_point_is_reported_and_the_others_still_listed(site: Path) -> None:
    install_addon(
        site,
        {
            GROUP: {
                "fake-hello": f"{WORKFLOW_MODULE}:HELLO",
                "misnamed": f"{WORKFLOW_MODULE}:MISNAMED",
                "not-a-workflow": f"{WORKFLOW_MODULE}:NOT_A_WORKFLOW",
                "broken": "no_such_module_anywhere:WORKFLOW",
            }
        },
        name="fakeworkflows",
    )
    result = httk("workflow", "workflows", "list", env=environment(site))
    assert result.returncode == 1
    assert "fake-hello: Say hello with the demo's runner." in result.stdout
    assert "vasp-relax: " in result.stdout and "misnamed" not in result.stdout
    assert result.stderr.splitlines() == [
        "error: entry point broken = no_such_module_anywhere:WORKFLOW (fakeworkflows) does not load: "
        "ModuleNotFoundError: No module named 'no_such_module_anywhere'",
        f"error: entry point misnamed = {WORKFLOW_MODULE}:MISNAMED (fakeworkflows) describes the workflow "
        "'fake-hello', not 'misnamed'",
        f"error: entry point not-a-workflow = {WORKFLOW_MODULE}:NOT_A_WORKFLOW (fakeworkflows) is a str, "
        "not a PackagedWorkflow",
    ]
    shown = json.loads(httk("workflow", "workflows", "list", "--json", env=environment(site)).stdout)
    [broken] = [entry for entry in shown if entry["name"] == "broken"]
    assert broken == {
        "name": "broken",
        "problem": "does not load: ModuleNotFoundError: No module named 'no_such_module_anywhere'",
        "entry_point": "no_such_module_anywhere:WORKFLOW",
        "distribution": "fakeworkflows",
    }


def test_a_name_two_distributions_register_is_refused_by_job_new(site: Path, tmp_path: Path) -> None:
    install_addon(site, {GROUP: {"vasp-relax": f"{WORKFLOW_MODULE}:HELLO"}}, name="shadowing")
    ws = init(tmp_path / "ws", "transactional-data-v1")
    result = httk("workflow", "job", "new", ws, "--workflow", "vasp-relax", env=environment(site))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: workflow 'vasp-relax' cannot be used: entry point vasp-relax = ")
    assert line.endswith("is registered more than once, by several distributions")
    assert markers(ws, "submitted") == []
