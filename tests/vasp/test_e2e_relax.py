"""The packaged workflows under the real manager, on a fault-free mock VASP."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

from httk.workflow import models
from httk.workflow.engine.manager._landlock import landlock
from httk.workflow.vasp import VASP_RELAX, VASP_RELAX_STATIC, VASP_STATIC

from tests.vasp.e2e import HTTK, Job, environment, httk, run_manager, submit, workspace
from tests.vasp.vaspkit import IRON_OXIDE, MOCK, SILICON, pseudo_library


def test_vasp_relax_repeats_until_consecutive_runs_agree_and_stores_results(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_RELAX, tmp_path / "in", tag="silicon")
    run_manager(ws)
    assert job.kind() == "succeeded"
    results = job.results()
    assert list(models.validator("vasp-results").iter_errors(results)) == []
    models.VaspResults.model_validate(results)
    assert results["format"] == "httk-workflow-vasp-results" and results["calculation"] == "relax"
    runs = results["runs"]
    assert len(runs) >= 3 and [r["outcome"] for r in runs][-1] == "converged"
    assert all(r["outcome"] == "repeat" for r in runs[:-1])
    relaxation = results["convergence"]["relaxation"]
    assert relaxation["converged"] and relaxation["energy_change"] <= relaxation["tolerance"] == 0.02
    assert (
        results["provenance"]["vasp_version"] == "6.4.2" and results["provenance"]["source"] == "vasprun.xml"
    )
    assert [d["titel"] for d in results["provenance"]["potcar"]] == ["PAW_PBE Si mock"]
    assert results["structure"]["volume"] < results["initial_structure"]["volume"]
    assert (job.payload / "data" / "CONTCAR").read_text().startswith("Si2 rattled")
    assert not (job.run / "WAVECAR").exists() and (job.run / "runs" / "01-relax" / "OUTCAR.gz").exists()
    kinds = [e["kind"] for e in job.events()]
    assert kinds[0] == "vasp.prepared" and kinds[-1] == "vasp.succeeded" and "vasp.repeat" in kinds
    # every attempt ran confined (the manager's default) wherever the kernel has Landlock
    confinements = job.confinements()
    assert confinements and all(c["enforced"] is (landlock().abi is not None) for c in confinements)


def test_vasp_static_is_one_run(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_STATIC, tmp_path / "in")
    run_manager(ws)
    assert job.kind() == "succeeded"
    results = job.results()
    assert list(models.validator("vasp-results").iter_errors(results)) == []
    assert results["calculation"] == "static" and len(results["runs"]) == 1
    assert results["convergence"]["relaxation"] is None and results["provenance"]["incar"]["NSW"] == 0


def test_vasp_relax_static_relaxes_then_computes_the_relaxed_structure(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_RELAX_STATIC, tmp_path / "in")
    run_manager(ws)
    assert job.kind() == "succeeded"
    results = job.results()
    stages = [r["stage"] for r in results["runs"]]
    assert stages[-1] == "static" and set(stages[:-1]) == {"relax"}
    assert results["calculation"] == "static" and results["convergence"]["relaxation"]["converged"]
    relaxed = [r for r in results["runs"] if r["stage"] == "relax"][-1]
    assert abs(results["energy"]["energy"] - relaxed["energy"]) < 0.05
    # collect reads it back generically: one record, whole, and its scalars as CSV columns
    (record,) = json.loads(httk("collect", str(ws), "--json", "--workflow", "vasp-relax-static").stdout)
    assert (record["job_key"], record["workflow"], record["degraded"]) == (
        job.key,
        "vasp-relax-static",
        False,
    )
    assert record["results"] == results and results["warnings"] == []
    (row,) = csv.DictReader(io.StringIO(httk("collect", str(ws), "--csv").stdout))
    assert float(row["results.energy.energy"]) == results["energy"]["energy"]
    assert row["results.provenance.vasp_version"] == "6.4.2" and row["results.calculation"] == "static"
    assert json.loads(httk("collect", str(ws), "--json", "--workflow", "vasp-relax").stdout) == []


def test_a_magnetic_static_keeps_its_wavefunctions_when_asked_and_reports_every_result(
    tmp_path: Path,
) -> None:
    """FeO gets ISPIN = 2 and moments by default; results.json holds what the issue lists."""
    ws = workspace(tmp_path)
    kept = submit(
        ws, VASP_STATIC, tmp_path / "in", poscar=IRON_OXIDE, inputs={"vasp.keep_wavefunctions": True}
    )
    removed = submit(ws, VASP_STATIC, tmp_path / "in", poscar=IRON_OXIDE)
    run_manager(ws)
    assert kept.kind() == removed.kind() == "succeeded"
    assert (kept.run / "WAVECAR").stat().st_size > 0 and (kept.run / "CHGCAR").stat().st_size > 0
    assert not (removed.run / "WAVECAR").exists() and not (removed.run / "CHGCAR").exists()
    results = removed.results()
    assert list(models.validator("vasp-results").iter_errors(results)) == []
    assert results["provenance"]["incar"]["ISPIN"] == 2
    energy = results["energy"]
    assert energy["free_energy"] is not None and energy["energy"] is not None
    assert energy["energy_per_atom"] == energy["energy"] / 2
    magnetization = results["magnetization"]
    assert magnetization["total"] > 0 and len(magnetization["sites"]) == 2
    assert len(results["forces"]) == 2 and len(results["stress"]) == 3 and results["pressure"] is not None
    assert results["convergence"]["electronic"] is True and results["convergence"]["ionic"] is None
    assert [d["element"] for d in results["provenance"]["potcar"]] == ["Fe", "O"]
    assert all(len(d["sha256"]) == 64 for d in results["provenance"]["potcar"])
    assert results["provenance"]["kpoints"]["source"] == "density 1000"


def test_job_new_makes_a_vasp_relax_that_a_manager_runs_to_success(tmp_path: Path) -> None:
    """The whole path in the operator's words: nothing but ``httk workflow`` commands and two files."""
    ws = tmp_path / "ws"
    httk("workspace", "init", str(ws), "--no-durable", "--extension", "transactional-data-v1")
    library = pseudo_library(tmp_path / "potcars")
    for name, value in (("vasp.command", MOCK), ("vasp.pseudo_library", str(library))):
        httk("workspace", "settings", "set", str(ws), name, value)
    (tmp_path / "POSCAR").write_text(SILICON)
    (tmp_path / "INCAR").write_text("EDIFF = 1E-7\n")

    made = subprocess.run(
        [
            HTTK,
            "workflow",
            "job",
            "new",
            str(ws),
            "--workflow",
            "vasp-relax",
            "--input",
            "structure=POSCAR",
            "--input",
            "incar=INCAR",
            "--input",
            "vasp.poll_seconds=0.05",
            "--tag",
            "silicon",
        ],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    key, payload = made.stdout.rstrip("\n").split("\t")
    job = Job(ws, str(Path(payload).parent.relative_to(ws)), key, key.removeprefix("silicon--"))
    run_manager(ws)

    assert job.kind() == "succeeded"
    shown = job.show()
    assert shown["job"]["workflow"] == "vasp-relax" and shown["data_path"] == str(job.payload / "data")
    results = job.results()
    assert results["calculation"] == "relax" and results["convergence"]["relaxation"]["converged"]
    assert results["provenance"]["incar"]["EDIFF"] == 1e-7  # the given INCAR's tag won
    assert (job.payload / "files" / "POSCAR").read_text() == SILICON
