from __future__ import annotations

import os
from pathlib import Path

import pytest
from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import move_marker, verified_rename
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init, probe_marker
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import TransitionError, WorkspaceUnavailableError

from tests.conftest import minimal_job


def _submitted(workspace_path: Path, durable: bool = False) -> tuple[Workspace, MarkerLocation]:
    ws = init(workspace_path, durable=durable)
    [result] = submit_jobs(ws, [JobSpec(minimal_job(), "proj/x")])
    return ws, result.marker


@pytest.mark.parametrize("durable", [False, True])
def test_a_move_journals_then_renames(workspace_path: Path, durable: bool) -> None:
    ws, marker = _submitted(workspace_path, durable)
    result = move_marker(
        ws, marker, Frame(Kind.READY, {"step": "prepare", "reason": "registered"}), Trigger.REGISTER
    )
    assert result.won and result.current is not None
    current = result.current
    assert not marker.path(ws).exists()
    assert current.path(ws).is_file()
    assert current.kind is Kind.READY and current.name.generation == 1
    frame = ws.reader.read(current.name.ref)  # type: ignore[arg-type]
    assert frame["kind"] == "ready"
    assert frame["state_generation"] == 1
    assert frame["previous_record_ref"] is None
    assert frame["job_key"] == marker.job_key and frame["placement"] == "proj/x"
    assert frame["step"] == "prepare" and frame["priority"] == 500
    assert probe_marker(ws, "proj/x", marker.job_key) == current


def test_history_links_backwards(workspace_path: Path) -> None:
    ws, marker = _submitted(workspace_path)
    first = move_marker(ws, marker, Frame(Kind.READY, {}), Trigger.REGISTER).current
    assert first is not None
    second = move_marker(ws, first, Frame(Kind.READY, {}, 3), Trigger.SET_PRIORITY).current
    assert second is not None
    assert second.name.priority == 3 and second.name.generation == 2
    frame = ws.reader.read(second.name.ref)  # type: ignore[arg-type]
    assert frame["previous_record_ref"] == str(first.name.ref)


def test_an_illegal_move_writes_nothing(workspace_path: Path) -> None:
    ws, marker = _submitted(workspace_path)
    with pytest.raises(TransitionError, match="illegal transition"):
        move_marker(ws, marker, Frame(Kind.RUNNING, {}), Trigger.LAUNCH)
    assert marker.path(ws).exists()
    assert not list(ws.journal_dir.iterdir())


def test_two_actors_racing_for_one_marker(workspace_path: Path) -> None:
    ws, marker = _submitted(workspace_path)
    other = attach(workspace_path)
    winner = move_marker(ws, marker, Frame(Kind.READY, {}), Trigger.REGISTER)
    loser = move_marker(other, marker, Frame(Kind.FAILED, {}), Trigger.PROTOCOL_ERROR)
    assert winner.won and not loser.won
    assert loser.current == winner.current
    markers = [p for p in (ws.control / "state").rglob("*") if p.is_file()]
    assert markers == [winner.current.path(ws)]  # type: ignore[union-attr]
    # The loser's frame stays in its own writer's segment, on nobody's chain.
    assert len(list(ws.journal_dir.iterdir())) == 2


def test_a_rename_reported_as_failed_that_happened_is_a_win(
    workspace_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, marker = _submitted(workspace_path)
    real = _fsops.rename

    def retransmitted(src: Path, dst: Path, *, durable: bool, noreplace: bool = True) -> None:
        real(src, dst, durable=durable, noreplace=noreplace)
        raise OSError(5, "Input/output error after retransmission")

    monkeypatch.setattr(_fsops, "rename", retransmitted)
    result = move_marker(ws, marker, Frame(Kind.READY, {}), Trigger.REGISTER)
    assert result.won and result.current is not None and result.current.path(ws).exists()


def test_a_transient_failure_is_retried(workspace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, marker = _submitted(workspace_path)
    real = _fsops.rename
    calls: list[Path] = []

    def flaky(src: Path, dst: Path, *, durable: bool, noreplace: bool = True) -> None:
        calls.append(dst)
        if len(calls) == 1:
            raise OSError(116, "Stale file handle")
        real(src, dst, durable=durable, noreplace=noreplace)

    monkeypatch.setattr(_fsops, "rename", flaky)
    result = move_marker(ws, marker, Frame(Kind.READY, {}), Trigger.REGISTER)
    assert result.won and len(calls) == 2


def test_everything_absent_is_unavailability_not_a_lost_race(tmp_path: Path) -> None:
    clock = ManualClock()
    with pytest.raises(WorkspaceUnavailableError, match="unresolved after 5"):
        verified_rename(
            tmp_path / "gone",
            tmp_path / "state" / "dst",
            durable=False,
            deadline_seconds=5.0,
            clock=clock,
            locate_current=lambda: None,
        )
    assert sum(clock.sleeps) == pytest.approx(5.0)


def test_a_marker_appearing_during_backoff_is_found(tmp_path: Path) -> None:
    clock = ManualClock()
    other = tmp_path / "other-marker"

    def appear(_clock: ManualClock) -> None:
        if len(_clock.sleeps) == 3:
            other.write_bytes(b"")

    clock.on_sleep.append(appear)
    won = verified_rename(
        tmp_path / "gone",
        tmp_path / "dst",
        durable=False,
        deadline_seconds=5.0,
        clock=clock,
        locate_current=lambda: other if other.exists() else None,
    )
    assert won is False and len(clock.sleeps) == 3


def test_two_markers_for_one_job_is_corruption(workspace_path: Path) -> None:
    ws, marker = _submitted(workspace_path)
    duplicate = ws.marker_dir(Kind.READY, "proj/x")
    duplicate.mkdir(parents=True)
    os.link(marker.path(ws), duplicate / marker.name.__str__())
    with pytest.raises(TransitionError, match="2 markers"):
        probe_marker(ws, "proj/x", marker.job_key)
