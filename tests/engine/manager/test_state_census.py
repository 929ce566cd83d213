"""``engine/_census``: the exit census says a ready job is not claimable exactly when the claim pass would
not claim it, and names the first requirement :func:`._launch.claim_mismatches` reports.

Every combination of an unmet pool, capability and executor is submitted as a real ready job; the census
of a manager serving ``default`` with the capability ``avx512`` must agree with the claim predicate job by
job, so the census cannot drift from what a manager does (nor from ``job why`` and ``precheck``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import init
from httk.workflow.engine.manager._rules import claim_mismatches
from httk.workflow.engine.manager._state import ManagerConfig, take_census

from tests.conftest import minimal_job
from tests.jobkinds import job_in, new_state

SERVED = ManagerConfig(pools=("default",), capabilities=("avx512",))


def _job(pool_unmet: bool, capability_unmet: bool, executor_unmet: bool) -> dict[str, Any]:
    claim = {
        "pool": "gpu" if pool_unmet else "default",
        "required_capabilities": ["avx512", *(["sve"] if capability_unmet else [])],
    }
    backend = "slurm" if executor_unmet else "path"
    runner: dict[str, Any] = {"backend": backend, "path": "files/runner", "arguments": []}
    return minimal_job(claim=claim, runner=runner)


def _label(document: dict[str, Any], requirement: str) -> str:
    """How the census words one unmet requirement (its established wording)."""
    if requirement == "pool":
        return f"pool {document['claim']['pool']}"
    if requirement == "capabilities":
        return "capability sve"
    return f"executor {document['runner']['backend']}"


def test_the_census_agrees_with_the_claim_predicate_for_every_combination(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    expected: dict[str, int] = {}
    claimable = 0
    for unmet in itertools.product((False, True), repeat=3):
        document = _job(*unmet)
        job_in(state, Kind.READY, job=document)
        mismatches = claim_mismatches(document, SERVED.pools, SERVED.capabilities)
        assert bool(mismatches) == any(unmet)
        if mismatches:
            label = _label(document, mismatches[0])
            expected[label] = expected.get(label, 0) + 1
        else:
            claimable += 1

    census = take_census(state.workspace, SERVED)

    assert census.kinds == {"ready": 8}
    assert dict(census.not_claimable) == expected
    assert expected == {"pool gpu": 4, "capability sve": 2, "executor slurm": 1}
    assert claimable == 1 and census.unreadable == 0
    assert census.advice() == [
        "2 ready job(s) need capability sve: add --capability sve",
        "1 ready job(s) need executor slurm, which this manager does not serve",
        "4 ready job(s) need pool gpu: run a manager with --pool gpu",
    ]


def test_the_census_names_the_resource_a_ready_job_needs_beyond_the_capacities(tmp_path: Path) -> None:
    state = new_state(init(tmp_path / "ws", durable=False).root)
    capacities = {"procs": 8, "gpus": 0}
    served = ManagerConfig(pools=("default",), resources=capacities)
    requirements = [{}, {"procs": 8}, {"procs": 9}, {"gpus": 1}, {"gpus": 2, "procs": 1}, {"licenses": 0}]
    expected: dict[str, int] = {}
    for requirement in requirements:
        job_in(state, Kind.READY, job=minimal_job(resources=requirement))
        mismatches = claim_mismatches(
            minimal_job(), served.pools, (), requirement=requirement, capacities=capacities
        )
        if mismatches:
            assert mismatches == ("resources",)
            label = f"resource {min(k for k, v in requirement.items() if v > capacities.get(k, 0))}"
            expected[label] = expected.get(label, 0) + 1
    job_in(state, Kind.READY, job=minimal_job(resources={"gpus": 1}, claim={"pool": "gpu"}))

    census = take_census(state.workspace, served)

    assert dict(census.not_claimable) == expected | {"pool gpu": 1}
    assert expected == {"resource procs": 1, "resource gpus": 2}
    assert census.as_dict()["ready_blocked"] == {"pool": {"gpu": 1}, "resources": {"gpus": 2, "procs": 1}}
    assert census.advice() == [
        "1 ready job(s) need pool gpu: run a manager with --pool gpu",
        "2 ready job(s) need resource gpus (up to 2): add --worker-resource gpus 2",
        "1 ready job(s) need resource procs (up to 9): add --worker-resource procs 9",
    ]
    # A manager that schedules no resources claims them all: nothing but the pool is reported.
    assert take_census(state.workspace, SERVED).not_claimable == {"pool gpu": 1}
