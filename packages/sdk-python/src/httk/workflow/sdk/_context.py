"""Reading the attempt context: context.json, checked once, behind typed read-only properties.

The manager writes ``.httk-attempt.<attempt-id>/context.json`` before it launches the runner and names it
in ``HTTK_WORKFLOW_CONTEXT``. The JSON is the source of truth; the scalar ``HTTK_WORKFLOW_*`` variables are
projections of it and are consulted only for a path a context does not record (an older manager), with
the layout of the specification as the last resort (``job_dir`` is the control directory's parent).

The check is shallow and cheap: the members ``schemas/attempt-context.schema.json`` requires must be
present with their JSON type, optional ones absent or of their type, unknown members are ignored. A
context that fails it raises :class:`ContextError` naming the member -- it was not written by a manager.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from types import MappingProxyType

from ._errors import ContextError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Literal

    from ._files import StrPath

    Directory = Literal["workspace_dir", "job_dir", "control_dir", "workdir"]

CONTEXT_FORMAT = "httk-workflow-attempt-context"
CONTEXT_VARIABLE = "HTTK_WORKFLOW_CONTEXT"
DURABLE_VARIABLE = "HTTK_WORKFLOW_DURABLE"

_TEXT = ("workspace_id", "job_id", "placement", "step", "activation_id", "attempt_id", "attempt_reason")
_FLAGS = ("is_restart", "is_unclean_restart")
_OPTIONAL: dict[str, tuple[type, ...]] = {
    "job_key": (str,),
    "activation_reason": (str,),
    "activation_ordinal": (int,),
    "previous_attempt_id": (str, type(None)),
    "data_generation": (int, type(None)),
    "data_dir": (str, type(None)),
    "durable": (bool,),
    "priority": (int,),
    "resources": (dict,),
    "settings": (dict,),
    "children": (list,),
    "join": (dict, type(None)),
    "workspace_dir": (str,),
    "job_dir": (str,),
    "control_dir": (str,),
    "workdir": (str,),
}
_JSON_TYPE = {str: "a string", int: "an integer", bool: "true or false", dict: "an object", list: "an array"}


def context_path_from(environ: Mapping[str, str]) -> str:
    """The context.json the manager named in ``HTTK_WORKFLOW_CONTEXT``."""
    value = environ.get(CONTEXT_VARIABLE)
    if not value:
        raise ContextError(
            f"{CONTEXT_VARIABLE} is not set: this process was not started by a workflow manager for an "
            "attempt (to run a step by hand, pass context_path= the attempt's context.json)"
        )
    return value


def read_context(path: StrPath) -> dict[str, Any]:
    """The decoded context.json at ``path``; :class:`ContextError` when it is unreadable or not an object."""
    try:
        with open(path, "rb") as stream:
            document = json.loads(stream.read())
    except OSError as exc:
        raise ContextError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError; nested too deep
        raise ContextError(f"is not UTF-8 JSON: {exc}", path=path) from exc
    if not isinstance(document, dict):
        raise ContextError("is not a JSON object", path=path)
    return document


def check_context(context: Mapping[str, Any], path: StrPath | None) -> None:
    """Refuse a context that lacks a member the schema requires or has one of the wrong JSON type."""

    def fail(member: str, rule: str) -> ContextError:
        return ContextError(rule, path=path, member=member)

    version = context.get("format_version")
    if context.get("format") != CONTEXT_FORMAT or type(version) is not int or version != 1:
        raise fail("format", f"must be {CONTEXT_FORMAT!r} with format_version 1: not an attempt context")
    for member in _TEXT:
        if not isinstance(context.get(member), str) or not context[member]:
            raise fail(member, "must be a nonempty string")
    ordinal = context.get("attempt_ordinal")
    if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 1:
        raise fail("attempt_ordinal", "must be an integer of at least 1")
    if context.get("workdir_mode") not in ("persistent", "isolated"):
        raise fail("workdir_mode", "must be 'persistent' or 'isolated'")
    for member in _FLAGS:
        if not isinstance(context.get(member), bool):
            raise fail(member, "must be true or false")
    for member, kinds in _OPTIONAL.items():
        if member not in context:
            continue
        value = context[member]
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            expected = " or ".join(_JSON_TYPE.get(kind, "null") for kind in kinds)
            raise fail(member, f"must be {expected}")


def freeze(value: Any) -> Any:
    """A read-only copy of a JSON value: objects become mapping proxies, arrays tuples."""
    if isinstance(value, dict):
        return MappingProxyType({key: freeze(member) for key, member in value.items()})
    if isinstance(value, list):
        return tuple(freeze(member) for member in value)
    return value


class AttemptContext:
    """The checked attempt context behind typed, read-only properties; the base of ``Attempt``.

    In the examples, ``a`` is the :class:`~httk.workflow.sdk.Attempt` a step function receives.

    Parameters
    ----------
    context
        The decoded context.json.
    context_path
        Where it was read from, if from a file.
    environ
        The process environment (default ``os.environ``), consulted for durability, settings and paths
        an older context does not record.
    """

    def __init__(
        self,
        context: Mapping[str, Any],
        *,
        context_path: StrPath | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        check_context(context, context_path)
        self._context = dict(context)
        self._context_path = context_path
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._children: tuple[Mapping[str, Any], ...] = freeze(self._context.get("children") or [])
        control = self._text("control_dir", "HTTK_WORKFLOW_CONTROL_DIR")
        if control is None:
            if context_path is None:
                raise ContextError(
                    "is required when the context is not read from a file", member="control_dir"
                )
            control = os.path.dirname(os.path.abspath(context_path))
        self._control_dir = control
        self._job_dir = self._text("job_dir", "HTTK_WORKFLOW_JOB_DIR") or _parent(control)

    def _text(self, member: str, variable: str) -> str | None:
        value = self._context.get(member) or self._environ.get(variable)
        return str(value) if value else None

    def directory(self, name: Directory) -> str:
        """One of the attempt's directories as a string: what the property of that name holds as a Path.

        The SDK itself works on strings, and a runner that does too never imports :mod:`pathlib` (with
        what it imports, a third of a bare interpreter start on every attempt).

        Parameters
        ----------
        name
            ``workdir``, ``job_dir``, ``control_dir`` or ``workspace_dir``.

        Raises
        ------
        ContextError
            For ``workspace_dir``, when neither the context nor the environment names it.

        Examples
        --------
        >>> a.directory("workdir") == str(a.workdir)
        True
        """
        if name == "control_dir":
            return self._control_dir
        if name == "job_dir":
            return self._job_dir
        if name == "workdir":
            return self._text("workdir", "HTTK_WORKFLOW_WORKDIR") or os.getcwd()
        if name == "workspace_dir":
            path = self._text("workspace_dir", "HTTK_WORKFLOW_WORKSPACE_DIR")
            if path is None:
                raise ContextError(
                    "is not recorded and HTTK_WORKFLOW_WORKSPACE_DIR is not set", member="workspace_dir"
                )
            return path
        raise ValueError(f"{name!r} is not one of the attempt's directories")

    @property
    def context(self) -> dict[str, Any]:
        """The decoded context.json itself, every member including those without a property.

        Examples
        --------
        >>> a.context["workdir_mode"]
        'persistent'
        """
        return self._context

    @property
    def step(self) -> str:
        """The step this attempt executes (``HTTK_WORKFLOW_STEP``).

        Examples
        --------
        >>> a.step
        'relax'
        """
        return str(self._context["step"])

    @property
    def job_id(self) -> str:
        """The job's UUID.

        Examples
        --------
        >>> a.job_id
        '01234567-89ab-cdef-0123-456789abcdef'
        """
        return str(self._context["job_id"])

    @property
    def job_key(self) -> str:
        """The job key ``[<tag>--]<uuid>``, which is also the name of the job's payload directory.

        Examples
        --------
        >>> a.job_key
        'silicon-relax--01234567-89ab-cdef-0123-456789abcdef'
        """
        return str(self._context.get("job_key") or os.path.basename(self._job_dir.rstrip("/")))

    @property
    def placement(self) -> str:
        """The job's placement: the payload directory's parent, relative to the workspace.

        Examples
        --------
        >>> a.placement
        'project-17/0/03a'
        """
        return str(self._context["placement"])

    @property
    def workspace_id(self) -> str:
        """The workspace's UUID.

        Examples
        --------
        >>> a.workspace_id
        'b588833b-87ea-4da2-b860-1c9e768cfbc1'
        """
        return str(self._context["workspace_id"])

    @property
    def activation_id(self) -> str:
        """The activation (one run of one step, retries included) this attempt belongs to.

        Use it with :attr:`job_id` as an idempotency key for effects outside the workspace.

        Examples
        --------
        >>> a.activation_id
        'e7f86a0e-34d6-45a7-b92d-3f4b2dc98c54'
        """
        return str(self._context["activation_id"])

    @property
    def activation_ordinal(self) -> int | None:
        """The 1-based number of this activation in the job, ``None`` if the context does not record it.

        Examples
        --------
        >>> a.activation_ordinal
        2
        """
        value = self._context.get("activation_ordinal")
        return None if value is None else int(value)

    @property
    def activation_reason(self) -> str | None:
        """Why the activation exists (``initial``, ``advance``, ``override_step``, ...), if recorded.

        Examples
        --------
        >>> a.activation_reason
        'advance'
        """
        value = self._context.get("activation_reason")
        return None if value is None else str(value)

    @property
    def attempt_id(self) -> str:
        """This attempt's UUID; its control directory is ``.httk-attempt.<attempt_id>/``.

        Examples
        --------
        >>> a.attempt_id
        'a6c2c973-29e1-44e2-9649-ae419e340ac4'
        """
        return str(self._context["attempt_id"])

    @property
    def attempt_ordinal(self) -> int:
        """The 1-based attempt number within the activation; greater than 1 means a retry.

        Examples
        --------
        >>> a.attempt_ordinal
        1
        """
        return int(self._context["attempt_ordinal"])

    @property
    def is_restart(self) -> bool:
        """Whether the same activation is being retried (``HTTK_WORKFLOW_IS_RESTART``).

        A planned advance to a new step is not a restart, even in a reused persistent workdir.

        Examples
        --------
        >>> if a.is_restart:
        ...     resume_from_checkpoint(a.workdir)
        """
        return bool(self._context["is_restart"])

    @property
    def is_unclean_restart(self) -> bool:
        """Whether the previous attempt ended without a valid outcome (``HTTK_WORKFLOW_UNCLEAN_RESTART``).

        Its files in a persistent workdir may be partial: validate or remove them.

        Examples
        --------
        >>> if a.is_unclean_restart:
        ...     (a.workdir / "OUTCAR").unlink(missing_ok=True)
        """
        return bool(self._context["is_unclean_restart"])

    @property
    def attempt_reason(self) -> str:
        """Why this attempt runs: ``initial``, ``advance``, ``lease_lost``, ``process_failure``, ...

        Examples
        --------
        >>> a.attempt_reason
        'lease_lost'
        """
        return str(self._context["attempt_reason"])

    @property
    def previous_attempt_id(self) -> str | None:
        """The attempt this one retries; ``None`` for the first attempt of an activation.

        Examples
        --------
        >>> a.previous_attempt_id is None
        True
        """
        value = self._context.get("previous_attempt_id")
        return None if value is None else str(value)

    @property
    def data_generation(self) -> int | None:
        """The committed data generation the attempt starts from; ``None`` without transactional data.

        Examples
        --------
        >>> a.data_generation is None
        True
        """
        value = self._context.get("data_generation")
        return None if value is None else int(value)

    @property
    def data_dir(self) -> Path | None:
        """The job's committed ``data/`` (``HTTK_WORKFLOW_DATA_DIR``); ``None`` without transactional data.

        Read it freely; change it only through :meth:`Attempt.transaction`. It is absent until the
        first transaction with operations is committed.

        Examples
        --------
        >>> a.data_dir is None
        True
        """
        value = self._context.get("data_dir")
        return None if value is None else _as_path(value)

    @property
    def durable(self) -> bool:
        """Whether what this attempt publishes is synchronized to storage before it counts.

        True when the context's ``durable`` member or ``HTTK_WORKFLOW_DURABLE=1`` says so (they agree
        under a manager; syncing when either asks is never wrong).

        Examples
        --------
        >>> a.durable
        True
        """
        return self._context.get("durable") is True or self._environ.get(DURABLE_VARIABLE) == "1"

    @property
    def priority(self) -> int | None:
        """The job's priority (0 highest, 999 lowest) when it was claimed, if the context records it.

        Examples
        --------
        >>> a.priority
        500
        """
        value = self._context.get("priority")
        return None if value is None else int(value)

    @property
    def resources(self) -> dict[str, int]:
        """The resources allocated to this attempt, such as ``{"procs": 32}`` (a copy).

        Examples
        --------
        >>> a.resources.get("procs", 1)
        32
        """
        return dict(self._context.get("resources") or {})

    @property
    def children(self) -> list[Mapping[str, Any]]:
        """The observations of the children of the join this activation follows; empty otherwise.

        Each is a read-only mapping (nested objects too, arrays are tuples), in the join's order, with
        the child's ``label`` (``None`` for a child this job's spawn set did not name), ``kind``
        (``succeeded``, ``failed``, ...), ``failure`` (its failure object when it ended failed or
        cancelled, else ``None``), the workspace-relative ``payload_path`` and ``workdir_path`` through
        which its results are read (``a.workspace_dir / child["workdir_path"]``), and its exact
        ``job_id``, ``job_key``, ``placement``, ``state_generation``, ``record_ref`` and
        ``data_generation``.

        Examples
        --------
        >>> {child["label"]: child["kind"] for child in a.children}
        {'strain-0': 'succeeded', 'strain-1': 'failed'}
        """
        return list(self._children)

    @property
    def join(self) -> Mapping[str, Any] | None:
        """The decided join this activation follows (``None`` otherwise), read-only.

        Its ``condition``, ``count`` (at_least), ``decision`` (``satisfied``, or ``impossible`` when
        ``on_impossible`` started this activation), ``decided_at`` and ``observations`` (the same
        objects as :attr:`children`).

        Examples
        --------
        >>> a.join["decision"] if a.join else None
        'satisfied'
        """
        join = self._context.get("join")
        return None if join is None else freeze(join)

    @property
    def control_dir(self) -> Path:
        """The attempt's control directory ``.httk-attempt.<attempt-id>/`` (``HTTK_WORKFLOW_CONTROL_DIR``).

        Examples
        --------
        >>> a.control_dir.name.startswith(".httk-attempt.")
        True
        """
        return _as_path(self._control_dir)

    @property
    def job_dir(self) -> Path:
        """The job's payload directory, holding ``job.json`` (``HTTK_WORKFLOW_JOB_DIR``).

        Examples
        --------
        >>> (a.job_dir / "job.json").is_file()
        True
        """
        return _as_path(self._job_dir)

    @property
    def workdir(self) -> Path:
        """The application workdir, which is also the step's current directory (``HTTK_WORKFLOW_WORKDIR``).

        Examples
        --------
        >>> a.workdir.name
        'run'
        """
        return _as_path(self.directory("workdir"))

    @property
    def workspace_dir(self) -> Path:
        """The workspace root (``HTTK_WORKFLOW_WORKSPACE_DIR``).

        Raises
        ------
        ContextError
            When neither the context nor the environment names it.

        Examples
        --------
        >>> (a.workspace_dir / ".httk-workflow").is_dir()
        True
        """
        return _as_path(self.directory("workspace_dir"))


def _parent(path: str) -> str:
    """The directory holding ``path``, as ``Path(path).parent`` names it (a trailing slash aside)."""
    return os.path.dirname(path.rstrip("/")) or ("/" if path.startswith("/") else ".")


def _as_path(path: str) -> Path:
    """``path`` as the :class:`~pathlib.Path` the public properties hold, pathlib imported on first use."""
    from pathlib import Path

    return Path(path)
