"""A manager claims only jobs whose marker, payload directory and job.json are regular, non-symlink
entries owned by its account (issue 15, item 7).

Ownership is changed for real (``chown`` to another uid), so these tests need the superuser, as CI has;
elsewhere they are skipped. One job per way of belonging to someone else runs beside one that is this
account's through one real manager: only that one runs, the others are left where they were, submitted
or ready (never failed: they are another account's to run), and the census says why.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._jobs import check_owned_marker, load_job
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.protocol import ForeignOwnerError, UnsafePathError

from tests.jobkinds import job_in, new_state
from tests.runners import (
    current_marker,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    ws_fixture,  # noqa: F401 (a fixture)
)

OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing an entry's owner needs the superuser")


def payload_of(ws: Workspace, marker: MarkerLocation) -> Path:
    return ws.payload_path(marker.placement, marker.job_key)


def give_away(path: Path) -> None:
    os.lchown(path, OTHER_UID, OTHER_UID)


WAYS: dict[str, Callable[[Workspace, MarkerLocation], None]] = {
    "marker": lambda ws, marker: give_away(marker.path(ws)),
    "payload": lambda ws, marker: give_away(payload_of(ws, marker)),
    "job.json": lambda ws, marker: give_away(payload_of(ws, marker) / "job.json"),
}


@as_root
@pytest.mark.parametrize("what", ["payload", "job.json"])
def test_loading_refuses_a_definition_another_account_owns(ws: Workspace, what: str) -> None:
    marker = job_in(new_state(ws.root), Kind.READY)
    WAYS[what](ws, marker)
    with pytest.raises(ForeignOwnerError, match=rf"invalid {what} .*owned by uid {OTHER_UID}, not by this"):
        load_job(ws, marker.placement, marker.job_key)


@as_root
def test_a_marker_another_account_owns_is_refused(ws: Workspace) -> None:
    marker = job_in(new_state(ws.root), Kind.READY)
    check_owned_marker(ws, marker)
    give_away(marker.path(ws))
    with pytest.raises(ForeignOwnerError, match=rf"invalid marker .*owned by uid {OTHER_UID}"):
        check_owned_marker(ws, marker)


def test_symbolic_links_are_refused_as_marker_and_as_job_json(ws: Workspace, tmp_path: Path) -> None:
    marker = job_in(new_state(ws.root), Kind.READY)
    path, job_file = marker.path(ws), payload_of(ws, marker) / "job.json"
    os.rename(path, tmp_path / "marker")
    os.symlink(tmp_path / "marker", path)
    with pytest.raises(UnsafePathError, match=r"invalid marker .* is a symbolic link"):
        check_owned_marker(ws, marker)
    os.rename(job_file, tmp_path / "job.json")
    os.symlink(tmp_path / "job.json", job_file)
    with pytest.raises(UnsafePathError, match=r"job\.json .*symbolic link"):
        load_job(ws, marker.placement, marker.job_key)


@as_root
@pytest.mark.parametrize("kind", [Kind.SUBMITTED, Kind.READY])
def test_a_manager_runs_only_its_own_account_s_jobs(
    ws: Workspace, runner: dict[str, Any], kind: Kind
) -> None:
    owner = new_state(ws.root)
    jobs: dict[str, dict[str, Any]] = {}
    for name in ("own", *WAYS):
        job = scripted_job({"prepare": {"action": "succeed"}}, runner)
        jobs[name] = job
        if kind is Kind.SUBMITTED:
            submit(ws, job)
        else:
            job_in(owner, Kind.READY, job=job)
    before = {name: current_marker(ws, job) for name, job in jobs.items()}
    for name, way in WAYS.items():
        way(ws, before[name])

    summary = Manager(ws, ManagerConfig(resources={})).run()

    assert current_marker(ws, jobs["own"]).kind is Kind.SUCCEEDED
    left = {name: current_marker(ws, job) for name, job in jobs.items() if name != "own"}
    assert left == {name: before[name] for name in left}  # untouched, and never failed
    assert summary.census.kinds == {kind.value: 3, "succeeded": 1}
    if kind is Kind.READY:
        assert summary.census.ready_blocked() == {"owner": {"other": 3}}
        assert any("belong to another account" in line for line in summary.census.advice())
