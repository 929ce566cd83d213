"""Reading a job's runner-reported events (``.httk-job/events.jsonl``) as untrusted input, boundedly.

The record is the contract of ``docs/runner-events.md``: any runner appends events (the SDKs' writers),
and any tool reads the last ones back -- ``job show``, ``job why``, the SDK's ``read_events``. This
module is the one reader. It guarantees, whatever the files hold:

- **bounded work**: at most :data:`WINDOW_BYTES` are read from the end of each of the two files (every
  file a writer keeps fits in it whole), lines are decoded newest first and only until ``limit`` events
  are found, and a line longer than :data:`MAX_EVENT_BYTES` is skipped undecoded;
- **no surprise from the filesystem**: ``.httk-job`` and both files are opened without following a
  symbolic link, a file must be regular (opened non-blocking, so a FIFO planted there cannot hang a
  reader), and nothing is opened for writing;
- **only events**: a line is returned only when it is a strict JSON object (``_jsonio``'s rules) whose
  members have the types of ``schemas/runner-event.schema.json``; anything else is counted in
  ``skipped`` and left out, so a renderer may rely on every member it shows.

Unknown members are kept (a later writer may add some). A record that cannot be read at all (a symbolic
link, a file that is not regular, an I/O error) is a ``problem`` of that job's record, never an
exception: inspection of a job goes on without its events.

The SDK's writer keeps its own copy of the constants below (so a runner that records an event does
not load this package); ``tests/sdk/test_events.py`` holds the two to the same values.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

from ._errors import InvalidDocumentError
from ._jsonio import parse_json_object

FORMAT = "httk-workflow-runner-event"
FORMAT_VERSION = 1
JOB_STATE_DIR = ".httk-job"
EVENTS_FILE = "events.jsonl"
PREVIOUS_FILE = "events.1.jsonl"
MAX_EVENT_BYTES = 8192
"""The longest event line a writer produces, its newline included."""
ROTATE_BYTES = 65536
"""The size a writer keeps ``events.jsonl`` below by rotating it first."""
WINDOW_BYTES = ROTATE_BYTES + MAX_EVENT_BYTES
"""How much of the end of each file is read: all of any file a writer leaves (one line may follow a
torn one), and no more of a file something else has grown."""
DEFAULT_LIMIT = 20
"""How many events inspection shows unless asked for another number."""
MAX_KIND_BYTES = 128

_KIND_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*\Z")
_STEP_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")
_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_TIME_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z\Z")
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class RunnerEvents:
    """The last events of a job's record, and what reading it found.

    ``events`` are oldest first. ``skipped`` counts the lines read that were not events (a torn write,
    a damaged or foreign line); empty lines are not counted. ``complete`` is true when every event the
    record holds is in ``events``: false when ``limit`` cut older ones off, or a file was larger than
    the window read of it. ``problem`` says why the record (or part of it) could not be read.
    """

    __slots__ = ("complete", "events", "problem", "skipped")

    def __init__(
        self, events: list[dict[str, Any]], skipped: int, complete: bool, problem: str | None
    ) -> None:
        self.events = events
        self.skipped = skipped
        self.complete = complete
        self.problem = problem

    def as_dict(self) -> dict[str, Any]:
        """The JSON form inspection commands print (``job show --json``'s ``events``)."""
        return {
            "path": f"{JOB_STATE_DIR}/{EVENTS_FILE}",
            "events": self.events,
            "skipped": self.skipped,
            "complete": self.complete,
            "problem": self.problem,
        }

    def __repr__(self) -> str:
        return (
            f"RunnerEvents({len(self.events)} events, skipped={self.skipped}, complete={self.complete}, "
            f"problem={self.problem!r})"
        )


def event_problem(event: dict[str, Any]) -> str | None:
    """Why a decoded line is not an event of this format (the schema's types), or ``None``."""
    if event.get("format") != FORMAT:
        return "is not a runner event (format)"
    if event.get("format_version") != FORMAT_VERSION or isinstance(event.get("format_version"), bool):
        return f"has format_version {event.get('format_version')!r}, not {FORMAT_VERSION}"
    for member, pattern in (("time", _TIME_RE), ("step", _STEP_RE), ("attempt_id", _UUID_RE)):
        value = event.get(member)
        if not isinstance(value, str) or not pattern.match(value):
            return f"has an invalid {member}"
    ordinal = event.get("attempt_ordinal")
    if not isinstance(ordinal, int) or isinstance(ordinal, bool) or ordinal < 0:
        return "has an invalid attempt_ordinal"
    kind = event.get("kind")
    if not isinstance(kind, str) or len(kind.encode()) > MAX_KIND_BYTES or not _KIND_RE.match(kind):
        return "has an invalid kind"
    message = event.get("message")
    if not isinstance(message, str) or not message:
        return "has an invalid message"
    if "details" in event and not isinstance(event["details"], dict):
        return "has details that are not an object"
    return None


def read_runner_events(job_dir: str | os.PathLike[str], limit: int | None = DEFAULT_LIMIT) -> RunnerEvents:
    """The last ``limit`` events (all, with ``None``) of the job whose payload is ``job_dir``.

    Examples
    --------
    >>> record = read_runner_events("/ws/vasp/job", limit=2)  # doctest: +SKIP
    >>> [event["kind"] for event in record.events], record.complete
    (['vasp.error', 'vasp.remedy'], False)
    """
    wanted = None if limit is None else max(limit, 0)
    directory = Path(job_dir) / JOB_STATE_DIR
    try:
        folder = os.open(directory, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        return RunnerEvents([], 0, True, None)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR and directory.is_symlink():  # O_DIRECTORY wins over O_NOFOLLOW
            exc = OSError(errno.ELOOP, "is a symbolic link")
        return RunnerEvents([], 0, False, f"{JOB_STATE_DIR} {_refusal(exc)}")
    newest_first: list[dict[str, Any]] = []
    skipped = 0
    complete = True
    problem = None
    try:
        for name in (EVENTS_FILE, PREVIOUS_FILE):
            if wanted is not None and len(newest_first) >= wanted:
                complete = complete and not _exists(name, folder)
                break
            try:
                data, whole = _tail(name, folder)
            except FileNotFoundError:
                continue
            except OSError as exc:
                problem = problem or f"{JOB_STATE_DIR}/{name} {_refusal(exc)}"
                complete = False
                continue
            found, bad, exhausted = _events_of(
                data, whole, None if wanted is None else wanted - len(newest_first)
            )
            newest_first += found
            skipped += bad
            complete = complete and whole and exhausted
    finally:
        os.close(folder)
    newest_first.reverse()
    return RunnerEvents(newest_first, skipped, complete, problem)


def _tail(name: str, folder: int) -> tuple[bytes, bool]:
    """The last :data:`WINDOW_BYTES` of a regular file, and whether that is all of it."""
    fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _NotRegularError(errno.EINVAL, "is not a regular file")
        start = max(status.st_size - WINDOW_BYTES, 0)
        chunks = []
        offset = start
        while offset < status.st_size:
            chunk = os.pread(fd, min(status.st_size - offset, 1 << 16), offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks), start == 0


def _events_of(data: bytes, whole: bool, wanted: int | None) -> tuple[list[dict[str, Any]], int, bool]:
    """Events of one file's text, newest first: at most ``wanted``, the lines skipped, and whether every
    line was looked at."""
    lines = data.split(b"\n")
    if not whole:
        lines = lines[1:]  # the window starts inside a line
    found: list[dict[str, Any]] = []
    skipped = 0
    for index in range(len(lines) - 1, -1, -1):
        if wanted is not None and len(found) >= wanted:
            return found, skipped, not any(line.strip() for line in lines[: index + 1])
        line = lines[index]
        if not line.strip():
            continue
        event = _event(line)
        if event is None:
            skipped += 1
        else:
            found.append(event)
    return found, skipped, True


def _event(line: bytes) -> dict[str, Any] | None:
    if len(line) >= MAX_EVENT_BYTES:  # with its newline, longer than any event
        return None
    try:
        event = parse_json_object(line, document="runner event", max_bytes=MAX_EVENT_BYTES)
    except InvalidDocumentError:
        return None
    return event if event_problem(event) is None else None


def _exists(name: str, folder: int) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return False
    return True


class _NotRegularError(OSError):
    """A record file that is a FIFO, a socket, a device or a directory."""


def _refusal(exc: OSError) -> str:
    if isinstance(exc, _NotRegularError):
        return "is not a regular file"
    if exc.errno == errno.ELOOP:
        return "is a symbolic link; it is not followed"
    if exc.errno == errno.ENOTDIR:
        return "is not a directory"
    return f"cannot be read: {exc.strerror or exc}"
