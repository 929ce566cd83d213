"""Composing and publishing the one outcome of an attempt, byte for byte as docs/outcome-documents.md says.

Composition: one line of compact UTF-8 JSON ending in a newline, members in the contract's order --
``format``, ``format_version``, ``job_id``, ``activation_id``, ``attempt_id``, ``action``, the action's own
member, then ``priority``, ``resources``, ``expected_data_generation``, ``message`` and ``runner_steps``,
each only when it applies. The Bash API publishes the same bytes for the same decision.

Publication (:class:`Draft`): ``mkdir outcome.tmp.<nonce>``, write ``outcome.json``, any child bundles
(:mod:`._children`, added through :meth:`Draft.add_file` as each child is spawned, so a draft may exist
before its outcome is decided) and any ``transaction/`` bundle (``stage_transaction``), when durable
synchronize every file and then every directory of the draft in one batch, rename the draft to
``outcome.ready``, and when durable synchronize the control directory. The documents are created with
mode 0666 less the umask, like any file a process creates (and like the Bash API's redirections). A
crash before the rename leaves an ignored draft; after it, the whole outcome.

Why a plain ``rename(2)`` never replaces a published outcome: a published ``outcome.ready`` is always a
nonempty directory (it was a draft holding ``outcome.json``), and renaming a directory onto a nonempty
directory fails (``ENOTEMPTY``/``EEXIST``), as it does onto a file (``ENOTDIR``). So the SDK needs no
``renameat2`` -- and no ``ctypes`` import on every attempt. The destination is also checked before the
draft is made, so the common mistake costs no writes.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence

from . import _checks
from ._errors import OutcomeAlreadyPublishedError, OutcomeError
from ._files import compact_json, fsync_path, nonce, plain_json, remove_quietly, write_new

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._files import StrPath

FORMAT = "httk-workflow-outcome"
FORMAT_VERSION = 1
READY_NAME = "outcome.ready"
DRAFT_PREFIX = "outcome.tmp."
OUTCOME_FILE = "outcome.json"
_TAKEN = frozenset({errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR})


# -- arguments -------------------------------------------------------------------------------------
def checked_text(argument: str, value: object) -> str:
    """A human text argument (message, reason): a string with something besides whitespace, valid UTF-8."""
    if not isinstance(value, str):
        raise OutcomeError(f"must be a string, not {type(value).__name__}", argument=argument)
    if not value.strip():
        raise OutcomeError("must not be empty or only whitespace", argument=argument)
    problem = _checks.json_problem(value)
    if problem is not None:
        raise OutcomeError(problem, argument=argument)
    return value


def advance_members(step: object) -> dict[str, Any]:
    """The members of an ``advance`` outcome's own part."""
    problem = _checks.step_problem(step)
    if problem is not None:
        raise OutcomeError(f"is not a valid step name ({step!r}): {problem}", argument="step")
    return {"next_step": step}


def failure_members(code: object, message: object, details: object, retryable: object) -> dict[str, Any]:
    """The ``failure`` member of a ``fail`` outcome, checked by the protocol's own failure rules."""
    failure: dict[str, Any] = {"code": code, "message": checked_text("message", message)}
    if details is not None:
        if not isinstance(details, Mapping):
            raise OutcomeError(f"must be a mapping, not {type(details).__name__}", argument="details")
        problem = _checks.json_problem(details, depth=2)  # outcome > failure > details
        if problem is not None:
            raise OutcomeError(problem, argument="details")
        failure["details"] = plain_json(details)
    if retryable is not None:
        if not isinstance(retryable, bool):
            raise OutcomeError(f"must be True, False or None, not {retryable!r}", argument="retryable")
        failure["retryable"] = retryable
    fault = _checks.failure_problem(failure)
    if fault is not None:
        member, rule = fault
        raise OutcomeError(f"{rule} ({failure.get(member)!r})", argument=member or "failure")
    return {"failure": failure}


def reason_members(action: str, reason: object) -> dict[str, Any]:
    """The ``retry`` or ``pause`` member: ``{"reason": ...}``."""
    return {action: {"reason": checked_text("reason", reason)}}


def compose(
    identity: tuple[str, str, str],
    action: str,
    members: Mapping[str, Any],
    *,
    priority: int | None = None,
    resources: Mapping[str, int] | None = None,
    expected_data_generation: int | None = None,
    message: str | None = None,
    runner_steps: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The outcome document, its members in the contract's order (arguments already checked)."""
    job_id, activation_id, attempt_id = identity
    document: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "job_id": job_id,
        "activation_id": activation_id,
        "attempt_id": attempt_id,
        "action": action,
    }
    document.update(members)
    if priority is not None:
        document["priority"] = priority
    if resources is not None:
        document["resources"] = dict(resources)
    if expected_data_generation is not None:
        document["expected_data_generation"] = expected_data_generation
    if message is not None:
        document["message"] = message
    if runner_steps is not None:
        document["runner_steps"] = list(runner_steps)
    return document


# -- publication -----------------------------------------------------------------------------------
class Draft:
    """An ``outcome.tmp.<nonce>/`` being composed, remembering every file and directory written into it.

    Parameters
    ----------
    control_dir
        The attempt's control directory, which must exist.
    """

    def __init__(self, control_dir: StrPath) -> None:
        self.control_dir = os.fspath(control_dir)
        self.path = os.path.join(self.control_dir, f"{DRAFT_PREFIX}{nonce()}")
        os.mkdir(self.path)
        self._dirs: list[str] = [self.path]
        self._files: list[str] = []
        self._published = False

    def add_file(self, relative: str, data: bytes, *, mode: int = 0o666) -> str:
        """Write a new file at the ``/``-separated ``relative`` path in the draft (mode less the umask).

        The default is what a Bash redirection creates, so outcome.json, spawn.json and a child's job.json
        have the same mode from either SDK under any umask (Bash cannot read its umask without a fork).
        """
        target = self.path
        *parents, name = relative.split("/")
        for part in parents:
            target = os.path.join(target, part)
            if target not in self._dirs:
                os.mkdir(target)
                self._dirs.append(target)
        target = os.path.join(target, name)
        self._files.append(target)
        write_new(target, data, mode=mode)
        return target

    def publish(self, *, durable: bool) -> str:
        """Synchronize the draft (durable), rename it to ``outcome.ready``, synchronize the control dir."""
        ready = os.path.join(self.control_dir, READY_NAME)
        if durable:
            for file in self._files:
                fsync_path(file)
            for folder in reversed(self._dirs):  # the deepest first, the draft itself last
                fsync_path(folder, directory=True)
        try:
            os.rename(self.path, ready)
        except OSError as exc:
            if exc.errno in _TAKEN:
                raise OutcomeAlreadyPublishedError(ready) from exc
            raise
        self._published = True
        if durable:
            fsync_path(self.control_dir, directory=True)
        return ready

    def discard(self) -> None:
        """Remove an unpublished draft, best effort (a leftover draft is ignored by every reader)."""
        if self._published:
            return
        for file in reversed(self._files):
            remove_quietly(file)
        for folder in reversed(self._dirs):
            try:
                os.rmdir(folder)
            except OSError:  # not empty (a staged bundle, removed below) or gone already
                continue
        if os.path.lexists(self.path):
            # Something this draft did not write itself is inside: a staged transaction bundle. The
            # draft is this process's own name, and rmtree removes a link without following it.
            import shutil

            shutil.rmtree(self.path, ignore_errors=True)

    @property
    def published(self) -> bool:
        """Whether the rename to ``outcome.ready`` has happened."""
        return self._published


def publish(
    control_dir: StrPath, document: Mapping[str, Any], *, durable: bool, draft: Draft | None = None
) -> str:
    """Publish ``document`` as the attempt's outcome; return the ``outcome.ready`` path.

    ``draft`` is a draft that already holds the outcome's bundles (children); by default a fresh one.
    Raises :class:`OutcomeAlreadyPublishedError` when the attempt already has an outcome, and
    :class:`OutcomeError` when the draft cannot be written or renamed. A draft that was not published
    is removed.
    """
    ready = os.path.join(control_dir, READY_NAME)
    if os.path.lexists(ready):
        if draft is not None:
            draft.discard()
        raise OutcomeAlreadyPublishedError(ready)
    data = compact_json(document)
    try:
        draft = Draft(control_dir) if draft is None else draft
    except OSError as exc:
        raise OutcomeError(
            f"cannot create an outcome draft: {exc.strerror or exc}", path=control_dir
        ) from exc
    try:
        draft.add_file(OUTCOME_FILE, data)
        return draft.publish(durable=durable)
    except OutcomeAlreadyPublishedError:
        draft.discard()
        raise
    except OSError as exc:
        draft.discard()
        what = "synchronize the control directory after publishing" if draft.published else "publish"
        raise OutcomeError(f"cannot {what} the outcome: {exc.strerror or exc}", path=draft.path) from exc
    except BaseException:
        draft.discard()
        raise
