"""The transfer environment check (spec/03): what a destination lacks of what the jobs need.

The source describes its jobs from its own files and the destination judges them against its own:
settings (never the process environment), extensions, its runner store and the modules installed there.
``transfer send`` asks before anything moves; ``transfer import`` asks of the bundles it was given.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.ops._extensions import enable_extension
from httk.workflow.engine.ops._transfer_detach import detach_jobs
from httk.workflow.engine.ops._transfer_environment import environment_advisories, transfer_requirements
from httk.workflow.engine.ops._transfer_import import ImportStatus, import_bundles
from httk.workflow.protocol import TransferError

from tests.cli.newkit import httk
from tests.conftest import minimal_job
from tests.runners import submit
from tests.transferkit import EXTENSION, jobs_in, run_manager, transfer_workspace


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


# -- on the importing side ------------------------------------------------------------------------------
def _detached_with_needs(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    """A source with a setting and a transactional job, detached into ``out``; a target lacking both."""
    source = init(tmp_path / "a", durable=False, extensions=(EXTENSION, "transactional-data-v1"))
    source.change_settings({"vasp.command": "srun vasp_std", "manager.workers": 4})
    submit(source, minimal_job(data={"mode": "transactional"}), "p")
    transfer_workspace(tmp_path / "b").close()
    (tmp_path / "out").mkdir()
    run_manager(tmp_path / "a")
    detached = detach_jobs(attach(tmp_path / "a"), ["p"], tmp_path / "out")
    return tmp_path / "a", tmp_path / "b", [result.bundle for result in detached]


def test_an_import_advises_what_the_bundles_need_and_strict_refuses_changing_nothing(tmp_path: Path) -> None:
    _a, b, bundles = _detached_with_needs(tmp_path)
    manifest = json.loads((bundles[0] / ".httk-transfer" / "manifest.json").read_text())
    assert manifest["environment"]["settings"] == ["vasp.command"]  # the launch profile stays behind
    before = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))
    advised: list[str] = []

    with pytest.raises(TransferError, match=r"nothing was imported \(--strict-environment\)"):
        import_bundles(attach(b), bundles, "in", strict_environment=True, advise=advised.append)

    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == before
    assert len(advised) == 2, advised
    assert "does not enable transactional-data-v1" in advised[0]
    assert advised[1].startswith("setting vasp.command is set at the source but not at the destination")

    enable_extension(attach(b), "transactional-data-v1")
    attach(b).change_settings({"vasp.command": "mpirun vasp_std"})
    advised.clear()
    [imported] = import_bundles(attach(b), bundles, "in", strict_environment=True, advise=advised.append)
    assert advised == [] and imported.status == ImportStatus.IMPORTED


def test_a_bundle_made_before_the_environment_member_is_judged_by_its_jobs_alone(tmp_path: Path) -> None:
    _a, b, bundles = _detached_with_needs(tmp_path)
    for bundle in bundles:  # as the code before it wrote the manifest (and its copy, not the original)
        path = bundle / ".httk-transfer" / "manifest.json"
        manifest = json.loads(path.read_text())
        del manifest["environment"]
        path.unlink()
        path.write_text(json.dumps(manifest))
    advised: list[str] = []

    import_bundles(attach(b), bundles, "in", advise=advised.append)

    assert len(advised) == 1 and "does not enable transactional-data-v1" in advised[0]


def test_import_through_the_command_line_prints_advisories_and_strict_exits_2(tmp_path: Path) -> None:
    _a, b, bundles = _detached_with_needs(tmp_path)

    refused = httk("workflow", "transfer", "import", b, *bundles, "--placement", "in", "--strict-environment")

    assert refused.returncode == 2 and refused.stdout == ""
    lines = refused.stderr.splitlines()
    assert [line.split(":")[0] for line in lines] == ["advisory", "advisory", "error"], lines
    assert lines[-1].startswith(f"error: nothing was imported (--strict-environment): {b} lacks")
    assert all(bundle.is_dir() for bundle in bundles) and not (b / "in").exists()

    imported = httk("workflow", "transfer", "import", b, *bundles, "--placement", "in")
    assert imported.returncode == 0 and imported.stderr.count("advisory: ") == 2
    assert imported.stdout.startswith("imported ")


def test_import_json_carries_the_advisories_beside_the_rows_as_send_json_does(tmp_path: Path) -> None:
    _a, b, bundles = _detached_with_needs(tmp_path)

    imported = httk("workflow", "transfer", "import", b, *bundles, "--placement", "in", "--json")

    assert imported.returncode == 0, imported.stderr
    report = json.loads(imported.stdout)
    advised = [line.removeprefix("advisory: ") for line in imported.stderr.splitlines()]
    assert report["advisories"] == advised and len(advised) == 2
    assert report["workspace_id"] == attach(b, writable=False).workspace_id
    assert sorted(row["status"] for row in report["imported"]) == ["imported"] * len(bundles)
    assert {row["placement"] for row in report["imported"]} == {"in"}
