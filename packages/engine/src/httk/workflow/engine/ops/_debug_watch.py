"""Watching one job for ``job debug``: its transitions and its attempts' output, printed as they happen.

A :class:`JobWatcher` polls on its own thread while the private manager runs on the caller's. Nothing here
writes to the workspace: it attaches read-only and only probes, reads frames and reads log files.

**Transitions.** Each poll probes the job's marker at its placement. When the name changed, the journal is
walked back from the new marker to the generation seen last, so a transition that came and went between
two polls is still printed, oldest first, as one ``[debug]`` line each.

**Output.** Every attempt a running frame names (a launched process) is printed exactly once, each line
prefixed with the attempt's step (``[relax]``, ``[relax stderr]``):

- *live*: the attempt's ``stdout.log`` and ``stderr.log`` are opened as soon as both exist and read to
  their end at every poll. An open file stays readable after the manager retires (removes) the control
  directory (D5), so nothing written after the opening is lost; once the marker has moved past the
  attempt, its process has exited and the rest is read at once.
- *afterwards*, for an attempt that came and went between two polls: from its control directory when that
  was kept (failed, cancelled, or an exit without outcome), otherwise from its section of
  ``logs/stdio.log``, which is complete by then: D5 appends it before it removes a single file.

An attempt's output is printed right after the transition that ended it, so it stays in order with the
other attempts' output even when it was not seen live.

Cost: one probe per poll (one listing per state kind at the job's placement), frame reads only when the
marker changed, one ``read`` per open log file per poll.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from httk.workflow.engine.core._states import OWNED_KINDS
from httk.workflow.engine.core._workspace import MarkerLocation, attach, probe_marker
from httk.workflow.protocol import TransitionError, WorkflowError
from httk.workflow.protocol._digest import ATTEMPT_DIR_PREFIX

POLL_INTERVAL = 0.05
MAX_FRAMES_PER_POLL = 1000
"""How far back one poll walks the journal; a job that moved more often between two polls is summarized."""

STDIO_LOG = Path("logs") / "stdio.log"
HEADER = re.compile(r"^== attempt \S+ of step '[^']*' \((?P<attempt>[0-9a-f-]{36})\) ==$")
"""The header ``_commit.retire_attempt_control`` writes before each attempt's output in logs/stdio.log."""
STDERR_LABEL = "-- stderr --"

Echo = Callable[[str], object]


@dataclass
class _Stream:
    """One open log file of an attempt and the incomplete last line read from it so far."""

    handle: BinaryIO
    label: str
    partial: bytes = b""

    def lines(self, *, final: bool) -> list[str]:
        *complete, self.partial = (self.partial + self.handle.read()).split(b"\n")
        if final and self.partial:
            complete.append(self.partial)
            self.partial = b""
        return [line.decode("utf-8", "replace") for line in complete]


@dataclass
class _Attempt:
    """An attempt of the watched job: where its output is, and how much of it was printed."""

    attempt_id: str
    step: str
    control: Path
    streams: list[_Stream] | None = None
    done: bool = False

    def open(self) -> bool:
        """Open both log files (once); whether they are open. Either missing means not now."""
        if self.streams is not None:
            return True
        handles: list[BinaryIO] = []
        try:
            for name in ("stdout.log", "stderr.log"):
                handles.append(open(self.control / name, "rb"))  # noqa: SIM115 - kept open across polls
        except OSError:
            for handle in handles:
                handle.close()
            return False
        self.streams = [_Stream(handles[0], self.step), _Stream(handles[1], f"{self.step} stderr")]
        return True

    def pump(self, echo: Echo, *, final: bool) -> None:
        for stream in self.streams or []:
            for line in stream.lines(final=final):
                echo(f"[{stream.label}] {line}")
        if final:
            self.close()
            self.done = True

    def close(self) -> None:
        for stream in self.streams or []:
            stream.handle.close()


@dataclass
class JobWatcher:
    """Prints one job's transitions and output while a manager drives it; see the module docstring.

    Examples
    --------
    >>> watcher = JobWatcher(workspace.root, marker, print)  # doctest: +SKIP
    >>> watcher.start(); manager.run(); watcher.stop()  # doctest: +SKIP
    """

    root: Path
    marker: MarkerLocation
    echo: Echo
    interval: float = POLL_INTERVAL
    _attempts: dict[str, _Attempt] = field(default_factory=dict, init=False)
    _live: str | None = field(default=None, init=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._workspace = attach(self.root, writable=False)
        self._last: MarkerLocation | None = self.marker
        self._missing_since: float | None = None
        self._payload = self._workspace.payload_path(self.marker.placement, self.marker.job_key)
        if self.marker.kind in OWNED_KINDS:  # an attempt already under way when the watch begins
            frame = self._read(self.marker.name.ref_text)
            if frame is not None:
                self._note_attempt(frame)
                self._live = frame.get("attempt_id") if frame.get("kind") != "claimed" else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="httk-debug-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling, then print what is left: the last transitions and every attempt's output."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        self.poll()
        self._live = None  # the manager has stopped: whatever it left running is not watched any more
        self._finish_attempts()
        for attempt in self._attempts.values():
            if not attempt.done:
                attempt.close()
                self.echo(f"[debug] the output of attempt {attempt.attempt_id} is gone")

    def _watch(self) -> None:
        while not self._stopping.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Report new transitions, then print what every unfinished attempt wrote since the last poll."""
        try:
            current = probe_marker(self._workspace, self.marker.placement, self.marker.job_key)
        except TransitionError:
            return  # two markers in every scan: the manager reports that corruption itself
        if current is None and not self._vanished():
            return  # a scan that crossed the marker's rename: absence is an answer only after the deadline
        self._missing_since = None
        if current != self._last:
            self._report_moves(current)
            self._last = current
        live = self._attempts.get(self._live or "")
        if live is not None and not live.done and live.open():
            live.pump(self.echo, final=False)
        self._finish_attempts()

    def _vanished(self) -> bool:
        """Whether the job's marker has been absent from every probe for the visibility deadline."""
        now = self._workspace.clock.monotonic()
        if self._missing_since is None:
            self._missing_since = now
        return now - self._missing_since > self._workspace.policy.visibility_deadline_seconds

    def _finish_attempts(self) -> None:
        """Print the rest of every attempt that is over, in attempt order.

        Logs that cannot be opened any more were retired: D5 appends them to stdio.log before it removes
        a single file, so the attempt's section there is already complete.
        """
        sections: dict[str, list[tuple[bool, str]]] | None = None
        for attempt in self._attempts.values():
            if attempt.done or attempt.attempt_id == self._live:
                continue
            if attempt.open():
                attempt.pump(self.echo, final=True)
                continue
            if sections is None:
                over = {a.attempt_id for a in self._attempts.values() if not a.done and a.streams is None}
                sections = stdio_sections(self._payload / STDIO_LOG, over)
            if attempt.attempt_id in sections:
                for is_stderr, line in sections[attempt.attempt_id]:
                    self.echo(f"[{attempt.step}{' stderr' if is_stderr else ''}] {line}")
                attempt.done = True

    # -- transitions -------------------------------------------------------------------------------
    def _report_moves(self, current: MarkerLocation | None) -> None:
        key = self.marker.job_key
        if current is None:
            self.echo(f"[debug] {key}: its marker is gone")
            self._live = None
            return
        frames = self._frames_since(current)
        previous = self._last.kind.value if self._last is not None else "?"
        for frame in frames:
            self.echo(f"[debug] {key}: {previous} -> {describe(frame)}")
            previous = str(frame.get("kind"))
            self._note_attempt(frame)
            if frame.get("kind") not in ("claimed", "running", "cancelling"):
                self._live = None  # no process runs past this frame: its output follows its end
                self._finish_attempts()
        if frames:  # else the frame could not be read: what is live stays as it was
            newest = frames[-1].get("attempt_id")
            self._live = newest if current.kind in OWNED_KINDS and isinstance(newest, str) else None

    def _frames_since(self, current: MarkerLocation) -> list[dict[str, Any]]:
        """The frames from the one after the generation seen last up to ``current``'s, oldest first."""
        seen = self._last.name.generation if self._last is not None else -1
        frames: list[dict[str, Any]] = []
        ref = current.name.ref_text if current.name.ref is not None else None
        while ref is not None and len(frames) < MAX_FRAMES_PER_POLL:
            frame = self._read(ref)
            if frame is None or int(frame.get("state_generation", 0)) <= seen:
                break
            frames.append(frame)
            previous = frame.get("previous_record_ref")
            ref = previous if isinstance(previous, str) else None
        return frames[::-1]

    def _read(self, ref: str) -> dict[str, Any] | None:
        try:
            return self._workspace.reader.read(ref)
        except WorkflowError as exc:
            self.echo(f"[debug] {self.marker.job_key}: a frame cannot be read: {exc}")
            return None

    def _note_attempt(self, frame: dict[str, Any]) -> None:
        attempt_id = frame.get("attempt_id")
        launched = frame.get("kind") == "running"  # a running frame names a process, which has logs
        if launched and isinstance(attempt_id, str) and attempt_id not in self._attempts:
            control = self._payload / f"{ATTEMPT_DIR_PREFIX}{attempt_id}"
            self._attempts[attempt_id] = _Attempt(attempt_id, str(frame.get("step")), control)


def describe(frame: dict[str, Any]) -> str:
    """``running (launched) step relax, attempt 2`` and the like: one transition for a ``[debug]`` line."""
    text = f"{frame.get('kind')} ({frame.get('reason')})"
    details: list[str] = []
    if "step" in frame:
        details.append(f"step {frame['step']}")
    if frame.get("kind") in ("claimed", "running") and "attempt_ordinal" in frame:
        details.append(f"attempt {frame['attempt_ordinal']}")
    failure = frame.get("failure")
    if isinstance(failure, dict):
        details.append(f"{failure.get('code')}: {failure.get('message')}")
    join = frame.get("join")
    if frame.get("kind") == "waiting" and isinstance(join, dict):
        details.append(f"waiting for {len(join.get('children') or [])} children ({join.get('condition')})")
    return text + (" " + ", ".join(details) if details else "")


def stdio_sections(path: Path, wanted: set[str]) -> dict[str, list[tuple[bool, str]]]:
    """The lines of each ``wanted`` attempt's section of ``logs/stdio.log``: ``(is_stderr, text)``."""
    sections: dict[str, list[tuple[bool, str]]] = {}
    if not wanted:
        return sections
    current: list[tuple[bool, str]] | None = None
    stderr = False
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError:
        return sections
    with handle:
        for raw in handle:
            line = raw.rstrip(b"\n").decode("utf-8", "replace")
            header = HEADER.match(line)
            if header is not None:
                current = sections.setdefault(header["attempt"], []) if header["attempt"] in wanted else None
                stderr = False
            elif current is not None and line == STDERR_LABEL and not stderr:
                stderr = True
            elif current is not None:
                current.append((stderr, line))
    return sections
