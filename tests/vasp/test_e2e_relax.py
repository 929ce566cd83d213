"""The packaged workflows under the real manager, on a fault-free mock VASP."""

from __future__ import annotations

from pathlib import Path

from httk.workflow import models
from httk.workflow.vasp import VASP_RELAX, VASP_RELAX_STATIC, VASP_STATIC

from tests.vasp.e2e import run_manager, submit, workspace


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
