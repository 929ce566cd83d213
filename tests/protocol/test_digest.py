"""The canonical tree digest of DECISIONS D11 and the file and job digests."""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from pathlib import Path

import pytest
from httk.workflow.protocol._digest import (
    job_digest,
    sha256_bytes,
    sha256_file,
    tree_digest,
)
from httk.workflow.protocol._errors import UnsafePathError
from hypothesis import given, settings
from hypothesis import strategies as st

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _build(root: Path, files: dict[str, bytes], dirs: tuple[str, ...] = ()) -> Path:
    for name in dirs:
        (root / name).mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_bytes_file_and_job_digests(tmp_path: Path) -> None:
    assert sha256_bytes(b"") == EMPTY_SHA256
    assert sha256_bytes(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    stored = b'{\n  "format": "httk-workflow-job"\n}\n'
    assert job_digest(stored) == _sha(stored)
    path = tmp_path / "runner"
    path.write_bytes(b"abc")
    assert sha256_file(path) == sha256_bytes(b"abc")


def test_file_digest_streams_files_larger_than_one_chunk(tmp_path: Path) -> None:
    data = os.urandom((1 << 20) * 2 + 17)
    path = tmp_path / "big"
    path.write_bytes(data)
    assert sha256_file(path) == _sha(data)
    assert tree_digest(tmp_path) == _sha(b"F\0big\0" + data)


def test_file_digest_refuses_symlinks_and_fifos(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafePathError, match="symbolic link") as info:
        sha256_file(tmp_path / "link")
    assert info.value.path == str(tmp_path / "link")
    with pytest.raises(UnsafePathError, match="not a regular file"):
        sha256_file(tmp_path / "fifo")


def test_empty_tree_is_the_digest_of_nothing(tmp_path: Path) -> None:
    # The root is not one of "the tree's entries".
    assert tree_digest(tmp_path) == EMPTY_SHA256


def test_hand_computed_vector(tmp_path: Path) -> None:
    _build(
        tmp_path,
        {"job.json": b"{}\n", "files/runner": b"#!/bin/sh\n", "files/empty": b""},
        dirs=("run",),
    )
    expected = (
        b"D\0files\0"
        + b"F\0files/empty\0"
        + b"F\0files/runner\0#!/bin/sh\n"
        + b"F\0job.json\0{}\n"
        + b"D\0run\0"
    )
    assert tree_digest(tmp_path) == _sha(expected)
    # Pinned, so that a change to the construction cannot pass by changing both sides.
    assert tree_digest(tmp_path) == "554cb5af230314468a6db3dcaee4666381068e65b9bf02427b033ca924e08d36"


def test_order_is_bytewise_over_whole_paths_not_per_directory(tmp_path: Path) -> None:
    # '-' (0x2d) < '.' (0x2e) < '/' (0x2f): a/b sorts after a-b and a.b, while a sorts before both.
    _build(tmp_path, {"a/b": b"1", "a-b": b"2", "a.b": b"3", "a/c/d": b"4", "B": b"5", "é": b"6"})
    expected = (
        b"F\0B\0"
        + b"5"  # uppercase sorts before lowercase bytewise, unlike most locales
        + b"D\0a\0"
        + b"F\0a-b\0"
        + b"2"
        + b"F\0a.b\0"
        + b"3"
        + b"F\0a/b\0"
        + b"1"
        + b"D\0a/c\0"
        + b"F\0a/c/d\0"
        + b"4"
        + "F\0é\0".encode()
        + b"6"  # 0xc3 0xa9: after every ASCII byte
    )
    assert tree_digest(tmp_path) == _sha(expected)


def test_file_contents_and_names_both_matter(tmp_path: Path) -> None:
    one = _build(tmp_path / "one", {"x": b"ab"})
    two = _build(tmp_path / "two", {"x": b"ac"})
    three = _build(tmp_path / "three", {"y": b"ab"})
    four = _build(tmp_path / "four", {}, dirs=("x",))
    digests = {tree_digest(root) for root in (one, two, three, four)}
    assert len(digests) == 4


def test_empty_directories_are_entries(tmp_path: Path) -> None:
    _build(tmp_path, {}, dirs=("a/b",))
    assert tree_digest(tmp_path) == _sha(b"D\0a\0D\0a/b\0")


def test_symlink_inside_the_tree_is_refused_naming_its_path(tmp_path: Path) -> None:
    _build(tmp_path, {"files/runner": b"x"})
    (tmp_path / "files" / "alias").symlink_to("runner")
    with pytest.raises(UnsafePathError) as info:
        tree_digest(tmp_path)
    assert info.value.member == "files/alias"
    assert info.value.path == str(tmp_path / "files" / "alias")
    assert "symbolic link" in info.value.rule


def test_symlink_to_a_directory_is_refused(tmp_path: Path) -> None:
    _build(tmp_path, {}, dirs=("real",))
    (tmp_path / "alias").symlink_to("real", target_is_directory=True)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        tree_digest(tmp_path)


def test_fifo_inside_the_tree_is_refused(tmp_path: Path) -> None:
    _build(tmp_path, {}, dirs=("run",))
    os.mkfifo(tmp_path / "run" / "pipe")
    with pytest.raises(UnsafePathError) as info:
        tree_digest(tmp_path)
    assert info.value.member == "run/pipe"
    assert "special file" in info.value.rule


def test_root_that_is_a_symlink_or_a_file_is_refused(tmp_path: Path) -> None:
    real = _build(tmp_path / "real", {"x": b"1"})
    (tmp_path / "alias").symlink_to(real)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        tree_digest(tmp_path / "alias")
    with pytest.raises(UnsafePathError, match="not a directory"):
        tree_digest(real / "x")


def test_missing_root_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        tree_digest(tmp_path / "absent")


def test_payload_digest_leaves_out_top_level_private_areas(tmp_path: Path) -> None:
    base = _build(tmp_path / "payload", {"job.json": b"{}", "run/out": b"1"})
    plain = tree_digest(base, exclude_payload_private=True)
    assert plain == tree_digest(base)
    _build(
        base,
        {".httk-job/declarations/d.json": b"{}", ".httk-attempt.0123/context.json": b"{}"},
        dirs=(".httk-attempt.",),
    )
    (base / ".httk-attempt.x").write_bytes(b"a file is left out too")
    (base / ".httk-attempt.link").symlink_to("job.json")  # left out, so never refused
    assert tree_digest(base, exclude_payload_private=True) == plain
    with pytest.raises(UnsafePathError):
        tree_digest(base)  # without exclusion the symlink is an ordinary entry


def test_payload_digest_keeps_nested_and_lookalike_names(tmp_path: Path) -> None:
    base = _build(tmp_path / "payload", {"job.json": b"{}"})
    plain = tree_digest(base, exclude_payload_private=True)
    for name in ("run/.httk-job/x", "run/.httk-attempt.1/x", ".httk-jobs/x", ".httk-attempt/x", "httk-job/x"):
        root = _build(tmp_path / name.replace("/", "_"), {"job.json": b"{}", name: b"kept"})
        assert tree_digest(root, exclude_payload_private=True) != plain, name
        assert tree_digest(root, exclude_payload_private=True) == tree_digest(root)


def _reference_digest(files: dict[bytes, bytes], dirs: set[bytes]) -> str:
    entries = sorted([(path, None) for path in dirs] + list(files.items()))
    hasher = hashlib.sha256()
    for path, data in entries:
        if data is None:
            hasher.update(b"D\0" + path + b"\0")
        else:
            hasher.update(b"F\0" + path + b"\0" + data)
    return hasher.hexdigest()


_COMPONENT = st.text(alphabet="ab-._éZ", min_size=1, max_size=3).filter(lambda name: name not in (".", ".."))
_TREES = st.dictionaries(
    st.lists(_COMPONENT, min_size=1, max_size=3).map(tuple), st.binary(max_size=8), max_size=12
)


@settings(max_examples=60, deadline=None)
@given(tree=_TREES, seed=st.integers(0, 2**32 - 1))
def test_digest_is_independent_of_creation_order(tree: dict[tuple[str, ...], bytes], seed: int) -> None:
    # Drop paths that are both a file and the parent of another path.
    prefixes = {parts[:i] for parts in tree for i in range(1, len(parts))}
    files = {parts: data for parts, data in tree.items() if parts not in prefixes}
    dirs = {"/".join(parts).encode() for parts in prefixes}
    expected = _reference_digest({"/".join(p).encode(): d for p, d in files.items()}, dirs)
    orders = [sorted(files), sorted(files, reverse=True)]
    shuffled = list(files)
    random.Random(seed).shuffle(shuffled)
    orders.append(shuffled)
    for order in orders:
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            for parts in order:
                target = root.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(files[parts])
            assert tree_digest(root) == expected


def test_entry_swapped_for_a_symlink_after_listing_is_refused(tmp_path: Path) -> None:
    # The walk lists a directory, then opens each entry relative to it with O_NOFOLLOW; an entry
    # replaced by a symlink in between must still be refused.
    from httk.workflow.protocol import _digest

    _build(tmp_path, {"target": b"x"}, dirs=("real",))
    (tmp_path / "dirlink").symlink_to("real", target_is_directory=True)
    (tmp_path / "filelink").symlink_to("target")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(UnsafePathError, match="symbolic link"):
            _digest._open_dir("dirlink", fd, str(tmp_path / "dirlink"), "dirlink")
        with pytest.raises(UnsafePathError, match="symbolic link"):
            _digest._open_file("filelink", fd, "tree", "filelink", tmp_path / "filelink")
    finally:
        os.close(fd)
