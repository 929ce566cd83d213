"""Python and Bash publish byte-identical child bundles, spawn.json and wait outcomes for the same calls.

Each language spawns into its own copy of one attempt layout (``tests/sdk/attempts.py``) whose parent
job.json is pretty-printed, so the Bash splitter's whitespace removal is exercised. The published
``outcome.ready/`` trees are compared file by file — relative paths, bytes and modes — after the fresh
UUIDs (child ids and spawn ids) are replaced by their order of first appearance, which is the only thing
allowed to differ.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.publish._joins import parse_join
from httk.workflow.engine.publish._outcome import ParentIdentity
from httk.workflow.protocol._job_rules import validate_job
from httk.workflow.sdk import Attempt, OutcomeError

from tests.conftest import minimal_job
from tests.sdk.attempts import ACTIVATION_ID, JOB_ID, JOB_KEY, PLACEMENT, WORKSPACE_ID, Layout, make_attempt

LIBRARY = Path(__file__).resolve().parents[2] / "sdk-bash" / "httk-workflow.sh"
FIXED = {WORKSPACE_ID, JOB_ID, ACTIVATION_ID, "a6c2c973-29e1-44e2-9649-ae419e340ac4"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def layout(root: Path, *, durable: bool = False, **job: Any) -> Layout:
    """An attempt whose job.json is a full parent job (pretty, non-ASCII) with a payload runner."""
    attempt = make_attempt(root, durable=durable)
    document = minimal_job(
        id=JOB_ID,
        runner={"backend": "path", "path": "files/runner", "arguments": ["--fast", "é"]},
        inputs={"structure": "Si.cif"},
        **job,
    )
    (attempt.job_dir / "job.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    runner = attempt.job_dir / "files" / "runner"
    runner.parent.mkdir()
    runner.write_bytes(b"#!/bin/sh\necho runner\n")
    runner.chmod(0o750)
    return attempt


def published(attempt: Layout) -> dict[str, tuple[bytes, int]]:
    """Every file below outcome.ready: normalized relative path -> (normalized bytes, mode)."""
    ready = attempt.control_dir / "outcome.ready"
    files = sorted(path for path in ready.rglob("*") if path.is_file())
    order: dict[str, str] = {}

    def normal(text: str) -> str:
        def name(match: re.Match[str]) -> str:
            found = match.group(0)
            if found in FIXED:
                return found
            return order.setdefault(found, f"<uuid-{len(order)}>")

        return _UUID.sub(name, text)

    # Number the UUIDs by their order in the outcome, then spawn.json: the same in both languages.
    for first in ("outcome.json", "children/spawn.json"):
        if (ready / first).exists():
            normal((ready / first).read_text())
    return {
        normal(str(path.relative_to(ready))): (normal(path.read_text()).encode(), path.stat().st_mode & 0o777)
        for path in files
    }


def run_bash(attempt: Layout, script: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("HTTK_")}
    env.update(attempt.environ())
    code = f"set -euo pipefail\nsource {LIBRARY}\nstep_a() {{ :; }}\nstep_b() {{ :; }}\n{script}"
    return subprocess.run(["bash", "-c", code], env=env, capture_output=True, text=True, check=False)


def python_attempt(attempt: Layout) -> Attempt:
    return Attempt.load(attempt.context_path, runner_steps=["step_a", "step_b"], environ=attempt.environ())


REGISTER = "httk_workflow_register_step step_a\nhttk_workflow_register_step step_b\n"


def wait_on_defaults(a: Attempt) -> None:
    a.spawn("relax", label="a")
    a.spawn("relax", label="b", inputs={"strain": 0.01, "note": 'q"uo\\te é'})
    a.wait("gather")


def wait_with_every_option(a: Attempt) -> None:
    a.spawn("relax", label="one", tag="t1", placement="elsewhere/x y", name="first child")
    a.spawn("relax", label="two", priority=7, resources={"procs": 4, "gpus": 1}, inputs={"k": [1, 2]})
    a.spawn("clean", label="three")
    a.wait("gather", condition="at_least", count=2, on_impossible="mourn", priority=3, message="wait")


def detached_with_advance(a: Attempt) -> None:
    a.spawn("relax", label="d")
    a.advance("next", message="detached")


def detached_with_succeed(a: Attempt) -> None:
    a.spawn("relax", label="d")
    a.succeed()


def discarded_by_fail(a: Attempt) -> None:
    a.spawn("relax", label="d")
    a.fail("x.broken", "it broke")


def any_succeeded(a: Attempt) -> None:
    a.spawn("relax", label="a")
    a.wait("gather", condition="any_succeeded")


SCENARIOS: dict[str, tuple[Callable[[Attempt], None], str]] = {
    "wait on defaults": (
        wait_on_defaults,
        "httk_workflow_spawn a relax\n"
        'httk_workflow_spawn b relax --input strain=0.01 --input \'note="q\\"uo\\\\te é"\'\n'
        "httk_workflow_wait gather\n",
    ),
    "wait with every option": (
        wait_with_every_option,
        "httk_workflow_spawn one relax --tag t1 --placement 'elsewhere/x y' --name 'first child'\n"
        "httk_workflow_spawn two relax --priority 7 --resource procs=4 --resource gpus=1 --input 'k=[1,2]'\n"
        "httk_workflow_spawn three clean\n"
        "httk_workflow_wait gather --condition at_least --count 2 --on-impossible mourn --priority 3 "
        "--message wait\n",
    ),
    "detached with advance": (
        detached_with_advance,
        "httk_workflow_spawn d relax\nhttk_workflow_advance next --message detached\n",
    ),
    "detached with succeed": (detached_with_succeed, "httk_workflow_spawn d relax\nhttk_workflow_succeed\n"),
    "discarded by fail": (
        discarded_by_fail,
        "httk_workflow_spawn d relax\nhttk_workflow_fail x.broken 'it broke'\n",
    ),
    "any_succeeded": (
        any_succeeded,
        "httk_workflow_spawn a relax\nhttk_workflow_wait gather --condition any_succeeded\n",
    ),
}


@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_both_languages_publish_the_same_bytes(tmp_path: Path, name: str, durable: bool) -> None:
    python_calls, bash_calls = SCENARIOS[name]
    in_python = layout(tmp_path / "py", durable=durable)
    python_calls(python_attempt(in_python))
    in_bash = layout(tmp_path / "sh", durable=durable)
    result = run_bash(in_bash, REGISTER + bash_calls)
    assert result.returncode == 0, result.stderr
    assert published(in_bash) == published(in_python)
    leftovers = [p.name for p in in_bash.control_dir.iterdir() if p.name.startswith("outcome.tmp")]
    assert (
        leftovers
        == []
        == [p.name for p in in_python.control_dir.iterdir() if p.name.startswith("outcome.tmp")]
    )


def test_the_published_documents_pass_the_managers_rules(tmp_path: Path) -> None:
    attempt = layout(tmp_path)
    a = python_attempt(attempt)
    for label in ("a", "b", "c"):
        a.spawn("relax", label=label)
    a.wait("gather", condition="at_least", count=2)
    ready = attempt.control_dir / "outcome.ready"
    spawn = json.loads((ready / "children" / "spawn.json").read_text())
    parent = ParentIdentity(WORKSPACE_ID, JOB_ID, JOB_KEY, PLACEMENT, ACTIVATION_ID)
    for entry in spawn["children"]:
        assert entry["placement"] == f"{PLACEMENT}/{JOB_KEY}.children/0"
        job = json.loads((ready / "children" / "jobs" / entry["job_key"] / "job.json").read_text())
        validate_job(job)
        assert job["parent"] == parent.reference(entry["spawn_id"])
        assert (job["tag"], job["initial_step"], job["runner"]["arguments"]) == (
            entry["label"],
            "relax",
            ["--fast", "é"],
        )
    outcome = json.loads((ready / "outcome.json").read_text())
    join = parse_join(outcome["join"], workspace_id=WORKSPACE_ID)
    assert [child.job_key for child in join.children] == [entry["job_key"] for entry in spawn["children"]]


def test_the_thousandth_child_starts_the_next_shard(tmp_path: Path) -> None:
    attempt = layout(tmp_path)
    a = python_attempt(attempt)
    refs = [a.spawn("w", label=f"c{index}") for index in range(1001)]
    assert {ref.placement for ref in refs[:1000]} == {f"{PLACEMENT}/{JOB_KEY}.children/0"}
    assert refs[1000].placement == f"{PLACEMENT}/{JOB_KEY}.children/1"


SPAWN_X = "httk_workflow_spawn x relax\n"
INSIDE = f"{PLACEMENT}/{JOB_KEY}/in"


def spawned_x(then: Callable[[Attempt], Any]) -> Callable[[Attempt], Any]:
    def call(a: Attempt) -> Any:
        a.spawn("relax", label="x")
        return then(a)

    return call


BAD_CALLS: list[tuple[str, Callable[[Attempt], Any], str]] = [
    ("label", lambda a: a.spawn("relax", label="Bad_Label"), "httk_workflow_spawn Bad_Label relax"),
    ("label", spawned_x(lambda a: a.spawn("relax", label="x")), SPAWN_X + "httk_workflow_spawn x relax"),
    ("step", lambda a: a.spawn(".hidden", label="x"), "httk_workflow_spawn x .hidden"),
    (
        "placement",
        lambda a: a.spawn("r", label="x", placement="a/../b"),
        "httk_workflow_spawn x r --placement a/../b",
    ),
    (
        "placement",
        lambda a: a.spawn("r", label="x", placement=INSIDE),
        f"httk_workflow_spawn x r --placement {INSIDE}",
    ),
    ("tag", lambda a: a.spawn("relax", label="x", tag="a--b"), "httk_workflow_spawn x relax --tag a--b"),
    ("children", lambda a: a.wait("gather"), "httk_workflow_wait gather"),
    (
        "condition",
        spawned_x(lambda a: a.wait("g", condition="most")),
        SPAWN_X + "httk_workflow_wait g --condition most",
    ),
    (
        "count",
        spawned_x(lambda a: a.wait("g", condition="at_least")),
        SPAWN_X + "httk_workflow_wait g --condition at_least",
    ),
    (
        "count",
        spawned_x(lambda a: a.wait("g", condition="at_least", count=2)),
        SPAWN_X + "httk_workflow_wait g --condition at_least --count 2",
    ),
    ("count", spawned_x(lambda a: a.wait("g", count=1)), SPAWN_X + "httk_workflow_wait g --count 1"),
    (
        "on_impossible",
        spawned_x(lambda a: a.wait("g", on_impossible="-x")),
        SPAWN_X + "httk_workflow_wait g --on-impossible -x",
    ),
]


@pytest.mark.parametrize(("argument", "python_call", "bash_calls"), BAD_CALLS)
def test_invalid_calls_are_refused_in_both_languages_and_publish_nothing(
    tmp_path: Path, argument: str, python_call: Callable[[Attempt], Any], bash_calls: str
) -> None:
    attempt = layout(tmp_path / "py")
    with pytest.raises(OutcomeError) as raised:
        python_call(python_attempt(attempt))
    assert raised.value.argument == argument
    assert not (attempt.control_dir / "outcome.ready").exists()
    in_bash = layout(tmp_path / "sh")
    result = run_bash(in_bash, bash_calls)
    assert result.returncode == 2, result.stderr
    assert not (in_bash.control_dir / "outcome.ready").exists()
