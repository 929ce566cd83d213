"""docs/sdk-parity.md names every authoring operation of both SDKs, and everything it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from httk.workflow import sdk
from httk.workflow.sdk import Attempt, Transaction

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "sdk-parity.md"
LIBRARY = ROOT / "sdk-bash" / "httk-workflow.sh"

# Public Attempt members that are plain context properties: listed in the paragraph under the table.
_PROPERTY_LINE = "Context members available as `Attempt` properties"


def _table_cells() -> tuple[set[str], set[str]]:
    python: set[str] = set()
    bash: set[str] = set()
    for line in TABLE.read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| Operation") or line.startswith("|---"):
            continue
        _operation, py_cell, bash_cell = (cell.strip() for cell in line.strip("|").split("|"))
        python.update(re.findall(r"`([^`]+)`", py_cell))
        bash.update(re.findall(r"`(httk_workflow_\w+)`", bash_cell))
    return python, bash


def _documented_properties() -> set[str]:
    text = TABLE.read_text()
    paragraph = text[text.index(_PROPERTY_LINE) : text.index("## Differences")]
    return set(re.findall(r"`(\w+)`", paragraph.split(":", 1)[1]))


def _bash_functions() -> set[str]:
    """Public functions of the library and of the files it sources (httk-workflow-transaction.sh)."""
    found: set[str] = set()
    for path in sorted(LIBRARY.parent.glob("httk-workflow*.sh")):
        found.update(re.findall(r"^(httk_workflow_\w+)\(\) \{", path.read_text(), flags=re.MULTILINE))
    return found


def _public_attempt_members() -> set[str]:
    return {name for name in dir(Attempt) if not name.startswith("_") and name not in ("load",)}


def _resolve(cell: str) -> object:
    """The SDK object a Python cell names (``dispatch()``, ``@step``, ``Transaction.put_file``)."""
    target: object = sdk
    for part in cell.split("(", 1)[0].lstrip("@").split("."):
        target = getattr(target, part)
    return target


def test_every_bash_function_is_in_the_table_and_exists() -> None:
    _python, bash = _table_cells()
    assert bash == _bash_functions()


def test_every_public_attempt_member_is_documented() -> None:
    python, _bash = _table_cells()
    in_table = {cell.split(".", 1)[1] for cell in python if cell.startswith("Attempt.")}
    documented = in_table | _documented_properties()
    assert _public_attempt_members() <= documented, _public_attempt_members() - documented


def test_every_public_transaction_member_is_in_the_table() -> None:
    python, _bash = _table_cells()
    in_table = {cell.split(".", 1)[1] for cell in python if cell.startswith("Transaction.")}
    public = {name for name in dir(Transaction) if not name.startswith("_")}
    assert public == in_table


def test_everything_the_table_names_exists() -> None:
    python, _bash = _table_cells()
    for cell in python:
        try:
            _resolve(cell)
        except AttributeError:
            pytest.fail(f"docs/sdk-parity.md names {cell}, which the SDK does not have")
    for member in _documented_properties():
        assert hasattr(Attempt, member), member
