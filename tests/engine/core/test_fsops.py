"""The mutation seam's tree removal: names known in advance are removed without a walk, never followed."""

from __future__ import annotations

import os
from pathlib import Path

from httk.workflow.engine.core import _fsops

EXPECTED = ("context.json", "stdout.log", "outcome.ready/outcome.json", "outcome.ready")


def _control_dir(root: Path) -> Path:
    control = root / ".httk-attempt.x"
    (control / "outcome.ready").mkdir(parents=True)
    for name in ("context.json", "stdout.log", "outcome.ready/outcome.json"):
        (control / name).write_text("{}")
    return control


def test_the_expected_entries_and_the_directory_are_removed(tmp_path: Path) -> None:
    control = _control_dir(tmp_path)
    _fsops.remove_tree(control, expected=EXPECTED)
    assert not control.exists()


def test_an_unexpected_entry_falls_back_to_removing_the_whole_tree(tmp_path: Path) -> None:
    control = _control_dir(tmp_path)
    (control / "outcome.tmp.123" / "deep").mkdir(parents=True)
    (control / "outcome.tmp.123" / "deep" / "file").write_text("x")
    (control / "outcome.ready" / "children").mkdir()
    _fsops.remove_tree(control, expected=EXPECTED)
    assert not control.exists()


def test_a_link_planted_under_an_expected_name_is_removed_as_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "outcome.json").write_text("keep me")
    control = tmp_path / "control"
    control.mkdir()
    (control / "context.json").write_text("{}")
    os.symlink(outside, control / "outcome.ready")
    _fsops.remove_tree(control, expected=EXPECTED)
    assert not control.exists()
    assert (outside / "outcome.json").read_text() == "keep me"


def test_a_linked_control_directory_is_not_followed(tmp_path: Path) -> None:
    outside = _control_dir(tmp_path / "elsewhere")
    link = tmp_path / "control"
    os.symlink(outside, link)
    _fsops.remove_tree(link, expected=EXPECTED)
    assert (outside / "context.json").exists()


def test_an_absent_tree_is_already_removed(tmp_path: Path) -> None:
    _fsops.remove_tree(tmp_path / "absent", expected=EXPECTED)
    assert list(tmp_path.iterdir()) == []
