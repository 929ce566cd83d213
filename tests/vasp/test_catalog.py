"""The error catalog: each row is found in what the mock writes for its fault; the README says the same."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from httk.workflow.vasp import CATALOG, REMEDIES, Incar, RunReport, diagnose, read_outputs
from httk.workflow.vasp._catalog import BY_NAME

from tests.vasp.vaspkit import MOCK, RELAX_INCAR, calculation

README = Path(__file__).resolve().parents[2] / "packages" / "vasp-runners" / "README.md"

# The mock fault that makes each derived row happen (a text row's fault has the row's name).
DERIVED_FAULTS = {"walltime": "walltime@2", "nelm": "nelm@2", "ionic": "nsw", "crash": "crash@2"}
DERIVED_INCAR = {
    "nelm": "IBRION = 2\nISIF = 2\nNSW = 4\nNELM = 30\nEDIFF = 1E-6\n",
    "ionic": "IBRION = 2\nISIF = 3\nNSW = 5\nEDIFFG = -0.001\n",
}


def run_to_files(directory: Path, fault: str) -> RunReport:
    """The mock with one fault, its output in vasp.out and vasp.err as the runner keeps it."""
    with open(directory / "vasp.out", "wb") as out, open(directory / "vasp.err", "wb") as err:
        status = subprocess.run(
            [MOCK, f"--fault={fault}"], cwd=directory, stdout=out, stderr=err, check=False
        )
    return RunReport(status=status.returncode, seconds=0.0, argv=[MOCK])


@pytest.mark.parametrize("row", [row.name for row in CATALOG])
def test_every_row_is_found_first_in_the_output_of_its_mock_fault(tmp_path: Path, row: str) -> None:
    incar = DERIVED_INCAR.get(row, RELAX_INCAR)
    run = calculation(tmp_path / "run", incar=incar)
    report = run_to_files(run, DERIVED_FAULTS.get(row, f"{row}@2"))
    found = diagnose(run, read_outputs(run), report, Incar.parse(incar))
    assert found.first == row, (found.problems, found.evidence)
    assert found.evidence[row]


def test_a_clean_run_has_no_problem(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    report = run_to_files(run, "zpotrf*0")
    assert report.status == 0
    assert diagnose(run, read_outputs(run), report, Incar.parse(RELAX_INCAR)).problems == []


def test_a_run_the_runner_stopped_is_not_a_crash(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    (run / "STOPCAR").write_text("LABORT = .TRUE.\n")
    report = run_to_files(run, "zpotrf*0")
    report.stopped = "timeout"
    found = diagnose(run, read_outputs(run), report, Incar.parse(RELAX_INCAR))
    assert found.problems == ["walltime"]  # the time limit, neither NELM nor a crash
    report.stopped, report.status = "error:brmix", -signal.SIGTERM
    assert diagnose(run, read_outputs(run), report, Incar.parse(RELAX_INCAR)).problems == []


def _readme_rows() -> dict[str, list[str]]:
    text = README.read_text()
    table = text[text.index("| Problem | custodian |") :].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells
    return rows


def test_the_readme_table_is_the_catalog() -> None:
    rows = _readme_rows()
    assert list(rows) == [row.name for row in CATALOG]
    for row in CATALOG:
        _, custodian, signatures, stops, ladder, failure = rows[row.name]
        assert custodian == (row.custodian or "—")
        assert re.findall(r"`([^`]+)`", signatures) == list(row.signatures)
        assert stops == ("yes" if row.stop_running else "no")
        times = "\N{MULTIPLICATION SIGN}"
        expected = [f"`{r.remedy}`" + (f" {times}{r.budget}" if r.budget > 1 else "") for r in row.ladder]
        assert ladder.split(" → ") == expected
        assert failure == f"`{row.failure}`"


def test_the_readme_describes_every_remedy() -> None:
    text = README.read_text()
    table = text[text.index("| remedy | change |") :].split("\n\n", 1)[0]
    described = set(re.findall(r"`(\w+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:])))
    assert described == set(REMEDIES)
    used = {rung.remedy for row in CATALOG for rung in row.ladder}
    assert used <= set(REMEDIES)
    assert all(rung.budget >= 1 for row in CATALOG for rung in row.ladder)


def test_rows_are_unique_and_their_failures_namespaced() -> None:
    assert len(BY_NAME) == len(CATALOG)
    assert {row.failure for row in CATALOG} == {
        "vasp.unrecoverable",
        "vasp.nonconvergent",
        "vasp.interrupted",
    }
    required = {
        "zpotrf",
        "brmix",
        "edddav",
        "subspacematrix",
        "tet",
        "inv_rot_mat",
        "pricel",
        "rspher",
        "zbrent",
        "posmap",
        "too_few_bands",
        "real_optlay",
        "grad_not_orth",
        "fexcf",
        "rot_matrix",
        "nelm",
        "ionic",
        "walltime",
    }
    assert required <= set(BY_NAME)
