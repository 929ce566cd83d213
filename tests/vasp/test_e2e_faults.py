"""Every catalog fault of the mock under the real manager, and the remedies, failures and stops around it.

One workspace runs the whole catalog at once: a job per row, each with its fault striking the first run
only, must end succeeded with that row remedied first. The other tests follow one case each through the
product: a ladder exhausted, an error VASP runs on with stopped by the monitor, the runner's own time
limit through each stop stage, a crash with truncated files, a missing command.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from httk.workflow.vasp import CATALOG, VASP_RELAX, VASP_STATIC
from httk.workflow.vasp.mock._faults import FAULTS

from tests.vasp.e2e import httk, mock_command, run_manager, submit, workspace
from tests.vasp.vaspkit import IRON_OXIDE, pseudo_library

# Rows whose fault needs a relaxation (a later ionic step, or NSW) and the fault that triggers each.
RELAXATION_ROWS = {
    "walltime": "walltime@2*1",
    "ionic": "nsw*1",
    "crash": "crash@2*1",
    "zbrent": "zbrent@2*1",
    "brions": "brions@2*1",
}
# Rows whose error only happens with settings the defaults avoid: the jobs that meet them have these.
CIRCUMSTANCES: dict[str, dict[str, str]] = {
    "ionic": {"incar": "IBRION = 2\nISIF = 3\nNSW = 12\n"},
    "real_optlay": {"incar": "LREAL = Auto\n"},
    "rspher": {"incar": "LREAL = Auto\n"},
    "tetirr": {"incar": "ISMEAR = -5\n", "kpoint_style": "Monkhorst-Pack"},
    "incorrect_shift": {"kpoint_style": "Monkhorst-Pack"},
}


# The mock's faults the catalog's rows do not name: the runner's own time limit meets them.
TIMEOUT_FAULTS = {"hang@2*1": "sigterm", "hang-hard@2*1": "sigkill"}


def _row_fault(name: str) -> str:
    return RELAXATION_ROWS.get(name, f"{name}*1")


# The rows a default test run covers (one per kind of fault: a fatal error, an error VASP runs on with, a
# derived row each, one needing its circumstances); ./dev vasp-matrix runs every row.
SUBSET = ("zpotrf", "subspacematrix", "rspher", "fexcf", "nelm", "walltime", "ionic", "crash")


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param(SUBSET, id="subset"),
        pytest.param(tuple(row.name for row in CATALOG), id="every-row", marks=pytest.mark.vasp_matrix),
    ],
)
def test_every_catalog_row_is_remedied_under_the_real_manager(tmp_path: Path, rows: tuple[str, ...]) -> None:
    ws = workspace(tmp_path)
    jobs = {}
    for row in (r for r in CATALOG if r.name in rows):
        relaxation = row.name in RELAXATION_ROWS
        fault = _row_fault(row.name)
        inputs: dict[str, object] = {"vasp.command": mock_command(fault)}
        for name, value in CIRCUMSTANCES.get(row.name, {}).items():
            inputs[name] = str(_incar(tmp_path, value)) if name == "incar" else value
        jobs[row.name] = submit(
            ws,
            VASP_RELAX if relaxation else VASP_STATIC,
            tmp_path / "in",
            placement=f"matrix/{row.name}",
            inputs=inputs,
        )
    run_manager(ws, "--workers", "2")
    for name, job in jobs.items():
        assert job.kind() == "succeeded", (name, job.show().get("failure"))
        results = job.results()
        assert results["runs"][0]["problems"][0] == name, results["runs"][0]
        assert results["remedies"][0]["problem"] == name
        kinds = [event["kind"] for event in job.events()]
        assert "vasp.error" in kinds and "vasp.remedy" in kinds


def _incar(root: Path, text: str) -> Path:
    path = root / f"INCAR.{abs(hash(text))}"
    path.write_text(text)
    return path


def test_a_remedy_backs_up_the_inputs_and_records_the_fix(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_STATIC, tmp_path / "in", inputs={"vasp.command": mock_command("zpotrf*1")})
    run_manager(ws)
    assert job.kind() == "succeeded"
    remedy = job.results()["remedies"][0]
    assert (remedy["problem"], remedy["remedy"], remedy["rung"]) == ("zpotrf", "no_symmetry", 1)
    backup = job.run / remedy["backup"]
    assert "ISYM" not in (backup / "INCAR").read_text() and "ISYM = 0" in (job.run / "INCAR").read_text()
    assert remedy["before"]["INCAR"] != remedy["after"]["INCAR"]
    assert job.results()["provenance"]["incar"]["ISYM"] == 0
    state = job.state()
    assert state["ladders"] == {"zpotrf": {"rung": 0, "uses": 1}} and state["pending"] is None
    # The fix history reaches job show and job why through the generic runner events, not VASP code.
    events = job.show()["events"]["events"]
    (told,) = [event for event in events if event["kind"] == "vasp.remedy"]
    assert {k: told["details"][k] for k in ("before", "after")} == {k: remedy[k] for k in ("before", "after")}
    why = httk("job", "why", str(ws), job.key).stdout
    assert "vasp.error  run 1: zpotrf" in why and "vasp.remedy  zpotrf: " in why


def test_an_exhausted_ladder_fails_the_job_naming_every_remedy_tried(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_STATIC, tmp_path / "in", inputs={"vasp.command": mock_command("zpotrf")})
    run_manager(ws)
    assert job.kind() == "failed"
    failure = job.show()["failure"]
    assert failure["code"] == "vasp.unrecoverable" and "zpotrf persists" in failure["message"]
    tried = [entry["remedy"] for entry in failure["details"]["remedies"]]
    assert tried == ["no_symmetry", "perturb_structure", "expand_cell"]  # halve_potim: not a relaxation
    assert job.events()[-1]["kind"] == "vasp.failed"


def test_an_error_vasp_runs_on_with_is_stopped_by_the_monitor(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(
        ws, VASP_STATIC, tmp_path / "in", inputs={"vasp.command": mock_command("brmix*1", step_seconds=0.05)}
    )
    run_manager(ws)
    assert job.kind() == "succeeded"
    first = job.state()["runs"][0]
    assert (first["stopped"], first["problems"]) == ("error:brmix", ["brmix"])
    assert (
        job.results()["remedies"][0]["remedy"] == "kerker_mixing"
    )  # continue_from_contcar: not a relaxation


def test_every_fault_of_the_mock_runs_under_the_manager_in_this_module() -> None:
    """The matrix (a fault per catalog row) and the time-limit tests together inject every mock fault."""
    injected = [_row_fault(row.name) for row in CATALOG] + list(TIMEOUT_FAULTS)
    assert {fault.split("@")[0].split("*")[0] for fault in injected} == set(FAULTS)


@pytest.mark.parametrize(("fault", "stage"), list(TIMEOUT_FAULTS.items()))
def test_the_runner_enforces_vasp_timeout_through_the_stop_stages(
    tmp_path: Path, fault: str, stage: str
) -> None:
    ws = workspace(tmp_path, settings={"vasp.stop_grace": 0.2, "vasp.kill_grace": 0.2})
    job = submit(
        ws, VASP_RELAX, tmp_path / "in", inputs={"vasp.command": mock_command(fault), "vasp.timeout": 2}
    )
    run_manager(ws)
    assert job.kind() == "succeeded"
    first = job.state()["runs"][0]
    assert (first["stopped"], first["problems"]) == ("timeout", ["walltime"])
    assert job.results()["remedies"][0]["remedy"] == "continue_from_contcar"
    runs = job.state()["runs"]
    assert runs[0]["status"] == (-15 if stage == "sigterm" else -9)


def test_a_crash_with_truncated_restart_files_starts_again_clean(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = submit(ws, VASP_RELAX, tmp_path / "in", inputs={"vasp.command": mock_command("crash@3*1")})
    run_manager(ws)
    assert job.kind() == "succeeded"
    first, remedy = job.state()["runs"][0], job.results()["remedies"][0]
    assert first["problems"] == ["crash"] and first["status"] == 174
    assert remedy["remedy"] == "fresh_start" and sorted(remedy["deleted"]) == ["CHGCAR", "WAVECAR"]


def test_without_vasp_command_the_job_fails_with_command_missing(tmp_path: Path) -> None:
    ws = workspace(tmp_path, command="")
    job = submit(ws, VASP_STATIC, tmp_path / "in")
    run_manager(ws)
    assert job.kind() == "failed"
    failure = job.show()["failure"]
    assert failure["code"] == "vasp.command_missing" and "vasp.command is not set" in failure["message"]
    assert not (job.run / "POSCAR").exists()  # refused before anything was prepared


def test_inputs_only_the_runner_can_judge_fail_the_job_naming_them(tmp_path: Path) -> None:
    """What build_payload cannot see -- the workspace's POTCAR library, the program vasp.command names --
    the runner refuses before VASP starts, with the failure naming what is wrong."""
    ws = workspace(tmp_path)
    si_only = pseudo_library(tmp_path / "si-only", "Si")
    no_iron = submit(
        ws, VASP_STATIC, tmp_path / "in", poscar=IRON_OXIDE, inputs={"vasp.pseudo_library": str(si_only)}
    )
    no_program = submit(ws, VASP_STATIC, tmp_path / "in", inputs={"vasp.command": str(tmp_path / "no-vasp")})
    run_manager(ws)
    assert no_iron.kind() == no_program.kind() == "failed"
    failure = no_iron.show()["failure"]
    assert failure["code"] == "vasp.input_invalid" and "Fe" in failure["message"], failure
    assert not (no_iron.run / "INCAR").exists()
    failure = no_program.show()["failure"]
    assert failure["code"] == "vasp.command_unavailable" and "no-vasp" in failure["message"], failure
    assert [e["kind"] for e in no_program.events()][-1] == "vasp.failed"
