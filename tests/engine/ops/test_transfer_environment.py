"""The transfer environment check (spec/03): what a destination lacks of what the jobs need.

The source describes its jobs from its own files and the destination judges them against its own:
settings (never the process environment), extensions, its runner store and the modules installed there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.ops._transfer_send import environment_advisories, transfer_requirements

from tests.conftest import minimal_job
from tests.runners import submit
from tests.transferkit import EXTENSION, jobs_in, transfer_workspace


def test_a_destination_lacking_an_extension_module_and_setting_is_told_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = init(tmp_path / "a", durable=False, extensions=(EXTENSION, "transactional-data-v1"))
    source.change_settings({"vasp.command": "srun vasp_std", "manager.workers": 4, "vasp.timeout": 60})
    transactional = minimal_job(data={"mode": "transactional"}, inputs={"vasp.timeout": 30})
    module = minimal_job(
        runner={"source": "installed", "path": "pkg:httk_no_such_module/run", "sha256": "0" * 64}
    )
    for job in (transactional, module):
        submit(source, job, "p")
    destination = transfer_workspace(tmp_path / "b")
    monkeypatch.setenv("HTTK_VASP_COMMAND", "set here, which says nothing about the destination")

    needs = transfer_requirements(source, ["p"])
    advisories = environment_advisories(destination, json.loads(json.dumps(needs)))

    assert needs["settings"] == ["vasp.command", "vasp.timeout"]  # the launch profile is the machine's
    assert len(advisories) == 3, advisories
    assert (
        "keep transactional data, and the destination does not enable transactional-data-v1" in advisories[0]
    )
    assert advisories[1].startswith("setting vasp.command is set at the source but not at the destination")
    assert "its installed runner cannot be reached at the destination" in advisories[2]
    assert "httk_no_such_module" in advisories[2]

    destination.change_settings({"vasp.command": "mpirun vasp_std"})
    assert len(environment_advisories(destination, needs)) == 2


def test_nothing_is_advised_when_the_destination_has_what_the_jobs_need(tmp_path: Path) -> None:
    source = transfer_workspace(tmp_path / "a")
    jobs_in(source, tmp_path, 2)
    destination = transfer_workspace(tmp_path / "b")

    assert environment_advisories(destination, transfer_requirements(source, ["p"])) == []
    assert environment_advisories(attach(tmp_path / "b"), transfer_requirements(source, ["nothing"])) == []
