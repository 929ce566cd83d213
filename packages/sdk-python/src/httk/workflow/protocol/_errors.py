"""The one exception hierarchy of httk-workflow.

Every error names what it is about (a path, a document member, a name) so the command line can print one
line that an operator can act on. Lower-layer exceptions (``OSError``, ``json.JSONDecodeError``,
``pydantic.ValidationError``, ``jsonschema.ValidationError``) are translated into these at the seam that
meets them.

::

    WorkflowError
    ├── InvalidNameError            a tag, job key, placement, label, step or base-36 number is malformed
    ├── InvalidDocumentError        a protocol document breaks its schema or a rule beside it
    │   └── UnsafePathError         a path escapes its root, is a symlink or a forbidden file type
    │       └── ForeignOwnerError   an entry a manager would act on belongs to another account
    ├── WorkspaceError              a workspace cannot be attached or changed
    │   ├── WorkspaceFormatError    format.json is missing, invalid, or names what we do not support
    │   ├── PolicyError             a policy or settings change is refused
    │   └── RegistryError           the user's workspace registry is unreadable or refuses a change
    ├── IdentityError               the operator identity is missing, unreadable or refuses a change
    ├── SubmissionError             a job cannot be submitted (conflicting UUID, missing payload, ...)
    ├── RunnerStoreError            a runner cannot be published to the workspace store
    ├── LauncherError               a launcher bundle or a launch setting is refused (nothing started)
    ├── LaunchError                 starting managers failed; carries what was started before it did
    ├── JournalError                a journal segment cannot be written
    │   └── JournalDamageError      a referenced frame is lastingly unreadable; carries a problem code
    └── TransitionError             a marker rename could not be resolved
        └── WorkspaceUnavailableError
                                    source, destination and any current marker all stayed absent
"""

from __future__ import annotations

from pathlib import Path


class WorkflowError(Exception):
    """Base of every error httk-workflow raises on purpose."""


class InvalidNameError(WorkflowError, ValueError):
    """A protocol name (tag, job key, placement, label, step, base-36 number, marker) is malformed."""

    def __init__(self, what: str, value: object, rule: str) -> None:
        self.what = what
        self.value = value
        self.rule = rule
        super().__init__(f"invalid {what} {value!r}: {rule}")


class InvalidDocumentError(WorkflowError, ValueError):
    """A protocol document is invalid; ``member`` is a dotted JSON path such as ``runner.sha256``."""

    def __init__(self, document: str, member: str, rule: str, path: Path | str | None = None) -> None:
        self.document = document
        self.member = member
        self.rule = rule
        self.path = None if path is None else str(path)
        where = f" {self.path}" if self.path else ""
        at = f" member {member!r}:" if member else ""
        super().__init__(f"invalid {document}{where}:{at} {rule}")


class UnsafePathError(InvalidDocumentError):
    """A path is absolute, escapes its root, is a symlink, or is a forbidden file type."""


class ForeignOwnerError(UnsafePathError):
    """An entry a manager would act on (a marker, a payload, job.json) is owned by another account.

    A manager runs only jobs its own account submitted: running another account's job.json would run
    that account's choice of code with this account's rights.
    """


class WorkspaceError(WorkflowError):
    """A workspace cannot be attached, initialized or changed."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        self.path = None if path is None else str(path)
        super().__init__(message if path is None else f"{path}: {message}")


class WorkspaceFormatError(WorkspaceError):
    """format.json is missing, unreadable, invalid, or declares something this version cannot serve."""


class PolicyError(WorkspaceError):
    """A policy or settings change is refused (unknown key, out-of-range value)."""


class RegistryError(WorkspaceError):
    """The per-user workspace registry has a corrupt file, lacks a name, or refuses a change.

    ``path`` is the registry file (or directory) concerned, so the operator can inspect or remove it.
    """


class IdentityError(WorkflowError):
    """The user's operator identity (its document or a key file) is unreadable, unsafe, or refuses a change.

    ``path`` is the file concerned, so the operator can inspect or repair it.
    """

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        self.path = None if path is None else str(path)
        super().__init__(message if path is None else f"{path}: {message}")


class SubmissionError(WorkflowError):
    """A job cannot be submitted."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        self.path = None if path is None else str(path)
        super().__init__(message if path is None else f"{path}: {message}")


class RunnerStoreError(WorkflowError):
    """A runner cannot be published into, or resolved from, the workspace runner store."""


class TransferError(WorkflowError):
    """A transfer is refused (a job that may not leave, a bundle that is not whole, a duplicate);
    nothing was changed."""


class RemoteError(WorkflowError):
    """A remote, its name or a setting is refused, or a remote cannot run what was asked; nothing was
    changed."""


class RemoteUnreachableError(WorkflowError):
    """A remote cannot be reached: ssh failed to connect, or refused the host's key."""


class LauncherError(WorkflowError):
    """A launcher bundle, its name or a launch setting is refused; nothing was started."""


class LaunchError(WorkflowError):
    """Starting managers failed part way; ``started`` names what was started before (pids, job ids)."""

    def __init__(self, message: str, started: tuple[str, ...] = ()) -> None:
        self.started = started
        super().__init__(message)


class JournalError(WorkflowError):
    """A journal segment cannot be created or appended to."""


class JournalDamageError(JournalError):
    """A referenced journal frame is lastingly unreadable.

    ``code`` is one of the problem codes of the specification: missing_segment, short_read,
    checksum_mismatch, length_mismatch, trailer_mismatch, reference_mismatch, invalid_header,
    undecodable_frame, invalid_record_ref.
    """

    CODES = frozenset(
        {
            "missing_segment",
            "short_read",
            "checksum_mismatch",
            "length_mismatch",
            "trailer_mismatch",
            "reference_mismatch",
            "invalid_header",
            "undecodable_frame",
            "invalid_record_ref",
        }
    )

    def __init__(self, code: str, ref: str, detail: str, path: Path | str | None = None) -> None:
        if code not in self.CODES:
            raise ValueError(f"unknown journal problem code {code!r}")
        self.code = code
        self.ref = ref
        self.detail = detail
        self.path = None if path is None else str(path)
        where = f" ({self.path})" if self.path else ""
        super().__init__(f"{code}: journal frame {ref}{where}: {detail}")


class TransitionError(WorkflowError):
    """A state-marker rename could not be carried out or resolved."""


class WorkspaceUnavailableError(TransitionError):
    """Source, expected destination and any other current marker all stayed absent past the deadline."""
