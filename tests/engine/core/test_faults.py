"""The seam's fault plan, in process: what fires where, once, and what reads see afterwards."""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from httk.workflow.engine.core import _faults, _fsops
from httk.workflow.engine.core._faults import APPLIES, MUTATIONS, Fault, Plan, parse


@pytest.fixture
def plan() -> Iterator[None]:
    yield
    _faults.install(None)


def at_next(fault: Fault) -> Plan:
    """A plan for the next mutation this process performs."""
    installed = Plan(_fsops.mutation_count() + 1, fault)
    _faults.install(installed)
    return installed


@pytest.mark.parametrize("text", ["", "3", "x:eintr", "0:eintr", "2:no-such-fault", "-1:eintr"])
def test_a_malformed_plan_is_refused_naming_the_variable(text: str) -> None:
    with pytest.raises(ValueError, match="HTTK_WORKFLOW_FAULT"):
        parse(text)


def test_a_plan_names_a_mutation_and_a_fault() -> None:
    assert (parse("17:rename-eio").at, parse("17:rename-eio").fault) == (17, Fault.RENAME_EIO)


def test_every_fault_applies_to_some_mutations_and_only_to_mutations() -> None:
    assert set(APPLIES) == set(Fault)
    assert all(operations and operations <= MUTATIONS for operations in APPLIES.values())


def test_a_write_fault_fires_once_and_leaves_half_the_bytes(tmp_path: Path, plan: None) -> None:
    target = tmp_path / "file"
    _fsops.create_file(target, b"", durable=False)
    handle = _fsops.create_append_file(tmp_path / "segment", b"", durable=False)
    try:
        at_next(Fault.WRITE_ENOSPC)
        with pytest.raises(OSError) as caught:
            handle.append(b"0123456789", durable=False)
        assert caught.value.errno == errno.ENOSPC and "injected: write-enospc" in str(caught.value)
        assert (tmp_path / "segment").read_bytes() == b"01234" and handle.size == 5
        handle.append(b"ab", durable=False)  # fired once: the next try works
    finally:
        handle.close()
    assert (tmp_path / "segment").read_bytes() == b"01234ab"


def test_an_interrupted_call_is_retried_by_the_seam(tmp_path: Path, plan: None) -> None:
    installed = at_next(Fault.EINTR)
    _fsops.make_dir(tmp_path / "made", durable=False)
    assert installed.fired and (tmp_path / "made").is_dir()


def test_a_rename_that_reports_failure_has_happened(tmp_path: Path, plan: None) -> None:
    (tmp_path / "a").write_text("x")
    at_next(Fault.RENAME_REPORTS_FAILURE)
    with pytest.raises(OSError) as caught:
        _fsops.rename(tmp_path / "a", tmp_path / "b", durable=True)
    assert caught.value.errno == errno.EIO
    assert not (tmp_path / "a").exists() and (tmp_path / "b").read_text() == "x"


def test_a_late_name_is_invisible_to_the_seam_s_reads_for_a_moment(
    tmp_path: Path, plan: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    at_next(Fault.LATE_NAME)
    _fsops.create_file(tmp_path / "new", b"data", durable=False)
    assert (tmp_path / "new").exists()  # there, for the kernel
    assert not _fsops.lexists(tmp_path / "new") and not _fsops.is_file(tmp_path / "new")
    assert [entry.name for entry in _fsops.scandir(tmp_path)] == []
    with pytest.raises(FileNotFoundError):
        _fsops.open_read(tmp_path / "new")
    now[0] += _faults.LATE_SECONDS
    assert _fsops.lexists(tmp_path / "new") and [e.name for e in _fsops.scandir(tmp_path)] == ["new"]


def test_a_stale_listing_shows_the_directory_as_it_was(
    tmp_path: Path, plan: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    (tmp_path / "old").write_text("x")
    at_next(Fault.STALE_LISTING)
    _fsops.rename(tmp_path / "old", tmp_path / "new", durable=False)
    with _fsops.scandir(tmp_path) as listing:
        assert [entry.name for entry in listing] == ["old"]
    now[0] += _faults.LATE_SECONDS
    assert [entry.name for entry in _fsops.scandir(tmp_path)] == ["new"]


def test_an_fsync_fault_fails_the_sync_of_that_mutation_only(tmp_path: Path, plan: None) -> None:
    at_next(Fault.FSYNC_EIO)
    with pytest.raises(OSError) as caught:
        _fsops.create_file(tmp_path / "f", b"", durable=True)
    assert caught.value.errno == errno.EIO and (tmp_path / "f").exists()  # created, not made durable
    _fsops.create_file(tmp_path / "g", b"", durable=True)
