"""The table of filesystem hostiles in ``docs/hostile-input.md`` and its tests agree, row for row.

Every row names one test (its pytest id) of ``test_hostile_payload.py`` or ``test_hostile_control.py``,
and every test there is a row: a hostile case without a documented response, or a documented response
nobody tests, fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "hostile-input.md"
SUITES = ("tests/hostile/test_hostile_payload.py", "tests/hostile/test_hostile_control.py")
ROW = re.compile(r"^\| `(test_[^`]+)` \|", re.MULTILINE)


def documented() -> list[str]:
    return ROW.findall(TABLE.read_text())


def collected() -> list[str]:
    """The pytest ids of the row tests, as pytest itself collects them."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *SUITES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split("::", 1)[1] for line in result.stdout.splitlines() if "::" in line]


def test_every_row_has_its_test_and_every_test_its_row() -> None:
    rows, tests = documented(), collected()
    assert len(rows) == len(set(rows)), "a row appears twice"
    assert sorted(rows) == sorted(tests), {
        "documented, not tested": sorted(set(rows) - set(tests)),
        "tested, not documented": sorted(set(tests) - set(rows)),
    }
