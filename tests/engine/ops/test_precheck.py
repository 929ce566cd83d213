"""``precheck``: pending jobs checked for runners and claimability, the environment, and the verdict."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.manager._launch import register as register_job
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.ops._precheck import PrecheckReport, environment_entries, precheck
from httk.workflow.engine.publish._runners import publish_runner

from tests.conftest import minimal_job
from tests.jobkinds import job_in
from tests.joinkit import current, submit_job
from tests.whykit import clock_fixture, finding, register, state_fixture, why  # noqa: F401 (fixtures)

PLACEMENT = "proj/a"
RUNNER_BYTES = b"#!/bin/sh\nexit 0\n"
RUNNER_SHA = hashlib.sha256(RUNNER_BYTES).hexdigest()


def findings_of(report: PrecheckReport, job_key: str) -> dict[str, Any]:
    [check] = [check for check in report.jobs if check.marker.job_key == job_key]
    return {found.topic: found for found in check.findings}


def test_pending_jobs_a_live_manager_can_run_pass(state: ManagerState) -> None:
    submit_job(state.workspace, PLACEMENT)
    _job, key = submit_job(state.workspace, PLACEMENT)
    register_job(state, current(state.workspace, PLACEMENT, key))
    job_in(state, Kind.SUCCEEDED, placement="proj/done")  # not pending: not checked
    register(state.workspace, "m")

    report = precheck(state.workspace)

    assert not report.failing and report.as_dict()["status"] == "ok"
    assert (report.checked, dict(report.counts), report.jobs) == (
        2,
        {"failing": 0, "indeterminate": 0, "ok": 2},
        (),
    )
    assert finding_topics(report) == ["managers", "declared environment", "required inputs", "language jobs"]
    assert report.lines()[-1] == "ok: 0 failing, 0 indeterminate, 2 ok"


def finding_topics(report: PrecheckReport) -> list[str]:
    return [notice.topic for notice in report.notices]


def test_an_unclaimable_job_fails_in_the_words_of_job_why(state: ManagerState) -> None:
    _job, key = submit_job(state.workspace, PLACEMENT, claim={"pool": "gpu", "required_capabilities": []})
    register_job(state, current(state.workspace, PLACEMENT, key))
    register(state.workspace, "m")

    report = precheck(state.workspace)

    claimed_by = findings_of(report, key)["claimed by"]
    assert report.failing and claimed_by.status == "blocked"
    assert claimed_by.text == "no live manager can claim it: manager m lacks pool 'gpu' (it serves default)"
    assert (
        claimed_by.text
        == finding(why(state.workspace, current(state.workspace, PLACEMENT, key)), "claimed by").text
    )


def test_a_resource_no_manager_advertises_fails_pending_jobs_of_both_kinds(state: ManagerState) -> None:
    _job, submitted = submit_job(state.workspace, PLACEMENT, resources={"gpus": 1})
    _job, ready = submit_job(state.workspace, PLACEMENT, resources={"gpus": 1})
    register_job(state, current(state.workspace, PLACEMENT, ready))
    submit_job(state.workspace, PLACEMENT, resources={"gpus": 0})  # zero needs nothing: ok
    register(state.workspace, "m", resources={"procs": 4})

    report = precheck(state.workspace)

    assert dict(report.counts) == {"failing": 2, "indeterminate": 0, "ok": 1}
    lacking = "no live manager can claim it: manager m lacks resources gpus=1 (it advertises procs=4)"
    assert findings_of(report, submitted)["claimed by"].text == lacking
    assert findings_of(report, ready)["claimed by"].text == lacking
    assert (
        lacking
        == finding(why(state.workspace, current(state.workspace, PLACEMENT, ready)), "claimed by").text
    )


def test_without_a_live_manager_one_notice_replaces_the_claim_findings(
    state: ManagerState, clock: ManualClock
) -> None:
    submit_job(state.workspace, PLACEMENT, claim={"pool": "gpu", "required_capabilities": []})
    register(state.workspace, "gone", lease_seconds=5.0)
    clock.advance(10.0)

    report = precheck(state.workspace)

    assert not report.failing and report.jobs == ()
    [managers] = [notice for notice in report.notices if notice.topic == "managers"]
    assert managers.status == "warning" and managers.text.startswith("no manager is live")


def test_runner_problems_fail_and_an_unconfigured_installed_runner_is_indeterminate(
    state: ManagerState, tmp_path: Path
) -> None:
    ws = state.workspace
    missing = job_in(state, Kind.READY, placement=PLACEMENT)  # its payload runner was never written
    source = tmp_path / "tool"
    source.write_bytes(RUNNER_BYTES)
    stored = publish_runner(ws, "tool", source).reference()
    mismatched = job_in(state, Kind.SUBMITTED, job=minimal_job(runner={**stored, "sha256": "0" * 64}))
    pinned = job_in(state, Kind.SUBMITTED, job=minimal_job(runner=stored))
    installed = {"source": "installed", "path": "tools/run", "sha256": RUNNER_SHA}
    plain = job_in(state, Kind.SUBMITTED, job=minimal_job(runner=installed))

    unconfigured = precheck(ws)
    assert unconfigured.failing
    assert findings_of(unconfigured, missing.job_key)["runner"].details == {"code": "runner_unavailable"}
    assert findings_of(unconfigured, mismatched.job_key)["runner"].text.startswith(
        "runner_mismatch: workspace runner 'tool' has digest"
    )
    assert pinned.job_key not in {check.marker.job_key for check in unconfigured.jobs}
    assert findings_of(unconfigured, plain.job_key)["runner"].status == "indeterminate"
    assert dict(unconfigured.counts) == {"failing": 2, "indeterminate": 1, "ok": 1}

    empty, roots = tmp_path / "empty", tmp_path / "roots"
    empty.mkdir()
    (roots / "tools").mkdir(parents=True)
    (roots / "tools" / "run").write_bytes(RUNNER_BYTES)
    searched = precheck(ws, runner_search_path=[empty])
    assert findings_of(searched, plain.job_key)["runner"].text.startswith(
        "runner_unavailable: installed runner 'tools/run' was not found"
    )
    resolved = precheck(ws, runner_search_path=[empty, roots])
    assert plain.job_key not in {check.marker.job_key for check in resolved.jobs}


def test_a_broken_job_json_fails(state: ManagerState) -> None:
    _job, key = submit_job(state.workspace, PLACEMENT)
    (state.workspace.payload_path(PLACEMENT, key) / "job.json").write_text('{"format": "nonsense"}')

    report = precheck(state.workspace)

    assert report.failing
    assert findings_of(report, key)["job.json"].text.startswith("a manager fails it with protocol_error:")


def test_environment_entries_say_where_each_setting_comes_from() -> None:
    settings = {"vasp.command": "srun vasp_std", "vasp.cores": 32, "potentials": ["PAW"], "workflow.x": "y"}

    entries = environment_entries(settings, {"HTTK_VASP_COMMAND": "mpirun vasp_std"})

    assert {entry["variable"]: entry["source"] for entry in entries} == {
        "HTTK_POTENTIALS": "context.json only (not a scalar, or in the protocol's HTTK_WORKFLOW_ namespace)",
        "HTTK_VASP_COMMAND": "this process's environment overrides the workspace setting",
        "HTTK_VASP_CORES": "workspace setting (exported to attempts)",
        "HTTK_WORKFLOW_X": "context.json only (not a scalar, or in the protocol's HTTK_WORKFLOW_ namespace)",
    }


def test_the_report_lists_the_workspace_settings(state: ManagerState) -> None:
    state.workspace.update_document({"settings": {"vasp.command": "srun vasp_std"}})

    report = precheck(state.workspace, environ={})

    assert report.as_dict()["environment"] == [
        {
            "setting": "vasp.command",
            "variable": "HTTK_VASP_COMMAND",
            "source": "workspace setting (exported to attempts)",
        }
    ]
    assert (
        "  environment HTTK_VASP_COMMAND (vasp.command): workspace setting (exported to attempts)"
        in report.lines()
    )
