"""The public surface of httk.workflow.sdk: exactly these names, documented, and cheap to import."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import types

import pytest
from httk.workflow import sdk

EXPECTED = [
    "Attempt",
    "ChildRef",
    "ContextError",
    "OutcomeAlreadyPublishedError",
    "OutcomeError",
    "Registry",
    "SdkError",
    "SettingNameError",
    "SettingNotFoundError",
    "StateError",
    "StepDefinitionError",
    "StepFunction",
    "Transaction",
    "TransactionError",
    "dispatch",
    "read_events",
    "step",
]

FORBIDDEN = (
    "httk.workflow.protocol",
    "httk.workflow.engine",
    "httk.workflow.models",
    "pydantic",
    "jsonschema",
    "typer",
    "rich",
    "dataclasses",
    "inspect",
    "ctypes",
    "uuid",
    # A runner pays for typing's import and for the annotations its named tuples make it compile (the
    # first compile sets up the interpreter's AST types): the child machinery loads on the first spawn.
    "typing",
    "httk.workflow.sdk._children",
)


def test_all_is_exact_sorted_and_unique() -> None:
    assert sdk.__all__ == EXPECTED
    assert sdk.__all__ == sorted(sdk.__all__)
    assert len(set(sdk.__all__)) == len(sdk.__all__)


def test_every_public_object_is_exported() -> None:
    # A public submodule (``typed``, ``packaged``) is an attribute only once something imported it: not an
    # export.
    # ChildRef loads on first use, so the module's namespace is read through dir() and getattr().
    public = {
        name
        for name in dir(sdk)
        if not name.startswith("_")
        and name not in ("annotations", "TYPE_CHECKING")
        and not isinstance(getattr(sdk, name), types.ModuleType)
    }
    assert public == set(EXPECTED)


def public_members(obj: object) -> list[tuple[str, object]]:
    """The public attributes a class defines itself (not those of object, Exception or Mapping)."""
    if not inspect.isclass(obj):
        return []
    members = []
    for klass in obj.__mro__:
        if not klass.__module__.startswith("httk.workflow.sdk"):
            continue
        for name, member in vars(klass).items():
            if not name.startswith("_"):
                members.append((f"{obj.__name__}.{name}", member))
    return members


@pytest.mark.parametrize("name", [name for name in EXPECTED if name != "StepFunction"])
def test_every_public_name_has_a_numpy_docstring_with_examples(name: str) -> None:
    obj = getattr(sdk, name)
    for qualified, member in [(name, obj), *public_members(obj)]:
        doc = inspect.getdoc(member.fget if isinstance(member, property) else member)
        assert doc, f"{qualified} has no docstring"
        assert "Examples\n--------\n>>> " in doc, f"{qualified} has no Examples section"


def test_the_package_docstring_shows_a_runner() -> None:
    assert "raise SystemExit(dispatch())" in (sdk.__doc__ or "")


def test_importing_the_sdk_loads_nothing_heavy() -> None:
    code = "import sys, json, httk.workflow.sdk; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout)
    heavy = [name for name in loaded if name.startswith(FORBIDDEN)]
    assert heavy == []
