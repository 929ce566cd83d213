"""Runner-reported events: Attempt.record_event, read_events, and the same bytes from the Bash API."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.sdk import Attempt, StateError, read_events
from httk.workflow.sdk._events import MAX_EVENT_BYTES, ROTATE_BYTES

from tests.sdk.attempts import ATTEMPT_ID, ascii_and_hostile, make_attempt

LIBRARY = Path(__file__).resolve().parents[2] / "sdk-bash" / "httk-workflow.sh"
TIME = re.compile(rb'"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"')


def untimed(data: bytes) -> bytes:
    return TIME.sub(b'"time":"T"', data)


def test_an_event_is_one_compact_line_in_the_contracts_order(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path, step="relax", attempt_ordinal=3)
    attempt = Attempt.load(layout.context_path, environ=layout.environ())
    path = attempt.record_event("vasp.error", "ZPOTRF", {"problem": "zpotrf", "run": 2})
    assert path == str(layout.job_dir / ".httk-job" / "events.jsonl")
    assert untimed(Path(path).read_bytes()) == (
        b'{"format":"httk-workflow-runner-event","format_version":1,"time":"T","step":"relax",'
        b'"attempt_id":"' + ATTEMPT_ID.encode() + b'","attempt_ordinal":3,"kind":"vasp.error",'
        b'"message":"ZPOTRF","details":{"problem":"zpotrf","run":2}}\n'
    )
    attempt.record_event("vasp.remedy", "symmetry off")
    events = read_events(layout.job_dir)
    assert [e["kind"] for e in events] == ["vasp.error", "vasp.remedy"] and "details" not in events[1]
    assert read_events(layout.job_dir, limit=1) == events[1:]
    assert read_events(layout.job_dir, limit=0) == []


def test_the_record_is_bounded_and_keeps_the_latest_events(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    attempt = Attempt.load(layout.context_path, environ=layout.environ())
    for index in range(200):
        attempt.record_event("bulk", f"{index} " + "x" * 2000)
    folder = layout.job_dir / ".httk-job"
    assert (folder / "events.jsonl").stat().st_size <= ROTATE_BYTES
    assert (folder / "events.1.jsonl").stat().st_size <= ROTATE_BYTES
    messages = [event["message"].split()[0] for event in read_events(layout.job_dir)]
    assert messages == [str(index) for index in range(200 - len(messages), 200)]
    assert len(messages) > 32


def test_a_torn_line_costs_only_itself(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    attempt = Attempt.load(layout.context_path, environ=layout.environ())
    attempt.record_event("before", "whole")
    with open(layout.job_dir / ".httk-job" / "events.jsonl", "ab") as stream:
        stream.write(b'{"format":"httk-workflow-runner-event","form')
    attempt.record_event("after", "whole too")
    assert [event["kind"] for event in read_events(layout.job_dir)] == ["before", "after"]


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (("", "m"), "argument kind must be 1-128"),
        (("two words", "m"), "argument kind must be"),
        ((".dot", "m"), "argument kind must be"),
        (("k" * 129, "m"), "argument kind must be"),
        (("kind", " \t"), "argument message must not be empty"),
        (("kind", 3), "argument message must be a string"),
        (("kind", "m", ["not", "a", "mapping"]), "argument details must be a mapping"),
        (("kind", "m", {"x": float("nan")}), "the event has the non-JSON number"),
        (("kind", "x" * MAX_EVENT_BYTES), "an event line holds at most 8192"),
    ],
)
def test_invalid_events_are_refused_and_nothing_is_written(
    tmp_path: Path, arguments: tuple[Any, ...], fragment: str
) -> None:
    layout = make_attempt(tmp_path)
    attempt = Attempt.load(layout.context_path, environ=layout.environ())
    with pytest.raises(StateError, match=re.escape(fragment)):
        attempt.record_event(*arguments)
    assert not (layout.job_dir / ".httk-job" / "events.jsonl").exists()


def test_unreadable_and_foreign_lines_are_skipped(tmp_path: Path) -> None:
    folder = tmp_path / ".httk-job"
    folder.mkdir()
    event = {
        "format": "httk-workflow-runner-event",
        "format_version": 1,
        "time": "2026-07-26T09:12:44.512314Z",
        "step": "relax",
        "attempt_id": ATTEMPT_ID,
        "attempt_ordinal": 1,
        "kind": "k",
        "message": "m",
    }
    incomplete = {"format": "httk-workflow-runner-event"}
    lines = [
        b"[1]",
        b'{"format":"other"}',
        b"not json",
        json.dumps(incomplete).encode(),
        json.dumps(event).encode(),
    ]
    (folder / "events.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert read_events(tmp_path) == [event]
    assert read_events(tmp_path / "nowhere") == []


def test_a_record_that_cannot_be_read_is_a_state_error(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".httk-job").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StateError, match="symbolic link"):
        read_events(tmp_path)


def test_the_writer_s_constants_are_the_reader_s() -> None:
    from httk.workflow.protocol import _events as reader
    from httk.workflow.sdk import _events as writer
    from httk.workflow.sdk._state import JOB_STATE_DIR

    for name in (
        "FORMAT",
        "FORMAT_VERSION",
        "EVENTS_FILE",
        "PREVIOUS_FILE",
        "MAX_EVENT_BYTES",
        "ROTATE_BYTES",
    ):
        assert getattr(writer, name) == getattr(reader, name), name
    assert writer.MAX_KIND_BYTES == reader.MAX_KIND_BYTES and JOB_STATE_DIR == reader.JOB_STATE_DIR
    assert reader._KIND_RE.pattern == writer.KIND_PATTERN + r"\Z"


@pytest.mark.parametrize("message", [*ascii_and_hostile(), "plain"])
def test_python_and_bash_write_the_same_bytes(tmp_path: Path, message: str) -> None:
    if "\0" in message:
        message = message.replace("\0", "")  # a Bash string cannot hold NUL
    python_side = make_attempt(tmp_path / "py", step="relax")
    bash_side = make_attempt(tmp_path / "sh", step="relax")
    details = {"problem": "zpotrf", "text": message}
    Attempt.load(python_side.context_path, environ=python_side.environ()).record_event(
        "vasp.error", message, details
    )
    compact = json.dumps(details, ensure_ascii=False, separators=(",", ":"))
    script = 'source "$1"; httk_workflow_record_event vasp.error "$2" --details "$3"'
    subprocess.run(
        ["bash", "-c", script, "bash", str(LIBRARY), message, compact],
        env={"PATH": "/usr/bin:/bin", **bash_side.environ()},
        check=True,
    )
    python_bytes = (python_side.job_dir / ".httk-job" / "events.jsonl").read_bytes()
    bash_bytes = (bash_side.job_dir / ".httk-job" / "events.jsonl").read_bytes()
    assert TIME.search(bash_bytes) and untimed(python_bytes) == untimed(bash_bytes)


def test_what_both_sdks_write_validates_against_the_schema(tmp_path: Path) -> None:
    from httk.workflow import models

    layout = make_attempt(tmp_path, step="relax")
    Attempt.load(layout.context_path, environ=layout.environ()).record_event("a.b", "python", {"n": 1})
    subprocess.run(
        ["bash", "-c", 'source "$1"; httk_workflow_record_event c.d bash', "bash", str(LIBRARY)],
        env={"PATH": "/usr/bin:/bin", **layout.environ()},
        check=True,
    )
    events = read_events(layout.job_dir)
    assert [event["kind"] for event in events] == ["a.b", "c.d"]
    for event in events:
        assert list(models.validator("runner-event").iter_errors(event)) == []
        models.RunnerEvent.model_validate(event)
