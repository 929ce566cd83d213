"""The bounded reader of runner-reported events: the last N, two files, hostile files and lines."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.protocol._events import (
    MAX_EVENT_BYTES,
    WINDOW_BYTES,
    RunnerEvents,
    event_problem,
    read_runner_events,
)

ATTEMPT = "01234567-89ab-cdef-0123-456789abcdef"


def event(index: int, **members: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": "httk-workflow-runner-event",
        "format_version": 1,
        "time": "2026-12-01T10:00:00.000001Z",
        "step": "relax",
        "attempt_id": ATTEMPT,
        "attempt_ordinal": 1,
        "kind": "test.event",
        "message": f"event {index}",
    }
    document.update(members)
    return document


def line(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode() + b"\n"


def record(job: Path, current: bytes = b"", previous: bytes | None = None) -> Path:
    folder = job / ".httk-job"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_bytes(current)
    if previous is not None:
        (folder / "events.1.jsonl").write_bytes(previous)
    return folder


def messages(found: RunnerEvents) -> list[str]:
    return [e["message"] for e in found.events]


def test_a_job_without_a_record_has_no_events_and_that_is_complete(tmp_path: Path) -> None:
    found = read_runner_events(tmp_path)
    assert (found.events, found.skipped, found.complete, found.problem) == ([], 0, True, None)


def test_the_last_n_come_oldest_first_across_both_files(tmp_path: Path) -> None:
    record(tmp_path, b"".join(line(event(i)) for i in (3, 4)), b"".join(line(event(i)) for i in (0, 1, 2)))
    assert messages(read_runner_events(tmp_path, None)) == [f"event {i}" for i in range(5)]
    everything = read_runner_events(tmp_path, 5)
    assert everything.complete and len(everything.events) == 5
    last = read_runner_events(tmp_path, 3)
    assert messages(last) == ["event 2", "event 3", "event 4"] and not last.complete
    newest = read_runner_events(tmp_path, 2)
    assert messages(newest) == ["event 3", "event 4"] and not newest.complete  # the older file is there
    assert read_runner_events(tmp_path, 0).events == []


def test_a_satisfied_limit_never_opens_the_older_file(tmp_path: Path) -> None:
    folder = record(tmp_path, line(event(1)))
    os.mkfifo(folder / "events.1.jsonl")  # opening it for reading would block without O_NONBLOCK
    found = read_runner_events(tmp_path, 1)
    assert messages(found) == ["event 1"] and not found.complete and found.problem is None


def test_lines_that_are_not_events_are_skipped_and_counted(tmp_path: Path) -> None:
    bad = [
        b"not json",
        b"[1]",
        line({"format": "other"}),
        b'{"format":"httk-workflow-runner-event","format_version":1,"time":"2026-12-01T10:00:00Z","a":1,"a":2}',
        line(event(0, attempt_ordinal=True)),
        b"[" * 70 + b"]" * 70,
        b'{"x": NaN}',
        b"\xff\xfe{}",
    ]
    body = b"\n".join(part.rstrip(b"\n") for part in [line(event(1)), *bad, line(event(2))]) + b"\n\n"
    record(tmp_path, body + b'{"format":"httk-workflow-runner-event","form')  # a torn last line
    found = read_runner_events(tmp_path, None)
    assert messages(found) == ["event 1", "event 2"]
    assert found.skipped == len(bad) + 1 and found.complete


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("format_version", 2),
        ("time", "yesterday"),
        ("step", "two words"),
        ("attempt_id", "not-a-uuid"),
        ("attempt_ordinal", -1),
        ("attempt_ordinal", 1.0),
        ("kind", ".dot"),
        ("kind", "k" * 129),
        ("message", ""),
        ("message", 3),
        ("details", [1, 2]),
    ],
)
def test_a_member_of_the_wrong_type_makes_a_line_no_event(tmp_path: Path, member: str, value: Any) -> None:
    assert event_problem(event(0, **{member: value})) is not None
    record(tmp_path, line(event(0, **{member: value})) + line(event(1)))
    found = read_runner_events(tmp_path)
    assert messages(found) == ["event 1"] and found.skipped == 1


def test_unknown_members_are_kept(tmp_path: Path) -> None:
    record(tmp_path, line(event(0, later={"added": True}, details={"run": 1})))
    (found,) = read_runner_events(tmp_path).events
    assert found["later"] == {"added": True} and found["details"] == {"run": 1}


def test_an_over_long_line_is_skipped_undecoded(tmp_path: Path) -> None:
    long = line(event(0, message="x" * MAX_EVENT_BYTES))
    record(tmp_path, long + line(event(1)))
    found = read_runner_events(tmp_path)
    assert messages(found) == ["event 1"] and found.skipped == 1


def test_a_grown_file_is_read_only_in_its_last_window(tmp_path: Path) -> None:
    one = line(event(0, message="y" * 1000))
    copies = 3 * WINDOW_BYTES // len(one)
    record(tmp_path, one * copies + line(event(1)))
    found = read_runner_events(tmp_path, None)
    assert not found.complete and found.skipped == 0  # the cut first line is not counted as damage
    assert len(found.events) <= WINDOW_BYTES // len(one) + 1 and found.events[-1]["message"] == "event 1"


@pytest.mark.parametrize("hostile", ["directory link", "file link", "fifo", "directory", "httk-job file"])
def test_a_record_that_cannot_be_read_safely_is_a_problem_not_an_error(tmp_path: Path, hostile: str) -> None:
    job = tmp_path / "job"
    job.mkdir()
    elsewhere = record(tmp_path / "elsewhere", line(event(9)))
    folder = job / ".httk-job"
    if hostile == "directory link":
        folder.symlink_to(elsewhere)
    elif hostile == "httk-job file":
        folder.write_text("")
    else:
        folder.mkdir()
        target = folder / "events.jsonl"
        if hostile == "file link":
            target.symlink_to(elsewhere / "events.jsonl")
        elif hostile == "fifo":
            os.mkfifo(target)
            # A writer that opens the FIFO would unblock a blocking reader; none does, so a reader that
            # blocked would hang this test. It must return at once instead.
        else:
            target.mkdir()
        (folder / "events.1.jsonl").write_bytes(line(event(1)))
    done: list[RunnerEvents] = []
    reader = threading.Thread(target=lambda: done.append(read_runner_events(job)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert done, "the reader blocked"
    (found,) = done
    assert found.problem is not None and not found.complete
    assert "event 9" not in messages(found)
    if hostile in ("file link", "fifo", "directory"):
        assert messages(found) == ["event 1"]  # the other file is still read
        assert "events.jsonl" in found.problem


def test_the_json_form_names_the_record(tmp_path: Path) -> None:
    record(tmp_path, line(event(1)))
    assert read_runner_events(tmp_path).as_dict() == {
        "path": ".httk-job/events.jsonl",
        "events": [event(1)],
        "skipped": 0,
        "complete": True,
        "problem": None,
    }
