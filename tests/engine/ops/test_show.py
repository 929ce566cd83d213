"""``job show`` and ``job log`` in the engine, on jobs the real manager ran, and on damaged journals."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init
from httk.workflow.engine.ops._history import follow_history, job_history
from httk.workflow.engine.ops._show import declarations, job_output, show_job
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import RecordRef

from tests.conftest import minimal_job
from tests.inspectkit import Built, build, copy, set_visibility_deadline


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("inspect")
    return build(base / "ws", base / "scratch")


@pytest.fixture
def ws(built: Built) -> Iterator[Workspace]:
    yield attach(built.root, writable=False)


def transitions(entries: list[dict[str, Any]]) -> list[str]:
    return [f"{e['from']}->{e['kind']}" for e in entries]


# -- show --------------------------------------------------------------------------------------------
def test_show_a_succeeded_two_step_job(built: Built, ws: Workspace) -> None:
    report = show_job(ws, built.marker("two_steps"))
    assert (report["kind"], report["generation"], report["placement"]) == ("succeeded", 9, "proj-a/00")
    assert report["state"]["step"] == "collect" and report["initial_step"] == "prepare"
    assert report["state"]["runner_steps"] == ["prepare", "collect"]
    assert report["budgets"]["maximum_activations"] == {"limit": 50, "used": 2}
    assert report["budgets"]["maximum_total_attempts"] == {"limit": 100, "used": 2}
    assert report["workdir_path"] == str(built.payload("two_steps") / "run")
    assert report["payload_exists"] and report["data_path"] is None
    assert report["job"]["digest"] == report["state"]["job_digest"]
    assert (report["frame_problem"], report["job_problem"]) == (None, None)
    assert "owner" not in report and "failure" not in report


def test_show_reports_the_failure_of_a_failed_job_and_the_pause_of_a_paused_one(
    built: Built, ws: Workspace
) -> None:
    failed = show_job(ws, built.marker("broken"))
    assert failed["failure"] == {"code": "bad_input", "message": "the structure is unphysical"}
    paused = show_job(ws, built.marker("paused"))
    assert paused["kind"] == "paused" and paused["pause"] == {"reason": "look at me"}


def test_show_a_job_no_manager_registered(built: Built, ws: Workspace) -> None:
    report = show_job(ws, built.marker("late"))
    assert (report["kind"], report["generation"], report["record_ref"]) == ("submitted", 0, "init")
    assert report["state"] == {} and report["initial_step"] == "prepare"
    assert report["budgets"]["maximum_activations"]["used"] == 0
    assert report["priority"] == 100


def test_show_keeps_going_when_job_json_is_broken(built: Built, tmp_path: Path) -> None:
    damaged = copy(built, tmp_path / "ws")
    (damaged.payload("gpu") / "job.json").write_text('{"format": "httk-workflow-job"')
    report = show_job(attach(damaged.root, writable=False), damaged.marker("gpu"))
    assert report["job"] is None and "job.json" in report["job_problem"]
    assert report["state"]["step"] == "prepare"


# -- log ---------------------------------------------------------------------------------------------
def test_log_walks_the_chain_oldest_first(built: Built, ws: Workspace) -> None:
    entries = job_history(ws, built.marker("two_steps"))
    assert [e["generation"] for e in entries] == list(range(1, 10))
    assert transitions(entries) == [
        "submitted->ready",
        "ready->claimed",
        "claimed->running",
        "running->committing",
        "committing->ready",
        "ready->claimed",
        "claimed->running",
        "running->committing",
        "committing->succeeded",
    ]
    assert [e["step"] for e in entries] == ["prepare"] * 4 + ["collect"] * 5
    assert entries[1]["attempt_ordinal"] == 1 and entries[1]["manager_id"]


def test_log_shows_a_retry_with_its_failure(built: Built, ws: Workspace) -> None:
    entries = job_history(ws, built.marker("flaky"))
    retry = next(e for e in entries if e["reason"] == "retry")
    assert retry["from"] == "running" and retry["kind"] == "ready"
    assert retry["last_failure"]["code"] == "process_failure"
    assert entries[-1]["total_attempts"] == 2


def test_a_limited_log_still_knows_where_its_oldest_line_came_from(built: Built, ws: Workspace) -> None:
    entries = job_history(ws, built.marker("two_steps"), limit=3)
    assert [e["generation"] for e in entries] == [7, 8, 9]
    assert transitions(entries)[0] == "claimed->running"
    assert job_history(ws, built.marker("late")) == []


def _ref_of(ws: Workspace, marker: MarkerLocation, generation: int) -> RecordRef:
    [entry] = [e for e in job_history(ws, marker) if e["generation"] == generation]
    return RecordRef.parse(entry["record_ref"])


def test_a_corrupt_frame_is_reported_in_place_and_the_walk_stops(built: Built, tmp_path: Path) -> None:
    damaged = copy(built, tmp_path / "ws")
    ws = attach(damaged.root, writable=False)
    marker = damaged.marker("two_steps")
    ref = _ref_of(ws, marker, 4)
    segment = damaged.root / ".httk-workflow" / "journal" / ref.writer / "0.hwj"
    with open(segment, "r+b") as handle:
        handle.seek(ref.offset + 8 + 3)
        byte = handle.read(1)
        handle.seek(ref.offset + 8 + 3)
        handle.write(bytes([byte[0] ^ 0x20]))

    entries = job_history(ws, marker)

    assert entries[0]["problem"]["code"] == "checksum_mismatch"
    assert (entries[0]["generation"], entries[0]["record_ref"]) == (4, str(ref))
    assert [e["generation"] for e in entries[1:]] == [5, 6, 7, 8, 9]
    assert entries[1]["from"] is None  # the frame that said where g5 came from is the damaged one
    assert show_job(ws, marker)["frame_problem"] is None  # the head frame is intact


def test_a_truncated_segment_is_a_short_read_after_the_visibility_deadline(
    built: Built, tmp_path: Path
) -> None:
    damaged = copy(built, tmp_path / "ws")
    set_visibility_deadline(damaged.root, 0.05)
    ws = attach(damaged.root, writable=False)
    heads = {label: damaged.marker(label) for label in ("two_steps", "flaky", "broken", "paused", "gpu")}
    label, newest = max(heads.items(), key=lambda item: item[1].name.ref.offset)  # type: ignore[union-attr]
    ref = newest.name.ref
    assert ref is not None
    os.truncate(damaged.root / ".httk-workflow" / "journal" / ref.writer / "0.hwj", ref.offset + 20)

    report = show_job(ws, newest)
    entries = job_history(ws, newest)

    assert report["frame_problem"]["code"] == "short_read"
    assert report["state"] == {}
    assert [e.get("problem", {}).get("code") for e in entries] == ["short_read"]
    others = [job_history(ws, marker) for name, marker in heads.items() if name != label]
    assert all("problem" not in entry for history in others for entry in history)


def test_a_frame_of_another_job_is_an_identity_mismatch(built: Built, tmp_path: Path) -> None:
    damaged = copy(built, tmp_path / "ws")
    ws = attach(damaged.root, writable=False)
    paused, broken = damaged.marker("paused"), damaged.marker("broken")
    assert broken.name.ref is not None
    forged = paused.path(ws).with_name(f"{paused.job_key}.p500.g5.{broken.name.ref}")
    paused.path(ws).rename(forged)

    marker = damaged.marker("paused")
    assert job_history(ws, marker)[0]["problem"]["code"] == "identity_mismatch"
    assert show_job(ws, marker)["frame_problem"]["code"] == "identity_mismatch"


# -- output ------------------------------------------------------------------------------------------
def test_output_of_a_succeeded_job_is_its_stdio_log(built: Built, ws: Workspace) -> None:
    log, attempts = job_output(ws, built.marker("two_steps"))
    assert log is not None and attempts == []
    text = log.read_text()
    assert "preparing" in text and "collecting" in text and "collected" in text
    assert text.index("step 'prepare'") < text.index("step 'collect'")


def test_output_of_a_failed_job_is_its_retained_attempt(built: Built, ws: Workspace) -> None:
    log, [attempt] = job_output(ws, built.marker("broken"))
    assert log is None
    assert (attempt.step, attempt.attempt_ordinal, attempt.total_attempts) == ("prepare", 1, 1)
    assert attempt.stdout is not None and attempt.stdout.read_text() == "checking the input\n"
    assert attempt.stderr is not None and attempt.stderr.read_text() == "unphysical!\n"


# -- follow ------------------------------------------------------------------------------------------
def test_follow_stops_at_its_time_limit_when_nothing_moves(built: Built, ws: Workspace) -> None:
    assert list(follow_history(ws, built.marker("gpu"), timeout=0.2, min_interval=0.01)) == []


def test_follow_returns_at_once_for_a_permanent_kind(built: Built, ws: Workspace) -> None:
    assert list(follow_history(ws, built.marker("two_steps"))) == []


def test_follow_reports_a_vanished_marker(built: Built, tmp_path: Path) -> None:
    damaged = copy(built, tmp_path / "ws")
    set_visibility_deadline(damaged.root, 0.05)
    ws = attach(damaged.root, writable=False)
    marker = damaged.marker("gpu")
    marker.path(ws).unlink()
    [entry] = follow_history(ws, marker, timeout=10.0, min_interval=0.01)
    assert entry["problem"]["code"] == "marker_vanished"


def test_show_a_waiting_job_with_the_state_of_each_child(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    parent, child = (
        r.marker for r in submit_jobs(ws, [JobSpec(minimal_job(), "p"), JobSpec(minimal_job(), "c")])
    )
    children = [
        {"job_id": child.job_id, "job_key": child.job_key, "placement_hint": "c"},
        {"job_id": child.job_id, "job_key": child.job_key, "placement_hint": "elsewhere"},
    ]
    for kind, trigger in (
        (Kind.READY, Trigger.REGISTER),
        (Kind.CLAIMED, Trigger.CLAIM),
        (Kind.RUNNING, Trigger.LAUNCH),
        (Kind.COMMITTING, Trigger.OUTCOME),
        (Kind.WAITING, Trigger.COMMIT),
    ):
        members = (
            {"join": {"condition": "all_succeeded", "children": children}} if kind is Kind.WAITING else {}
        )
        moved = move_marker(ws, parent, Frame(kind, members), trigger).current
        assert moved is not None
        parent = moved

    report = show_job(attach(ws.root, writable=False), parent)

    assert report["join"]["condition"] == "all_succeeded"
    assert [c["kind"] for c in report["join_children"]] == ["submitted", None]


def test_declarations_are_reported_by_name_unmerged_and_an_unreadable_one_is_flagged(tmp_path: Path) -> None:
    payload = tmp_path / "payload"
    folder = payload / ".httk-job" / "declarations"
    folder.mkdir(parents=True)
    (folder / "relax.json").write_text('{"seen": {"energy": -5.4}}')
    (folder / ".relax.json.tmp.0a1b").write_text("{")  # a writer's temporary name
    (folder / "notes.txt").write_text("not a declaration")
    (folder / "bad name.json").write_text("{}")
    (folder / "list.json").write_text("[1, 2]")
    (folder / "link.json").symlink_to("relax.json")
    job = {"declarations": {"relax": {"wanted": {"energy": "eV"}}, "method": {"code": "vasp"}}}

    rows = {row["name"]: row for row in declarations(payload, job)}

    assert list(rows) == ["bad name", "link", "list", "method", "relax"]
    assert rows["relax"] == {
        "name": "relax",
        "declared": {"wanted": {"energy": "eV"}},
        "observed": {"seen": {"energy": -5.4}},
        "observed_problem": None,
    }
    assert rows["method"]["observed"] is None and rows["method"]["observed_problem"] is None
    for name, problem in (
        ("bad name", "invalid declaration name 'bad name'"),
        ("link", "is a symbolic link"),
        ("list", "JSON object"),
    ):
        assert rows[name]["declared"] is None and rows[name]["observed"] is None
        assert problem in rows[name]["observed_problem"], rows[name]
    assert declarations(tmp_path / "elsewhere", None) == []
