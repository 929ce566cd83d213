"""The packaged VASP workflows as descriptors: entry points, payloads, and refusals of bad inputs."""

from __future__ import annotations

import json
import os
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from httk.workflow.protocol._job_rules import validate_job
from httk.workflow.sdk.packaged import PackagedWorkflow, WorkflowInputError, build_payload, runner_file
from httk.workflow.vasp import VASP_RELAX, VASP_RELAX_BASH, VASP_RELAX_STATIC, VASP_STATIC, WORKFLOWS

from tests.vasp.vaspkit import IRON_OXIDE, SILICON, pseudo_library

NO_SPECIES = "\n".join(line for index, line in enumerate(SILICON.splitlines()) if index != 5) + "\n"


def test_the_four_workflows_are_registered_entry_points() -> None:
    found = {ep.name: ep.load() for ep in entry_points(group="httk.workflow.workflows")}
    assert found == {w.name: w for w in WORKFLOWS}
    assert [w.name for w in WORKFLOWS] == [
        "vasp-relax",
        "vasp-static",
        "vasp-relax-static",
        "vasp-relax-bash",
    ]
    for workflow in WORKFLOWS:
        assert isinstance(workflow, PackagedWorkflow)
        assert workflow.extensions == ("transactional-data-v1",) and workflow.data_mode == "transactional"
        assert workflow.workdir_mode == "persistent" and workflow.runner.startswith("pkg:httk.workflow.vasp/")
        assert os.access(runner_file(workflow.runner), os.X_OK)
    assert (VASP_RELAX.initial_step, VASP_STATIC.initial_step, VASP_RELAX_STATIC.initial_step) == (
        "relax",
        "static",
        "relax",
    )
    assert VASP_RELAX.arguments == ("vasp-relax",) and VASP_RELAX_BASH.arguments == ()


def test_the_bash_api_is_a_registered_entry_point() -> None:
    (api,) = [
        ep for ep in entry_points(group="httk.workflow.bash_apis") if ep.name == "HTTK_WORKFLOW_VASP_BASH_API"
    ]
    path = Path(api.load()())
    assert path.is_absolute() and path.is_file() and path.name == "httk-workflow-vasp.sh"


def _files(tmp_path: Path, **texts: str) -> dict[str, str]:
    paths = {}
    for name, text in texts.items():
        path = tmp_path / f"user-{name}"
        path.write_text(text)
        paths[name] = str(path)
    return paths


def test_a_payload_of_every_input_kind_is_a_valid_job(tmp_path: Path) -> None:
    library = pseudo_library(tmp_path / "lib", "Fe", "O")
    potcar = (library / "Fe" / "POTCAR").read_text() + (library / "O" / "POTCAR").read_text()
    files = _files(
        tmp_path, structure=IRON_OXIDE, incar="ISPIN = 2\n", kpoints="k\n0\nGamma\n2 2 2\n", potcar=potcar
    )
    payload = build_payload(
        VASP_RELAX_STATIC,
        {**files, "kpoint_density": "500", "vasp.timeout": "3600", "vasp.keep_wavefunctions": "true"},
        tmp_path / "payload",
        tag="feo",
    )
    job = json.loads((payload / "job.json").read_text())
    validate_job(job)
    assert job["runner"]["arguments"] == ["vasp-relax-static"]
    assert job["inputs"]["structure"] == "files/POSCAR" and job["inputs"]["potcar"] == "files/POTCAR"
    assert job["inputs"]["vasp.timeout"] == 3600 and job["inputs"]["vasp.keep_wavefunctions"] is True
    assert sorted(p.name for p in (payload / "files").iterdir()) == ["INCAR", "KPOINTS", "POSCAR", "POTCAR"]


@pytest.mark.parametrize(
    ("texts", "values", "name", "fragment"),
    [
        ({"structure": "Si\n5.43\n0 .5 .5\n"}, {}, "structure", "line 4 is missing"),
        ({"structure": NO_SPECIES}, {}, "structure", "line 6: has no species line"),
        ({"structure": SILICON}, {"species": ""}, "species", "must name the species"),
        ({"structure": SILICON, "incar": "ISMEAR 0\n"}, {}, "incar", "'ISMEAR 0' is not TAG = value"),
        (
            {"structure": SILICON, "kpoints": "k\n0\nGamma\n4 x 4\n"},
            {},
            "kpoints",
            "three positive subdivisions",
        ),
        (
            {
                "structure": SILICON,
                "potcar": "  PAW_PBE O mock\n TITEL = PAW_PBE O mock\n ZVAL = 6\n End of Dataset\n",
            },
            {},
            "potcar",
            "holds datasets for O, but the structure's species are Si",
        ),
        (
            {"structure": SILICON},
            {"kpoint_style": "Hexagonal"},
            "kpoint_style",
            "must be one of Gamma, Monkhorst-Pack",
        ),
        ({"structure": SILICON}, {"kpoint_density": "-5"}, "kpoint_density", "must be a positive number"),
        (
            {"structure": SILICON},
            {"vasp.pseudopotentials": "Fe:Fe_pv"},
            "vasp.pseudopotentials",
            "is not ELEMENT=CHOICE",
        ),
        ({"structure": SILICON}, {"magic": "1"}, "magic", "is not an input of workflow 'vasp-relax'"),
    ],
)
def test_bad_inputs_are_refused_naming_the_input_before_anything_is_written(
    tmp_path: Path, texts: dict[str, str], values: dict[str, str], name: str, fragment: str
) -> None:
    with pytest.raises(WorkflowInputError, match=re.escape(fragment)) as raised:
        build_payload(VASP_RELAX, {**_files(tmp_path, **texts), **values}, tmp_path / "payload")
    assert raised.value.name == name
    if name in texts:  # a file's refusal names the user's own file, not the payload's copy
        assert raised.value.message.startswith(f"{tmp_path / f'user-{name}'}"), raised.value.message
    assert not (tmp_path / "payload").exists()


def test_a_poscar_without_its_species_line_is_accepted_with_the_species_input(tmp_path: Path) -> None:
    payload = build_payload(
        VASP_STATIC, {**_files(tmp_path, structure=NO_SPECIES), "species": "Si"}, tmp_path / "p"
    )
    assert json.loads((payload / "job.json").read_text())["inputs"]["species"] == "Si"
