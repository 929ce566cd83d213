"""``workspace fsck --repair --rebuild-lost``: jobs whose whole history was lost get one rebuilt frame.

A ``--no-durable`` workspace synchronizes nothing, so a power cut can take every journal segment with
it while the markers survive, each naming a frame in a segment that is gone. The cut is simulated
deterministically: either the segments are deleted after the jobs were moved, or a real manager run
records every ``fsync`` and :func:`tests.powercut.cut_power` keeps only what was synchronized. Every kind
gets the rule of issue 15; a durable workspace, cut the same way, needs nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._liveness import identity_of, write_process_file
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, attach, init, probe_marker
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.maintenance._fsck_check import FsckReport
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.ops._history import job_history
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.crashkit import crash_at_every_point
from tests.engine.maintenance.test_fsck_repair import heartbeat
from tests.jobkinds import assert_frames_valid, chain, job_in, new_state
from tests.powercut import cut_power, recording_syncs
from tests.runners import publish_scripted_runner, records, scripted_job

BIN = Path(sys.executable).parent
SUCCEED = {"prepare": {"action": "succeed"}}

# The rule of each kind (issue 15, item 9): (kind afterwards, counters, attempt reason, unclean restart).
FRESH = ((1, 0, 0), "initial", False)
RESTART = ((1, 1, 1), "history_lost", True)
RULES: dict[Kind, tuple[Kind, tuple[tuple[int, int, int], str, bool]]] = {
    Kind.SUBMITTED: (Kind.READY, FRESH),
    Kind.READY: (Kind.READY, FRESH),
    Kind.CLAIMED: (Kind.READY, RESTART),
    Kind.RUNNING: (Kind.READY, RESTART),
    Kind.COMMITTING: (Kind.READY, RESTART),
    Kind.CANCELLING: (Kind.CANCELLED, FRESH),
    Kind.PAUSED: (Kind.PAUSED, FRESH),
    Kind.FAILED: (Kind.FAILED, FRESH),
    Kind.CANCELLED: (Kind.CANCELLED, FRESH),
    Kind.SUCCEEDED: (Kind.SUCCEEDED, FRESH),
}


def lose_every_segment(root: Path) -> None:
    shutil.rmtree(root / ".httk-workflow" / "journal")
    (root / ".httk-workflow" / "journal").mkdir()


def run_fsck(
    root: Path, *, repair: bool = False, rebuild_lost: bool = False, quarantine: bool = False
) -> FsckReport:
    repair = repair or rebuild_lost or quarantine
    workspace = attach(root, writable=repair, clock=ManualClock())
    return fsck(workspace, repair=repair, rebuild_lost=rebuild_lost, quarantine_unrepairable=quarantine)


def marker_of(root: Path, marker: MarkerLocation) -> MarkerLocation:
    found = probe_marker(attach(root, writable=False), marker.placement, marker.job_key)
    assert found is not None
    return found


def lost_workspace(base: Path, kinds: list[Kind]) -> tuple[Path, dict[Kind, MarkerLocation]]:
    """A no-durable workspace with a runnable job in each of ``kinds``, every frame then lost."""
    root = base / "ws"
    ws = init(root, durable=False)
    runner = publish_scripted_runner(ws, base)
    state = new_state(root)
    markers = {kind: job_in(state, kind, job=scripted_job(SUCCEED, runner)) for kind in kinds}
    if Kind.SUBMITTED in markers:  # a submitted marker with a frame of its own: a priority was changed
        priority = Frame(Kind.SUBMITTED, {"reason": "operator_set_priority"}, 700)
        moved = state.move(markers[Kind.SUBMITTED], priority, Trigger.SET_PRIORITY)
        assert moved.current is not None
        markers[Kind.SUBMITTED] = moved.current
    ws.close()
    state.workspace.close()
    lose_every_segment(root)
    return root, markers


@pytest.fixture
def every_kind(tmp_path: Path) -> tuple[Path, dict[Kind, MarkerLocation]]:
    return lost_workspace(tmp_path, [*RULES, Kind.WAITING])


def test_every_kind_gets_its_rule_and_only_waiting_stays_unrepairable(
    every_kind: tuple[Path, dict[Kind, MarkerLocation]],
) -> None:
    root, markers = every_kind
    assert {p.code for p in run_fsck(root).problems} == {"missing_segment"}

    plain = run_fsck(root, repair=True)
    assert {p.action for p in plain.problems} == {"unrepairable"}
    assert all("--rebuild-lost" in str(p.note) for p in plain.problems)

    report = run_fsck(root, rebuild_lost=True)

    actions = {p.subject.kind: p.action for p in report.problems if p.subject is not None}
    assert actions == {**dict.fromkeys(RULES, "rebuilt"), Kind.WAITING: "unrepairable"}
    ws = attach(root, writable=False)
    for source, (kind, (counters, attempt_reason, unclean)) in RULES.items():
        before = markers[source]
        after = marker_of(root, before)
        assert (after.kind, after.name.generation) == (kind, before.name.generation + 1), source
        assert after.name.priority == before.name.priority
        [frame] = chain(ws, after)  # the rebuilt frame starts the chain: nothing before it is readable
        assert_frames_valid([frame])
        assert frame["reason"] == "fsck_rebuild" and frame["previous_record_ref"] is None
        assert frame["fsck_rebuild"] == {
            "lost_record_ref": before.name.ref_text,
            "problem": "missing_segment",
            "from_kind": source.value,
            "lost_generations": {"first": 1, "last": before.name.generation},
        }
        got = (frame["activation_ordinal"], frame["attempt_ordinal"], frame["total_attempts"])
        assert (got, frame["attempt_reason"], frame["unclean_restart"]) == (counters, attempt_reason, unclean)
        assert frame["step"] == "prepare" and frame["activation_reason"] == "initial"
    frames = {kind: chain(ws, marker_of(root, markers[kind]))[0] for kind in RULES}
    assert frames[Kind.FAILED]["failure"]["code"] == "history_lost"
    assert frames[Kind.CANCELLED]["cancellation"] == {"verified": "history_lost"}
    assert frames[Kind.CANCELLING]["cancellation"] == {"verified": "history_lost"}
    assert "history" in frames[Kind.PAUSED]["pause"]["reason"]
    assert frames[Kind.RUNNING]["last_failure"]["code"] == "history_lost"

    left = run_fsck(root)
    assert [(p.code, p.subject.kind if p.subject else None) for p in left.problems] == [
        ("missing_segment", Kind.WAITING)
    ]


def test_job_log_shows_the_lost_generations_and_the_kind_the_job_came_from(
    every_kind: tuple[Path, dict[Kind, MarkerLocation]],
) -> None:
    root, markers = every_kind
    run_fsck(root, rebuild_lost=True)
    running = markers[Kind.RUNNING]
    [entry] = job_history(attach(root, writable=False), marker_of(root, running))
    generation = running.name.generation
    assert entry["from"] == "running" and entry["kind"] == "ready" and entry["reason"] == "fsck_rebuild"
    assert entry["lost_generations"] == {"first": 1, "last": generation}
    assert entry["note"] == (
        f"generations 1..{generation} were lost (missing_segment), never synchronized; "
        "workspace fsck rebuilt the job from job.json"
    )
    shown = subprocess.run(
        [str(BIN / "httk"), "workflow", "job", "log", str(root), running.job_key],
        capture_output=True,
        text=True,
        check=True,
    )
    first, second = shown.stdout.splitlines()[:2]
    assert first.endswith(f"note: {entry['note']}")
    assert "running -> ready" in second and "reason=fsck_rebuild" in second, second


def test_rebuilt_jobs_run_again_from_their_initial_step(
    every_kind: tuple[Path, dict[Kind, MarkerLocation]],
) -> None:
    root, markers = every_kind
    report = run_fsck(root, rebuild_lost=True, quarantine=True)  # the waiting job is set aside
    assert report.counts() == {"rebuilt": len(RULES), "quarantined": 1}

    Manager(root, ManagerConfig(workers=2)).run()

    ws = attach(root, writable=False)
    for source in (Kind.SUBMITTED, Kind.READY, Kind.CLAIMED, Kind.RUNNING, Kind.COMMITTING):
        assert marker_of(root, markers[source]).kind is Kind.SUCCEEDED, source
    [record] = records(ws.payload_path("p", markers[Kind.RUNNING].job_key))
    assert record.env["HTTK_WORKFLOW_ATTEMPT_REASON"] == "history_lost"
    assert record.env["HTTK_WORKFLOW_UNCLEAN_RESTART"] == "1"
    for kind in (Kind.PAUSED, Kind.FAILED, Kind.CANCELLED, Kind.SUCCEEDED):
        assert marker_of(root, markers[kind]).kind is kind  # nothing runs a job at rest


def test_a_live_owner_and_a_running_attempt_process_are_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    init(root, durable=False)
    owner = new_state(root)
    owned = job_in(owner, Kind.RUNNING)
    heartbeat(owner)  # its manager heartbeats: its marker is its own
    other = new_state(root)
    running = job_in(other, Kind.RUNNING)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        control = attach(root).payload_path("p", running.job_key) / f".httk-attempt.{uuid.uuid4()}"
        control.mkdir()
        write_process_file(control, identity_of(sleeper.pid), durable=False)
        lose_every_segment(root)

        report = run_fsck(root, rebuild_lost=True)

        actions = {str(p.subject.key): p.action for p in report.problems if p.subject is not None}
        assert actions == {owned.job_key: "live_owner", running.job_key: "live_process"}
        assert marker_of(root, owned) == owned and marker_of(root, running) == running
    finally:
        sleeper.kill()
        sleeper.wait()
    assert {p.action for p in run_fsck(root, rebuild_lost=True).problems} == {"live_owner", "rebuilt"}


def test_a_job_whose_job_json_is_unusable_stays_unrepairable(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    init(root, durable=False)
    marker = job_in(new_state(root), Kind.SUCCEEDED)
    job_json = attach(root).payload_path("p", marker.job_key) / "job.json"
    job_json.write_text(json.dumps({**json.loads(job_json.read_text()), "id": str(uuid.uuid4())}))
    lose_every_segment(root)

    [problem] = run_fsck(root, rebuild_lost=True).problems

    assert problem.action == "unrepairable" and "job.json cannot be used" in str(problem.note)
    assert marker_of(root, marker) == marker


def test_the_command_needs_repair_and_reports_what_it_rebuilt(
    every_kind: tuple[Path, dict[Kind, MarkerLocation]],
) -> None:
    root, _ = every_kind

    def httk(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(BIN / "httk"), "workflow", "workspace", "fsck", str(root), *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    refused = httk("--rebuild-lost")
    assert refused.returncode == 2 and "--rebuild-lost needs --repair" in refused.stderr
    done = httk("--repair", "--rebuild-lost", "--json")
    assert done.returncode == 1  # the waiting job is left for an operator
    report = json.loads(done.stdout)
    assert report["actions"] == {"rebuilt": len(RULES), "unrepairable": 1}
    assert httk().returncode == 1 and json.loads(httk("--json").stdout)["left"] == 1


@pytest.mark.parametrize("durable", [False, True], ids=["no-durable", "durable"])
def test_after_a_power_cut_a_durable_workspace_is_clean_and_a_no_durable_one_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool
) -> None:
    """A real run of 40 jobs, then a power cut that keeps exactly what was synchronized."""
    root = tmp_path / "ws"
    ws = init(root, durable=durable)
    runner = publish_scripted_runner(ws, tmp_path)
    plans: list[dict[str, Any]] = [
        SUCCEED,
        {"prepare": {"action": "advance", "next_step": "collect"}, "collect": {"action": "succeed"}},
        {"prepare": {"action": "pause", "reason": "look"}},
        {"prepare": {"action": "fail", "failure": {"code": "app.broken", "message": "broken"}}},
    ]
    jobs = [scripted_job(plans[index % len(plans)], runner) for index in range(40)]
    submit_jobs(ws, [JobSpec(job, "p") for job in jobs])
    ws.close()
    with recording_syncs(monkeypatch) as synced:
        Manager(root, ManagerConfig(workers=2)).run()
    kinds_before = {job["id"]: marker_kind(root, job) for job in jobs}

    counts = cut_power(root, synced)

    if durable:
        assert counts["lost"] == counts["truncated"] == 0
        assert run_fsck(root).clean
        return
    assert counts["kept"] == counts["truncated"] == 0 and counts["lost"] > 0
    assert len(run_fsck(root).problems) == len(jobs)
    report = run_fsck(root, rebuild_lost=True)
    assert report.counts() == {"rebuilt": len(jobs)} and report.clean
    assert {job["id"]: marker_kind(root, job) for job in jobs} == kinds_before  # at rest: kinds kept
    assert run_fsck(root).clean


def marker_kind(root: Path, job: dict[str, Any]) -> Kind:
    found = probe_marker(attach(root, writable=False), "p", f"{job['tag']}--{job['id']}")
    assert found is not None
    return found.kind


def test_nothing_is_left_in_the_journal_that_a_rebuilt_chain_names(
    every_kind: tuple[Path, dict[Kind, MarkerLocation]],
) -> None:
    """Every rebuilt marker names a frame in a segment this repair wrote: gc can collect the rest."""
    root, markers = every_kind
    run_fsck(root, rebuild_lost=True)
    writers = {p.name for p in (root / ".httk-workflow" / "journal").iterdir()}
    assert len(writers) == 1  # only the repair's own writer
    for kind in RULES:
        ref = marker_of(root, markers[kind]).name.ref
        assert ref is not None and ref.writer in writers
    assert os.listdir(root / ".httk-workflow" / "journal" / writers.pop())


REBUILD_CODE = """
from httk.workflow.engine.maintenance._fsck import fsck
from httk.workflow.engine.core._workspace import attach
fsck(attach({root!r}), repair=True, rebuild_lost=True)
"""


def rebuilt_state(root: Path, markers: dict[Kind, MarkerLocation]) -> dict[Kind, tuple[Any, ...]]:
    ws = attach(root, writable=False)
    found: dict[Kind, tuple[Any, ...]] = {}
    for source, marker in markers.items():
        now = marker_of(root, marker)
        frames = chain(ws, now) if now.kind is not Kind.WAITING else []
        links = [(frame["reason"], frame["previous_record_ref"]) for frame in frames]
        found[source] = (now.kind, now.name.generation, links)
    return found


def test_every_crash_point_of_a_rebuild_converges_when_it_runs_again(tmp_path: Path) -> None:
    template, markers = lost_workspace(tmp_path / "template", [Kind.RUNNING, Kind.SUCCEEDED, Kind.WAITING])
    expected, failures = crash_at_every_point(
        template,
        tmp_path,
        REBUILD_CODE,
        lambda root: run_fsck(root, rebuild_lost=True),
        lambda root: rebuilt_state(root, markers),
    )
    assert expected[Kind.RUNNING][:2] == (Kind.READY, markers[Kind.RUNNING].name.generation + 1)
    assert not failures, "\n".join(failures)
