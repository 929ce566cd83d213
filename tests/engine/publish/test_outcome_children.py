"""Child bundles in an outcome: every defect refuses the whole set, registration is step 5 and idempotent.

A parent is driven to ``running`` with real transitions and no process; its outcome is written by hand
(``tests/joinkit.py``) and committed with :func:`_commit.commit`, exactly as a reaped attempt is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.manager import _commit, _recovery
from httk.workflow.engine.manager._launch import plan
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.publish import _outcome as _children
from httk.workflow.engine.publish._outcome import read_outcome
from httk.workflow.engine.publish._submit import SubmitStatus, Submitter
from httk.workflow.protocol._digest import job_digest

from tests.conftest import minimal_job
from tests.joinkit import (
    PARENT_PLACEMENT,
    Bundle,
    Publication,
    all_markers,
    current,
    frame_of,
    join_of,
    make_child,
    manager_state,
    running_parent,
    state_fixture,  # noqa: F401 (a fixture)
    submit_job,
    to_running,
    ws_fixture,  # noqa: F401 (a fixture)
)


@pytest.fixture
def pub(state: ManagerState) -> Publication:
    return running_parent(state)


def commit(pub: Publication) -> Frame:
    """Commit what the parent published; return the parent's frame afterwards."""
    outcome = read_outcome(pub.control)
    _commit.commit(pub.state, pub.marker, pub.frame, pub.job, outcome=outcome)
    return frame_of(pub.state.workspace, current(pub.state.workspace, PARENT_PLACEMENT, pub.key))


def three(pub: Publication) -> list[Bundle]:
    return [pub.bundle(label) for label in ("alpha", "beta", "gamma")]


def child_markers(ws: Workspace, bundles: list[Bundle]) -> list[list[Path]]:
    """The markers of each bundle's child, in the bundles' order."""
    found: dict[str, list[Path]] = {bundle.key: [] for bundle in bundles}
    for key, path in all_markers(ws):
        if key in found:
            found[key].append(path)
    return [found[bundle.key] for bundle in bundles]


# -- every defect: protocol_error, no child registered ---------------------------------------------
Defect = Callable[[Publication, list[Bundle]], tuple[dict[str, Any], dict[str, Any] | None]]


def _wait(pub: Publication, bundles: list[Bundle], **join: Any) -> dict[str, Any]:
    return pub.outcome("wait", next_step="gather", join={**join_of(bundles), **join})


def _spawn(bundles: list[Bundle]) -> dict[str, Any]:
    return {"format": "httk-workflow-spawn", "format_version": 1, "children": [b.entry for b in bundles]}


def _entry(member: str, value: Any) -> Defect:
    def apply(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        bundles[1].entry[member] = value
        return pub.outcome("advance", next_step="next"), None

    return apply


def _job(change: Callable[[dict[str, Any]], None]) -> Defect:
    def apply(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        change(bundles[2].job)
        return pub.outcome("succeed"), None

    return apply


def _spawn_document(document: dict[str, Any]) -> Defect:
    def apply(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return pub.outcome("advance", next_step="next"), document

    return apply


def _duplicate_label(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    bundles[2].entry["label"] = bundles[0].label
    return pub.outcome("succeed"), None


def _duplicate_spawn_id(
    pub: Publication, bundles: list[Bundle]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    bundles[2].entry["spawn_id"] = bundles[0].entry["spawn_id"]
    return pub.outcome("succeed"), None


def _missing_bundle(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    spawn = _spawn(bundles)
    del bundles[1]
    return pub.outcome("succeed"), spawn


def _extra_bundle(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    return pub.outcome("succeed"), _spawn(bundles[:2])


def _renamed_bundle(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    bundles[0].directory = f"other--{bundles[0].job['id']}"
    return pub.outcome("succeed"), None


def _symlink(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    bundles[0].files = {}
    return pub.outcome("succeed"), None


def _parents_own_id(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    bundles[0].entry.update(job_id=pub.marker.job_id, job_key=f"alpha--{pub.marker.job_id}")
    return pub.outcome("succeed"), None


def _twice_in_join(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    outcome = _wait(pub, bundles)
    outcome["join"]["children"].append(dict(outcome["join"]["children"][0]))
    return outcome, None


def _with_action(action: str, **members: Any) -> Defect:
    def apply(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return pub.outcome(action, **members), None

    return apply


def _join(**join: Any) -> Defect:
    def apply(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        return _wait(pub, bundles, **join), None

    return apply


def _join_child(change: Callable[[dict[str, Any]], None]) -> Defect:
    def apply(pub: Publication, bundles: list[Bundle]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        outcome = _wait(pub, bundles)
        change(outcome["join"]["children"][1])
        return outcome, None

    return apply


def _unknown_join_child(
    pub: Publication, bundles: list[Bundle]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    outcome = _wait(pub, bundles)
    stranger = minimal_job()
    outcome["join"]["children"].append(
        {
            "workspace_id": pub.state.workspace.workspace_id,
            "job_id": stranger["id"],
            "job_key": f"x--{stranger['id']}",
            "placement_hint": "nowhere",
        }
    )
    return outcome, None


def _set(member: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        document[member] = value

    return change


def _drop(member: str) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        del document[member]

    return change


def _parent_member(member: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        document["parent"] = {**document["parent"], member: value}

    return change


DEFECTS: dict[str, tuple[Defect, str]] = {
    "spawn format": (_spawn_document({"format": "x", "format_version": 1, "children": []}), "format"),
    "spawn children not an array": (
        _spawn_document({"format": "httk-workflow-spawn", "format_version": 1, "children": {}}),
        "must be an array",
    ),
    "entry without label": (_entry("label", None), "label is required"),
    "label not tag syntax": (_entry("label", "Beta_Label"), "child label"),
    "duplicate label": (_duplicate_label, "appears twice"),
    "duplicate spawn id": (_duplicate_spawn_id, "appears twice"),
    "other workspace": (_entry("workspace_id", "00000000-0000-4000-8000-000000000000"), "not this workspace"),
    "job key of another id": (_entry("job_key", "beta--00000000-0000-4000-8000-000000000000"), "job_key"),
    "placement escapes": (_entry("placement", "a/../b"), "placement"),
    "placement in the parent's payload": (_entry("placement", "PARENT"), "inside the parent's payload"),
    "bundle missing": (_missing_bundle, "has no bundle"),
    "bundle not in spawn.json": (_extra_bundle, "does not name"),
    "bundle named otherwise": (_renamed_bundle, "has no bundle"),
    "runner symlink in bundle": (_symlink, "symlinks are refused"),
    "child id is the parent's": (_parents_own_id, "parent's own"),
    "invalid child job.json": (_job(_drop("claim")), "claim"),
    "child job.json of another id": (_job(_set("id", "00000000-0000-4000-8000-000000000000")), "job key"),
    "child job.json of another tag": (_job(_set("tag", "other")), "job key"),
    "child without parent": (_job(_set("parent", None)), "parent must be"),
    "child of another activation": (
        _job(_parent_member("activation_id", "00000000-0000-4000-8000-000000000000")),
        "parent must be",
    ),
    "child without the parent's placement": (
        _job(_parent_member("placement", "elsewhere")),
        "parent must be",
    ),
    "children with fail": (
        _with_action("fail", failure={"code": "x.y", "message": "no"}),
        "only with advance, succeed or wait",
    ),
    "children with retry": (_with_action("retry", retry={"reason": "again"}), "not with 'retry'"),
    "children with pause": (_with_action("pause", pause={"reason": "look"}), "not with 'pause'"),
    "join without placement_hint": (_join_child(_drop("placement_hint")), "placement_hint is required"),
    "join without job_key": (_join_child(_drop("job_key")), "job_key is required"),
    "join hint differs from spawn": (_join_child(_set("placement_hint", "elsewhere")), "disagrees"),
    "join child neither spawned nor existing": (_unknown_join_child, "neither spawned"),
    "join twice the same child": (_twice_in_join, "more than once"),
    "join condition unknown": (_join(condition="most_succeeded"), "condition"),
    "at_least without count": (_join(condition="at_least"), "join.count"),
    "at_least count too large": (_join(condition="at_least", count=4), "join.count"),
    "count without at_least": (_join(count=1), "applies only to at_least"),
    "empty join": (_join(children=[]), "nonempty"),
    "on_impossible advance to no step": (
        _join(on_impossible={"action": "advance", "next_step": ".x"}),
        "next_step",
    ),
    "on_impossible not an object": (_join(on_impossible="gather"), "must be an object"),
    "join not an object": (_with_action("wait", next_step="gather", join=[]), "join object"),
}


@pytest.mark.parametrize("name", list(DEFECTS))
def test_a_defect_makes_the_outcome_unusable_and_registers_no_child(pub: Publication, name: str) -> None:
    defect, needle = DEFECTS[name]
    bundles = three(pub)
    outcome, spawn = defect(pub, bundles)
    for bundle in bundles:  # the placeholder resolved now that the parent's key is known
        if bundle.entry["placement"] == "PARENT":
            bundle.entry["placement"] = f"{PARENT_PLACEMENT}/{pub.key}/inside"
    if name == "runner symlink in bundle":
        pub.publish(outcome, bundles, spawn=spawn)
        bundle_dir = pub.control / "outcome.ready" / "children" / "jobs" / bundles[0].directory
        os.symlink("/bin/sh", bundle_dir / "runner-link")
    else:
        pub.publish(outcome, bundles, spawn=spawn)
    frame = commit(pub)
    assert frame["kind"] == "failed", frame
    assert frame["failure"]["code"] == "protocol_error"
    assert needle in frame["failure"]["message"], frame["failure"]["message"]
    ws = pub.state.workspace
    assert {key for key, _path in all_markers(ws)} == {pub.key}
    assert not any((ws.root / PARENT_PLACEMENT / f"{pub.key}.children").glob("*/*"))


def test_a_different_job_already_at_the_destination_refuses_the_set(pub: Publication) -> None:
    bundles = three(pub)
    squatter = minimal_job(id=bundles[1].job["id"], tag=bundles[1].label)
    destination = pub.state.workspace.payload_path(bundles[1].placement, bundles[1].key)
    destination.mkdir(parents=True)
    (destination / "job.json").write_text(json.dumps(squatter))
    pub.publish(pub.outcome("succeed"), bundles)
    frame = commit(pub)
    assert (frame["kind"], frame["failure"]["code"]) == ("failed", "protocol_error")
    assert "already holds a different job" in frame["failure"]["message"]
    assert {key for key, _ in all_markers(pub.state.workspace)} == {pub.key}


# -- registration ------------------------------------------------------------------------------------
@pytest.mark.parametrize("action", ["advance", "succeed"])
def test_detached_children_are_registered_with_advance_and_succeed(pub: Publication, action: str) -> None:
    bundles = three(pub)
    members = {"next_step": "next"} if action == "advance" else {}
    pub.publish(pub.outcome(action, **members), bundles)
    frame = commit(pub)
    assert frame["kind"] == ("ready" if action == "advance" else "succeeded")
    ws = pub.state.workspace
    for bundle, paths in zip(bundles, child_markers(ws, bundles), strict=True):
        assert [path.parent for path in paths] == [ws.marker_dir(Kind.SUBMITTED, bundle.placement)]
        placed = ws.payload_path(bundle.placement, bundle.key)
        assert json.loads((placed / "job.json").read_text()) == bundle.job
        assert (placed / "files" / "runner").read_bytes() == b"#!/bin/sh\n"


def test_a_wait_registers_its_children_before_the_parent_waits(pub: Publication) -> None:
    bundles = three(pub)
    pub.publish(_wait(pub, bundles), bundles)
    frame = commit(pub)
    assert frame["kind"] == "waiting"
    assert frame["next_step"] == "gather" and frame["first_unresolved_at"] is None
    assert [child["label"] for child in frame["join"]["children"]] == ["alpha", "beta", "gamma"]
    assert all(len(paths) == 1 for paths in child_markers(pub.state.workspace, bundles))
    committing = pub.state.workspace.reader.read(frame["previous_record_ref"])
    assert [child["label"] for child in committing["spawned"]] == ["alpha", "beta", "gamma"]
    assert committing["spawned"][0]["job_digest"] == job_digest(
        (pub.state.workspace.payload_path(bundles[0].placement, bundles[0].key) / "job.json").read_bytes()
    )


def test_a_join_may_name_a_child_that_already_exists(state: ManagerState, pub: Publication) -> None:
    older = make_child(state, "proj/older", Kind.SUCCEEDED)
    bundles = [pub.bundle("fresh")]
    outcome = _wait(pub, bundles)
    outcome["join"]["children"].append({k: v for k, v in older.items() if k != "label"})
    pub.publish(outcome, bundles)
    frame = commit(pub)
    assert frame["kind"] == "waiting"
    assert [child.get("label") for child in frame["join"]["children"]] == ["fresh", None]


def test_replay_after_registering_half_registers_the_missing_set_once(
    pub: Publication, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundles = three(pub)
    pub.publish(_wait(pub, bundles), bundles)
    original = Submitter.submit_bundle
    calls: list[str] = []

    def crash_on_the_second(self: Any, bundle: Path, *args: Any) -> Any:
        calls.append(bundle.name)
        if len(calls) == 2:
            raise SystemExit("crash")  # the manager died half-way through step 5
        return original(self, bundle, *args)

    monkeypatch.setattr(Submitter, "submit_bundle", crash_on_the_second)
    with pytest.raises(SystemExit):
        commit(pub)
    monkeypatch.setattr(Submitter, "submit_bundle", original)
    ws = pub.state.workspace
    committing = current(ws, PARENT_PLACEMENT, pub.key)
    assert committing.kind is Kind.COMMITTING
    assert [len(paths) for paths in child_markers(ws, bundles)] == [1, 0, 0]
    # A second manager replays the commit: the identical child is accepted, the missing two registered.
    successor = manager_state(ws)
    assert _recovery.on_committing(successor, committing) is True
    assert current(ws, PARENT_PLACEMENT, pub.key).kind is Kind.WAITING
    assert [len(paths) for paths in child_markers(ws, bundles)] == [1, 1, 1]


def test_registration_is_idempotent(pub: Publication) -> None:
    bundles = three(pub)
    pub.publish(_wait(pub, bundles), bundles)
    commit(pub)
    ws = pub.state.workspace
    committing = ws.reader.read(frame_of(ws, current(ws, PARENT_PLACEMENT, pub.key))["previous_record_ref"])
    spawned = _children.spawned_of(committing)
    again = _children.register_children(ws, pub.control, spawned)
    assert [result.status for result in again] == [SubmitStatus.ALREADY_SUBMITTED] * 3
    assert all(len(paths) == 1 for paths in child_markers(ws, bundles))


def test_a_placed_child_without_its_marker_gets_the_marker_on_replay(pub: Publication) -> None:
    bundles = three(pub)
    pub.publish(_wait(pub, bundles), bundles)
    commit(pub)
    ws = pub.state.workspace
    [lost] = child_markers(ws, bundles[:1])
    lost[0].unlink()  # as if the crash fell between the payload rename and the marker rename
    committing = ws.reader.read(frame_of(ws, current(ws, PARENT_PLACEMENT, pub.key))["previous_record_ref"])
    results = _children.register_children(ws, pub.control, _children.spawned_of(committing))
    assert [result.status for result in results] == [
        SubmitStatus.COMPLETED_ORPHAN,
        SubmitStatus.ALREADY_SUBMITTED,
        SubmitStatus.ALREADY_SUBMITTED,
    ]


def test_the_same_uuid_with_other_content_at_registration_fails_the_parent(
    pub: Publication, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundles = three(pub)
    pub.publish(_wait(pub, bundles), bundles)
    ws = pub.state.workspace
    original = _children.register_children

    def squat_then_register(workspace: Workspace, control: Path, spawned: list[Any]) -> Any:
        destination = workspace.payload_path(bundles[2].placement, bundles[2].key)
        destination.mkdir(parents=True)
        (destination / "job.json").write_text(json.dumps(minimal_job(id=bundles[2].job["id"])))
        return original(workspace, control, spawned)

    monkeypatch.setattr(_commit, "register_children", squat_then_register)
    frame = commit(pub)
    assert (frame["kind"], frame["failure"]["code"]) == ("failed", "protocol_error")
    assert "gamma" in frame["failure"]["message"] and "different definition" in frame["failure"]["message"]
    # Registration is never rolled back: the first two children stay registered.
    assert [len(paths) for paths in child_markers(ws, bundles)] == [1, 1, 0]


def test_a_wait_beyond_the_activation_budget_fails_but_keeps_its_children(state: ManagerState) -> None:
    pub = running_parent(state, retry_policy={"maximum_activations": 1})
    bundles = three(pub)
    pub.publish(_wait(pub, bundles), bundles)
    frame = commit(pub)
    assert (frame["kind"], frame["failure"]["code"]) == ("failed", "budget_exhausted")
    assert all(len(paths) == 1 for paths in child_markers(state.workspace, bundles))


def test_terminal_frames_keep_the_attempt_and_its_workdir(pub: Publication) -> None:
    pub.publish(pub.outcome("succeed"))
    frame = commit(pub)
    assert frame["attempt_id"] == pub.frame["attempt_id"]
    assert frame["workdir"] == pub.frame["workdir"]


def test_the_join_summary_belongs_to_its_activation_only(state: ManagerState, pub: Publication) -> None:
    """Carried through every frame of the activation a join started, dropped by the next activation."""
    ws = state.workspace
    _job, key = submit_job(ws, "proj/q")
    running, frame = to_running(state, "proj/q", key)
    summary = {"condition": "all_terminal", "decision": "satisfied", "observations": [{"label": "x"}]}
    frame = frame.with_members(join_summary=summary)
    job = state.jobs.get(running)
    attempt = plan(state, running, frame, job)
    assert attempt.join == summary and attempt.children == [{"label": "x"}]
    (job.payload_dir / f".httk-attempt.{frame['attempt_id']}" / "outcome.ready").mkdir()
    outcome = {
        "format": "httk-workflow-outcome",
        "format_version": 1,
        "job_id": running.job_id,
        "activation_id": frame["activation_id"],
        "attempt_id": frame["attempt_id"],
        "action": "advance",
        "next_step": "later",
    }
    _commit.commit(state, running, frame, job, outcome=outcome)
    ready = frame_of(ws, current(ws, "proj/q", key))
    assert ready["kind"] == "ready" and "join_summary" not in ready
    committing = ws.reader.read(ready["previous_record_ref"])
    assert committing["join_summary"] == summary
