"""A durable launch makes what the runner is launched against durable before its gate is released.

spec/01 "Durability": an attempt's context.json and process.json are synchronized, contents and the
directory entries that name them, before the runner is launched against them. A manager launching a
batch leaves the directories of each preparation (the payload's new control directory, ``.httk-job/``,
``logs/`` and workdir; context.json and process.json in the control directory), and those of the claim
renames before it, to one synchronization shared with the running renames (``_fsops.OwedSyncs``).
This test records every mutation, every fsync (from any thread: the shared one runs concurrently) and
every gate release of a real durable manager launching three jobs at once, and checks the order for
each attempt.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._liveness import write_process_file
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import init
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._gate import GatedProcess
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig

from tests.runners import current_marker, publish_scripted_runner, scripted_job, submit

JOBS = 3
CLAIMED, READY = Kind.CLAIMED.value, Kind.READY.value
Event = tuple[str, str, str]  # (what, its kind or pid, the path)


def record_launches(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    events: list[Event] = []
    lock = threading.Lock()

    def note(event: Event) -> None:
        with lock:
            events.append(event)

    real_fsync, real_mutated = os.fsync, _fsops._mutated
    real_release, real_process_file = GatedProcess.release, write_process_file

    def fsync(fd: int) -> None:
        real_fsync(fd)
        note(("fsync", "", os.readlink(f"/proc/self/fd/{fd}")))

    def mutated(what: str, path: Path | str) -> None:
        note(("mutation", what, os.path.realpath(path)))
        real_mutated(what, path)

    def release(process: GatedProcess) -> bool:
        note(("release", str(process.pid), ""))
        return real_release(process)

    def process_file(control_dir: Path, identity: Any, durable: bool, **options: Any) -> Path:
        note(("process", str(identity["pid"]), os.path.realpath(control_dir)))
        return real_process_file(control_dir, identity, durable, **options)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(_fsops, "_mutated", mutated)
    monkeypatch.setattr(GatedProcess, "release", release)
    monkeypatch.setattr(_launch, "write_process_file", process_file)
    return events


def test_each_new_entry_of_a_durable_launch_is_synchronized_before_its_runner_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = init(tmp_path / "ws", durable=True)
    runner = publish_scripted_runner(ws, tmp_path)
    jobs = [scripted_job({"prepare": {"action": "succeed"}}, runner) for _ in range(JOBS)]
    for job in jobs:
        submit(ws, job)
    events = record_launches(monkeypatch)

    Manager(ws, ManagerConfig(workers=JOBS)).run()

    monkeypatch.undo()
    assert [current_marker(ws, job).kind.value for job in jobs] == ["succeeded"] * JOBS
    launches = [
        (index, pid, control) for index, (what, pid, control) in enumerate(events) if what == "process"
    ]
    assert len(launches) == JOBS
    for start, pid, control in launches:
        released = next(i for i, event in enumerate(events) if event[:2] == ("release", pid))
        assert released > start
        payload = os.path.dirname(control)
        made = [
            (index, path)
            for index, (what, kind, path) in enumerate(events[:released])
            if what == "mutation"
            and kind in ("mkdir", "rename")
            and os.path.dirname(path) in (payload, control)
        ]
        names = {os.path.basename(path) for _index, path in made}
        assert {os.path.basename(control), ".httk-job", "logs", "context.json", "process.json"} <= names
        key = os.path.basename(payload)
        [(claim, claimed)] = [
            (index, path)
            for index, (what, kind, path) in enumerate(events[:released])
            if what == "mutation"
            and kind == "rename"
            and f"/state/{CLAIMED}/" in path
            and os.path.basename(path).startswith(f"{key}.")
        ]
        ready = os.path.join(os.path.dirname(claimed).replace(f"/state/{CLAIMED}/", f"/state/{READY}/"), "x")
        for index, path in [*made, (claim, claimed), (claim, ready)]:
            parent = os.path.dirname(path)
            synced = [
                i
                for i, (what, _, p) in enumerate(events[index:released], index)
                if what == "fsync" and p == parent
            ]
            assert synced, (
                f"{parent} changed at event {index} ({path}) and was not synchronized before the release"
            )
