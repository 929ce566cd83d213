"""Runner-reported events: a bounded, append-only record of what a runner saw and did, in ``.httk-job/``.

Any runner may tell an operator what happened inside its steps -- an error it detected, the remedy it
applied, a restart it validated -- by appending one event. Inspection tools read the last events back
(``docs/runner-events.md`` is the contract they are written from) through the protocol's bounded
reader, ``httk.workflow.protocol._events``, which :func:`read_events` hands to; its constants are the
ones below (a test holds them equal: the writer does not import the protocol package). Nothing in the
protocol depends on events: they are evidence, like the attempt's stdout.log.

The record is two files below the job's ``.httk-job/``: ``events.jsonl``, appended to, and
``events.1.jsonl``, the previous one. An event is one line of compact UTF-8 JSON (the same bytes the Bash
API's ``httk_workflow_record_event`` writes), at most :data:`MAX_EVENT_BYTES` with its newline. Before an
append that would make ``events.jsonl`` larger than :data:`ROTATE_BYTES`, it is renamed over
``events.1.jsonl``, so the record never exceeds twice that and always holds the most recent events.

Why no synchronization, even in a durable workspace: like the run log the specification exempts, an
event is diagnostics, and a per-event ``fsync`` would cost more than what it records. Process-interruption
safety still holds: an event is one ``write(2)`` on an ``O_APPEND`` descriptor, and a writer that finds
the file not ending in a newline (a write cut short) starts its event on a new line, so a torn line
costs that event alone; readers skip lines that are not events.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping

from . import _checks
from ._errors import StateError
from ._files import compact_json, make_dirs
from ._state import JOB_STATE_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._files import StrPath

FORMAT = "httk-workflow-runner-event"
FORMAT_VERSION = 1
EVENTS_FILE = "events.jsonl"
PREVIOUS_FILE = "events.1.jsonl"
MAX_EVENT_BYTES = 8192
ROTATE_BYTES = 65536
MAX_KIND_BYTES = 128
KIND_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:-]*"
_KIND_RE = re.compile(KIND_PATTERN + r"\Z")
_APPEND = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC  # read: the last byte


def kind_problem(kind: object) -> str | None:
    """Why ``kind`` is not an event kind (a dotted token such as ``vasp.remedy``), or ``None``."""
    if not isinstance(kind, str):
        return f"must be a string, not {type(kind).__name__}"
    if not _KIND_RE.match(kind) or len(kind) > MAX_KIND_BYTES:
        return (
            f"must be 1-{MAX_KIND_BYTES} letters, digits, '.', '_', ':' or '-', starting with a letter or "
            f"digit (such as vasp.remedy), not {kind!r}"
        )
    return None


def message_problem(message: object) -> str | None:
    """Why ``message`` is not an event message (a string with something besides whitespace), or ``None``."""
    if not isinstance(message, str):
        return f"must be a string, not {type(message).__name__}"
    if not message.strip():
        return "must not be empty or only whitespace"
    return None


def utc_now() -> str:
    """The current time as the protocol's documents write it: ``2026-07-26T09:12:44.512314Z``."""
    now = time.time()
    seconds = int(now)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int((now - seconds) * 1e6):06d}Z"


def event_document(
    context: Mapping[str, Any], kind: str, message: str, details: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The event's members in the contract's order (``details`` only when given)."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "time": utc_now(),
        "step": context["step"],
        "attempt_id": context["attempt_id"],
        "attempt_ordinal": context["attempt_ordinal"],
        "kind": kind,
        "message": message,
    }
    if details is not None:
        document["details"] = details
    return document


def encoded_event(document: Mapping[str, Any], path: str) -> bytes:
    """The event's line; :class:`StateError` when it is not JSON or too long."""
    problem = _checks.json_problem(document)
    if problem is not None:
        raise StateError(f"the event {problem}", path=path)
    line = compact_json(document)
    if len(line) > MAX_EVENT_BYTES:
        raise StateError(
            f"the event is {len(line)} bytes; an event line holds at most {MAX_EVENT_BYTES} "
            "(shorten the message or the details)",
            path=path,
        )
    return line


def append_event(job_dir: StrPath, line: bytes) -> str:
    """Append one encoded event to the job's record, rotating it first when it would grow too large."""
    folder = os.path.join(job_dir, JOB_STATE_DIR)
    path = os.path.join(folder, EVENTS_FILE)
    try:
        make_dirs(job_dir, JOB_STATE_DIR, durable=False)
        fd = os.open(path, _APPEND, 0o666)
        try:
            size = os.fstat(fd).st_size
            if size and size + len(line) > ROTATE_BYTES:
                os.close(fd)
                fd = -1
                os.replace(path, os.path.join(folder, PREVIOUS_FILE))
                fd = os.open(path, _APPEND, 0o666)
                size = 0
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # the last writer was cut short: keep its fragment off this line
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            if fd >= 0:
                os.close(fd)
    except OSError as exc:
        raise StateError(f"cannot record the event: {exc.strerror or exc}", path=path) from exc
    return path


def read_events(job_dir: str | os.PathLike[str], limit: int | None = None) -> list[dict[str, Any]]:
    """The job's recorded runner events, oldest first; the last ``limit`` of them when given.

    Lines that are not events (a torn write, another format, members of the wrong type) are skipped; a
    job without events has none. The reading is the protocol's bounded one
    (``httk.workflow.protocol._events``), imported here on first use: recording an event does not load it.

    Parameters
    ----------
    job_dir
        The job's payload directory.
    limit
        How many of the most recent events to return; all when ``None``.

    Raises
    ------
    StateError
        When the record exists but cannot be read (a symbolic link, not a regular file, an I/O error).

    Examples
    --------
    >>> from httk.workflow.sdk import read_events
    >>> [event["kind"] for event in read_events("/ws/p/job", limit=2)]  # doctest: +SKIP
    ['vasp.error', 'vasp.remedy']
    """
    from httk.workflow.protocol._events import read_runner_events

    record = read_runner_events(job_dir, limit)
    if record.problem is not None:
        raise StateError(record.problem, path=os.fspath(job_dir))
    return record.events
