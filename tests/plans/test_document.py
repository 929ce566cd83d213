"""A plan is checked whole before anything is written: its schema, ids, dependencies, cycles, stages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.plans import PlanError, check_plan, critical_path_length, find_cycle

from tests.plans.plankit import plan, stage, submit


def _payload_space(ws: Workspace) -> list[str]:
    return sorted(p.name for p in ws.root.iterdir() if p.name != ".httk-workflow")


def _state_markers(ws: Workspace) -> list[Path]:
    return sorted(p for p in (ws.root / ".httk-workflow" / "state").rglob("*") if p.is_file())


REFUSALS: list[tuple[str, list[dict[str, Any]], str, str]] = [
    (
        "cycle of two",
        [stage("a", "b"), stage("b", "a")],
        "stages",
        "the dependencies have a cycle: a -> b -> a",
    ),
    (
        "cycle of three behind a root",
        [stage("root"), stage("x", "root", "z"), stage("y", "x"), stage("z", "y")],
        "stages",
        "the dependencies have a cycle: x -> z -> y -> x",
    ),
    ("self dependency", [stage("a", "a")], "stages[0].depends_on", "stage 'a' depends on itself"),
    (
        "missing dependency",
        [stage("a"), stage("b", "nope")],
        "stages[1].depends_on",
        "stage 'b' depends on 'nope', which is not a stage of the plan",
    ),
    ("duplicate id", [stage("a"), stage("a")], "stages[1].id", "stage id 'a' is also the id of stages[0]"),
    (
        "neither workflow nor runner",
        [{"id": "a"}],
        "stages[0]",
        "stage 'a' must name exactly one of workflow and runner",
    ),
    (
        "both workflow and runner",
        [{"id": "a", "runner": "stage", "workflow": "vasp-relax"}],
        "stages[0]",
        "stage 'a' must name exactly one of workflow and runner",
    ),
    (
        "step with a workflow",
        [{"id": "a", "workflow": "vasp-relax", "step": "main"}],
        "stages[0].step",
        "a step is given only with a runner (a workflow has its own)",
    ),
    (
        "misspelt member",
        [{"id": "a", "runner": "stage", "depend_on": []}],
        "stages[0]",
        "'depend_on' was unexpected",
    ),
    ("bad id", [{"id": "A b", "runner": "stage"}], "stages[0].id", "does not match"),
]


@pytest.mark.parametrize(
    ("stages", "member", "rule"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_broken_plan_is_refused_naming_the_member(
    stages: list[dict[str, Any]], member: str, rule: str
) -> None:
    with pytest.raises(PlanError) as caught:
        check_plan(plan("study", stages), "plan.json")
    assert caught.value.member == member
    assert rule in caught.value.rule


@pytest.mark.parametrize(
    ("stages", "member", "rule"),
    [
        (
            [stage("a"), {"id": "b", "runner": "unpublished"}],
            "stages[1].runner",
            "has no runner 'unpublished'",
        ),
        (
            [{"id": "a", "workflow": "no-such-workflow"}],
            "stages[0].workflow",
            "no packaged workflow is named",
        ),
        (
            [{"id": "a", "runner": "pkg:httk.workflow.plans/runners/none"}],
            "stages[0].runner",
            "has no resource",
        ),
        (
            [{"id": "a", "workflow": "vasp-relax", "inputs": {"structure": "si.vasp"}}],
            "stages[0].inputs",
            "cannot read",
        ),
        (
            [{"id": "a", "workflow": "vasp-relax", "inputs": {"structur": "si.vasp"}}],
            "stages[0].inputs",
            "input 'structur': is not an input of workflow 'vasp-relax'",
        ),
        ([stage("a", "b"), stage("b", "a")], "stages", "a -> b -> a"),
    ],
    ids=[
        "unknown runner",
        "unknown workflow",
        "unknown installed runner",
        "unreadable input",
        "unknown input",
        "cycle",
    ],
)
def test_submit_refuses_before_anything_is_written(
    ws: Workspace, tmp_path: Path, stages: list[dict[str, Any]], member: str, rule: str
) -> None:
    before = (_payload_space(ws), _state_markers(ws))
    with pytest.raises(PlanError) as caught:
        submit(ws, tmp_path, plan("study", stages))
    assert caught.value.member == member
    assert rule in str(caught.value)
    assert (_payload_space(ws), _state_markers(ws)) == before


def test_a_workflow_stage_needs_the_extensions_of_its_workflow(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "si.vasp").write_text(
        "Si\n1\n5.4 0 0\n0 5.4 0\n0 0 5.4\nSi\n2\nDirect\n0 0 0\n0.25 0.25 0.25\n"
    )
    document = plan("study", [{"id": "relax", "workflow": "vasp-relax", "inputs": {"structure": "si.vasp"}}])
    with pytest.raises(PlanError, match="needs the workspace extension transactional-data-v1"):
        submit(ws, tmp_path, document)
    assert _state_markers(ws) == []


def test_find_cycle_and_critical_path_on_a_long_chain_do_not_recurse() -> None:
    chain = {f"s{i}": [f"s{i - 1}"] if i else [] for i in range(20_000)}
    assert find_cycle(chain) is None
    assert critical_path_length(chain) == 20_000
    chain["s0"] = ["s19999"]
    cycle = find_cycle(chain)
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) == 20_001
