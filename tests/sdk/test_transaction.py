"""The transaction builder and its staging into an outcome draft, checked against the engine's own rules."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.publish._transactions import replay, validate_manifest
from httk.workflow.protocol._digest import tree_digest
from httk.workflow.sdk import OutcomeError
from httk.workflow.sdk._transaction import Transaction, TransactionError, stage_transaction

from tests.sdk.attempts import fd_path
from tests.sdk.test_package import FORBIDDEN, public_members

UUID = "6fc3852b-f1df-4edf-a92c-7f81c3e02465"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stage(tmp_path: Path, tx: Transaction, *, durable: bool = False, generation: int = 0) -> Path:
    draft = tmp_path / "outcome.tmp.1"
    draft.mkdir(exist_ok=True)
    stage_transaction(draft, tx, expected_data_generation=generation, durable=durable)
    return draft / "transaction"


def source_tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "sub/b.txt").write_bytes(b"b")
    (root / "a.txt").write_bytes(b"a")
    (root / "empty").mkdir()
    return root


# -- building ----------------------------------------------------------------------------------------
def test_operation_ids_follow_the_position_unless_the_caller_names_them() -> None:
    tx = Transaction()
    assert tx.make_dir("results") == "op1"
    assert tx.put_file("results/x", b"1", op_id="op3") == "op3"
    assert tx.remove("old", missing_ok=True) == "op4"  # position 3 is taken by the caller's id
    assert tx.make_dir("other") == "op5"
    assert tx.operation_ids == ("op1", "op3", "op4", "op5")
    assert len(tx) == 4
    assert repr(tx) == "<Transaction operations=['op1', 'op3', 'op4', 'op5']>"


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/etc/passwd", "relative"),
        ("a//b", "normalized"),
        ("a/./b", "normalized"),
        ("../x", "normalized"),
        ("a/", "normalized"),
        ("", "nonempty"),
        ("a\0b", "NUL"),
        (".httk-job/state.json", "control data"),
        ("x/.httk-workflow", "control data"),
        (".httk-attempt.1", "control data"),
        ("x" * 256, "longer than 255"),
    ],
)
def test_paths_are_checked_when_an_operation_is_added(path: str, rule: str) -> None:
    tx = Transaction()
    with pytest.raises(TransactionError, match=rule) as excinfo:
        tx.make_dir(path)
    assert excinfo.value.argument == "path"
    assert excinfo.value.operation == "op1"
    assert isinstance(excinfo.value, OutcomeError)
    assert len(tx) == 0


def test_overlapping_operations_are_refused_and_leave_the_transaction_unchanged() -> None:
    tx = Transaction()
    tx.make_dir("results")
    tx.put_file("results/energy.json", b"1")
    tx.remove("scratch")
    before = tx.operation_ids
    with pytest.raises(TransactionError, match="also the path of operation 'op1'"):
        tx.remove("results")
    with pytest.raises(TransactionError, match=re.escape("lies below 'results/energy.json'")):
        tx.make_dir("results/energy.json/x")
    with pytest.raises(TransactionError, match="lies below 'scratch'"):
        tx.put_file("scratch/x", b"1")
    # Invariant: a refused call leaves the transaction exactly as it was.
    assert tx.operation_ids == before
    tx.make_dir("results/deeper")  # below an earlier make_dir: fine
    late = Transaction()
    late.put_file("late/x", b"1")
    with pytest.raises(TransactionError, match="add make_dir before the operations below it"):
        late.make_dir("late")
    with pytest.raises(TransactionError, match="holds 'late/x' of operation 'op1'"):
        late.remove("late")
    assert late.operation_ids == ("op1",)


def test_arguments_are_checked() -> None:
    tx = Transaction()
    with pytest.raises(TransactionError, match="64 lowercase") as excinfo:
        tx.remove("x", expected_sha256="ABC")
    assert excinfo.value.argument == "expected_sha256"
    with pytest.raises(TransactionError, match="cannot be combined"):
        tx.put_file("x", b"1", require_absent=True, expected_sha256="0" * 64)
    with pytest.raises(TransactionError, match="True or False"):
        tx.make_dir("x", parents="yes")  # type: ignore[arg-type]
    with pytest.raises(TransactionError, match="must match"):
        tx.make_dir("x", op_id="bad/id")
    tx.make_dir("x", op_id="dir")
    with pytest.raises(TransactionError, match="already used"):
        tx.make_dir("y", op_id="dir")
    assert tx.operation_ids == ("dir",)


def test_sources_must_exist_with_the_right_type(tmp_path: Path) -> None:
    tx = Transaction()
    with pytest.raises(TransactionError, match="cannot be used as a source"):
        tx.put_file("x", tmp_path / "missing")
    with pytest.raises(TransactionError, match="regular file"):
        tx.put_file("x", tmp_path)
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(TransactionError, match="directory") as excinfo:
        tx.put_tree("x", tmp_path / "f")
    assert excinfo.value.argument == "source_dir"
    with pytest.raises(TransactionError, match="directory"):
        tx.replace_tree("x", tmp_path / "f")


# -- staging -----------------------------------------------------------------------------------------
def test_staging_writes_the_spec_layout_and_compact_manifest(tmp_path: Path) -> None:
    tree = source_tree(tmp_path / "src")
    (tmp_path / "big.bin").write_bytes(b"\1" * 3_000_000)
    tx = Transaction(transaction_id=UUID)
    tx.make_dir("results/relax", parents=True)
    tx.put_file("results/relax/energy.json", b'{"e":-1}\n', op_id="energy")
    tx.put_file("results/relax/big.bin", tmp_path / "big.bin", require_absent=True)
    tx.put_tree("relax-tree", tree)
    tx.replace_tree("current", str(tree), expected_sha256="1" * 64)
    tx.remove("scratch", missing_ok=True, expected_sha256="2" * 64)
    bundle = stage(tmp_path, tx, generation=4)

    raw = (bundle / "manifest.json").read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1 and b", " not in raw and b": " not in raw
    digest = tree_digest(bundle / "payload/relax-tree")
    assert json.loads(raw) == {
        "format": "httk-workflow-transaction",
        "format_version": 1,
        "id": UUID,
        "expected_data_generation": 4,
        "operations": [
            {"id": "op1", "op": "make-dir", "path": "results/relax", "parents": True},
            {
                "id": "energy",
                "op": "put-file",
                "source": "payload/results/relax/energy.json",
                "path": "results/relax/energy.json",
                "sha256": sha(b'{"e":-1}\n'),
            },
            {
                "id": "op3",
                "op": "put-file",
                "source": "payload/results/relax/big.bin",
                "path": "results/relax/big.bin",
                "sha256": sha(b"\1" * 3_000_000),
                "require_absent": True,
            },
            {
                "id": "op4",
                "op": "put-tree",
                "source": "payload/relax-tree",
                "path": "relax-tree",
                "sha256": digest,
            },
            {
                "id": "op5",
                "op": "replace-tree",
                "source": "payload/current",
                "path": "current",
                "sha256": digest,
                "expected_sha256": "1" * 64,
            },
            {"id": "op6", "op": "remove", "path": "scratch", "missing_ok": True, "expected_sha256": "2" * 64},
        ],
    }
    assert list(json.loads(raw)["operations"][1]) == ["id", "op", "source", "path", "sha256"]
    assert sorted(p.name for p in bundle.iterdir()) == ["manifest.json", "payload", "trash"]
    assert list((bundle / "trash").iterdir()) == []
    assert (bundle / "payload/current/sub/b.txt").read_bytes() == b"b"
    assert (bundle / "payload/current/empty").is_dir()


def test_staged_payloads_are_private_copies(tmp_path: Path) -> None:
    (tmp_path / "script").write_bytes(b"#!/bin/sh\n")
    (tmp_path / "script").chmod(0o755)
    tree = source_tree(tmp_path / "src")
    tx = Transaction()
    tx.put_file("script", tmp_path / "script")
    tx.put_tree("tree", tree)
    bundle = stage(tmp_path, tx)
    for original, staged in [
        (tmp_path / "script", bundle / "payload/script"),
        (tree / "a.txt", bundle / "payload/tree/a.txt"),
    ]:
        assert os.stat(staged).st_ino != os.stat(original).st_ino
        assert os.stat(staged).st_nlink == 1
    assert os.stat(bundle / "payload/script").st_mode & 0o777 == 0o755
    (tmp_path / "script").write_bytes(b"changed later")
    assert (bundle / "payload/script").read_bytes() == b"#!/bin/sh\n"


def test_the_engine_accepts_and_replays_what_the_sdk_stages(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "current").mkdir(parents=True)
    (data / "current/old").write_bytes(b"old")
    (data / "scratch").write_bytes(b"tmp")
    tx = Transaction()
    tx.make_dir("results/relax", parents=True)
    tx.put_file("results/relax/energy.json", b"-1\n")
    tx.put_tree("relax-tree", source_tree(tmp_path / "src"))
    tx.replace_tree("current", tmp_path / "src", expected_sha256=tree_digest(data / "current"))
    tx.remove("scratch", expected_sha256=sha(b"tmp"))
    bundle = stage(tmp_path, tx, generation=2)
    document = json.loads((bundle / "manifest.json").read_bytes())
    manifest = validate_manifest(document, bundle, expected_data_generation=2, data_dir=data)
    result = replay(data, bundle, manifest, durable=False, deadline_seconds=0.1, clock=ManualClock())
    assert result.changed
    assert (data / "results/relax/energy.json").read_bytes() == b"-1\n"
    assert (data / "current/sub/b.txt").read_bytes() == b"b"
    assert not (data / "current/old").exists()
    assert (bundle / "trash/op4/old/old").read_bytes() == b"old"
    assert (bundle / "trash/op5/removed").read_bytes() == b"tmp"


def test_a_symlink_in_a_source_tree_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    tree = source_tree(tmp_path / "src")
    os.symlink("/etc/passwd", tree / "sub/link")
    tx = Transaction()
    tx.put_tree("tree", tree, op_id="t")
    draft = tmp_path / "draft"
    draft.mkdir()
    with pytest.raises(TransactionError, match="symbolic link") as excinfo:
        stage_transaction(draft, tx, expected_data_generation=0, durable=False)
    assert excinfo.value.operation == "t"
    assert list(draft.iterdir()) == []


def test_an_existing_transaction_directory_is_never_replaced_or_removed(tmp_path: Path) -> None:
    draft = tmp_path / "draft"
    (draft / "transaction").mkdir(parents=True)
    (draft / "transaction/keep").write_bytes(b"")
    with pytest.raises(TransactionError, match="cannot be staged"):
        stage_transaction(draft, Transaction(), expected_data_generation=0, durable=False)
    assert (draft / "transaction/keep").exists()


@pytest.mark.parametrize("generation", [-1, True, "0", 1 << 64])
def test_the_expected_generation_is_checked(tmp_path: Path, generation: Any) -> None:
    with pytest.raises(TransactionError) as excinfo:
        stage_transaction(tmp_path, Transaction(), expected_data_generation=generation, durable=False)
    assert excinfo.value.argument == "expected_data_generation"


def test_an_empty_transaction_stages_a_valid_empty_manifest(tmp_path: Path) -> None:
    bundle = stage(tmp_path, Transaction())
    document = json.loads((bundle / "manifest.json").read_bytes())
    assert document["operations"] == []
    assert validate_manifest(document, bundle, expected_data_generation=0).operations == ()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name synchronized files")
def test_durable_staging_synchronizes_every_file_and_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: set[Path] = set()
    real = os.fsync

    def recording(fd: int) -> None:
        synced.add(Path(fd_path(fd)))
        real(fd)

    tx = Transaction()
    tx.put_file("a/b/c.txt", b"c")
    tx.put_tree("t", source_tree(tmp_path / "src"))
    monkeypatch.setattr(os, "fsync", recording)
    bundle = stage(tmp_path, tx, durable=True)
    everything = {bundle, bundle.parent, *bundle.rglob("*")}
    assert {p.resolve() for p in everything} <= synced


def test_stage_transaction_without_durable_synchronizes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    tx = Transaction()
    tx.put_file("x", b"1")
    stage(tmp_path, tx)
    assert calls == []


def test_the_builder_and_file_staging_load_nothing_heavy(tmp_path: Path) -> None:
    """An Attempt accessor may import this module eagerly: it must cost a runner nothing extra."""
    code = f"""
import json, sys, pathlib
import httk.workflow.sdk
before = set(sys.modules)
from httk.workflow.sdk._transaction import Transaction, stage_transaction
imported = sorted(set(sys.modules) - before)
tx = Transaction()
tx.put_file("x", b"1")
stage_transaction(pathlib.Path({str(tmp_path)!r}), tx, expected_data_generation=0, durable=False)
print(json.dumps([imported, sorted(sys.modules)]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    imported, loaded = json.loads(out)
    assert imported == []  # the package itself imports the builder (Attempt.transaction, the exports)
    assert [m for m in loaded if m.startswith(FORBIDDEN)] == []
    assert "shutil" not in loaded


@pytest.mark.parametrize("obj", [Transaction, TransactionError, stage_transaction])
def test_every_name_to_be_exported_has_a_numpy_docstring_with_examples(obj: Any) -> None:
    for qualified, member in [(obj.__name__, obj), *public_members(obj)]:
        doc = inspect.getdoc(member.fget if isinstance(member, property) else member)
        assert doc, f"{qualified} has no docstring"
        assert "Examples\n--------\n>>> " in doc, f"{qualified} has no Examples section"
