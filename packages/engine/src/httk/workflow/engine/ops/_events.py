"""A job's runner-reported events as inspection shows them: ``job show`` and ``job why``. Read-only.

Any runner may append events to its job's ``.httk-job/events.jsonl`` (``docs/runner-events.md``): an
error it found, the remedy it applied, a restart it judged. The engine knows nothing of what they mean;
it reads the last ones with the protocol's bounded reader (``httk.workflow.protocol._events``: a window
at the end of each file, no symbolic link followed, only lines that are events) and shows them as they
are, oldest first. The VASP workflows tell their fix history this way.

What a runner wrote is untrusted text: :func:`event_line` shows a message on one line, its control
characters escaped (a message cannot move the cursor or recolour an operator's terminal) and cut at
:data:`MESSAGE_CHARS`; ``--json`` carries every member unchanged.

Cost: two ``open`` and at most two reads of :data:`~httk.workflow.protocol._events.WINDOW_BYTES` per job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.protocol._events import DEFAULT_LIMIT, RunnerEvents, read_runner_events

WHY_LIMIT = 5
"""How many events ``job why`` shows: the latest, which say what the runner last did."""
MESSAGE_CHARS = 200
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def job_events(
    workspace: Workspace, marker: MarkerLocation, limit: int | None = DEFAULT_LIMIT
) -> RunnerEvents:
    """The last ``limit`` runner-reported events of the job at ``marker`` (all with ``None``)."""
    return read_runner_events(workspace.payload_path(marker.placement, marker.job_key), limit)


def printable(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` safe to print on one line: control characters (and Unicode's line and paragraph
    separators) as ``\\xNN`` or ``\\uNNNN`` escapes, at most ``limit`` characters."""
    escaped = _CONTROL.sub(_escape, text)
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "\N{HORIZONTAL ELLIPSIS}"


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def event_line(event: Mapping[str, Any]) -> str:
    """One event as one line: time, step and attempt ordinal, kind, message.

    Examples
    --------
    >>> event_line({"time": "2026-12-01T10:00:00.5Z", "step": "relax", "attempt_ordinal": 2,
    ...             "kind": "vasp.remedy", "message": "zpotrf: ISYM = 0"})
    '2026-12-01T10:00:00.5Z  relax #2  vasp.remedy  zpotrf: ISYM = 0'
    """
    return (
        f"{event['time']}  {event['step']} #{event['attempt_ordinal']}  {event['kind']}  "
        f"{printable(event['message'])}"
    )


def event_lines(record: Mapping[str, Any], *, more: str) -> list[str]:
    """A record (:meth:`RunnerEvents.as_dict`, as ``job show --json`` has it) for people: a heading that
    says how many events and what was left out or could not be read, then one indented line per event.

    ``more`` says how to see the older events when the record is not complete.
    """
    events, problem = record["events"], record["problem"]
    count = len(events)
    if problem is not None and not count:
        return [f"runner events: {printable(problem)}"]
    noun = "event" if count == 1 else "events"
    heading = f"{count} runner {noun}" if record["complete"] else f"the runner's last {count} {noun}"
    notes = [] if record["complete"] else [more]
    if record["skipped"]:
        notes.append(f"{record['skipped']} damaged or foreign lines skipped")
    if problem is not None:
        notes.append(printable(problem))
    heading += f" ({'; '.join(notes)})" if notes else ""
    return [heading, *(f"  {event_line(event)}" for event in events)]
