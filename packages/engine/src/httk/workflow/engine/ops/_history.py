"""A job's history, read: ``job log`` and ``job log --follow``. Read-only.

:func:`job_history` walks the frame chain backwards from the marker through ``previous_record_ref`` and
returns it oldest first. It never scans the journal forwards (an orphan frame is on nobody's chain). A
frame that cannot be read — or that belongs to another job, or breaks the generation sequence — is
reported in place as an entry carrying ``problem``, and the walk stops there, because the link to
everything older was in that frame. Reading a frame waits out network-filesystem lag up to the
workspace's visibility deadline before calling it damaged, exactly as the manager does.

Generations fall by one along a chain except behind an ``fsck_repair`` frame (:func:`previous_link`): a
repair chains to the newest readable frame strictly older than the damaged marker, so the generations in
between were lost. That jump is accepted exactly when the repair record names the frame it links to, and
the repair's entry says which generations were lost (``lost_generations`` and a one-line ``note``). An
``fsck_rebuild`` frame starts a chain of its own (its ``previous_record_ref`` is null) after every earlier
generation was lost: its entry says so the same way, and that it came from the kind the marker had.

:func:`follow_history` polls the job's marker at its placement (one listing per state kind there, never a
scan) with a bounded back-off and yields the frames of every new generation, until the job reaches a
permanent kind (succeeded, cancelled), its marker vanishes, or a time limit passes.

Cost: ``log`` one frame read per generation shown (``limit`` bounds it), plus one for a repair whose
recovered frame is not shown; ``follow`` one placement probe per poll.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._frames import (
    REBUILD_REASON,
    REPAIR_REASON,
    fits_link,
    previous_link,
    repaired_from,
)
from httk.workflow.engine.core._sealed import SEALED_DIR, SEALED_HISTORY
from httk.workflow.engine.core._states import PERMANENT_KINDS, Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker
from httk.workflow.protocol import (
    InvalidDocumentError,
    JournalDamageError,
    JournalError,
)
from httk.workflow.protocol._jsonio import parse_json_object, read_json_object

LOG_DETAILS = (
    "fsck_repair",
    "fsck_rebuild",
    "failure",
    "last_failure",
    "takeover",
    "retry",
    "pause",
    "operator",
    "operator_key",
    "operator_reason",
    "cancellation",
    "confinement",
)


def job_history(
    workspace: Workspace,
    marker: MarkerLocation,
    *,
    limit: int | None = None,
    after_generation: int = 0,
    previous_kind: str | None = None,
) -> list[dict[str, Any]]:
    """The marker's frame chain, oldest first: at most ``limit`` frames, none at ``after_generation`` or
    below.

    ``previous_kind`` is the kind before the oldest returned frame when the caller knows it (``follow``).
    """
    entries: list[dict[str, Any]] = []
    wanted = None if limit is None else limit + 1  # one more, to know the kind the oldest came from
    for entry in history_chain(workspace, marker, after_generation):
        if wanted is not None and len(entries) >= wanted:
            break
        if "frame" in entry and entry["frame"]["state_generation"] <= after_generation:
            break  # a repair adopted a frame the caller has already seen
        entries.append(entry)
        if "problem" in entry:
            break
    entries.reverse()
    extra: dict[str, Any] | None = None
    if wanted is not None and len(entries) == wanted and "problem" not in entries[0]:
        extra = entries.pop(0)
        previous_kind = extra["frame"].get("kind")
    elif entries and "problem" not in entries[0] and entries[0]["frame"].get("previous_record_ref") is None:
        previous_kind = Kind.SUBMITTED.value  # generation 1 always leaves the g0 submission marker
    gaps = _lost_generations(workspace, marker.job_id, entries, extra)
    return [
        _log_entry(entry, before, gaps.get(index))
        for index, (entry, before) in enumerate(_with_previous(entries, previous_kind))
    ]


def history_chain(
    workspace: Workspace, marker: MarkerLocation, after_generation: int
) -> Iterator[dict[str, Any]]:
    """The marker's frames newest first, as :func:`read_entry` gives them.

    Past a ``transfer_import`` frame, whose predecessor is in the journal of the workspace the job came
    from, the chain goes on in the history the transfer carried in the payload (detached-transfer-v1).
    """
    ref: Any = None if marker.name.ref is None else marker.name.ref_text
    expected = range(marker.name.generation, marker.name.generation + 1)
    while ref is not None and expected and expected[-1] > after_generation:
        entry = read_entry(workspace, ref, marker.job_id, expected)
        yield entry
        if "problem" in entry:
            return
        if entry["frame"].get("reason") == TRANSFER_IMPORT_REASON:
            payload = workspace.payload_path(marker.placement, marker.job_key)
            for carried in reversed(carried_history(payload)):
                yield {
                    "ref": carried["record_ref"],
                    **{k: v for k, v in carried.items() if k != "record_ref"},
                }
            return
        ref, expected = previous_link(entry["frame"])


TRANSFER_IMPORT_REASON = "transfer_import"
HISTORY_MAX_BYTES = 64 << 20
"""The largest carried history read: a very long-lived job's is large, never unbounded."""


def carried_history(payload: Path, data: bytes | None = None) -> list[dict[str, Any]]:
    """The entries of the payload's ``.httk-transfer/history.json`` (or of its bytes ``data``, which the
    caller read), oldest first; ``[]`` when it has none.

    A history that cannot be read is one problem entry, so ``job log`` says so instead of failing.
    """
    path = payload / SEALED_DIR / SEALED_HISTORY
    if data is None and not os.path.lexists(path):
        return []
    try:
        if data is None:
            document = read_json_object(path, document="transfer history", max_bytes=HISTORY_MAX_BYTES)
        else:
            document = parse_json_object(data, document="transfer history", path=path)
        entries = document.get("entries")
        if document.get("format") != "httk-workflow-transfer-history" or not isinstance(entries, list):
            raise InvalidDocumentError("transfer history", "", "is not a transfer history document", path)
    except InvalidDocumentError as exc:
        return [{"record_ref": str(path), "generation": None, "problem": _code("bad_history", str(exc))}]
    return [entry for entry in entries if isinstance(entry, dict) and "record_ref" in entry]


def _lost_generations(
    workspace: Workspace, job_id: str, entries: list[dict[str, Any]], older: dict[str, Any] | None
) -> dict[int, tuple[int | None, int]]:
    """For each repair entry (by index): the first and last generation it jumped over.

    The first is one above the recovered frame's generation, the frame before the repair's on the chain:
    the previous entry, ``older`` (read but not shown) for the first one, or else (a ``follow`` starting
    right at the repair) read once here; ``None`` when it cannot be read.
    """
    gaps: dict[int, tuple[int | None, int]] = {}
    for index, entry in enumerate(entries):
        frame = entry.get("frame")
        if frame is not None and frame.get("reason") == REBUILD_REASON:
            gaps[index] = (1, frame["state_generation"] - 1)  # everything before it was lost
            continue
        previous, expected = previous_link(frame) if frame is not None else (None, range(0))
        if frame is None or not repaired_from(frame, previous):
            continue
        if index:
            before = entries[index - 1]
        else:
            before = older if older is not None else read_entry(workspace, str(previous), job_id, expected)
        recovered = before.get("frame")
        first = None if recovered is None else recovered["state_generation"] + 1
        gaps[index] = (first, frame["state_generation"] - 1)
    return gaps


def _with_previous(
    entries: list[dict[str, Any]], first: str | None
) -> Iterator[tuple[dict[str, Any], str | None]]:
    before = first
    for entry in entries:
        frame = entry.get("frame")
        if frame is not None and frame.get("reason") == REPAIR_REASON:
            before = frame.get("kind")  # a repair keeps the marker's kind: it came from its own kind
        elif frame is not None and frame.get("reason") == REBUILD_REASON:
            before = (frame.get("fsck_rebuild") or {}).get("from_kind")
        yield entry, before
        before = None if frame is None else frame.get("kind")


def read_entry(workspace: Workspace, ref: str, job_id: str, expected: range) -> dict[str, Any]:
    """``{"ref", "frame"}`` or ``{"ref", "generation", "problem": {"code", "detail"}}``.

    The frame must be of ``job_id`` at a generation in ``expected``; the problem's generation is the one
    expected, or ``None`` when a repair leaves it open.
    """
    generation = expected[0] if len(expected) == 1 else None
    try:
        frame = workspace.read_record(ref)
    except JournalDamageError as exc:
        return _problem(ref, generation, exc.code, exc.detail)
    except JournalError as exc:
        return _problem(ref, generation, "io_error", str(exc))
    if frame.get("job_id") != job_id:
        return _problem(ref, generation, "identity_mismatch", f"the frame is of job {frame.get('job_id')!r}")
    if not fits_link(frame, expected):
        wants = f"{generation}" if generation is not None else f"one of {_span(expected)} (behind a repair)"
        detail = f"the frame has generation {frame.get('state_generation')!r}, its successor expects {wants}"
        return _problem(ref, generation, "identity_mismatch", detail)
    return {"ref": ref, "frame": frame}


def _span(generations: range) -> str:
    return f"{generations.start}..{generations.stop - 1}" if generations else "none"


def _problem(ref: str, generation: int | None, code: str, detail: str) -> dict[str, Any]:
    return {"ref": ref, "generation": generation, "problem": _code(code, detail)}


def _code(code: str, detail: str) -> dict[str, str]:
    return {"code": code, "detail": detail}


def repair_note(first: int | None, last: int, problem: object) -> str:
    """The one line ``job log`` shows for generations a repair jumped over."""
    if first is None:
        lost = f"generations up to {last} were"
    elif first == last:
        lost = f"generation {last} was"
    else:
        lost = f"generations {first}..{last} were"
    cause = f" ({problem})" if isinstance(problem, str) else ""
    return f"{lost} lost to damage{cause} and repaired by workspace fsck"


def rebuild_note(last: int, problem: object) -> str:
    """The one line ``job log`` shows before a frame ``fsck --rebuild-lost`` made."""
    lost = "generation 1 was" if last == 1 else f"generations 1..{last} were"
    cause = f" ({problem})" if isinstance(problem, str) else ""
    return f"{lost} lost{cause}, never synchronized; workspace fsck rebuilt the job from job.json"


def _log_entry(
    entry: Mapping[str, Any], previous_kind: str | None, lost: tuple[int | None, int] | None
) -> dict[str, Any]:
    if "problem" in entry:
        return {
            "generation": entry["generation"],
            "record_ref": entry["ref"],
            "problem": entry["problem"],
        }
    frame = entry["frame"]
    line: dict[str, Any] = {
        "generation": frame.get("state_generation"),
        "record_ref": entry["ref"],
        "created_at": frame.get("created_at"),
        "from": previous_kind,
        "kind": frame.get("kind"),
        "reason": frame.get("reason"),
        "step": frame.get("step"),
        "activation_ordinal": frame.get("activation_ordinal"),
        "attempt_ordinal": frame.get("attempt_ordinal"),
        "total_attempts": frame.get("total_attempts"),
        "attempt_id": frame.get("attempt_id"),
        "manager_id": frame.get("manager_id"),
        "priority": frame.get("priority"),
    }
    for member in LOG_DETAILS:
        if member in frame:
            line[member] = frame[member]
    if lost is not None:
        line["lost_generations"] = {"first": lost[0], "last": lost[1]}
        if frame.get("reason") == REBUILD_REASON:
            line["note"] = rebuild_note(lost[1], (frame.get("fsck_rebuild") or {}).get("problem"))
        else:
            line["note"] = repair_note(*lost, (frame.get("fsck_repair") or {}).get("problem"))
    return line


def follow_history(
    workspace: Workspace,
    marker: MarkerLocation,
    *,
    timeout: float | None = None,
    min_interval: float = 0.05,
    max_interval: float = 1.0,
) -> Iterator[dict[str, Any]]:
    """Yield the log entries of every generation after ``marker``'s, as the job moves.

    Stops when the job is in a permanent kind, when its marker stays absent past the visibility deadline
    (yielding one ``marker_vanished`` problem entry), or after ``timeout`` seconds.
    """
    clock = workspace.clock
    started = clock.monotonic()
    current = marker
    interval = min_interval
    missing_since: float | None = None
    while current.kind not in PERMANENT_KINDS:
        if timeout is not None and clock.monotonic() - started >= timeout:
            return
        clock.sleep(interval)
        found = probe_marker(workspace, current.placement, current.job_key)
        if found is None:
            missing_since = clock.monotonic() if missing_since is None else missing_since
            if clock.monotonic() - missing_since > workspace.policy.visibility_deadline_seconds:
                detail = f"no marker of the job at placement {current.placement} any more"
                yield {"generation": None, "record_ref": None, "problem": _code("marker_vanished", detail)}
                return
            continue
        missing_since = None
        if found.name == current.name:
            interval = min(interval * 2, max_interval)
            continue
        yield from job_history(
            workspace, found, after_generation=current.name.generation, previous_kind=current.kind.value
        )
        current, interval = found, min_interval
