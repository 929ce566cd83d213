"""The job-level records half of :class:`~httk.workflow.sdk.Attempt` (a mixin): what outlives the attempt.

Job state (``.httk-job/state.json``), observed declarations (``.httk-job/declarations/``) and
runner-reported events (``.httk-job/events.jsonl``) all belong to the job rather than to one attempt: they
survive retries, advances and isolated workdirs, and they are excluded from every payload digest. State
is read on first use and cached; :meth:`JobRecords.save_state` replaces it on disk and in the cache.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import _events, _state
from ._context import AttemptContext
from ._errors import StateError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class JobRecords(AttemptContext):
    """Job state, observed declarations and runner-reported events of the attempt's job."""

    _state: dict[str, Any] | None = None

    @property
    def state(self) -> dict[str, Any]:
        """The job's state from ``.httk-job/state.json`` (``{}`` when none was saved), read once.

        It survives retries, step advances and isolated workdirs. Changing the dict changes nothing on
        disk until :meth:`save_state`.

        Raises
        ------
        StateError
            When the file exists but cannot be read or does not hold a JSON object.

        Examples
        --------
        >>> a.state.get("ionic_steps", 0)
        0
        """
        if self._state is None:
            self._state = _state.read_state(self._job_dir)
        return self._state

    def save_state(self, state: Mapping[str, Any]) -> None:
        """Replace the job's state atomically (synchronized when the workspace is durable).

        Save before publishing the outcome: the next step may start as soon as the outcome is committed.

        Parameters
        ----------
        state
            The whole new state: a mapping JSON can hold unchanged (string keys, finite numbers).

        Raises
        ------
        StateError
            When ``state`` is not such a mapping, or the file cannot be written.

        Examples
        --------
        >>> a.save_state({**a.state, "ionic_steps": 61})
        >>> a.state["ionic_steps"]
        61
        """
        self._state = _state.write_state(self._job_dir, state, durable=self.durable)

    def declare(self, name: str, document: Mapping[str, Any]) -> str:
        """Record what the job observed for one of its declarations, replacing an earlier observation.

        Written atomically to ``.httk-job/declarations/<name>.json``; tools report it beside the
        declaration in job.json, never merged with it.

        Parameters
        ----------
        name
            The declaration name (``[A-Za-z0-9_][A-Za-z0-9._-]{0,63}``).
        document
            The observed declaration: a mapping JSON can hold unchanged; opaque to the protocol.

        Returns
        -------
        str
            The file written.

        Raises
        ------
        StateError
            When the name or document is invalid, or the file cannot be written.

        Examples
        --------
        >>> os.path.basename(a.declare("outputs", {"files": ["OUTCAR", "vasprun.xml"]}))
        'outputs.json'
        """
        return _state.write_declaration(self._job_dir, name, document, durable=self.durable)

    def record_event(self, kind: str, message: str, details: Mapping[str, Any] | None = None) -> str:
        """Append one event to the job's runner-reported events, for ``job show`` and ``job why``.

        The record (``.httk-job/events.jsonl``, docs/runner-events.md) keeps the most recent events of
        the job across its attempts: what the runner detected, decided or repaired, in its own words.
        It may be written at any time, also after the outcome. It is diagnostics, never synchronized.

        Parameters
        ----------
        kind
            A namespaced token such as ``vasp.error`` or ``vasp.remedy``.
        message
            One human sentence.
        details
            Structured evidence (a mapping JSON can hold); the whole event is at most 8 KiB.

        Returns
        -------
        str
            The file appended to.

        Raises
        ------
        StateError
            When an argument is invalid (it is named), the event is too long, or it cannot be written.

        Examples
        --------
        >>> os.path.basename(a.record_event("vasp.remedy", "ZPOTRF: switched symmetry off"))
        'events.jsonl'
        """
        path = os.path.join(self._job_dir, _state.JOB_STATE_DIR, _events.EVENTS_FILE)
        for argument, problem in (
            ("kind", _events.kind_problem(kind)),
            ("message", _events.message_problem(message)),
        ):
            if problem is not None:
                raise StateError(f"argument {argument} {problem}", path=path)
        if details is not None and not isinstance(details, Mapping):
            raise StateError(f"argument details must be a mapping, not {type(details).__name__}", path=path)
        document = _events.event_document(self._context, kind, message, details)
        return _events.append_event(self._job_dir, _events.encoded_event(document, path))
