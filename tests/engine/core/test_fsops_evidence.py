"""The seam's writes of evidence and scratch: logs, copies, received files, private directories.

Each is numbered like every other mutation (so crash injection and the fault plan reach it), and each
keeps the properties its callers relied on when they wrote the disk themselves: no link followed, an
exact mode where one is asked for, times kept on a copy.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from httk.workflow.engine.core import _faults, _fsops
from httk.workflow.engine.core._faults import Fault, Plan


@pytest.fixture
def plan() -> Iterator[None]:
    yield
    _faults.install(None)


@pytest.fixture
def strict_umask() -> Iterator[None]:
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def at_next(fault: Fault) -> None:
    _faults.install(Plan(_fsops.mutation_count() + 1, fault))


def test_an_evidence_file_is_created_once_and_then_reopened_without_a_mutation(tmp_path: Path) -> None:
    log = tmp_path / "stdio.log"
    before = _fsops.mutation_count()
    first = _fsops.open_for_append(log)
    os.write(first, b"one\n")
    os.close(first)
    assert _fsops.mutation_count() == before + 1
    again = _fsops.open_for_append(log)
    os.write(again, b"two\n")
    os.close(again)
    assert _fsops.mutation_count() == before + 1
    assert log.read_bytes() == b"one\ntwo\n"


def test_an_evidence_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("keep")
    os.symlink(outside, tmp_path / "stdio.log")
    with pytest.raises(OSError) as caught:
        _fsops.open_for_append(tmp_path / "stdio.log")
    assert caught.value.errno == errno.ELOOP
    assert outside.read_text() == "keep"


def test_an_evidence_file_opens_relative_to_a_directory_descriptor(tmp_path: Path) -> None:
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = _fsops.open_for_append("stdio.log", dir_fd=dir_fd, flags=os.O_NONBLOCK)
        os.close(fd)
    finally:
        os.close(dir_fd)
    assert (tmp_path / "stdio.log").is_file()


def test_an_append_of_many_pieces_is_one_mutation(tmp_path: Path) -> None:
    fd = _fsops.open_for_append(tmp_path / "log")
    try:
        before = _fsops.mutation_count()
        _fsops.append(fd, iter([b"head\n", b"body", b"\n"]), tmp_path / "log")
        assert _fsops.mutation_count() == before + 1
        _fsops.append(fd, iter([]), tmp_path / "log")  # nothing to append: no mutation
        assert _fsops.mutation_count() == before + 1
    finally:
        os.close(fd)
    assert (tmp_path / "log").read_bytes() == b"head\nbody\n"


def test_a_full_device_during_an_append_takes_part_of_the_first_piece(tmp_path: Path, plan: None) -> None:
    fd = _fsops.open_for_append(tmp_path / "log")
    try:
        at_next(Fault.WRITE_ENOSPC)
        with pytest.raises(OSError) as caught:
            _fsops.append(fd, iter([b"0123456789", b"never"]), tmp_path / "log")
    finally:
        os.close(fd)
    assert caught.value.errno == errno.ENOSPC
    assert (tmp_path / "log").read_bytes() == b"01234"


def test_a_copy_keeps_contents_mode_and_times_and_is_a_new_inode(tmp_path: Path) -> None:
    source = tmp_path / "POSCAR"
    source.write_bytes(b"Si\n" * 1000)
    source.chmod(0o751)
    os.utime(source, ns=(1_000_000_000, 2_000_000_000))
    target = tmp_path / "copy"
    _fsops.copy_file(source, target)
    info, copied = source.stat(), target.stat()
    assert target.read_bytes() == source.read_bytes()
    assert stat.S_IMODE(copied.st_mode) == 0o751 and copied.st_mtime_ns == info.st_mtime_ns
    assert copied.st_ino != info.st_ino


def test_a_copy_never_follows_a_link_nor_replaces_a_name(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(OSError) as caught:
        _fsops.copy_file(tmp_path / "link", tmp_path / "copy")
    assert caught.value.errno == errno.ELOOP and not (tmp_path / "copy").exists()
    (tmp_path / "taken").write_text("mine")
    with pytest.raises(FileExistsError):
        _fsops.copy_file(tmp_path / "real", tmp_path / "taken")
    assert (tmp_path / "taken").read_text() == "mine"


def test_a_fault_on_a_copy_s_bytes_fails_the_copy(tmp_path: Path, plan: None) -> None:
    source = tmp_path / "data"
    source.write_bytes(b"x" * 100)
    _faults.install(Plan(_fsops.mutation_count() + 2, Fault.WRITE_EIO))  # the create, then its bytes
    with pytest.raises(OSError) as caught:
        _fsops.copy_file(source, tmp_path / "copy")
    assert caught.value.errno == errno.EIO


def test_a_streamed_file_gets_every_chunk_its_exact_mode_and_its_time(
    tmp_path: Path, strict_umask: None
) -> None:
    target = tmp_path / "WAVECAR"
    before = _fsops.mutation_count()
    _fsops.create_streamed(target, iter([b"a" * 10, b"b" * 5, b""]), durable=True, mode=0o755, mtime=1234.0)
    assert _fsops.mutation_count() == before + 2  # its name, then its bytes
    info = target.stat()
    assert target.read_bytes() == b"a" * 10 + b"b" * 5
    assert stat.S_IMODE(info.st_mode) == 0o755 and info.st_mtime == 1234.0


def test_a_full_device_fails_a_streamed_file(tmp_path: Path, plan: None) -> None:
    _faults.install(Plan(_fsops.mutation_count() + 2, Fault.WRITE_ENOSPC))
    with pytest.raises(OSError) as caught:
        _fsops.create_streamed(tmp_path / "f", iter([b"0123456789"]), durable=False)
    assert caught.value.errno == errno.ENOSPC


def test_a_private_directory_and_file_get_their_mode_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o277)  # would strip the owner's write and execute bits
    try:
        _fsops.make_dirs(tmp_path / "a" / "private", durable=False, mode=0o700)
        _fsops.create_file(
            tmp_path / "a" / "private" / "run.sh", b"#!/bin/sh\n", durable=False, mode=0o700, exact_mode=True
        )
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a" / "private").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a" / "private" / "run.sh").stat().st_mode) == 0o700


def test_an_existing_directory_keeps_its_own_mode(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir(mode=0o755)
    assert not _fsops.make_dir(tmp_path / "shared", durable=False, exist_ok=True, mode=0o700)
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o755


def test_a_tree_another_program_wrote_is_synchronized_past_its_links(tmp_path: Path) -> None:
    tree = tmp_path / "bundle"
    (tree / "payload" / "data").mkdir(parents=True)
    (tree / "payload" / "data" / "energy.json").write_text("{}")
    os.symlink("/nonexistent", tree / "payload" / "dangling")
    _fsops.sync_tree(tree)  # a link is left to the validation that refuses it: no ELOOP here
