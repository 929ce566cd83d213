"""httk.workflow.sdk.packaged: descriptors, build_payload, and every refusal before anything is written."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.protocol._job_rules import validate_job
from httk.workflow.sdk import SdkError
from httk.workflow.sdk.packaged import (
    PackagedWorkflow,
    WorkflowInput,
    WorkflowInputError,
    build_payload,
    resolve_inputs,
    runner_digest,
    runner_file,
)

RUNNER = "pkg:httk.workflow.vasp/runners/vasp"


def workflow(**overrides: Any) -> PackagedWorkflow:
    values: dict[str, Any] = {
        "name": "demo",
        "summary": "A demonstration.",
        "runner": RUNNER,
        "arguments": ("vasp-static",),
        "initial_step": "static",
        "inputs": (
            WorkflowInput("structure", "a POSCAR", required=True, kind="file", destination="POSCAR"),
            WorkflowInput("density", "k-points per atom", default=1000, value_type="number"),
            WorkflowInput("repeats", "at most", value_type="integer"),
            WorkflowInput("keep", "keep files", value_type="boolean"),
            WorkflowInput("choices", "a JSON object", value_type="json"),
            WorkflowInput("label", "free text"),
        ),
        "data_mode": "transactional",
        "extensions": ("transactional-data-v1",),
    }
    values.update(overrides)
    return PackagedWorkflow(**values)


def test_a_payload_is_job_json_and_files_with_the_runner_pinned(tmp_path: Path) -> None:
    (tmp_path / "POSCAR").write_text("Si\n")
    inputs = {"structure": str(tmp_path / "POSCAR"), "density": "2000", "repeats": "3", "keep": "yes"}
    payload = build_payload(
        workflow(), {**inputs, "choices": '{"Fe": "Fe_pv"}', "label": "x"}, tmp_path / "p", tag="si"
    )
    job = json.loads((payload / "job.json").read_text())
    validate_job(job)  # what submission accepts
    assert job["tag"] == "si" and job["workflow"] == "demo" and job["initial_step"] == "static"
    assert job["runner"] == {
        "backend": "path",
        "path": RUNNER,
        "arguments": ["vasp-static"],
        "source": "installed",
        "sha256": hashlib.sha256(runner_file(RUNNER).read_bytes()).hexdigest(),
    }
    assert job["inputs"] == {
        "structure": "files/POSCAR",
        "density": 2000,
        "repeats": 3,
        "keep": True,
        "choices": {"Fe": "Fe_pv"},
        "label": "x",
    }
    assert job["workdir"] == {"mode": "persistent", "path": "run"} and job["data"] == {
        "mode": "transactional"
    }
    assert (payload / "files" / "POSCAR").read_text() == "Si\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["POSCAR", "p"]  # no staging left behind


@pytest.mark.parametrize(
    ("inputs", "name", "fragment"),
    [
        ({}, "structure", "is required by workflow 'demo'"),
        (
            {"structure": "POSCAR", "nonsense": 1},
            "nonsense",
            "is not an input of workflow 'demo' (its inputs:",
        ),
        ({"structure": "missing/POSCAR"}, "structure", "cannot read"),
        ({"structure": 42}, "structure", "needs a path"),
        ({"structure": "POSCAR", "density": "many"}, "density", "must be a number, not 'many'"),
        ({"structure": "POSCAR", "repeats": 2.5}, "repeats", "must be an integer"),
        ({"structure": "POSCAR", "keep": "perhaps"}, "keep", "must be a boolean"),
        ({"structure": "POSCAR", "choices": "{"}, "choices", "must be a JSON value"),
        ({"structure": "POSCAR", "label": 3}, "label", "must be a string"),
    ],
)
def test_bad_inputs_are_refused_naming_the_input_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inputs: dict[str, Any], name: str, fragment: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "POSCAR").write_text("Si\n")
    with pytest.raises(WorkflowInputError, match=re.escape(fragment)) as raised:
        build_payload(workflow(), inputs, tmp_path / "p")
    assert raised.value.name == name and str(raised.value).startswith(f"input {name!r}: ")
    assert not (tmp_path / "p").exists()


def test_the_workflows_check_runs_before_anything_is_written(tmp_path: Path) -> None:
    seen: list[tuple[Any, Any]] = []

    def refuse(inputs: Any, sources: Any) -> None:
        seen.append((dict(inputs), dict(sources)))
        raise WorkflowInputError("structure", f"{sources['structure']}: is not a crystal")

    (tmp_path / "si.vasp").write_text("x\n")
    given = {"structure": str(tmp_path / "si.vasp"), "density": 10}
    with pytest.raises(WorkflowInputError, match=re.escape(f"{tmp_path / 'si.vasp'}: is not a crystal")):
        build_payload(workflow(check=refuse), given, tmp_path / "p")
    assert seen == [({"structure": b"x\n", "density": 10}, {"structure": tmp_path / "si.vasp"})]
    assert not (tmp_path / "p").exists()


def test_an_existing_directory_and_an_unknown_runner_are_refused(tmp_path: Path) -> None:
    (tmp_path / "POSCAR").write_text("x\n")
    (tmp_path / "p").mkdir()
    with pytest.raises(SdkError, match="already exists"):
        build_payload(workflow(), {"structure": str(tmp_path / "POSCAR")}, tmp_path / "p")
    with pytest.raises(SdkError, match="has no resource 'runners/none'"):
        runner_digest("pkg:httk.workflow.vasp/runners/none")
    with pytest.raises(SdkError, match="only pkg:"):
        runner_digest("files/runner")


def test_resolve_inputs_reads_files_as_bytes(tmp_path: Path) -> None:
    (tmp_path / "POSCAR").write_bytes(b"Si\n")
    resolved = resolve_inputs(workflow(), {"structure": "POSCAR", "density": 10}, base=tmp_path)
    assert resolved == {"structure": b"Si\n", "density": 10}


def test_descriptors_describe_themselves_for_workflows_list() -> None:
    described = workflow().describe()
    assert described["name"] == "demo" and described["extensions"] == ["transactional-data-v1"]
    assert described["inputs"][1] == {
        "name": "density",
        "required": False,
        "default": 1000,
        "kind": "value",
        "value_type": "number",
        "meaning": "k-points per atom",
    }
    assert described["inputs"][0]["value_type"] is None  # a file input has no value type


def test_the_sdk_does_not_import_the_packaged_module() -> None:
    code = (
        "import sys, httk.workflow.sdk\n"
        "print('httk.workflow.sdk.packaged' in sys.modules, 'dataclasses' in sys.modules)"
    )
    assert subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split() == [
        "False",
        "False",
    ]
