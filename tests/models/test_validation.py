"""``pattern`` anchors keep their ECMA-262 meaning in the validators ``validator()`` builds."""

from __future__ import annotations

import pytest
from httk.workflow import models
from httk.workflow.models._validation import ecma_anchors


@pytest.mark.parametrize(
    ("pattern", "python"),
    [
        ("^[a-z]+$", r"^[a-z]+\Z"),
        ("(?:^|/)(?:\\.|\\.\\.)(?:/|$)", r"(?:^|/)(?:\.|\.\.)(?:/|\Z)"),
        ("^[$]\\$$", r"^[$]\$\Z"),
        ("^[^\\]$]x$", r"^[^\]$]x\Z"),
        ("^\\S+$", r"^\S+\Z"),
    ],
)
def test_dollar_outside_a_class_becomes_end_of_string(pattern: str, python: str) -> None:
    assert ecma_anchors(pattern) == python


def test_a_final_newline_does_not_satisfy_an_anchored_pattern() -> None:
    document = {"code": "lease_lost\n", "message": "m"}
    assert not models.validator("failure").is_valid(document)
    assert models.validator("failure").is_valid({"code": "lease_lost", "message": "m"})


def test_the_validator_reports_pattern_errors_with_the_path() -> None:
    errors = list(models.validator("failure").iter_errors({"code": "a b", "message": "m"}))
    assert [(list(error.path), error.validator) for error in errors] == [(["code"], "pattern")]
