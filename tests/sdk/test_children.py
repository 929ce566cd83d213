"""Attempt.spawn and Attempt.wait: drafts, discarding, joining existing children, and reading a join.

Byte layouts against Bash are tests/sdk/test_children_parity.py; these are the Python-only behaviours.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.sdk import Attempt, ChildRef, OutcomeAlreadyPublishedError, OutcomeError

from tests.conftest import minimal_job
from tests.sdk.attempts import JOB_ID, make_attempt

AFTER_JOIN = Path(__file__).resolve().parents[1] / "models" / "documents" / "attempt-context.after-join.json"


def attempt(root: Path, **job: Any) -> Attempt:
    layout = make_attempt(root)
    document = minimal_job(**{"id": JOB_ID, "runner": {"backend": "path", "path": "runner.py"}, **job})
    (layout.job_dir / "job.json").write_text(json.dumps(document))
    (layout.job_dir / "runner.py").write_text("print('hi')\n")
    return Attempt.load(layout.context_path, environ=layout.environ())


def drafts(a: Attempt) -> list[Path]:
    return sorted(a.control_dir.glob("outcome.tmp.*"))


def test_a_spawn_writes_its_bundle_into_a_draft_at_once(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    child = a.spawn("relax", label="one", inputs={"n": 1})
    [draft] = drafts(a)
    bundle = draft / "children" / "jobs" / child.job_key
    assert json.loads((bundle / "job.json").read_text())["inputs"] == {"n": 1}
    assert (bundle / "runner.py").read_text() == "print('hi')\n"
    assert not (a.control_dir / "outcome.ready").exists()
    a.wait("gather")
    assert drafts(a) == []
    spawn = json.loads((a.control_dir / "outcome.ready" / "children" / "spawn.json").read_text())
    assert [entry["job_key"] for entry in spawn["children"]] == [child.job_key]


@pytest.mark.parametrize("action", ["fail", "retry", "pause"])
def test_an_unfinished_step_discards_its_children(tmp_path: Path, action: str) -> None:
    a = attempt(tmp_path)
    a.spawn("relax", label="one")
    if action == "fail":
        a.fail("x.broken", "it broke")
    else:
        getattr(a, action)("a reason")
    ready = a.control_dir / "outcome.ready"
    assert sorted(path.name for path in ready.iterdir()) == ["outcome.json"]
    assert drafts(a) == []


def test_a_runner_outside_the_payload_is_not_copied(tmp_path: Path) -> None:
    runner = {"backend": "path", "source": "workspace", "path": "shared", "sha256": "0" * 64}
    a = attempt(tmp_path, runner=runner)
    child = a.spawn("relax", label="one")
    [draft] = drafts(a)
    assert sorted(p.name for p in (draft / "children" / "jobs" / child.job_key).iterdir()) == ["job.json"]


def test_extra_payload_files_go_into_the_childs_bundle(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    child = a.spawn("relax", label="one", files={"files/POSCAR": b"Si\n", "notes.txt": b"n"})
    [draft] = drafts(a)
    bundle = draft / "children" / "jobs" / child.job_key
    assert (bundle / "files" / "POSCAR").read_bytes() == b"Si\n"
    assert sorted(p.name for p in bundle.iterdir()) == ["files", "job.json", "notes.txt", "runner.py"]


@pytest.mark.parametrize(
    "name",
    ["job.json", "/abs", "../out", "a//b", "./x", ".httk-job/s.json", ".httk-attempt.x/y", "runner.py", ""],
)
def test_a_payload_file_a_spawn_may_not_write_is_refused(tmp_path: Path, name: str) -> None:
    a = attempt(tmp_path)
    with pytest.raises(OutcomeError, match="is not a payload file a spawn may write") as caught:
        a.spawn("relax", label="one", files={name: b"x"})
    assert caught.value.argument == "files"
    assert drafts(a) == []


def test_payload_file_content_must_be_bytes(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    with pytest.raises(OutcomeError, match="content must be bytes, not str"):
        a.spawn("relax", label="one", files={"notes.txt": "text"})  # type: ignore[dict-item]


def test_overrides_replace_the_inherited_members(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    child = a.spawn(
        "relax",
        label="one",
        workdir={"mode": "isolated"},
        claim={"pool": "gpu"},
        retry_policy={"maximum_activations": 2},
        data={"mode": "transactional"},
    )
    [draft] = drafts(a)
    job = json.loads((draft / "children" / "jobs" / child.job_key / "job.json").read_text())
    assert (job["workdir"], job["claim"], job["retry_policy"], job["data"]) == (
        {"mode": "isolated"},
        {"pool": "gpu"},
        {"maximum_activations": 2},
        {"mode": "transactional"},
    )


def test_an_invalid_override_is_named(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    with pytest.raises(OutcomeError) as raised:
        a.spawn("relax", label="one", workdir={"mode": "somewhere"})
    assert raised.value.argument == "workdir"
    assert drafts(a) == []


def test_a_wait_may_join_existing_children(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    existing = {
        "workspace_id": a.workspace_id,
        "job_id": "411d9e6e-c050-451d-a851-e20f2570d7c5",
        "job_key": "branch-a--411d9e6e-c050-451d-a851-e20f2570d7c5",
        "placement": "project-17/0/041",  # an observation names it placement
    }
    fresh = a.spawn("relax", label="fresh")
    a.wait("gather", children=[existing, fresh], condition="all_terminal")
    join = json.loads((a.control_dir / "outcome.ready" / "outcome.json").read_text())["join"]
    assert join["children"][0]["placement_hint"] == "project-17/0/041"
    assert join["children"][1] == fresh.join_reference()
    with pytest.raises(OutcomeError):
        attempt(tmp_path / "other").wait("gather", children=[{"job_id": "x"}])


def test_a_spawn_after_the_outcome_is_refused(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    a.succeed()
    with pytest.raises(OutcomeAlreadyPublishedError):
        a.spawn("relax", label="late")


def test_a_child_ref_names_its_child(tmp_path: Path) -> None:
    child = attempt(tmp_path).spawn("relax", label="one", tag="t")
    assert isinstance(child, ChildRef)
    assert (child.label, child.step, child.job_key) == ("one", "relax", f"t--{child.job_id}")
    assert child.spawn_entry()["placement"] == child.join_reference()["placement_hint"] == child.placement


def test_the_step_after_a_join_reads_its_children(tmp_path: Path) -> None:
    context = json.loads(AFTER_JOIN.read_text())
    layout = make_attempt(tmp_path, join=context["join"], children=context["children"])
    a = Attempt.load(layout.context_path, environ=layout.environ())
    assert {child["label"]: child["kind"] for child in a.children} == {
        "branch-a": "succeeded",
        "branch-b": "failed",
    }
    assert a.children[1]["failure"]["code"] == "vasp.nonconvergent"
    assert a.join is not None and a.join["decision"] == "satisfied"
    assert a.join["observations"][0]["workdir_path"].endswith("/run")
    plain = Attempt.load(make_attempt(tmp_path / "plain").context_path)
    assert plain.children == [] and plain.join is None
