"""JSON Schema validation of protocol documents: a registry of every schema, and ECMA-262 ``pattern`` anchors.

Imported only by :func:`httk.workflow.models.validator`, so jsonschema is loaded on first use.

The ``pattern`` keyword is an ECMA-262 regular expression, in which ``$`` matches only at the very end of
the string. jsonschema evaluates it with Python's ``re``, in which ``$`` also matches just before a final
newline, so ``"relax\\n"`` would pass ``^[a-z]+$``. The generated pydantic models (Rust regex) refuse it;
to keep the two in agreement the validator built here evaluates patterns with every ``$`` outside a
character class read as ``\\Z``.

The same agreement is kept for numbers: JSON Schema counts ``1.0`` as an integer and as equal to ``1``,
while the models (strict types) and every reader of the protocol tell an integer from a float. So here
``integer`` is an integer only, and ``const`` and ``enum`` also compare the kind of number. Every other
keyword behaves exactly as in Draft202012Validator.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators  # type: ignore[import-untyped]
from referencing import Registry, Resource


def ecma_anchors(pattern: str) -> str:
    """Rewrite an ECMA-262 pattern for Python's ``re``: ``$`` outside a class becomes ``\\Z``.

    Examples
    --------
    >>> ecma_anchors(r"^[a-z$]+(?:/|$)$")
    '^[a-z$]+(?:/|\\\\Z)\\\\Z'
    """
    out: list[str] = []
    in_class = escaped = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(ecma_anchors(pattern))


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _is_integer(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _same_number_kind(instance: Any, value: Any) -> bool:
    """False for an integer compared with a float (or the other way round); True otherwise."""
    numbers = (int, float)
    if isinstance(instance, bool) or isinstance(value, bool):
        return True
    if isinstance(instance, numbers) and isinstance(value, numbers):
        return isinstance(instance, int) == isinstance(value, int)
    return True


_BASE_CONST = Draft202012Validator.VALIDATORS["const"]
_BASE_ENUM = Draft202012Validator.VALIDATORS["enum"]


def _const(validator: Any, const: Any, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not _same_number_kind(instance, const):
        yield ValidationError(f"{const!r} was expected")
        return
    yield from _BASE_CONST(validator, const, instance, schema)


def _enum(validator: Any, enums: Any, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not any(
        _same_number_kind(instance, value) and validator.evolve(schema={"const": value}).is_valid(instance)
        for value in enums
    ):
        yield ValidationError(f"{instance!r} is not one of {enums!r}")
        return
    yield from _BASE_ENUM(validator, enums, instance, schema)


# Draft202012Validator with ECMA-262 anchors in ``pattern`` (and so in ``propertyNames`` patterns too), and
# integers told from floats.
ProtocolValidator: Any = validators.extend(
    Draft202012Validator,
    {"pattern": _pattern, "const": _const, "enum": _enum},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)
ProtocolValidator.__name__ = ProtocolValidator.__qualname__ = "ProtocolValidator"


def build_registry(schemas: list[dict[str, Any]]) -> Registry[Any]:
    """Return a registry in which every schema is found under its ``$id``."""
    return Registry().with_resources((schema["$id"], Resource.from_contents(schema)) for schema in schemas)


def build_validator(schema: dict[str, Any], registry: Registry[Any]) -> Any:
    """Return a validator of ``schema`` that resolves references through ``registry``."""
    return ProtocolValidator(schema, registry=registry)
