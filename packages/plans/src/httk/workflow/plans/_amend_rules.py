"""The rules of spec/04's amendments, as pure functions of plan documents: what one changes, replaying the
audit trail, which stages are skipped, and the invalidation cascade.

An applied amendment's ``changes`` say what it did to the plan's definitional fields, member to
``{"old", "new"}``:

===================  ==========================================================================
type                 changes
===================  ==========================================================================
parameter_change     ``{"parameters": {KEY: {"old", "new"}}}`` (``old`` is ``null`` for a new key)
criteria_change      ``{"success_criteria": {KEY: {"old", "new"}}}``
stage_insert         ``{"stage": {"old": null, "new": STAGE}}``, and with stages that now depend on
                     it ``{"depends_on": {ID: {"old", "new"}}}``
stage_skip           ``{"status": {"old": STATUS, "new": "skipped"}}`` (no definitional member)
stage_rerun          ``{"status": {"old": "completed", "new": "invalidated"}}``
===================  ==========================================================================

so :func:`replay` rebuilds a plan's stages from the document as submitted and its amendments, which is
how ``plan status`` tells a plan document edited by hand from one its amendments made. A stage is
skipped exactly when a ``stage_skip`` amendment names it (:func:`skipped`): the plan keeps no other mark.

Standard library only: the coordinator, ``plan amend`` and ``plan status`` share it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._outputs import readers

TYPES = ("parameter_change", "criteria_change", "stage_insert", "stage_skip", "stage_rerun")
REDEFINING = frozenset({"parameter_change", "criteria_change", "stage_insert"})
"""The types after which the stage's job is built from a template the amendment carries."""
SET_MEMBER = {"parameter_change": "parameters", "criteria_change": "success_criteria"}
"""The stage member a type's ``--set KEY=VALUE`` changes."""


class AmendmentRefusedError(ValueError):
    """An amendment the plan cannot take; the message names the stage, key or dependency at fault."""


def skipped(amendments: Iterable[Mapping[str, Any]]) -> set[str]:
    """The stages a ``stage_skip`` amendment named.

    Examples
    --------
    >>> sorted(skipped([{"type": "stage_skip", "stage_id": "b"}, {"type": "stage_rerun", "stage_id": "a"}]))
    ['b']
    """
    return {str(item["stage_id"]) for item in amendments if item.get("type") == "stage_skip"}


def skip_refusal(
    stages: Sequence[Mapping[str, Any]], stage: str, amendments: Iterable[Mapping[str, Any]]
) -> None:
    """Refuse to skip ``stage`` while a stage that is not skipped takes an input from its output."""
    gone = skipped(amendments)
    reading = [name for name in readers(list(stages), stage) if name not in gone]
    if reading:
        raise AmendmentRefusedError(
            f"stage {stage!r} is not skipped: {', '.join(reading)} take(s) an input from its output "
            "(skip or amend them first)"
        )


def changed_stages(stages: Sequence[Mapping[str, Any]], amendment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``stages`` as ``amendment`` (its ``type``, ``stage_id`` and ``changes``) leaves them, as a copy."""
    result = [copy.deepcopy(dict(stage)) for stage in stages]
    changes: Mapping[str, Any] = amendment.get("changes") or {}
    kind = amendment.get("type")
    if kind in SET_MEMBER:
        member = SET_MEMBER[kind]
        for stage in result:
            if stage["id"] == amendment["stage_id"]:
                values = stage.setdefault(member, {})
                for key, change in (changes.get(member) or {}).items():
                    values[key] = copy.deepcopy(change["new"])
    elif kind == "stage_insert":
        rewired = changes.get("depends_on") or {}
        for stage in result:
            if stage["id"] in rewired:
                stage["depends_on"] = list(rewired[stage["id"]]["new"])
        result.append(copy.deepcopy(dict(changes["stage"]["new"])))
    return result


def replay(
    submitted: Sequence[Mapping[str, Any]], amendments: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The stages the plan as submitted has after each amendment of its audit trail, in order."""
    stages = [dict(stage) for stage in submitted]
    for amendment in amendments:
        stages = changed_stages(stages, amendment)
    return stages


def unamended(current: Sequence[Mapping[str, Any]], expected: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids of the stages that differ between the plan document and its replayed audit trail.

    Examples
    --------
    >>> unamended([{"id": "a", "parameters": {"k": 2}}, {"id": "c"}], [{"id": "a", "parameters": {"k": 1}}])
    ['a', 'c']
    """
    mine = {stage["id"]: _normal(stage) for stage in current}
    theirs = {stage["id"]: _normal(stage) for stage in expected}
    return sorted(name for name in mine.keys() | theirs.keys() if mine.get(name) != theirs.get(name))


def _normal(stage: Mapping[str, Any]) -> dict[str, Any]:
    """A stage with its defaulted members dropped, so ``"depends_on": []`` equals no ``depends_on``."""
    return {key: value for key, value in stage.items() if value not in ([], {}, None)}


def set_changes(
    stage: Mapping[str, Any], member: str, values: Mapping[str, Any], known: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """``{KEY: {"old", "new"}}`` for ``--set`` of ``values`` on ``stage[member]``; refuse an unknown key.

    Examples
    --------
    >>> set_changes({"id": "a", "parameters": {"k": 1}}, "parameters", {"k": 2}, ["k"])
    {'k': {'old': 1, 'new': 2}}
    """
    allowed = set(known)
    current: Mapping[str, Any] = stage.get(member) or {}
    changes = {}
    for key, value in values.items():
        if key not in allowed:
            choices = ", ".join(sorted(allowed)) or "none"
            raise AmendmentRefusedError(
                f"stage {stage['id']!r} has no {_singular(member)} {key!r} (its keys: {choices})"
            )
        changes[key] = {"old": copy.deepcopy(current.get(key)), "new": value}
    return changes


def _singular(member: str) -> str:
    return "parameter or input" if member == "parameters" else "success criterion"


def cascade(
    roots: Iterable[str],
    dependants: Mapping[str, Sequence[str]],
    completed: Callable[[str], bool],
) -> list[str]:
    """spec/04's invalidation cascade from ``roots``: each root, then every completed stage downstream of
    an invalidated one, transitively, in the order met (iterative: no recursion limit)."""
    invalidated: list[str] = []
    seen: set[str] = set()
    pending = list(reversed(list(roots)))
    while pending:
        stage = pending.pop()
        if stage in seen:
            continue
        seen.add(stage)
        invalidated.append(stage)
        pending.extend(reversed([name for name in dependants.get(stage, ()) if completed(name)]))
    return invalidated


def dependants_of(stages: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Stage id to the ids of the stages that depend on it directly."""
    found: dict[str, list[str]] = {}
    for stage in stages:
        found.setdefault(stage["id"], [])
        for need in stage.get("depends_on", []):
            found.setdefault(need, []).append(stage["id"])
    return found
