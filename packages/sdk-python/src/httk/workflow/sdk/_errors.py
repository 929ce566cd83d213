"""The one exception hierarchy of the Python SDK.

Every error names what it is about -- the argument, the member, the setting or the path -- so a step's
traceback, and the ``stderr.log`` the manager keeps, says what to fix. Lower-layer exceptions (``OSError``,
``json.JSONDecodeError``, the protocol package's ``InvalidNameError``) are translated into these where the
SDK meets them; the original stays reachable as ``__cause__``.

::

    SdkError                            base of every error the SDK raises on purpose
    ├── ContextError                    the attempt context (context.json, job.json) is missing or malformed
    ├── StepDefinitionError             a step name is invalid or registered twice      (also ValueError)
    ├── OutcomeError                    an outcome argument is invalid or publication failed (ValueError)
    │   ├── OutcomeAlreadyPublishedError  the attempt already has its one outcome (a second one, or a
    │   │                               transaction call after it, is refused)
    │   └── TransactionError            a transaction operation is refused, the job is not transactional,
    │                                   or the bundle cannot be staged (defined in ``_transaction``)
    ├── SettingNameError                a setting name is not a dotted lowercase name   (also ValueError)
    ├── SettingNotFoundError            no layer holds the setting and no default was given (LookupError)
    └── StateError                      job state or an observed declaration cannot be read or written

``SdkError`` deliberately does not derive from ``httk.workflow.protocol.WorkflowError``: that would make
importing the SDK import the whole protocol package, which a runner pays for on every attempt.

Examples
--------
>>> from httk.workflow.sdk import OutcomeAlreadyPublishedError, OutcomeError, SdkError
>>> issubclass(OutcomeAlreadyPublishedError, OutcomeError) and issubclass(OutcomeError, SdkError)
True
"""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from os import PathLike


class SdkError(Exception):
    """Base of every error the Python SDK raises on purpose.

    Examples
    --------
    >>> from httk.workflow.sdk import SdkError, SettingNotFoundError
    >>> issubclass(SettingNotFoundError, SdkError)
    True
    """


class ContextError(SdkError):
    """The attempt context cannot be used: context.json or job.json is missing, unreadable or malformed.

    Parameters
    ----------
    message
        What is wrong, naming the member when one is at fault.
    path
        The document concerned, when there is one.
    member
        The offending member of that document (``"attempt_ordinal"``), when there is one.

    Examples
    --------
    >>> from httk.workflow.sdk import ContextError
    >>> str(ContextError("must be an integer", path="/w/context.json", member="attempt_ordinal"))
    "/w/context.json: member 'attempt_ordinal' must be an integer"
    """

    def __init__(
        self, message: str, *, path: str | PathLike[str] | None = None, member: str | None = None
    ) -> None:
        self.path = None if path is None else str(path)
        self.member = member
        text = message if member is None else f"member {member!r} {message}"
        super().__init__(text if self.path is None else f"{self.path}: {text}")


class StepDefinitionError(SdkError, ValueError):
    """A step cannot be registered: its name is invalid or another function already has it.

    Parameters
    ----------
    message
        What is wrong.
    step
        The step name concerned.

    Examples
    --------
    >>> from httk.workflow.sdk import StepDefinitionError
    >>> StepDefinitionError("is registered twice", step="relax").step
    'relax'
    """

    def __init__(self, message: str, *, step: object) -> None:
        self.step = step
        super().__init__(f"step {step!r} {message}")


class OutcomeError(SdkError, ValueError):
    """An outcome was refused before anything was written, or could not be published.

    Parameters
    ----------
    message
        What is wrong.
    argument
        The argument of the outcome action at fault (``"priority"``, ``"details"``), if one is.
    path
        The file or directory concerned, if one is.

    Examples
    --------
    >>> from httk.workflow.sdk import OutcomeError
    >>> str(OutcomeError("must be an integer from 0 through 999, not 1000", argument="priority"))
    'argument priority must be an integer from 0 through 999, not 1000'
    """

    def __init__(
        self, message: str, *, argument: str | None = None, path: str | PathLike[str] | None = None
    ) -> None:
        self.argument = argument
        self.path = None if path is None else str(path)
        text = message if argument is None else f"argument {argument} {message}"
        super().__init__(text if self.path is None else f"{self.path}: {text}")


class OutcomeAlreadyPublishedError(OutcomeError):
    """The attempt already has its one outcome; a second one, or a transaction operation, comes too late.

    A transaction is published with the outcome (or discarded with it), so an operation added afterwards
    would be lost without a word; it is refused instead, naming the operation. The Bash API refuses the
    same calls with the same words (return 3).

    Parameters
    ----------
    path
        The attempt's ``outcome.ready`` directory.
    operation
        The transaction call refused (``"put_file"``, ``"transaction"``), when one was.

    Examples
    --------
    >>> from httk.workflow.sdk import OutcomeAlreadyPublishedError
    >>> OutcomeAlreadyPublishedError("/w/.httk-attempt.x/outcome.ready").path
    '/w/.httk-attempt.x/outcome.ready'
    >>> str(OutcomeAlreadyPublishedError("/w/outcome.ready", operation="put_file")).split(";")[0]
    '/w/outcome.ready: put_file refused: the attempt has already published its one outcome'
    """

    def __init__(self, path: str | PathLike[str], *, operation: str | None = None) -> None:
        self.operation = operation
        message = "the attempt has already published its one outcome"
        if operation is not None:
            message = (
                f"{operation} refused: {message}; a transaction goes out with the outcome, so open it and "
                "add its operations before publishing"
            )
        super().__init__(message, path=path)


class SettingNameError(SdkError, ValueError):
    """A setting name is not a dotted lowercase name such as ``vasp.command``.

    Parameters
    ----------
    name
        The refused name.
    rule
        The rule it breaks.

    Examples
    --------
    >>> from httk.workflow.sdk import SettingNameError
    >>> SettingNameError("VASP", "use lowercase").name
    'VASP'
    """

    def __init__(self, name: object, rule: str) -> None:
        self.name = name
        super().__init__(rule)


class SettingNotFoundError(SdkError, LookupError):
    """No layer holds the setting, and the caller gave no default.

    Parameters
    ----------
    name
        The setting name.
    layers
        What was consulted, in order.

    Examples
    --------
    >>> from httk.workflow.sdk import SettingNotFoundError
    >>> error = SettingNotFoundError("vasp.command", ["job inputs", "HTTK_VASP_COMMAND"])
    >>> error.layers
    ('job inputs', 'HTTK_VASP_COMMAND')
    """

    def __init__(self, name: str, layers: Sequence[str]) -> None:
        self.name = name
        self.layers = tuple(layers)
        super().__init__(
            f"setting {name!r} is not set: consulted {'; '.join(self.layers)}; pass default= to "
            f"a.setting(), or set it with: httk workflow workspace settings set WORKSPACE {name} VALUE"
        )


class StateError(SdkError):
    """Job state or an observed declaration cannot be read or written, or is not a valid document.

    Parameters
    ----------
    message
        What is wrong.
    path
        The file concerned.

    Examples
    --------
    >>> from httk.workflow.sdk import StateError
    >>> str(StateError("is not a JSON object", path="/w/.httk-job/state.json"))
    '/w/.httk-job/state.json: is not a JSON object'
    """

    def __init__(self, message: str, *, path: str | PathLike[str] | None = None) -> None:
        self.path = None if path is None else str(path)
        super().__init__(message if self.path is None else f"{self.path}: {message}")
