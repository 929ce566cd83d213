"""Transactions: manifest rules, preconditions, idempotent replay, crashes, races, durability, workdirs."""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import ManualClock, backoff_schedule
from httk.workflow.engine.core._frames import next_data_generation
from httk.workflow.engine.manager._attempt import populate_isolated_workdir, prepare_attempt
from httk.workflow.engine.publish import _transactions
from httk.workflow.engine.publish._runners import RunnerFailure
from httk.workflow.engine.publish._transaction_manifest import digest_of, path_kind
from httk.workflow.engine.publish._transactions import (
    Manifest,
    TransactionCorruptionError,
    TransactionError,
    check_preconditions,
    load_manifest,
    replay,
    trash_path,
    validate_manifest,
)
from httk.workflow.protocol._digest import tree_digest

from tests.crashkit import count_mutations, run_crashing
from tests.engine.manager.test_attempt import _payload_job, _plan, _workspace

TX_ID = "6fc3852b-f1df-4edf-a92c-7f81c3e02465"
DEADLINE = 0.5


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_tree(root: Path, files: dict[str, bytes | None]) -> None:
    """Create ``files`` below ``root``; a ``None`` value makes an (empty) directory."""
    root.mkdir(parents=True, exist_ok=True)
    for relative, data in files.items():
        path = root / relative
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry below ``root``: file bytes, or ``None`` for a directory."""
    if not root.exists():
        return {}
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        found[path.relative_to(root).as_posix()] = None if path.is_dir() else path.read_bytes()
    return found


class Bundle:
    """A transaction bundle built by hand, the way a runner would."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        (root / "payload").mkdir(parents=True)
        self.ops: list[dict[str, Any]] = []

    @classmethod
    def of(cls, root: Path, ops: list[dict[str, Any]]) -> Bundle:
        """A view of an existing bundle directory with the given operations."""
        bundle = cls.__new__(cls)
        bundle.dir, bundle.ops = root, ops
        return bundle

    def make_dir(self, op_id: str, path: str, **extra: Any) -> Bundle:
        self.ops.append({"id": op_id, "op": "make-dir", "path": path, **extra})
        return self

    def file(self, op_id: str, path: str, data: bytes, **extra: Any) -> Bundle:
        write_tree(self.dir / "payload", {path: data})
        self.ops.append(
            {"id": op_id, "op": "put-file", "source": f"payload/{path}", "path": path, "sha256": sha(data)}
            | extra
        )
        return self

    def tree(
        self, op_id: str, path: str, files: dict[str, bytes | None], op: str = "put-tree", **extra: Any
    ) -> Bundle:
        source = self.dir / "payload" / path
        write_tree(source, files)
        self.ops.append(
            {"id": op_id, "op": op, "source": f"payload/{path}", "path": path, "sha256": tree_digest(source)}
            | extra
        )
        return self

    def remove(self, op_id: str, path: str, **extra: Any) -> Bundle:
        self.ops.append({"id": op_id, "op": "remove", "path": path, **extra})
        return self

    def document(self, generation: int = 0) -> dict[str, Any]:
        return {
            "format": "httk-workflow-transaction",
            "format_version": 1,
            "id": TX_ID,
            "expected_data_generation": generation,
            "operations": copy.deepcopy(self.ops),
        }

    def write(self) -> Bundle:
        (self.dir / "manifest.json").write_text(json.dumps(self.document()))
        return self

    def manifest(self, *, check_payload: bool = True) -> Manifest:
        return validate_manifest(
            self.document(), self.dir, expected_data_generation=0, check_payload=check_payload
        )


def run_replay(data: Path, bundle: Bundle, **kwargs: Any) -> _transactions.ReplayResult:
    manifest = bundle.manifest(check_payload=False)
    options: dict[str, Any] = {"durable": False, "deadline_seconds": DEADLINE, "clock": ManualClock()}
    options.update(kwargs)
    return replay(data, bundle.dir, manifest, **options)


# -- manifest validation: every rule ---------------------------------------------------------------
def _base(tmp_path: Path) -> Bundle:
    return (
        Bundle(tmp_path / "bundle")
        .make_dir("mk", "results")
        .file("energy", "results/energy.json", b'{"energy":-10.8}\n')
        .remove("old", "scratch/obsolete.dat", missing_ok=True)
    )


def _op(index: int, **members: Any) -> Callable[[dict[str, Any], Path], None]:
    def change(doc: dict[str, Any], _: Path) -> None:
        for key, value in members.items():
            if value is ...:
                doc["operations"][index].pop(key)
            else:
                doc["operations"][index][key] = value

    return change


def _top(**members: Any) -> Callable[[dict[str, Any], Path], None]:
    def change(doc: dict[str, Any], _: Path) -> None:
        doc.update(members)

    return change


def _append(op: dict[str, Any]) -> Callable[[dict[str, Any], Path], None]:
    def change(doc: dict[str, Any], _: Path) -> None:
        doc["operations"].append(op)

    return change


def _payload(action: Callable[[Path], object]) -> Callable[[dict[str, Any], Path], None]:
    def change(_: dict[str, Any], bundle: Path) -> None:
        action(bundle)

    return change


def _tree_op(doc: dict[str, Any], bundle: Path, files: dict[str, bytes | None]) -> None:
    write_tree(bundle / "payload/tree", files)
    digest = (
        tree_digest(bundle / "payload/tree") if not any(v == b"link" for v in files.values()) else "0" * 64
    )
    doc["operations"].append(
        {"id": "tree", "op": "put-tree", "source": "payload/tree", "path": "tree", "sha256": digest}
    )


def _energy_is_a_directory(bundle: Path) -> None:
    (bundle / "payload/results/energy.json").unlink()
    (bundle / "payload/results/energy.json").mkdir()


def _tree_source_is_a_file(doc: dict[str, Any], bundle: Path) -> None:
    _tree_op(doc, bundle, {"a": b"a"})
    shutil.rmtree(bundle / "payload/tree")
    (bundle / "payload/tree").write_bytes(b"x")


def _symlink_in_tree(doc: dict[str, Any], bundle: Path) -> None:
    _tree_op(doc, bundle, {"a": b"a"})
    os.symlink("/etc/passwd", bundle / "payload/tree/link")


FIFO_CASE = pytest.param(
    _payload(lambda b: os.mkfifo(b / "payload/fifo")), "", "device, socket or FIFO", id="fifo-in-payload"
)

MANIFEST_CASES = [
    pytest.param(_top(format="httk-workflow-outcome"), "format", "httk-workflow-transaction", id="format"),
    pytest.param(_top(format_version=2), "format_version", "must be 1", id="format-version"),
    pytest.param(_top(format_version=True), "format_version", "must be 1", id="format-version-bool"),
    pytest.param(_top(id="not-a-uuid"), "id", "UUID", id="transaction-id"),
    pytest.param(
        _top(expected_data_generation=1), "expected_data_generation", "started from", id="gen-stale"
    ),
    pytest.param(
        _top(expected_data_generation=-1), "expected_data_generation", "unsigned", id="gen-negative"
    ),
    pytest.param(_top(expected_data_generation=True), "expected_data_generation", "unsigned", id="gen-bool"),
    pytest.param(_top(expected_data_generation="0"), "expected_data_generation", "unsigned", id="gen-text"),
    pytest.param(_top(operations={}), "operations", "must be an array", id="operations-object"),
    pytest.param(_top(operations=[1]), "operations[0]", "must be an object", id="operation-not-object"),
    pytest.param(_op(0, id=".hidden"), "operations[0].id", "must match", id="id-dot"),
    pytest.param(_op(0, id="a/b"), "operations[0].id", "must match", id="id-slash"),
    pytest.param(_op(0, id="x" * 65), "operations[0].id", "must match", id="id-long"),
    pytest.param(_op(0, id=...), "operations[0].id", "must match", id="id-missing"),
    pytest.param(_op(1, id="mk"), "operations[1].id", "not unique", id="id-duplicate"),
    pytest.param(_op(0, op="copy"), "operations[0].op", "must be one of", id="op-unknown"),
    pytest.param(_op(0, path="/etc"), "operations[0].path", "relative", id="path-absolute"),
    pytest.param(_op(0, path="a//b"), "operations[0].path", "normalized", id="path-empty-component"),
    pytest.param(_op(0, path="a/./b"), "operations[0].path", "normalized", id="path-dot"),
    pytest.param(_op(0, path="../x"), "operations[0].path", "normalized", id="path-dotdot"),
    pytest.param(_op(0, path="a/"), "operations[0].path", "normalized", id="path-trailing-slash"),
    pytest.param(_op(0, path=""), "operations[0].path", "empty", id="path-empty"),
    pytest.param(_op(0, path="a\0b"), "operations[0].path", "NUL", id="path-nul"),
    pytest.param(_op(0, path=7), "operations[0].path", "string", id="path-not-string"),
    pytest.param(_op(0, path=...), "operations[0].path", "string", id="path-missing"),
    pytest.param(_op(0, path=".httk-job/x"), "operations[0].path", "control data", id="path-httk-job"),
    pytest.param(_op(0, path="a/.httk-workflow"), "operations[0].path", "control data", id="path-workflow"),
    pytest.param(_op(0, path=".httk-attempt.1/x"), "operations[0].path", "control data", id="path-attempt"),
    pytest.param(_op(2, path="results"), "operations[2].path", "also the path of", id="overlap-equal"),
    pytest.param(
        _append({"id": "deep", "op": "remove", "path": "results/energy.json/x"}),
        "operations[3].path",
        "lies below",
        id="overlap-below-put",
    ),
    pytest.param(
        _append({"id": "late", "op": "make-dir", "path": "scratch"}),
        "operations[2].path",
        "only an earlier make-dir",
        id="overlap-make-dir-after",
    ),
    pytest.param(_op(1, sha256=...), "operations[1].sha256", "is required", id="sha-missing"),
    pytest.param(_op(1, sha256="A" * 64), "operations[1].sha256", "64 lowercase", id="sha-uppercase"),
    pytest.param(_op(1, sha256="a" * 63), "operations[1].sha256", "64 lowercase", id="sha-short"),
    pytest.param(_op(1, source=...), "operations[1].source", "string", id="source-missing"),
    pytest.param(_op(1, source="other/x"), "operations[1].source", "below payload/", id="source-outside"),
    pytest.param(
        _op(1, source="payload"), "operations[1].source", "below payload/", id="source-payload-root"
    ),
    pytest.param(_op(1, source="payload/../x"), "operations[1].source", "normalized", id="source-dotdot"),
    pytest.param(
        _append(
            {
                "id": "twin",
                "op": "put-file",
                "source": "payload/results/energy.json",
                "path": "twin",
                "sha256": sha(b'{"energy":-10.8}\n'),
            }
        ),
        "operations[3].source",
        "also the source",
        id="source-shared",
    ),
    pytest.param(
        _append(
            {"id": "nest", "op": "put-tree", "source": "payload/results", "path": "nest", "sha256": "0" * 64}
        ),
        "operations[1].source",
        "lies below the source",
        id="source-nested",
    ),
    pytest.param(_op(0, parents="yes"), "operations[0].parents", "true or false", id="parents-not-bool"),
    pytest.param(_op(2, missing_ok=1), "operations[2].missing_ok", "true or false", id="missing-ok-not-bool"),
    pytest.param(
        _op(1, require_absent=True, expected_sha256="0" * 64),
        "operations[1].require_absent",
        "contradicts",
        id="absent-and-expected",
    ),
    pytest.param(
        _op(0, expected_sha256="0" * 64), "operations[0].expected_sha256", "idempotent", id="mk-expected"
    ),
    pytest.param(
        _op(2, expected_sha256="xyz"), "operations[2].expected_sha256", "64 lowercase", id="expected-bad"
    ),
    # the staged payload
    pytest.param(
        _payload(lambda b: (b / "payload/results/energy.json").unlink()),
        "operations[1].source",
        "is absent",
        id="source-absent",
    ),
    pytest.param(
        _payload(lambda b: (b / "payload/results/energy.json").write_bytes(b"tampered")),
        "operations[1].sha256",
        "digests to",
        id="source-digest",
    ),
    pytest.param(
        _payload(_energy_is_a_directory),
        "operations[1].source",
        "regular file",
        id="put-file-source-dir",
    ),
    pytest.param(
        _tree_source_is_a_file,
        "operations[3].source",
        "must be a dir",
        id="put-tree-source-file",
    ),
    pytest.param(
        _payload(lambda b: os.symlink("/etc/passwd", b / "payload/stray")),
        "",
        "symbolic link",
        id="symlink-stray",
    ),
    pytest.param(_symlink_in_tree, "", "symbolic link", id="symlink-in-tree"),
    FIFO_CASE,
    pytest.param(
        _payload(lambda b: os.link(b / "payload/results/energy.json", b / "payload/hardlink")),
        "",
        "hard links",
        id="hard-link",
    ),
    pytest.param(
        _payload(lambda b: write_tree(b / "trash", {"x": b"x"})), "", "must be empty", id="trash-full"
    ),
    pytest.param(
        _payload(lambda b: (b / "trash").write_bytes(b"")), "trash", "empty directory", id="trash-file"
    ),
]


@pytest.mark.parametrize(("change", "member", "rule"), MANIFEST_CASES)
def test_every_manifest_rule_is_enforced(
    tmp_path: Path, change: Callable[[dict[str, Any], Path], None], member: str, rule: str
) -> None:
    bundle = _base(tmp_path)
    doc = bundle.document()
    change(doc, bundle.dir)
    with pytest.raises(TransactionError) as excinfo:
        validate_manifest(doc, bundle.dir, expected_data_generation=0)
    error = excinfo.value
    assert not isinstance(error, TransactionCorruptionError)
    assert error.code == "protocol_error"
    assert error.member == member
    assert rule in error.rule
    assert rule in str(error)


def test_an_error_names_the_operation_member_and_rule(tmp_path: Path) -> None:
    bundle = _base(tmp_path)
    doc = bundle.document()
    doc["operations"][1]["sha256"] = "nope"
    with pytest.raises(TransactionError) as excinfo:
        validate_manifest(doc, bundle.dir, expected_data_generation=0)
    assert (excinfo.value.operation, excinfo.value.member) == ("energy", "operations[1].sha256")
    assert str(excinfo.value) == (
        "invalid transaction: operation 'energy' member 'operations[1].sha256': "
        "must be 64 lowercase hexadecimal digits"
    )


def test_a_manifest_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TransactionError, match="JSON object"):
        validate_manifest([], tmp_path, expected_data_generation=0)  # type: ignore[arg-type]


def test_the_specification_example_and_an_empty_transaction_are_valid(tmp_path: Path) -> None:
    bundle = (
        Bundle(tmp_path / "bundle")
        .file("energy", "results/energy.json", b"{}\n")
        .remove("old-scratch", "scratch/obsolete.dat", missing_ok=True)
    )
    manifest = bundle.manifest()
    assert [(op.id, op.op, op.path) for op in manifest.operations] == [
        ("energy", "put-file", "results/energy.json"),
        ("old-scratch", "remove", "scratch/obsolete.dat"),
    ]
    assert manifest.operations[1].missing_ok is True
    assert repr(manifest) == f"<Manifest {TX_ID} generation=0 operations=2>"
    empty = {**bundle.document(), "operations": []}
    assert validate_manifest(empty, tmp_path / "nothing", expected_data_generation=0).operations == ()


def test_operations_below_an_earlier_make_dir_and_unknown_members_are_accepted(tmp_path: Path) -> None:
    bundle = _base(tmp_path)
    doc = bundle.document()
    doc["operations"][0]["future_member"] = {"ignored": True}
    doc["comment"] = "ignored"
    assert len(validate_manifest(doc, bundle.dir, expected_data_generation=0).operations) == 3


def test_a_resumed_replay_validates_without_the_payload(tmp_path: Path) -> None:
    bundle = _base(tmp_path)
    (bundle.dir / "payload/results/energy.json").unlink()  # already renamed into data/
    with pytest.raises(TransactionError, match="is absent"):
        bundle.manifest()
    assert len(bundle.manifest(check_payload=False).operations) == 3


def test_load_manifest_reads_untrusted_json(tmp_path: Path) -> None:
    bundle = _base(tmp_path).write()
    assert load_manifest(bundle.dir, expected_data_generation=0).id == TX_ID
    (bundle.dir / "manifest.json").write_text('{"a": 1, "a": 2}')
    with pytest.raises(TransactionError, match="duplicate"):
        load_manifest(bundle.dir, expected_data_generation=0)


# -- preconditions against data/ -------------------------------------------------------------------
PRECONDITION_CASES = [
    pytest.param(
        lambda b: b.tree("t", "missing/t", {"a": b"a"}, op="replace-tree"),
        {},
        "replace-tree replaces a tree in place",
        id="replace-tree-no-parent",
    ),
    pytest.param(
        lambda b: b.file("f", "x/y/z", b"1"),
        {"x": b"0"},
        "ancestor 'x' in data/ is not",
        id="put-parent-file",
    ),
    pytest.param(
        lambda b: b.tree("t", "x/t", {"a": b"a"}),
        {"x": None, "x/t": b"0"},
        "not an empty",
        id="put-tree-file",
    ),
    pytest.param(lambda b: b.make_dir("m", "a/b"), {}, "declare parents", id="make-dir-no-parent"),
    pytest.param(lambda b: b.make_dir("m", "f"), {"f": b"1"}, "not a directory", id="make-dir-over-file"),
    pytest.param(lambda b: b.file("f", "d", b"1"), {"d": None}, "not a regular file", id="put-file-over-dir"),
    pytest.param(
        lambda b: b.file("f", "x", b"1", require_absent=True), {"x": b"0"}, "require_absent", id="put-absent"
    ),
    pytest.param(
        lambda b: b.file("f", "x", b"1", expected_sha256=sha(b"other")),
        {"x": b"0"},
        "not expected",
        id="put-exp",
    ),
    pytest.param(
        lambda b: b.file("f", "x", b"1", expected_sha256=sha(b"0")), {}, "is absent but", id="put-exp-absent"
    ),
    pytest.param(
        lambda b: b.tree("t", "d", {"a": b"a"}), {"d/x": b"x"}, "use replace-tree", id="put-tree-full"
    ),
    pytest.param(
        lambda b: b.tree("t", "d", {"a": b"a"}, op="replace-tree"),
        {"d": b"f"},
        "replaces only a tree",
        id="rt-file",
    ),
    pytest.param(
        lambda b: b.tree("t", "d", {"a": b"a"}, op="replace-tree", expected_sha256="0" * 64),
        {"d/x": b"x"},
        "not expected",
        id="replace-tree-expected",
    ),
    pytest.param(lambda b: b.remove("r", "x"), {}, "missing_ok", id="remove-absent"),
    pytest.param(
        lambda b: b.remove("r", "d", expected_sha256="0" * 64),
        {"d/x": b"x"},
        "not expected",
        id="remove-expected",
    ),
    pytest.param(
        lambda b: b.file("f", "a/x", b"1"), {"a": b"file"}, "is not a directory", id="ancestor-file"
    ),
]


@pytest.mark.parametrize(("build", "files", "rule"), PRECONDITION_CASES)
def test_every_precondition_is_checked_before_committing(
    tmp_path: Path, build: Callable[[Bundle], Bundle], files: dict[str, bytes | None], rule: str
) -> None:
    data = tmp_path / "data"
    write_tree(data, files)
    bundle = build(Bundle(tmp_path / "bundle"))
    before = snapshot(data)
    with pytest.raises(TransactionError) as excinfo:
        validate_manifest(bundle.document(), bundle.dir, expected_data_generation=0, data_dir=data)
    assert rule in excinfo.value.rule
    assert excinfo.value.operation == bundle.ops[-1]["id"]
    assert snapshot(data) == before  # nothing was touched


def test_a_symlinked_ancestor_in_data_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_tree(data, {})
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", data / "link")
    bundle = Bundle(tmp_path / "bundle").file("f", "link/x", b"1")
    with pytest.raises(TransactionError, match="ancestor 'link'"):
        check_preconditions(data, bundle.manifest())


def test_data_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").write_bytes(b"")
    with pytest.raises(TransactionError, match="data/ must be a directory"):
        check_preconditions(tmp_path / "data", Bundle(tmp_path / "bundle").make_dir("m", "x").manifest())


def test_puts_below_earlier_make_dirs_and_over_empty_directories_pass(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_tree(data, {"empty": None, "old": b"0"})
    bundle = (
        Bundle(tmp_path / "bundle")
        .make_dir("deep", "a/b/c", parents=True)
        .file("f", "a/x", b"1")
        .tree("t", "empty", {"n": b"n"})
        .file("g", "old", b"1", expected_sha256=sha(b"0"))
        .tree("r", "fresh", {"n": b"n"}, op="replace-tree")
        .remove("gone", "nothing", missing_ok=True)
    )
    check_preconditions(data, bundle.manifest())
    check_preconditions(tmp_path / "no-data-yet", Bundle(tmp_path / "b2").make_dir("m", "x").manifest())


# -- replay: each operation, idempotence, changed --------------------------------------------------
INITIAL: dict[str, bytes | None] = {
    "keep.txt": b"keep",
    "old.txt": b"old",
    "old-tree/a": b"a",
    "old-tree/b/c": b"c",
    "gone.txt": b"gone",
    "gone-tree/x": b"x",
}
EXPECTED_DATA: dict[str, bytes | None] = {
    "keep.txt": b"keep",
    "new-tree": None,
    "new-tree/c": b"c",
    "new-tree/d": None,
    "new-tree/d/e": b"e",
    "new-tree/empty": None,
    "old-tree": None,
    "old-tree/n": b"n",
    "old.txt": b"new",
    "results": None,
    "results/relax": None,
    "results/relax/energy.json": b'{"e":-1}',
}
EXPECTED_TRASH: dict[str, bytes | None] = {
    "rm-file": None,
    "rm-file/removed": b"gone",
    "rm-tree": None,
    "rm-tree/removed": None,
    "rm-tree/removed/x": b"x",
    "swap": None,
    "swap/old": None,
    "swap/old/a": b"a",
    "swap/old/b": None,
    "swap/old/b/c": b"c",
}


def full_scenario(root: Path) -> tuple[Path, Bundle]:
    """data/ with something for every operation type to do, and a bundle doing all of it."""
    data = root / "data"
    write_tree(data, INITIAL)
    bundle = (
        Bundle(root / "bundle")
        .make_dir("mk", "results/relax", parents=True)
        .file("energy", "results/relax/energy.json", b'{"e":-1}')
        .file("replace", "old.txt", b"new", expected_sha256=sha(b"old"))
        .tree("tree", "new-tree", {"c": b"c", "d/e": b"e", "empty": None})
        .tree(
            "swap", "old-tree", {"n": b"n"}, op="replace-tree", expected_sha256=tree_digest(data / "old-tree")
        )
        .remove("rm-file", "gone.txt", expected_sha256=sha(b"gone"))
        .remove("rm-tree", "gone-tree", expected_sha256=tree_digest(data / "gone-tree"))
        .remove("rm-none", "never", missing_ok=True)
        .write()
    )
    check_preconditions(data, bundle.manifest())
    return data, bundle


def test_every_operation_is_applied_in_order(tmp_path: Path) -> None:
    data, bundle = full_scenario(tmp_path)
    result = run_replay(data, bundle)
    assert snapshot(data) == EXPECTED_DATA
    assert snapshot(bundle.dir / "trash") == EXPECTED_TRASH
    assert snapshot(bundle.dir / "payload") == {"results": None, "results/relax": None}  # every source moved
    assert result.changed is True
    assert result.touched == [data / op["path"] for op in bundle.ops]
    # make-dir (one step), three puts, replace-tree (two renames), two removes; missing_ok needs none
    assert result.performed == 8


def test_replay_again_changes_nothing_and_reports_the_same(tmp_path: Path) -> None:
    data, bundle = full_scenario(tmp_path)
    first = run_replay(data, bundle)
    clock = ManualClock()
    second = run_replay(data, bundle, clock=clock)
    assert (second.changed, second.touched, second.performed) == (first.changed, first.touched, 0)
    assert snapshot(data) == EXPECTED_DATA
    assert snapshot(bundle.dir / "trash") == EXPECTED_TRASH
    assert clock.sleeps == []


def test_changed_is_false_only_when_nothing_was_contributed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    bundle = Bundle(tmp_path / "bundle").remove("r", "nothing", missing_ok=True)
    assert run_replay(data, bundle).changed is False
    empty = Bundle(tmp_path / "empty")
    result = run_replay(tmp_path / "data2", empty)
    assert (result.changed, result.touched) == (False, [])
    assert not (tmp_path / "data2").exists()  # an empty transaction does not even create data/
    assert next_data_generation(7, True) == 8
    assert next_data_generation(7, False) == 7


def test_replay_creates_data_when_it_does_not_exist_yet(tmp_path: Path) -> None:
    bundle = Bundle(tmp_path / "bundle").file("f", "x", b"1")
    run_replay(tmp_path / "data", bundle)
    assert snapshot(tmp_path / "data") == {"x": b"1"}


def test_put_tree_over_an_empty_directory_and_replace_tree_without_an_old_tree(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_tree(data, {"empty": None})
    bundle = (
        Bundle(tmp_path / "bundle")
        .tree("t", "empty", {"a": b"a"})
        .tree("r", "r", {"b": b"b"}, op="replace-tree")
    )
    run_replay(data, bundle)
    assert snapshot(data) == {"empty": None, "empty/a": b"a", "r": None, "r/b": b"b"}
    assert not trash_path(bundle.dir, bundle.manifest(check_payload=False).operations[1]).exists()


def test_a_forward_replay_reads_each_source_once_and_no_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checked-identity invariant: an installed source is recognized without digesting it again."""
    data, bundle = full_scenario(tmp_path)
    digested: list[Path] = []
    real = digest_of

    def counting(path: Path, kind: str) -> str:
        digested.append(path)
        return real(path, kind)

    monkeypatch.setattr(_transactions, "digest_of", counting)
    run_replay(data, bundle)
    sources = [bundle.dir / op["source"] for op in bundle.ops if "source" in op]
    old = [data / "old.txt", data / "old-tree", data / "gone.txt", data / "gone-tree"]  # expected_sha256
    assert sorted(digested) == sorted(sources + old)


# -- resumable midpoints, constructed by hand ------------------------------------------------------
def _apply_by_hand(bundle: Bundle, data: Path, op_id: str, *, steps: int) -> None:
    """Perform the first ``steps`` renames of one operation as a crashed replayer would have."""
    op = next(o for o in bundle.manifest(check_payload=False).operations if o.id == op_id)
    trash = trash_path(bundle.dir, op)
    moves: list[tuple[Path, Path]] = []
    if op.op in ("remove", "replace-tree"):
        moves.append((data / op.path, trash))
    if op.source is not None:
        moves.append((bundle.dir / op.source, data / op.path))
    for source, target in moves[:steps]:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(source, target)


@pytest.mark.parametrize(
    ("op_id", "steps"),
    [
        ("energy", 1),
        ("replace", 1),
        ("tree", 1),
        ("swap", 1),  # the midpoint: old tree in trash, new one not yet installed
        ("swap", 2),
        ("rm-file", 1),
        ("rm-tree", 1),
    ],
)
def test_every_midpoint_resumes_to_the_same_result(tmp_path: Path, op_id: str, steps: int) -> None:
    data, bundle = full_scenario(tmp_path)
    ops = [op["id"] for op in bundle.ops]
    # everything before op_id applied by an earlier replayer, op_id itself part-way
    run_replay(data, Bundle.of(bundle.dir, bundle.ops[: ops.index(op_id)]))
    _apply_by_hand(bundle, data, op_id, steps=steps)
    clock = ManualClock()
    run_replay(data, bundle, clock=clock)
    assert snapshot(data) == EXPECTED_DATA
    assert snapshot(bundle.dir / "trash") == EXPECTED_TRASH
    assert clock.sleeps == []


def test_a_trash_directory_left_by_a_crash_is_reused(tmp_path: Path) -> None:
    data, bundle = full_scenario(tmp_path)
    (bundle.dir / "trash/swap").mkdir(parents=True)
    (bundle.dir / "trash/rm-file").mkdir()
    run_replay(data, bundle)
    assert snapshot(bundle.dir / "trash") == EXPECTED_TRASH


def test_a_make_dir_whose_parent_was_made_is_finished(tmp_path: Path) -> None:
    data, bundle = full_scenario(tmp_path)
    (data / "results").mkdir()
    run_replay(data, bundle)
    assert snapshot(data) == EXPECTED_DATA


# -- impossible combinations -----------------------------------------------------------------------
def _corrupt_put_source_gone(data: Path, bundle: Bundle) -> None:
    (bundle.dir / "payload/results/relax/energy.json").unlink()


def _corrupt_put_other_content(data: Path, bundle: Bundle) -> None:
    (data / "results/relax").mkdir(parents=True)
    os.rename(bundle.dir / "payload/results/relax/energy.json", data / "results/relax/energy.json")
    (data / "results/relax/energy.json").write_bytes(b"tampered")


def _corrupt_remove_both_absent(data: Path, bundle: Bundle) -> None:
    (data / "gone.txt").unlink()


def _corrupt_remove_both_present(data: Path, bundle: Bundle) -> None:
    write_tree(bundle.dir / "trash/rm-file", {"removed": b"gone"})


def _corrupt_replace_tree_all_present(data: Path, bundle: Bundle) -> None:
    write_tree(bundle.dir / "trash/swap/old", {"a": b"a"})


def _corrupt_make_dir_file(data: Path, bundle: Bundle) -> None:
    write_tree(data, {"results/relax": b"file"})


def _corrupt_source_digest(data: Path, bundle: Bundle) -> None:
    (bundle.dir / "payload/old.txt").write_bytes(b"changed after validation")


def _corrupt_parent_a_file(data: Path, bundle: Bundle) -> None:
    bundle.ops[0] = {"id": "mk", "op": "make-dir", "path": "unrelated"}
    write_tree(data, {"results": b"not a directory"})


def _corrupt_replace_expected(data: Path, bundle: Bundle) -> None:
    (data / "old-tree/a").write_bytes(b"edited")


CORRUPTIONS = [
    pytest.param(_corrupt_put_source_gone, "energy", "absent", id="put-source-and-destination-absent"),
    pytest.param(_corrupt_put_other_content, "energy", "not holding sha256", id="put-destination-other"),
    pytest.param(_corrupt_remove_both_absent, "rm-file", "trash entry", id="remove-both-absent"),
    pytest.param(_corrupt_remove_both_present, "rm-file", "exists too", id="remove-both-present"),
    pytest.param(_corrupt_replace_tree_all_present, "swap", "again", id="replace-tree-all-present"),
    pytest.param(_corrupt_make_dir_file, "mk", "regular file", id="make-dir-over-file"),
    pytest.param(_corrupt_source_digest, "replace", "digests to", id="source-digest"),
    pytest.param(_corrupt_parent_a_file, "energy", "ancestor", id="parent-a-file"),
    pytest.param(_corrupt_replace_expected, "swap", "expected_sha256", id="old-tree-changed"),
]


@pytest.mark.parametrize(("damage", "op_id", "found"), CORRUPTIONS)
def test_an_impossible_combination_is_corruption_after_the_deadline(
    tmp_path: Path, damage: Callable[[Path, Bundle], None], op_id: str, found: str
) -> None:
    data, bundle = full_scenario(tmp_path)
    damage(data, bundle)
    clock = ManualClock()
    with pytest.raises(TransactionCorruptionError) as excinfo:
        run_replay(data, bundle, clock=clock)
    error = excinfo.value
    assert error.code == "transaction_corruption"
    assert error.operation == op_id
    assert found in error.rule
    assert "re-probes" in error.rule
    assert clock.sleeps == backoff_schedule(DEADLINE)  # every bounded re-probe, and no real sleeping
    assert sum(clock.sleeps) == pytest.approx(DEADLINE)


def test_a_state_that_becomes_visible_during_the_re_probes_is_accepted(tmp_path: Path) -> None:
    data, bundle = full_scenario(tmp_path)
    hidden = tmp_path / "hidden-energy.json"
    os.rename(bundle.dir / "payload/results/relax/energy.json", hidden)  # "not yet visible"
    clock = ManualClock()

    def appear(c: ManualClock) -> None:
        if len(c.sleeps) == 3:
            os.rename(hidden, bundle.dir / "payload/results/relax/energy.json")

    clock.on_sleep.append(appear)
    run_replay(data, bundle, clock=clock)
    assert snapshot(data) == EXPECTED_DATA
    assert len(clock.sleeps) == 3


def test_a_failed_rename_is_resolved_by_what_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replayer's rename lands first and ours reports ENOENT: re-probe, done, no waiting."""
    data, bundle = full_scenario(tmp_path)
    real = _fsops.rename
    calls: list[Path] = []

    def racing(src: Path, dst: Path, *, durable: bool, noreplace: bool = True) -> None:
        calls.append(Path(dst))
        if len(calls) == 1:
            real(src, dst, durable=durable, noreplace=noreplace)  # the other replayer wins ...
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(src))  # ... we fail
        real(src, dst, durable=durable, noreplace=noreplace)

    monkeypatch.setattr(_fsops, "rename", racing)
    clock = ManualClock()
    run_replay(data, bundle, clock=clock)
    assert snapshot(data) == EXPECTED_DATA
    assert clock.sleeps == []


def test_a_slow_replayer_never_moves_a_freshly_installed_tree_to_trash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between our trash probe and our destination probe another replayer completes the operation."""
    data = tmp_path / "data"
    write_tree(data, {})
    bundle = Bundle(tmp_path / "bundle").tree("swap", "t", {"n": b"n"}, op="replace-tree")
    real_kind = path_kind
    interleaved: list[bool] = []

    def kind(path: Path) -> str:
        found = real_kind(path)
        if path.name == "old" and not interleaved:
            interleaved.append(True)
            run_replay(data, bundle)  # the other replayer, start to finish
        return found

    monkeypatch.setattr(_transactions, "path_kind", kind)
    result = run_replay(data, bundle)
    assert interleaved == [True]
    assert result.performed == 0
    assert snapshot(data) == {"t": None, "t/n": b"n"}
    assert not (bundle.dir / "trash/swap/old").exists()


def test_steps_that_never_settle_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Something keeps undoing the operation: replay stops after a bounded number of steps."""
    data, bundle = full_scenario(tmp_path)
    monkeypatch.setattr(_fsops, "make_dir", lambda *_, **__: True)  # "succeeds" without effect
    clock = ManualClock()
    with pytest.raises(TransactionCorruptionError, match="did not settle after 4 steps") as excinfo:
        run_replay(data, bundle, clock=clock)
    assert excinfo.value.operation == "mk"
    assert sum(clock.sleeps) == pytest.approx(DEADLINE)


def test_a_symlinked_trash_directory_is_never_followed(tmp_path: Path) -> None:
    data, bundle = full_scenario(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (bundle.dir / "trash").mkdir()
    os.symlink(tmp_path / "elsewhere", bundle.dir / "trash/rm-file")
    with pytest.raises(TransactionCorruptionError, match="is not a directory") as excinfo:
        run_replay(data, bundle)
    assert excinfo.value.operation == "rm-file"
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert (data / "gone.txt").read_bytes() == b"gone"


def test_storage_errors_are_not_mistaken_for_races(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, bundle = full_scenario(tmp_path)

    def broken(*_: Any, **__: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(_fsops, "rename", broken)
    with pytest.raises(OSError, match="Input/output"):
        run_replay(data, bundle)


# -- crash injection through the seam --------------------------------------------------------------
REPLAY_CODE = """
from pathlib import Path
from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.publish._transactions import load_manifest, replay
bundle, data = Path({bundle!r}), Path({data!r})
manifest = load_manifest(bundle, expected_data_generation=0, check_payload=False)
replay(data, bundle, manifest, durable={durable}, deadline_seconds=0.0, clock=SYSTEM_CLOCK)
"""


def _prefix_applied(
    initial: dict[str, bytes | None], crashed: dict[str, bytes | None], ops: list[dict[str, Any]]
) -> bool:
    """Each operation is untouched or complete, in manifest order; one may be in progress."""

    def part(snap: dict[str, bytes | None], op: dict[str, Any]) -> dict[str, bytes | None]:
        deep = op["op"] != "make-dir"
        return {k: v for k, v in snap.items() if k == op["path"] or (deep and k.startswith(op["path"] + "/"))}

    started_pending = False
    for op in ops:
        before, after, now = part(initial, op), part(EXPECTED_DATA, op), part(crashed, op)
        if before == after:
            continue
        if started_pending:
            if now != before:
                return False
        elif now != after:
            started_pending = True
            if now != before and not (op["op"] == "replace-tree" and now == {}):
                return False
    return True


def test_the_all_or_none_oracle_rejects_a_state_out_of_order(tmp_path: Path) -> None:
    data, bundle = full_scenario(tmp_path)
    initial = snapshot(data)
    assert _prefix_applied(initial, initial, bundle.ops)
    (data / "gone.txt").unlink()  # a later operation applied before the earlier ones
    assert not _prefix_applied(initial, snapshot(data), bundle.ops)
    finished, done = full_scenario(tmp_path / "finished")
    run_replay(finished, done)
    assert _prefix_applied(initial, snapshot(finished), bundle.ops)


def replay_mutations(template: Path, work: Path, durable: bool) -> list[str]:
    """Replay a copy of ``template`` (``data/`` and ``bundle/``) at ``work``; its mutation trace."""
    shutil.copytree(template, work, symlinks=True)
    code = REPLAY_CODE.format(bundle=str(work / "bundle"), data=str(work / "data"), durable=durable)
    return count_mutations(code, work.parent / f"{work.name}.trace")


def replay_crashed(template: Path, case: Path, durable: bool, after: int) -> Path:
    """A copy of ``template`` at ``case`` whose replay was stopped right after mutation ``after``."""
    shutil.copytree(template, case, symlinks=True)
    run_crashing(
        REPLAY_CODE.format(bundle=str(case / "bundle"), data=str(case / "data"), durable=durable), after
    )
    return case


@pytest.mark.parametrize("durable", [False, True])
def test_a_crash_after_every_mutation_resumes_to_the_uncrashed_result(tmp_path: Path, durable: bool) -> None:
    template = tmp_path / "template"
    _, bundle = full_scenario(template)
    initial = snapshot(template / "data")
    mutations = replay_mutations(template, tmp_path / "count", durable)
    # make-dir 2, three puts 3, replace-tree 4 (trash/, trash/swap/, two renames), removes 2 x 2
    assert len(mutations) == 13
    assert snapshot(tmp_path / "count/data") == EXPECTED_DATA
    for k in range(1, len(mutations) + 1):
        case = replay_crashed(template, tmp_path / f"crash-{k}", durable, k)
        assert _prefix_applied(initial, snapshot(case / "data"), bundle.ops), k
        run_replay(case / "data", Bundle.of(case / "bundle", bundle.ops))
        assert snapshot(case / "data") == EXPECTED_DATA, k
        assert snapshot(case / "bundle/trash") == EXPECTED_TRASH, k


# -- concurrent replayers --------------------------------------------------------------------------
BARRIER_CODE = """
import os, sys
from pathlib import Path
from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.publish._transactions import load_manifest, replay
bundle, data = Path({bundle!r}), Path({data!r})
manifest = load_manifest(bundle, expected_data_generation=0, check_payload=False)
os.write({ready}, b"x")
os.read({go}, 1)  # returns at EOF, when the test closes the other end: everyone starts together
result = replay(data, bundle, manifest, durable=False, deadline_seconds=5.0, clock=SYSTEM_CLOCK)
print(result.performed, result.changed)
"""


def replay_concurrently(data: Path, bundle: Bundle, count: int = 3) -> list[tuple[int, bool]]:
    """``count`` replayer processes released at one instant; each one's (performed, changed)."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    code = BARRIER_CODE.format(bundle=str(bundle.dir), data=str(data), ready=ready_w, go=go_r)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(ready_w, go_r),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(count)
    ]
    os.close(ready_w)
    os.close(go_r)
    arrived = b""
    while len(arrived) < count:
        chunk = os.read(ready_r, count)
        assert chunk, "a replayer died before the barrier"
        arrived += chunk
    os.close(go_w)  # release them all at once
    os.close(ready_r)
    outputs = [process.communicate(timeout=60) for process in processes]
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()
    return [(int(out.split()[0]), out.split()[1] == b"True") for out, _ in outputs]


@pytest.mark.parametrize("round_", range(3))
def test_three_replayers_of_one_abandoned_bundle_converge(tmp_path: Path, round_: int) -> None:
    data, bundle = full_scenario(tmp_path)
    results = replay_concurrently(data, bundle)
    assert all(changed for _, changed in results)
    # Every step happened exactly once among them, whoever did it (a make-dir may be raced: exist_ok).
    assert 8 <= sum(performed for performed, _ in results) <= 8 + 2
    assert snapshot(data) == EXPECTED_DATA
    assert snapshot(bundle.dir / "trash") == EXPECTED_TRASH


# -- durability ------------------------------------------------------------------------------------
def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    synced: list[Path] = []
    real = os.fsync

    def recording(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return synced


def _must_be_synced(data: Path, bundle: Path) -> set[Path]:
    paths = {
        data.parent,
        data,
        data / "results",
        data / "results/relax",
        data / "results/relax/energy.json",
        data / "old.txt",
        data / "new-tree",
        data / "old-tree",
        bundle / "payload/results/relax",  # the source parents, which lost their entries
        bundle / "payload",
        bundle / "trash",  # the trash every removal and replacement moved into
        bundle / "trash/swap",
        bundle / "trash/rm-file",
        bundle / "trash/rm-tree",
    }
    return {path.resolve() for path in paths}


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name synchronized files")
@pytest.mark.parametrize("predecessor", [False, True], ids=["fresh", "after-a-crashed-predecessor"])
def test_durable_replay_synchronizes_every_destination_and_directory_it_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, predecessor: bool
) -> None:
    data, bundle = full_scenario(tmp_path)
    if predecessor:
        run_replay(data, bundle, durable=False)  # applied everything, synchronized nothing
    synced = _record_fsyncs(monkeypatch)
    result = run_replay(data, bundle, durable=True)
    assert result.performed == (0 if predecessor else 8)
    assert _must_be_synced(data, bundle.dir) <= set(synced)


def test_a_non_durable_replay_synchronizes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, bundle = full_scenario(tmp_path)
    synced = _record_fsyncs(monkeypatch)
    run_replay(data, bundle, durable=False)
    assert synced == []


# -- isolated workdirs -----------------------------------------------------------------------------
def test_an_isolated_workdir_is_a_private_copy_of_data(tmp_path: Path) -> None:
    data, workdir = tmp_path / "data", tmp_path / "run.x"
    write_tree(data, {"a.txt": b"a", "sub/b.bin": b"\0" * 70000, "empty": None})
    (data / "sub/b.bin").chmod(0o751)
    os.utime(data / "a.txt", ns=(1, 1_000_000_000))
    workdir.mkdir()
    assert populate_isolated_workdir(data, workdir) == 2
    assert snapshot(workdir) == snapshot(data)
    for relative in ("a.txt", "sub/b.bin"):
        original, copied = os.stat(data / relative), os.stat(workdir / relative)
        assert original.st_ino != copied.st_ino  # Invariant: never a hard link into committed data
        assert copied.st_nlink == 1
        assert copied.st_mode == original.st_mode
    assert os.stat(workdir / "a.txt").st_mtime_ns == 1_000_000_000
    (workdir / "a.txt").write_bytes(b"changed through the workdir")
    assert (data / "a.txt").read_bytes() == b"a"


def test_populating_from_absent_data_copies_nothing_and_symlinks_are_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    assert populate_isolated_workdir(tmp_path / "data", tmp_path / "run") == 0
    write_tree(tmp_path / "data", {})
    os.symlink("/etc/passwd", tmp_path / "data/link")
    with pytest.raises(TransactionError, match="symbolic link"):
        populate_isolated_workdir(tmp_path / "data", tmp_path / "run")
    os.symlink(tmp_path / "run", tmp_path / "linked-data")
    with pytest.raises(TransactionError, match="not a directory"):
        populate_isolated_workdir(tmp_path / "linked-data", tmp_path / "run")


def test_prepare_attempt_populates_a_transactional_isolated_workdir(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws, workdir={"mode": "isolated"}, data={"mode": "transactional"})
    write_tree(job_dir / "data", {"results/energy.json": b"-10.8"})
    prepared = prepare_attempt(_plan(ws, job, job_dir, data_generation=1))
    assert snapshot(prepared.workdir) == {"results": None, "results/energy.json": b"-10.8"}
    plain, plain_dir = _payload_job(ws, workdir={"mode": "isolated"})
    write_tree(plain_dir / "data", {"x": b"x"})
    assert snapshot(prepare_attempt(_plan(ws, plain, plain_dir)).workdir) == {}  # data.mode none: empty


def test_unusable_committed_data_fails_the_attempt_with_protocol_error(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws, workdir={"mode": "isolated"}, data={"mode": "transactional"})
    write_tree(job_dir / "data", {})
    os.mkfifo(job_dir / "data/fifo")
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir, data_generation=1))
    assert excinfo.value.code == "protocol_error"
    assert excinfo.value.details["reason"] == "data_unavailable"
