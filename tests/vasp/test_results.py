"""results.json's warnings: what a finished calculation's results lack, which collect shows."""

from __future__ import annotations

import pytest
from httk.workflow.vasp._results import warnings


@pytest.mark.parametrize(
    ("source", "versioned", "electronic", "said"),
    [
        ("vasprun.xml", True, True, []),
        ("OUTCAR", True, True, ["vasprun.xml was incomplete: the final values are OUTCAR's"]),
        ("none", True, True, ["neither vasprun.xml nor OUTCAR held an ionic step"]),
        ("vasprun.xml", False, True, ["OUTCAR names no VASP version"]),
        ("vasprun.xml", True, False, ["the final electronic minimization reached NELM"]),
    ],
)
def test_each_lack_is_one_sentence(source: str, versioned: bool, electronic: bool, said: list[str]) -> None:
    found = warnings(source, versioned, electronic)
    assert len(found) == len(said) and all(
        text.startswith(start) for text, start in zip(found, said, strict=True)
    )
