"""The plan's two human-readable files in the coordinator's workdir: ``progress.log`` and
``workflow-state.json`` (spec/04's artifacts).

``progress.log`` is append-only: one ``[ISO-8601] message`` line per stage status change and per plan
event, each written with one ``write(2)`` on a descriptor opened ``O_APPEND`` -- so ``tail -f`` never
shows half a line and two writers never interleave inside one -- and synchronized when the workspace is
durable. It is also the coordinator's record of what it has already said (:func:`logged`): a coordinator
attempt that dies after writing some lines and is retried does not write them again.

``workflow-state.json`` is rewritten whole at every activation: a temporary file in the same directory,
written, synchronized when durable, renamed over the old one, so ``cat`` shows one complete task list.

Stage lines read ``[<time>] stage <id> (<name>): status -> <status> (<job key> g<generation>)``, the
generation being the stage job's state generation that the status was read from; the ``ready`` line of a
stage has no job yet and ends at the status.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.sdk._files import replace_atomically

from ._mutations import done

LOG_FILE = "progress.log"
STATE_FILE = "workflow-state.json"

_STAGE_LINE = re.compile(
    r"^\[[^\]]*\] stage (?P<stage>\S+) \(.*\): status -> (?P<status>[a-z_]+)"
    r"(?: \((?P<key>\S+) g(?P<generation>\d+)\))?$"
)


def now_iso() -> str:
    """This instant as ``date -Iseconds`` prints it in UTC: ``2026-12-02T10:00:00+00:00``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def iso_of(created_at: object) -> str | None:
    """A frame's ``created_at`` (``2026-12-02T10:00:00.123456Z``) in the log's form, or ``None``."""
    if not isinstance(created_at, str) or len(created_at) < 19 or created_at[10] != "T":
        return None
    return f"{created_at[:19]}+00:00"


def stage_line(when: str, stage: str, name: str, status: str, job: tuple[str, int] | None = None) -> str:
    """One stage status line (see the module docstring).

    Examples
    --------
    >>> stage_line("2026-12-02T10:00:00+00:00", "relax", "Relax", "running", ("relax--0ab", 3))
    '[2026-12-02T10:00:00+00:00] stage relax (Relax): status -> running (relax--0ab g3)'
    """
    suffix = "" if job is None else f" ({job[0]} g{job[1]})"
    return f"[{when}] stage {stage} ({name}): status -> {status}{suffix}"


def plan_line(when: str, workflow_id: str, message: str) -> str:
    """One line about the plan as a whole."""
    return f"[{when}] plan {workflow_id}: {message}"


@dataclass(frozen=True)
class Logged:
    """What the log last said of one stage: its status, and the job generation it was read from."""

    status: str
    job_key: str | None
    generation: int | None


def logged(path: Path) -> dict[str, Logged]:
    """The last status the log at ``path`` gives each stage (nothing for a log not written yet)."""
    last: dict[str, Logged] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return last
    for line in text.splitlines():
        match = _STAGE_LINE.match(line)
        if match is not None:
            generation = match["generation"]
            last[match["stage"]] = Logged(
                match["status"], match["key"], None if generation is None else int(generation)
            )
    return last


def lines_of(path: Path) -> set[str]:
    """Every line the log at ``path`` holds (none for a log not written yet)."""
    try:
        return set(path.read_text(encoding="utf-8", errors="replace").splitlines())
    except FileNotFoundError:
        return set()


def last_says(path: Path, line: str) -> bool:
    """Whether the log's last line is ``line`` but for its time (the ``[...]`` it starts with)."""
    try:
        with open(path, "rb") as stream:
            stream.seek(max(0, os.fstat(stream.fileno()).st_size - 4096))
            tail = stream.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return False
    return bool(tail) and tail[-1].partition("] ")[2] == line.partition("] ")[2]


def append(path: Path, lines: Iterable[str], *, durable: bool) -> None:
    """Append each line with one ``write`` (see the module docstring); synchronize once when durable."""
    encoded = [f"{line}\n".encode() for line in lines]
    if not encoded:
        return
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        for data in encoded:
            written = os.write(fd, data)
            if written != len(data):  # a regular file takes the whole write or raises (ENOSPC)
                raise OSError(f"{path}: short write of a progress line ({written} of {len(data)} bytes)")
            done("progress line", path)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    if created and durable:
        fsync_dir(path.parent)


def write_state(path: Path, document: Mapping[str, Any], *, durable: bool) -> None:
    """Replace ``path`` with ``document`` atomically (see the module docstring)."""
    data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    replace_atomically(path, data, durable=durable)
    done("replace", path)


def fsync_dir(directory: Path) -> None:
    """Synchronize a directory's entries (a file created or renamed in it)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
