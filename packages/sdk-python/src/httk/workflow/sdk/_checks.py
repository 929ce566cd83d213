"""The SDK's seam to the protocol's rules: names, priorities, failures, resources and JSON values.

The rules are the protocol package's (``httk.workflow.protocol``): every value the SDK cannot accept
cheaply on its own is checked by calling them, so a runner never publishes what the manager would
refuse and every refusal is worded as the protocol words it. Each function here returns
``None`` when the value is acceptable and otherwise the reason it is not; the caller wraps the reason in
the error that fits its context (a :class:`~httk.workflow.sdk.StepDefinitionError` at registration, an
:class:`~httk.workflow.sdk.OutcomeError` in an outcome), naming its own argument.

Why the protocol package is imported lazily: importing it costs more than the rest of the SDK together
(it pulls in ``dataclasses``, ``inspect`` and ``uuid``), and a runner pays for its imports on every
attempt. A step that reads its context, a setting and succeeds needs none of it, so it never loads it (the
load costs about as much as the whole SDK import: ``benchmarks/runner_overhead.py``). Cheap fast paths
keep the common cases free, each accepting only a subset of what the protocol accepts, and handing
everything else -- including every refusal and its explanation -- to the protocol:

* a step name that is an ASCII Python identifier of at most 128 characters (every bare ``@step``
  function name): ``[A-Za-z_][A-Za-z0-9_]*`` is contained in the protocol's step syntax;
* a declaration name that is an ASCII identifier of at most 64 characters, likewise;
* a setting name whose dot-separated parts are lowercase ASCII identifiers, the first starting with a
  letter, at most 128 characters; its variable is spelled as the protocol spells it;
* a priority that is an ``int`` from 0 through 999;
* a JSON value nested at most :data:`SHALLOW_DEPTH` deep, well inside the protocol's nesting limit.

Invariant: whatever a fast path accepts, the protocol accepts too, with the same result
(``tests/sdk/test_checks.py`` checks each against the protocol on generated input).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ._errors import SettingNameError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SHALLOW_DEPTH = 16
"""Nesting that needs no look-up of the protocol's limit (which is larger)."""

_STEP_FAST_MAX = 128
_DECLARATION_FAST_MAX = 64
_SETTING_FAST_MAX = 128
_PRIORITY_FAST = range(1000)


def _identifier(value: object, longest: int) -> bool:
    return isinstance(value, str) and len(value) <= longest and value.isascii() and value.isidentifier()


def _rule_broken(validate: Callable[[Any], object], value: object) -> str | None:
    """The rule that ``validate``, one of the protocol's name checks, finds ``value`` breaking, or ``None``.

    ``validate`` takes any value: it checks the type itself.
    """
    from httk.workflow.protocol import InvalidNameError

    try:
        validate(value)
    except InvalidNameError as exc:
        return exc.rule
    return None


def step_problem(value: object) -> str | None:
    """Why ``value`` is not a step name, or ``None``."""
    if _identifier(value, _STEP_FAST_MAX):
        return None
    from httk.workflow.protocol import validate_step

    return _rule_broken(validate_step, value)


def priority_problem(value: object) -> str | None:
    """Why ``value`` is not a priority (an integer from 0 through 999), or ``None``."""
    if type(value) is int and value in _PRIORITY_FAST:
        return None
    from httk.workflow.protocol import InvalidNameError, validate_priority

    try:
        validate_priority(value)
    except InvalidNameError as exc:
        return f"{exc.rule}, not {value!r}"
    return None


def failure_problem(failure: Mapping[str, Any]) -> tuple[str, str] | None:
    """The failure member at fault and why, or ``None`` for a valid failure object."""
    from httk.workflow.protocol import InvalidDocumentError
    from httk.workflow.protocol._job_rules import validate_failure

    try:
        validate_failure(dict(failure))
    except InvalidDocumentError as exc:
        return exc.member, exc.rule
    return None


def resources_problem(resources: object) -> str | None:
    """Why ``resources`` is not a map of resource labels to non-negative integers, or ``None``."""
    if not isinstance(resources, Mapping):
        return "must be a mapping of resource labels to non-negative integers"
    from httk.workflow.protocol import InvalidNameError, validate_capability
    from httk.workflow.protocol._job_rules import MAX_COUNT

    for label, amount in resources.items():
        try:
            validate_capability(label)
        except InvalidNameError as exc:
            return f"has an invalid label {label!r}: {exc.rule}"
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount <= MAX_COUNT:
            return f"must map {label!r} to a non-negative integer, not {amount!r}"
    return None


def declaration_name_problem(name: object) -> str | None:
    """Why ``name`` is not a declaration name, or ``None``."""
    if _identifier(name, _DECLARATION_FAST_MAX):
        return None
    from httk.workflow.protocol import validate_declaration_name

    return _rule_broken(validate_declaration_name, name)


def setting_variable(name: object) -> str:
    """The ``HTTK_<NAME>`` variable of a setting; :class:`SettingNameError` for an invalid name."""
    if (
        isinstance(name, str)
        and len(name) <= _SETTING_FAST_MAX
        and name.isascii()
        and name[:1].isalpha()
        and name == name.lower()
        and all(part.isidentifier() for part in name.split("."))
    ):
        return "HTTK_" + name.replace(".", "_").upper()
    from httk.workflow.protocol import PolicyError
    from httk.workflow.protocol._policy import setting_environment_name

    try:
        return setting_environment_name(name)  # type: ignore[arg-type]  # it checks the type itself
    except PolicyError as exc:
        raise SettingNameError(name, str(exc)) from exc


def json_problem(value: object, *, depth: int = 0) -> str | None:
    """Why ``value`` cannot be written as JSON a manager reads back unchanged, or ``None``.

    Accepted are ``None``, booleans, integers, finite floats, strings without lone surrogates, lists and
    tuples, and mappings with string keys (a non-string key would be converted silently, and could
    collide with another). ``depth`` is the nesting of ``value`` inside the document it is written into (the
    document itself is depth 1).
    """
    stack: list[tuple[object, int, str]] = [(value, depth + 1, "")]
    deepest = 0
    while stack:
        item, level, where = stack.pop()
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, str):
            if not _encodable(item):
                return f"has a string that is not valid UTF-8 (a lone surrogate){_at(where)}"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"has the non-JSON number {item!r}{_at(where)}"
        elif isinstance(item, Mapping):
            deepest = max(deepest, level)
            for key, member in item.items():
                if not isinstance(key, str):
                    return f"has the non-string key {key!r}{_at(where)}"
                if not _encodable(key):
                    return f"has a key that is not valid UTF-8 (a lone surrogate){_at(where)}"
                stack.append((member, level + 1, f"{where}.{key}" if where else key))
        elif isinstance(item, list | tuple):
            deepest = max(deepest, level)
            stack.extend((member, level + 1, f"{where}[{i}]") for i, member in enumerate(item))
        else:
            return f"has a value of type {type(item).__name__}, which JSON cannot hold{_at(where)}"
    if deepest > SHALLOW_DEPTH:
        from httk.workflow.protocol._jsonio import MAX_NESTING_DEPTH

        if deepest > MAX_NESTING_DEPTH:
            return f"nests {deepest} levels deep in its document; the protocol allows {MAX_NESTING_DEPTH}"
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _at(where: str) -> str:
    return f" at {where}" if where else ""
