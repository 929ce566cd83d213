"""The hostile rows plant trees deeper than Python's recursion limit, which pytest's own clean-up of its
temporary directories walks recursively; each test's directory is removed here with ``rm -rf`` instead."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path: Path) -> Iterator[None]:
    yield
    subprocess.run(["rm", "-rf", "--", str(tmp_path)], check=False)
