"""The VASP tests: the full fault matrix runs only when asked for (``./dev vasp-matrix``)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("HTTK_VASP_MATRIX") == "1":
        return
    skip = pytest.mark.skip(reason="the full VASP fault matrix runs with ./dev vasp-matrix")
    for item in items:
        if "vasp_matrix" in item.keywords:
            item.add_marker(skip)
