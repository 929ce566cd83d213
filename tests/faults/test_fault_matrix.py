"""Every fault of the seam at every protocol mutation of every lifecycle scenario the crash suite runs.

For each scenario (plan and durability, :data:`tests.crash.test_manager_crash.SCENARIOS`) the fault-free
run is traced once; then for each fault and EVERY mutation that fault can happen to, a fresh case is
run with the fault there and must pass :func:`tests.faults._faultkit.fault_and_converge`. That is the
full matrix of ``./dev faults`` (``HTTK_FAULT_MATRIX=full``), split into shards by residue for xdist.

``./dev test`` runs a deterministic subset: the two-step ``advance`` scenario, and for each fault the
first point of each of :data:`SUBSET_POINTS` it applies to — the journal (its writer directory, a
segment, an append), the ready directory registration creates (a manager that cannot list it yet must
not take itself for idle), a marker rename, the attempt's control directory, the copy of an attempt's
output into the job log, the manager's record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from httk.workflow.engine.core._faults import Fault

from tests.faults._faultkit import (
    Reference,
    Scenario,
    enumerate_failures,
    env_full_matrix,
    fault_and_converge,
    reference,
)

FULL = env_full_matrix()
SCENARIOS = [Scenario("advance", True), Scenario("advance", False)]
SCENARIOS += [Scenario(plan, False) for plan in ("retry", "succeed", "fail", "pause")]
SHARDS = 4 if FULL else 1

SUBSET_POINTS = (
    "mkdir <ws>/.httk-workflow/journal/",
    "append <ws>/.httk-workflow/journal/",
    "mkdir <ws>/.httk-workflow/state/ready",
    "rename <ws>/.httk-workflow/state/claimed/",
    "rename <ws>/.httk-workflow/state/committing/",
    "create <ws>/proj/a/",
    "append <ws>/proj/a/",
    "write <ws>/.httk-workflow/managers/",
)
"""Trace prefixes; in the subset each fault is injected at the first mutation matching each of them that
it can happen to, in the ``advance`` scenario."""


def subset(ref: Reference, fault: Fault, durable: bool) -> list[int]:
    points = ref.applicable(fault, durable=durable)
    chosen = []
    for prefix in SUBSET_POINTS:
        first = next((k for k in points if ref.trace[k - 1].startswith(prefix)), None)
        if first is not None and first not in chosen:
            chosen.append(first)
    return sorted(chosen)


_REFERENCES: dict[Scenario, Reference] = {}


def reference_of(tmp_path_factory: pytest.TempPathFactory, scenario: Scenario) -> Reference:
    if scenario not in _REFERENCES:
        base = tmp_path_factory.mktemp(f"fault-reference-{scenario}")
        _REFERENCES[scenario] = reference(base / "case", scenario.plan, durable=scenario.durable)
    return _REFERENCES[scenario]


@dataclass(frozen=True)
class Cell:
    scenario: Scenario
    fault: Fault
    shard: int


CELLS = [
    pytest.param(Cell(scenario, fault, shard), id=f"{scenario}-{fault.value}-{shard + 1}")
    for scenario in (SCENARIOS if FULL else [Scenario("advance", True)])
    for fault in Fault
    for shard in range(SHARDS)
]


@pytest.mark.slow
@pytest.mark.parametrize("cell", CELLS)
def test_every_fault_leaves_every_job_at_a_commit_point_and_a_later_manager_converges(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cell: Cell
) -> None:
    scenario, fault = cell.scenario, cell.fault
    ref = reference_of(tmp_path_factory, scenario)
    durable = scenario.durable
    points = ref.applicable(fault, durable=durable) if FULL else subset(ref, fault, durable)
    points = points[cell.shard :: SHARDS]
    if not points:
        pytest.skip(f"{fault.value} applies to no mutation of this shard of {scenario}")
    failures = enumerate_failures(
        points, lambda k: fault_and_converge(tmp_path / f"k{k}", scenario, ref, k, fault)
    )
    described = [f"{line} [{ref.trace[int(line[2:].split(':')[0]) - 1]}]" for line in failures]
    assert not failures, f"{len(failures)} of {len(points)} points failed:\n" + "\n".join(described)
