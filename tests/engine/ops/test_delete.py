"""``job delete``: each deletable kind, the refusals, the join-parent guard, races with a claim, and crashes.

Jobs reach their state through real transitions (``tests/joinkit.py``); a "manager" claiming at the same
instant is the real claim function on the marker it observed. The workspace clock is manual, so the
delete's linger after a fence costs no real time and a claimer can act during it (``on_sleep``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, probe_marker
from httk.workflow.engine.manager import _commit
from httk.workflow.engine.manager._launch import claim_and_launch, claim_frame, register
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.ops._delete import (
    DeleteError,
    DeleteResult,
    delete_jobs,
    linger_seconds,
    plan_delete,
)
from httk.workflow.engine.publish._outcome import read_outcome

from tests.crashkit import count_mutations, run_crashing
from tests.joinkit import (
    PARENT_PLACEMENT,
    current,
    frame_of,
    fresh_workspace,
    join_of,
    make_child,
    manager_state,
    running_parent,
    submit_job,
    to_running,
    waiting_parent,
)

KIDS = "proj/kids"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[ManagerState]:
    """A manager's state on a fresh workspace whose clock is manual (``state.clock``)."""
    clock = ManualClock()
    workspace = fresh_workspace(tmp_path / "ws", clock)
    yield manager_state(workspace, clock)
    workspace.close()


@pytest.fixture
def ws(state: ManagerState) -> Workspace:
    return state.workspace


@pytest.fixture
def clock(state: ManagerState) -> ManualClock:
    assert isinstance(state.clock, ManualClock)
    return state.clock


def delete(ws: Workspace, marker: MarkerLocation, *, force: bool = False) -> DeleteResult:
    [result] = delete_jobs(ws, [plan_delete(ws, marker, force=force)], operator="tester")
    return result


def fill_payload(payload: Path, outside: Path) -> None:
    """Application files at depth, an attempt control directory, and a symlink leading out of the payload."""
    (payload / "run" / "deep" / "deeper").mkdir(parents=True)
    (payload / "run" / "deep" / "deeper" / "OUTCAR").write_text("energy\n")
    (payload / ".httk-attempt.x" / "outcome.ready").mkdir(parents=True)
    outside.write_text("not the payload's\n")
    (payload / "run" / "link").symlink_to(outside)


# -- what may be deleted ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [Kind.SUBMITTED, Kind.READY, Kind.SUCCEEDED, Kind.FAILED, Kind.CANCELLED])
def test_each_deletable_kind_loses_payload_and_marker_together(
    ws: Workspace, state: ManagerState, tmp_path: Path, kind: Kind
) -> None:
    member = make_child(state, KIDS, kind)
    payload = ws.payload_path(KIDS, member["job_key"])
    fill_payload(payload, tmp_path / "outside.txt")
    marker = current(ws, KIDS, member["job_key"])

    result = delete(ws, marker)

    assert result.error is None and result.removed is not None
    assert probe_marker(ws, KIDS, member["job_key"]) is None
    assert not payload.exists() and not payload.is_symlink()
    assert (tmp_path / "outside.txt").read_text() == "not the payload's\n"  # a symlink is never followed
    assert not list(ws.state_dir(kind).rglob("*--*"))
    if kind in (Kind.SUBMITTED, Kind.READY):
        # the fence is journaled: the removed marker named a cancelled frame recording the delete
        assert result.removed.kind is Kind.CANCELLED
        fence = frame_of(ws, result.removed)
        assert fence["reason"] == "operator_delete" and fence["operator"] == "tester"
        assert fence["cancellation"] == {"verified": "no_live_attempt"}
        assert fence["state_generation"] == marker.name.generation + 1
        if kind is Kind.READY:
            assert fence["step"] == "prepare" and fence["total_attempts"] == 0  # the activation is carried
    else:
        assert result.removed == marker


def test_a_payload_already_removed_by_hand_is_finished_by_removing_the_marker(
    ws: Workspace, state: ManagerState
) -> None:
    member = make_child(state, KIDS, Kind.SUCCEEDED)
    payload = ws.payload_path(KIDS, member["job_key"])
    for path in sorted(payload.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    payload.rmdir()

    assert delete(ws, current(ws, KIDS, member["job_key"])).error is None
    assert probe_marker(ws, KIDS, member["job_key"]) is None


@pytest.mark.parametrize("kind", [Kind.CLAIMED, Kind.RUNNING, Kind.PAUSED, Kind.CANCELLING])
def test_a_job_with_work_attached_is_refused_with_the_cancel_advice(
    ws: Workspace, state: ManagerState, kind: Kind
) -> None:
    _job, key = submit_job(ws, KIDS)
    running, frame = to_running(state, KIDS, key)
    if kind is Kind.CLAIMED:
        marker = state.move(
            running, Frame(Kind.CLAIMED, {**frame, "reason": "takeover"}), Trigger.TAKEOVER
        ).current
    elif kind is Kind.PAUSED:
        committing = state.move(
            running, Frame(Kind.COMMITTING, {**frame, "reason": "outcome"}), Trigger.OUTCOME
        )
        assert committing.current is not None
        marker = state.move(
            committing.current, Frame(Kind.PAUSED, {**frame, "reason": "pause"}), Trigger.COMMIT
        ).current
    elif kind is Kind.CANCELLING:
        marker = state.move(
            running, Frame(Kind.CANCELLING, {**frame, "reason": "fence"}), Trigger.CANCEL_FENCE
        ).current
    else:
        marker = running
    assert marker is not None and marker.kind is kind
    payload = ws.payload_path(KIDS, key)
    before = sorted(payload.rglob("*"))

    with pytest.raises(DeleteError, match=f"is {kind.value}: .*httk job request cancel {key}"):
        plan_delete(ws, marker)
    assert current(ws, KIDS, key) == marker and sorted(payload.rglob("*")) == before


def test_a_waiting_job_is_refused(ws: Workspace, state: ManagerState) -> None:
    join = {"children": [make_child(state, KIDS, Kind.READY)], "condition": "all_succeeded"}
    waiting, _key = waiting_parent(state, join)
    with pytest.raises(
        DeleteError, match="is waiting: only succeeded, failed, cancelled, submitted or ready"
    ):
        plan_delete(ws, waiting)


def test_a_payload_holding_another_jobs_payload_is_refused(ws: Workspace, state: ManagerState) -> None:
    outer = make_child(state, KIDS, Kind.SUCCEEDED)
    inner_placement = f"{KIDS}/{outer['job_key']}/inside"
    _job, inner = submit_job(ws, inner_placement)
    with pytest.raises(DeleteError, match=f"holds the payload of job {inner}"):
        plan_delete(ws, current(ws, KIDS, outer["job_key"]))
    assert probe_marker(ws, inner_placement, inner) is not None


# -- the join-parent guard -------------------------------------------------------------------------
def spawned_child(state: ManagerState) -> tuple[str, MarkerLocation]:
    """A parent committed into waiting on the one child its outcome spawned; (parent key, child marker)."""
    pub = running_parent(state)
    bundle = pub.bundle("kid")
    pub.publish(pub.outcome("wait", next_step="gather", join=join_of([bundle])), [bundle])
    _commit.commit(pub.state, pub.marker, pub.frame, pub.job, outcome=read_outcome(pub.control))
    assert current(state.workspace, PARENT_PLACEMENT, pub.key).kind is Kind.WAITING
    return pub.key, current(state.workspace, bundle.placement, bundle.key)


def test_a_child_the_waiting_parents_join_names_is_refused_unless_forced(
    ws: Workspace, state: ManagerState
) -> None:
    parent, child = spawned_child(state)
    with pytest.raises(DeleteError, match=f"join of its parent {parent} \\(waiting\\) depends on.*--force"):
        plan_delete(ws, child)
    assert probe_marker(ws, child.placement, child.job_key) == child

    assert delete(ws, child, force=True).error is None
    assert probe_marker(ws, child.placement, child.job_key) is None
    assert current(ws, PARENT_PLACEMENT, parent).kind is Kind.WAITING  # the parent is not touched


def test_a_child_whose_parent_has_finished_is_not_guarded(ws: Workspace, state: ManagerState) -> None:
    parent, child = spawned_child(state)
    waiting = current(ws, PARENT_PLACEMENT, parent)
    state.move(
        waiting,
        Frame(Kind.CANCELLED, {"cancellation": {"verified": "no_live_attempt"}, "reason": "x"}),
        Trigger.CANCEL,
    )
    assert delete(ws, child).error is None


def test_a_child_in_the_join_summary_of_a_running_parent_is_guarded(
    ws: Workspace, state: ManagerState
) -> None:
    parent, child = spawned_child(state)
    waiting = current(ws, PARENT_PLACEMENT, parent)
    frame = frame_of(ws, waiting)
    summary = {"condition": "all_succeeded", "observations": [{"job_id": child.job_id, "kind": "ready"}]}
    ready = state.move(
        waiting, Frame(Kind.READY, {**frame, "join_summary": summary, "reason": "join"}), Trigger.JOIN
    )
    assert ready.current is not None and ready.current.kind is Kind.READY
    with pytest.raises(DeleteError, match="join of its parent"):
        plan_delete(ws, child)


# -- racing a manager's claim ----------------------------------------------------------------------
def ready_job(ws: Workspace, state: ManagerState) -> tuple[MarkerLocation, Any]:
    _job, key = submit_job(ws, KIDS)
    register(state, current(ws, KIDS, key))
    marker = current(ws, KIDS, key)
    return marker, state.jobs.get(marker)  # the claimer has the job cached, as after its register pass


def test_a_claim_that_wins_first_makes_the_delete_refuse_and_touch_nothing(
    ws: Workspace, state: ManagerState
) -> None:
    observed, job = ready_job(ws, state)
    plan = plan_delete(ws, observed)
    claimed = state.move(
        observed, Frame(Kind.CLAIMED, claim_frame(state, frame_of(ws, observed), job)), Trigger.CLAIM
    )
    assert claimed.won
    files = sorted(plan.payload.rglob("*"))

    [result] = delete_jobs(ws, [plan], operator="tester")

    assert result.removed is None and result.error is not None
    assert "was ready and is claimed now" in str(result.error) and "nothing was removed" in str(result.error)
    assert current(ws, KIDS, observed.job_key) == claimed.current
    assert sorted(plan.payload.rglob("*")) == files


def test_a_claimer_holding_a_stale_ready_listing_loses_cleanly_during_the_linger(
    ws: Workspace, state: ManagerState, clock: ManualClock
) -> None:
    observed, job = ready_job(ws, state)
    outcomes: list[bool] = []

    def claim_from_stale_listing(_clock: ManualClock) -> None:
        outcomes.append(claim_and_launch(state, observed, job))
        assert current(ws, KIDS, observed.job_key).kind is Kind.CANCELLED  # what it lost to

    clock.on_sleep.append(claim_from_stale_listing)
    result = delete(ws, observed)

    assert outcomes == [False] and state.live == {}  # a lost race, nothing launched, no unavailable error
    assert clock.sleeps == [pytest.approx(linger_seconds(ws))]
    assert result.error is None and probe_marker(ws, KIDS, observed.job_key) is None


def test_a_batch_lingers_once_and_finished_jobs_never(
    ws: Workspace, state: ManagerState, clock: ManualClock
) -> None:
    finished = [current(ws, KIDS, make_child(state, KIDS, Kind.SUCCEEDED)["job_key"]) for _ in range(2)]
    delete_jobs(ws, [plan_delete(ws, marker) for marker in finished], operator="tester")
    assert clock.sleeps == []
    queued = [ready_job(ws, state)[0] for _ in range(3)]
    results = delete_jobs(ws, [plan_delete(ws, marker) for marker in queued], operator="tester")
    assert [r.error for r in results] == [None] * 3 and len(clock.sleeps) == 1


def test_a_failed_job_revived_meanwhile_is_reported_and_finished_by_a_second_delete(
    ws: Workspace, state: ManagerState
) -> None:
    member = make_child(state, KIDS, Kind.FAILED)
    observed = current(ws, KIDS, member["job_key"])
    plan = plan_delete(ws, observed)
    frame = frame_of(ws, observed)
    state.move(
        observed, Frame(Kind.READY, {**frame, "reason": "operator_continue"}), Trigger.OPERATOR_CONTINUE
    )

    [result] = delete_jobs(ws, [plan], operator="tester")

    assert result.error is not None and "marker moved meanwhile (it is ready now)" in str(result.error)
    assert not plan.payload.exists()
    assert delete(ws, current(ws, KIDS, member["job_key"])).error is None
    assert probe_marker(ws, KIDS, member["job_key"]) is None


# -- crashes ---------------------------------------------------------------------------------------
CRASH_SCENARIO = """
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.ops._delete import delete_jobs, plan_delete
from httk.workflow.engine.core._workspace import probe_marker
from httk.workflow.engine.core._workspace import attach
ws = attach({root!r}, clock=ManualClock())
marker = probe_marker(ws, {placement!r}, {key!r})
[result] = delete_jobs(ws, [plan_delete(ws, marker)], operator="crash-test")
assert result.error is None, result.error
"""


def crash_case(root: Path) -> tuple[str, str]:
    """A ready job with files at depth; the scenario code deleting it."""
    ws = fresh_workspace(root)
    state = manager_state(ws)
    marker, _job = ready_job(ws, state)
    payload = ws.payload_path(KIDS, marker.job_key)
    (payload / "run" / "deep").mkdir(parents=True)
    for name in ("a", "b"):
        (payload / "run" / "deep" / name).write_text(name)
    ws.close()
    return marker.job_key, CRASH_SCENARIO.format(root=str(root), placement=KIDS, key=marker.job_key)


def check_remains(ws: Workspace, key: str) -> MarkerLocation | None:
    """What a crash left is classifiable: no payload without a marker, no payload entries without job.json."""
    marker = probe_marker(ws, KIDS, key)
    payload = ws.payload_path(KIDS, key)
    if payload.exists():
        assert marker is not None, "a payload without a marker is an interrupted submission, not a delete"
        assert not any(payload.iterdir()) or (payload / "job.json").is_file(), "job.json goes last"
    if marker is not None:
        assert marker.kind in (Kind.READY, Kind.CANCELLED), marker
    return marker


def test_every_crash_point_of_a_delete_leaves_a_classifiable_rest_that_a_second_delete_finishes(
    tmp_path: Path,
) -> None:
    _key, code = crash_case(tmp_path / "reference")
    trace = count_mutations(code, tmp_path / "trace")
    kinds = [line.split("\t")[1] for line in trace]
    assert kinds[-2:] == ["rmdir", "unlink"]  # the payload directory, then the marker: last of all
    failures: list[str] = []
    for k in range(1, len(trace) + 1):
        root = tmp_path / f"crash-{k}"
        key, code = crash_case(root)
        run_crashing(code, k)
        ws = attach(root, clock=ManualClock())
        try:
            marker = check_remains(ws, key)
            if marker is not None:
                [result] = delete_jobs(ws, [plan_delete(ws, marker)], operator="again")
                if result.error is not None:
                    failures.append(f"after mutation {k} ({trace[k - 1]}): {result.error}")
            if probe_marker(ws, KIDS, key) is not None or ws.payload_path(KIDS, key).exists():
                failures.append(f"after mutation {k} ({trace[k - 1]}): the job was not deleted")
        finally:
            ws.close()
    assert not failures, "\n".join(failures)
