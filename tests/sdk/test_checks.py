"""The seam to the protocol's rules, and the invariant that its fast paths accept only what it accepts."""

from __future__ import annotations

from typing import Any

import pytest
from httk.workflow.protocol import (
    InvalidNameError,
    PolicyError,
    validate_declaration_name,
    validate_priority,
    validate_step,
)
from httk.workflow.protocol._jsonio import MAX_NESTING_DEPTH
from httk.workflow.protocol._policy import setting_environment_name
from httk.workflow.sdk import SettingNameError, _checks
from hypothesis import given
from hypothesis import strategies as st

SETTING_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,20}(\.[a-z0-9_]{1,20}){0,3}", fullmatch=True)


@given(st.text(max_size=140))
def test_step_names_the_fast_path_accepts_the_protocol_accepts(name: str) -> None:
    """Invariant: ``step_problem`` agrees with ``validate_step`` on every string."""
    try:
        validate_step(name)
        valid = True
    except InvalidNameError:
        valid = False
    assert (_checks.step_problem(name) is None) == valid


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,127}", fullmatch=True))
def test_every_identifier_takes_the_fast_path_and_is_valid(name: str) -> None:
    assert name.isidentifier()
    assert _checks.step_problem(name) is None
    assert validate_step(name) == name


@given(st.text(max_size=80) | st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,70}", fullmatch=True))
def test_declaration_names_agree_with_the_protocol(name: str) -> None:
    try:
        validate_declaration_name(name)
        valid = True
    except InvalidNameError:
        valid = False
    assert (_checks.declaration_name_problem(name) is None) == valid


@given(st.text(max_size=140) | SETTING_NAMES | SETTING_NAMES.map(str.upper))
def test_setting_variables_agree_with_the_protocol(name: str) -> None:
    try:
        expected: str | None = setting_environment_name(name)
    except PolicyError:
        expected = None
    try:
        variable: str | None = _checks.setting_variable(name)
    except SettingNameError:
        variable = None
    assert variable == expected


@given(st.integers(-3, 1003) | st.booleans() | st.floats(0, 999) | st.none() | st.text(max_size=3))
def test_priorities_agree_with_the_protocol(value: object) -> None:
    try:
        validate_priority(value)
        valid = True
    except InvalidNameError:
        valid = False
    assert (_checks.priority_problem(value) is None) == valid


def test_the_shallow_depth_is_within_the_protocol_limit() -> None:
    assert MAX_NESTING_DEPTH >= _checks.SHALLOW_DEPTH


def nested(levels: int) -> Any:
    """``levels`` objects, one inside the other."""
    value: Any = 0
    for _ in range(levels):
        value = {"k": value}
    return value


@pytest.mark.parametrize("depth", [0, 2])
def test_json_depth_is_counted_from_the_document(depth: int) -> None:
    deepest = MAX_NESTING_DEPTH - depth
    assert _checks.json_problem(nested(deepest), depth=depth) is None
    problem = _checks.json_problem(nested(deepest + 1), depth=depth)
    assert problem == f"nests {MAX_NESTING_DEPTH + 1} levels deep in its document; the protocol allows 64"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": [1, {"b": float("-inf")}]}, "has the non-JSON number -inf at a[1].b"),
        ({"a": {(1, 2): 3}}, "has the non-string key (1, 2) at a"),
        ({"\udc80": 1}, "has a key that is not valid UTF-8 (a lone surrogate)"),
        ([b"bytes"], "has a value of type bytes, which JSON cannot hold at [0]"),
    ],
)
def test_json_problems_name_where_they_are(value: Any, problem: str) -> None:
    assert _checks.json_problem(value) == problem


def test_plain_json_values_pass() -> None:
    value = {"s": "é🧪", "i": -(2**70), "f": 1e-300, "b": False, "n": None, "l": (1, [2]), "d": {}}
    assert _checks.json_problem(value) is None


def test_resources_labels_and_amounts() -> None:
    assert _checks.resources_problem({"procs": 0, "mem": 2**63 - 1, "gpu.a100": 1}) is None
    too_many = _checks.resources_problem({"procs": 2**63})
    assert too_many == "must map 'procs' to a non-negative integer, not 9223372036854775808"
    assert "invalid label 'Procs'" in str(_checks.resources_problem({"Procs": 1}))
