"""Resolving an application setting through its layers (spec/02 "Application settings").

A setting such as ``vasp.command`` is looked up, first match wins, in

1. the job's ``inputs`` member of exactly that name -- one job's own choice;
2. the environment variable ``HTTK_VASP_COMMAND`` -- where the manager exports each scalar workspace
   setting, unless a deployment override of that variable is already set, which it then leaves alone;
3. the workspace settings snapshot in context.json -- every setting, arrays and objects included, as the
   workspace held them when the job was claimed;
4. the caller's default; otherwise :class:`SettingNotFoundError` names every layer consulted.

An environment value is text. When it is exactly the spelling in which the manager exports the snapshot's
value of the same setting (a string as it is, a number or boolean in JSON), it *is* that setting and the
typed snapshot value is returned (``4``, not ``"4"``); any other text is a deployment override and is
returned as the string it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from . import _checks
from ._errors import SettingNotFoundError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _Missing:
    """The type of :data:`MISSING`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""The default of ``Attempt.setting``'s ``default``: no default, a missing setting is an error."""


def resolve(
    name: str,
    *,
    inputs: Mapping[str, Any],
    environ: Mapping[str, str],
    snapshot: Mapping[str, Any],
    default: Any = MISSING,
    context_path: object = None,
) -> Any:
    """The value of setting ``name`` from the first layer that holds it (see the module docstring)."""
    variable = _checks.setting_variable(name)
    if name in inputs:
        return inputs[name]
    # HTTK_WORKFLOW_* belongs to the protocol (the manager never exports a setting there), so a setting
    # named workflow.* is never read from it; the Bash API skips it the same way.
    if not variable.startswith("HTTK_WORKFLOW_") and variable in environ:
        text = environ[variable]
        if name in snapshot and exported_spelling(snapshot[name]) == text:
            return snapshot[name]
        return text
    if name in snapshot:
        return snapshot[name]
    if default is not MISSING:
        return default
    where = "context.json" if context_path is None else str(context_path)
    raise SettingNotFoundError(
        name,
        [
            f"job inputs member {name!r}",
            f"environment variable {variable}",
            f"workspace settings snapshot in {where}",
        ],
    )


def exported_spelling(value: object) -> str | None:
    """How the manager exports a scalar setting value to the environment; ``None`` if it does not."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None
