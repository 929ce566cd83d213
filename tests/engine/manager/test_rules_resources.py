"""Resource scheduling: the arithmetic of ``engine/_resources``, and real managers packing real runners.

End to end, every job is the scripted runner (``tests/runners.py``). Overlap is observed from the
filesystem and the manager's state, never from timing: a step blocks on a gate file the test creates
(``wait_for``), so two steps seen started before either gate exists ran at the same time. That a job
waits for room is seen in the manager's ``awaiting_room`` (it looked at the job and passed it over)
before the test opens the gate that makes room; the waiting job also requires that gate file
(``require_file``, absolute) and fails permanently (``retry_on: []``) if it started before it existed.
Managers run in a thread bounded by a watchdog.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager._manager import Manager, RunSummary
from httk.workflow.engine.manager._rules import (
    UNSATISFIABLE,
    allocation,
    describe,
    fair_share,
    fits,
    requirement_of,
    reserved,
    unmet,
)
from httk.workflow.engine.manager._state import ManagerConfig

from tests.runners import (
    WAIT_SECONDS,
    current_marker,
    frame_chain,
    job_key,
    records,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    wait_until,
    ws_fixture,  # noqa: F401 (a fixture)
)
from tests.whykit import why

LICENSED = {"procs": 32, "mem": 128000, "matlab_license_slots": 2}
"""spec/03's manager: ``--worker-resource procs 32 --worker-resource mem 128000 ...slots 2``."""
ANALYSE = {"procs": 1, "mem": 2000, "matlab_license_slots": 1}
RELAX = {"procs": 32, "mem": 120000}


# -- the arithmetic ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("capacity", "workers", "share"), [(32, 4, 8), (10, 4, 2), (3, 4, 3), (0, 4, 0), (7, 1, 7)]
)
def test_the_fair_share_is_the_quotient_or_everything(capacity: int, workers: int, share: int) -> None:
    assert fair_share(capacity, workers) == share


def test_an_allocation_adds_the_fair_share_of_undeclared_procs_and_mem_only() -> None:
    capacities = {"procs": 32, "mem": 128000, "gpus": 4}

    assert allocation({}, capacities, 4) == {"procs": 8, "mem": 32000}
    assert allocation({"procs": 2, "gpus": 1}, capacities, 4) == {"procs": 2, "gpus": 1, "mem": 32000}
    assert allocation({"procs": 0, "mem": 0}, capacities, 4) == {"procs": 0, "mem": 0}
    assert allocation({"licenses": 1}, {"licenses": 2}, 4) == {"licenses": 1}  # no procs/mem to share


def test_a_declared_amount_beyond_the_capacity_is_unmet_and_an_absent_label_has_none() -> None:
    capacities = {"procs": 8, "gpus": 0}

    assert unmet({"procs": 8, "mem": 0}, capacities) == ()  # zero needs nothing, even of an absent label
    assert unmet({"procs": 9, "gpus": 1, "licenses": 1}, capacities) == ("gpus", "licenses", "procs")


def test_fitting_counts_what_running_attempts_reserve() -> None:
    capacities = {"procs": 4, "slots": 2}
    held = reserved([{"procs": 2, "slots": 1}, {"procs": 1}])

    assert held == {"procs": 3, "slots": 1}
    assert fits({"procs": 1, "slots": 1}, capacities, held)
    assert not fits({"procs": 2}, capacities, held)
    assert not fits({"slots": 2}, capacities, held)
    assert fits({"procs": 0, "gpus": 0}, capacities, held)


def test_a_malformed_requirement_can_never_be_served() -> None:
    assert requirement_of(None) == {} and requirement_of(["procs"]) == {}
    assert requirement_of({"procs": 2, "mem": -1, "gpus": True, "x": 1.5}) == {
        "procs": 2,
        "mem": UNSATISFIABLE,
        "gpus": UNSATISFIABLE,
        "x": UNSATISFIABLE,
    }
    assert unmet(requirement_of({"mem": "16G"}), {"mem": (1 << 63) - 1}) == ("mem",)


def test_describe_lists_labels_in_order() -> None:
    assert describe({"procs": 4, "mem": 16000}) == "mem=16000,procs=4"
    assert describe({}) == "-"


# -- real managers -------------------------------------------------------------------------------------
def run(ws: Workspace, **config: Any) -> RunSummary:
    return Manager(ws, ManagerConfig(**config)).run()


@contextlib.contextmanager
def serving(ws: Workspace, **config: Any) -> Iterator[Manager]:
    """A manager running in a thread until it is idle (it must end idle)."""
    manager = Manager(ws, ManagerConfig(**config))
    summaries: list[RunSummary] = []
    thread = threading.Thread(target=lambda: summaries.append(manager.run()))
    watchdog = threading.Timer(WAIT_SECONDS, manager.request_drain)  # a test must never hang
    watchdog.start()
    thread.start()
    try:
        yield manager
    except BaseException:
        manager.request_drain()
        raise
    finally:
        thread.join(2 * WAIT_SECONDS)
        watchdog.cancel()
    assert summaries and summaries[0].exit_reason == "idle", summaries


def gated(
    ws: Workspace,
    runner: dict[str, Any],
    script: Mapping[str, Any],
    *,
    priority: int,
    resources: Mapping[str, int],
    step: str = "prepare",
) -> dict[str, Any]:
    """Submit a one-step job that fails for good if its script's precondition does not hold."""
    job = scripted_job(
        {step: dict(script)},
        runner,
        initial_step=step,
        priority=priority,
        resources=dict(resources),
        retry_on=[],
    )
    submit(ws, job)
    return job


def started(ws: Workspace, job: Mapping[str, Any]) -> bool:
    return bool(records(ws.payload_path("p", job_key(job))))


def awaiting_room(manager: Manager, *jobs: Mapping[str, Any]) -> bool:
    """Whether the manager passed over each of ``jobs`` for want of room (and keeps it for later)."""
    waiting = {marker.job_key for marker in list(manager.state.awaiting_room)}
    return all(job_key(job) in waiting for job in jobs)


def kind(ws: Workspace, job: Mapping[str, Any]) -> str:
    return current_marker(ws, job).kind.value


def contexts(ws: Workspace, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``resources`` of every attempt's context.json, in attempt order."""
    return [record.context["resources"] for record in records(ws.payload_path("p", job_key(job)))]


def test_two_half_jobs_run_together_and_a_whole_one_runs_alone(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    whole_done, halves_done = tmp_path / "whole-done", tmp_path / "halves-done"
    whole = gated(ws, runner, {"wait_for": str(whole_done)}, priority=1, resources={"procs": 4})
    halves = [
        gated(
            ws,
            runner,
            {"require_file": str(whole_done), "wait_for": str(halves_done)},
            priority=2,
            resources={"procs": 2},
        )
        for _ in range(2)
    ]

    with serving(ws, workers=4, resources={"procs": 4}) as manager:
        wait_until(lambda: started(ws, whole), "the whole-capacity job to start")
        wait_until(lambda: awaiting_room(manager, *halves), "the halves to wait for room")
        assert kind(ws, halves[0]) == kind(ws, halves[1]) == "ready"  # two workers free, no procs
        whole_done.touch()
        wait_until(lambda: all(started(ws, half) for half in halves), "both halves to run at once")
        assert kind(ws, whole) == "succeeded"
        halves_done.touch()

    assert [kind(ws, job) for job in (whole, *halves)] == ["succeeded"] * 3
    assert contexts(ws, whole) == [{"procs": 4}]
    assert contexts(ws, halves[0]) == contexts(ws, halves[1]) == [{"procs": 2}]


def test_at_most_two_analyse_steps_share_two_license_slots(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    first_done, second_done = tmp_path / "first-done", tmp_path / "second-done"
    first = gated(ws, runner, {"wait_for": str(first_done)}, priority=1, resources=ANALYSE, step="analyse")
    second = gated(ws, runner, {"wait_for": str(second_done)}, priority=2, resources=ANALYSE, step="analyse")
    third = gated(
        ws, runner, {"require_file": str(first_done)}, priority=3, resources=ANALYSE, step="analyse"
    )

    with serving(ws, workers=4, resources=LICENSED) as manager:
        wait_until(lambda: started(ws, first) and started(ws, second), "two analyse steps to hold both slots")
        wait_until(lambda: awaiting_room(manager, third), "the third to wait for a slot")
        assert kind(ws, third) == "ready"
        first_done.touch()
        wait_until(lambda: kind(ws, third) == "succeeded", "the third to take the freed slot")
        assert kind(ws, second) == "running"  # the third ran beside it
        second_done.touch()

    assert [kind(ws, job) for job in (first, second, third)] == ["succeeded"] * 3
    assert contexts(ws, third) == [ANALYSE]


def test_a_smaller_job_passes_a_larger_better_one_that_does_not_fit_yet(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    small_done = tmp_path / "small-done"
    running = gated(ws, runner, {"wait_for": str(small_done)}, priority=1, resources={"procs": 2})
    large = gated(ws, runner, {"require_file": str(small_done)}, priority=2, resources={"procs": 3})
    small = gated(ws, runner, {"wait_for": str(small_done)}, priority=3, resources={"procs": 2})

    with serving(ws, workers=4, resources={"procs": 4}) as manager:
        wait_until(lambda: started(ws, running) and started(ws, small), "the small job to pass the large")
        wait_until(lambda: awaiting_room(manager, large), "the large job to wait for room")
        assert kind(ws, large) == "ready"
        small_done.touch()

    assert [kind(ws, job) for job in (running, large, small)] == ["succeeded"] * 3


def test_a_job_without_procs_or_mem_gets_one_workers_share(
    ws: Workspace, runner: dict[str, Any], tmp_path: Path
) -> None:
    undeclared_done = tmp_path / "undeclared-done"
    undeclared = gated(ws, runner, {"wait_for": str(undeclared_done)}, priority=1, resources={})
    # Three procs and a share of mem: it cannot start beside the undeclared job's two procs.
    declared = gated(ws, runner, {"require_file": str(undeclared_done)}, priority=2, resources={"procs": 3})

    with serving(ws, workers=2, resources={"procs": 4, "mem": 1000}) as manager:
        wait_until(lambda: started(ws, undeclared), "the undeclared job to start")
        wait_until(lambda: awaiting_room(manager, declared), "the declared job to wait for room")
        undeclared_done.touch()

    assert kind(ws, declared) == kind(ws, undeclared) == "succeeded"
    assert contexts(ws, undeclared) == [{"procs": 2, "mem": 500}]
    assert contexts(ws, declared) == [{"procs": 3, "mem": 500}]
    # The frames keep the requirement, not the allocation: a retry elsewhere gets that manager's share.
    running = [f for f in frame_chain(ws, current_marker(ws, undeclared)) if f["kind"] == "running"]
    assert [frame["resources"] for frame in running] == [{}]


@pytest.mark.parametrize(
    ("requirement", "capacities"),
    [
        ({"gpus": 1}, {"procs": 4}),
        ({"gpus": 1}, {"procs": 4, "gpus": 0}),
        ({"gpus": 1}, {}),
        ({"procs": 8}, {"procs": 4}),
    ],
    ids=["absent", "zero", "no-capacities", "over-capacity"],
)
def test_a_job_needing_more_than_the_manager_has_is_never_claimed_and_is_reported(
    ws: Workspace, runner: dict[str, Any], requirement: dict[str, int], capacities: dict[str, int]
) -> None:
    [(label, amount)] = requirement.items()
    job = scripted_job({"prepare": {}}, runner, resources=requirement)
    submit(ws, job)

    summary = run(ws, workers=2, resources=capacities)

    assert summary.exit_reason == "idle" and summary.launched == 0
    assert kind(ws, job) == "ready"
    assert summary.census.not_claimable == {f"resource {label}": 1}
    assert summary.census.as_dict()["ready_blocked"] == {"resources": {label: 1}}
    assert f"1 not claimable here (resource {label}: 1)" in summary.census.line()
    assert summary.census.advice() == [
        f"1 ready job(s) need resource {label} (up to {amount}): add --worker-resource {label} {amount}"
    ]


def test_a_manager_without_resource_scheduling_claims_whatever_is_declared(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    job = scripted_job({"prepare": {}}, runner, resources={"gpus": 2})
    submit(ws, job)

    summary = run(ws)  # ManagerConfig(resources=None): the library default and job debug's

    assert summary.launched == 1 and kind(ws, job) == "succeeded"
    assert contexts(ws, job) == [{"gpus": 2}]


def test_an_advance_requirement_applies_to_the_next_activation_and_survives_a_retry(
    ws: Workspace, runner: dict[str, Any]
) -> None:
    steps = {
        "relax": {"action": "advance", "next_step": "analyse", "outcome": {"resources": ANALYSE}},
        "analyse": {"attempts": [{"action": "exit", "exit": 3}, {"action": "succeed"}]},
    }
    job = scripted_job(steps, runner, initial_step="relax", resources=RELAX)
    submit(ws, job)

    unlicensed = run(ws, workers=4, resources={"procs": 32, "mem": 128000})

    assert unlicensed.launched == 1 and kind(ws, job) == "ready"
    assert unlicensed.census.not_claimable == {"resource matlab_license_slots": 1}
    # job why measures the frame's requirement, not job.json's (which this manager could serve).
    diagnosis = why(ws, current_marker(ws, job))
    assert diagnosis.answer.endswith(
        "lacks resources matlab_license_slots=1 (it advertises mem=128000,procs=32)"
    )
    assert diagnosis.next_steps == ("run a manager with --worker-resource matlab_license_slots 1",)
    licensed = run(ws, workers=4, resources=LICENSED)
    assert licensed.launched == 2 and kind(ws, job) == "succeeded"
    assert contexts(ws, job) == [RELAX, ANALYSE, ANALYSE]
    frames = frame_chain(ws, current_marker(ws, job))
    ready = [
        (frame["step"], frame["attempt_reason"], frame["resources"])
        for frame in frames
        if frame["kind"] == "ready"
    ]
    assert ready == [
        ("relax", "initial", RELAX),
        ("analyse", "advance", ANALYSE),
        ("analyse", "process_failure", ANALYSE),
    ]


def test_an_outcome_with_malformed_resources_is_unusable(ws: Workspace, runner: dict[str, Any]) -> None:
    steps = {"prepare": {"action": "advance", "next_step": "x", "outcome": {"resources": {"procs": -1}}}}
    job = scripted_job(steps, runner)
    submit(ws, job)

    run(ws, resources={"procs": 4})

    frame = frame_chain(ws, current_marker(ws, job))[-1]
    assert frame["kind"] == "failed" and frame["failure"]["code"] == "protocol_error"
    assert "outcome member 'resources.procs': must be a non-negative integer" in frame["failure"]["message"]
