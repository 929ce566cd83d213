"""The manager's log file stays bounded: past its limit it becomes ``<log>.1`` and a new one begins."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from httk.workflow.engine.manager._run import BoundedFileHandler


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("httk.workflow.manager", logging.INFO, __file__, 1, message, None, None)


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BoundedFileHandler, "max_bytes", 100)
    monkeypatch.setattr(BoundedFileHandler, "check_every", 3)


def test_a_log_past_its_limit_is_rotated_at_the_next_check_keeping_one_backup(
    tmp_path: Path, small: None
) -> None:
    log = tmp_path / "log"
    handler = BoundedFileHandler(log)
    try:
        for index in range(3):  # 3 x 40 bytes: past 100 at the third record, which is a check
            handler.emit(record(f"first {index:02d} " + "x" * 30))
        assert log.read_text() == "" and "first 02" in (tmp_path / "log.1").read_text()
        for index in range(2):  # not a check yet: the new file grows past the limit unchecked
            handler.emit(record(f"second {index:02d} " + "y" * 60))
        assert "second 01" in log.read_text()
        handler.emit(record("third"))  # the check: the second generation replaces the first backup
        assert log.read_text() == ""
        backup = (tmp_path / "log.1").read_text()
        assert "second 00" in backup and "third" in backup and "first" not in backup
    finally:
        handler.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["log", "log.1"]


def test_a_large_log_is_rotated_when_a_manager_opens_it(tmp_path: Path, small: None) -> None:
    log = tmp_path / "log"
    log.write_text("z" * 101)
    handler = BoundedFileHandler(log)
    try:
        handler.emit(record("fresh"))
    finally:
        handler.close()
    assert (tmp_path / "log.1").read_text() == "z" * 101
    assert log.read_text() == "fresh\n"


def test_a_log_within_its_limit_is_appended_to(tmp_path: Path, small: None) -> None:
    log = tmp_path / "log"
    log.write_text("earlier\n")
    handler = BoundedFileHandler(log)
    try:
        for _ in range(3):
            handler.emit(record("x"))
    finally:
        handler.close()
    assert log.read_text() == "earlier\nx\nx\nx\n" and not (tmp_path / "log.1").exists()
