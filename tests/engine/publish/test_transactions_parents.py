"""Transaction puts create the missing parents of their destination (DECISIONS D15), idempotently.

The specification's own example puts ``results/energy.json`` into a fresh ``data/``; a runner written
for another implementation of the protocol publishes exactly that. Here a put-file and a put-tree land
two and three levels below directories that do not exist yet, and a later put-file lands in a directory
the first one created. Replay is checked the way the rest of the transaction suite checks it: again
after completion (nothing changes), after a crash at every mutation (resumed to the same result, each
operation untouched or complete in manifest order), and by three replayers at once. What stays refused:
a parent that exists as a file, and replace-tree without its parent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.publish._transactions import (
    TransactionCorruptionError,
    TransactionError,
    check_preconditions,
    validate_manifest,
)

from tests.engine.publish.test_transactions import (
    TX_ID,
    Bundle,
    replay_concurrently,
    replay_crashed,
    replay_mutations,
    run_replay,
    sha,
    snapshot,
    write_tree,
)

ENERGY = b'{"energy":-10.8}\n'
EXPECTED: dict[str, bytes | None] = {
    "keep.txt": b"keep",
    "restart": None,
    "restart/run1": None,
    "restart/run1/tree": None,
    "restart/run1/tree/CHGCAR": b"charge",
    "restart/run1/tree/sub": None,
    "restart/run1/tree/sub/WAVECAR": b"waves",
    "results": None,
    "results/relax": None,
    "results/relax/energy.json": ENERGY,
    "results/relax/forces.json": b"forces",
}


def scenario(root: Path) -> tuple[Path, Bundle]:
    """data/ without any of the destinations' parents, and a bundle putting into them."""
    data = root / "data"
    write_tree(data, {"keep.txt": b"keep"})
    bundle = (
        Bundle(root / "bundle")
        .file("energy", "results/relax/energy.json", ENERGY)
        .tree("restart", "restart/run1/tree", {"CHGCAR": b"charge", "sub/WAVECAR": b"waves"})
        .file("forces", "results/relax/forces.json", b"forces")  # below a parent "energy" creates
        .write()
    )
    check_preconditions(data, bundle.manifest())
    return data, bundle


def test_the_specification_example_lands_in_a_fresh_data_directory(tmp_path: Path) -> None:
    bundle = Bundle(tmp_path / "bundle").file("energy", "results/energy.json", ENERGY)
    document = {**bundle.document(3), "id": TX_ID}
    manifest = validate_manifest(document, bundle.dir, expected_data_generation=3, data_dir=tmp_path / "data")
    assert [op.path for op in manifest.operations] == ["results/energy.json"]
    result = run_replay(tmp_path / "data", bundle)
    assert snapshot(tmp_path / "data") == {"results": None, "results/energy.json": ENERGY}
    assert (result.changed, result.performed) == (True, 1)


def test_puts_create_missing_parents_and_a_second_replay_changes_nothing(tmp_path: Path) -> None:
    data, bundle = scenario(tmp_path)
    first = run_replay(data, bundle)
    assert snapshot(data) == EXPECTED
    assert (first.changed, first.performed) == (True, 3)  # a put with its parents is one step
    clock = ManualClock()
    second = run_replay(data, bundle, clock=clock)
    assert (second.changed, second.touched, second.performed) == (True, first.touched, 0)
    assert snapshot(data) == EXPECTED and clock.sleeps == []


def test_parents_a_crashed_replayer_left_are_reused(tmp_path: Path) -> None:
    data, bundle = scenario(tmp_path)
    (data / "results/relax").mkdir(parents=True)  # created, then the replayer died before its rename
    (data / "restart").mkdir()
    run_replay(data, bundle)
    assert snapshot(data) == EXPECTED


@pytest.mark.parametrize(
    ("files", "op_id", "op", "found"),
    [
        ({"results": b"a file"}, "energy", "put-file", "ancestor 'results' in data/ is not a directory"),
        ({"restart/run1": b"a file"}, "restart", "put-tree", "ancestor 'restart/run1' in data/ is not"),
    ],
    ids=["put-file", "put-tree"],
)
def test_a_parent_that_exists_as_a_file_is_still_refused(
    tmp_path: Path, files: dict[str, bytes | None], op_id: str, op: str, found: str
) -> None:
    data, bundle = scenario(tmp_path)
    write_tree(data, files)
    before = snapshot(data)
    with pytest.raises(TransactionError) as excinfo:
        check_preconditions(data, bundle.manifest())
    assert (excinfo.value.operation, found in excinfo.value.rule) == (op_id, True), excinfo.value.rule
    assert snapshot(data) == before
    clock = ManualClock()
    with pytest.raises(TransactionCorruptionError) as replayed:  # and replay never guesses either
        run_replay(data, Bundle.of(bundle.dir, [o for o in bundle.ops if o["op"] == op]), clock=clock)
    assert replayed.value.operation == op_id and "ancestor" in replayed.value.rule


def test_a_symlinked_parent_a_racer_planted_is_never_followed(tmp_path: Path) -> None:
    data, bundle = scenario(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, data / "results")
    with pytest.raises(TransactionCorruptionError, match="symbolic link"):
        run_replay(data, bundle)
    assert list(elsewhere.iterdir()) == []


def test_replace_tree_still_needs_its_parent(tmp_path: Path) -> None:
    bundle = Bundle(tmp_path / "bundle").tree("swap", "a/b", {"x": b"x"}, op="replace-tree")
    with pytest.raises(TransactionError, match="replace-tree replaces a tree in place"):
        check_preconditions(tmp_path / "data", bundle.manifest())
    with pytest.raises(TransactionCorruptionError, match="never creates parents"):
        run_replay(tmp_path / "data", bundle)


def _complete_in_order(crashed: dict[str, bytes | None], ops: list[dict[str, Any]]) -> bool:
    """Each put is absent or whole, in manifest order; only directories may stand ahead of them."""
    done = []
    for op in ops:
        mine = {k: v for k, v in EXPECTED.items() if k == op["path"] or k.startswith(op["path"] + "/")}
        now = {k: v for k, v in crashed.items() if k in mine}
        if now not in ({}, mine):
            return False
        done.append(now == mine)
    files = {k for k, v in crashed.items() if v is not None}
    return done == sorted(done, reverse=True) and files <= {k for k, v in EXPECTED.items() if v is not None}


@pytest.mark.parametrize("durable", [False, True])
def test_a_crash_after_every_mutation_resumes_to_the_same_result(tmp_path: Path, durable: bool) -> None:
    template = tmp_path / "template"
    _, bundle = scenario(template)
    mutations = replay_mutations(template, tmp_path / "count", durable)
    # results/, results/relax/, energy; restart/, restart/run1/, the tree; forces
    assert len(mutations) == 7
    assert snapshot(tmp_path / "count/data") == EXPECTED
    for k in range(1, len(mutations) + 1):
        case = replay_crashed(template, tmp_path / f"crash-{k}", durable, k)
        assert _complete_in_order(snapshot(case / "data"), bundle.ops), k
        run_replay(case / "data", Bundle.of(case / "bundle", bundle.ops))
        assert snapshot(case / "data") == EXPECTED, k


def test_three_replayers_create_each_parent_once_and_converge(tmp_path: Path) -> None:
    data, bundle = scenario(tmp_path)
    results = replay_concurrently(data, bundle)
    assert all(changed for _, changed in results)
    assert sum(performed for performed, _ in results) == 3  # each put renamed exactly once among them
    assert snapshot(data) == EXPECTED


def test_the_manifest_records_nothing_about_the_parents(tmp_path: Path) -> None:
    """Deterministic from the manifest: no operation, member or scratch path names a created parent."""
    data, bundle = scenario(tmp_path)
    before = json.loads((bundle.dir / "manifest.json").read_text())
    run_replay(data, bundle)
    assert json.loads((bundle.dir / "manifest.json").read_text()) == before
    assert snapshot(bundle.dir / "trash") == {}
    assert before["operations"][0] == {
        "id": "energy",
        "op": "put-file",
        "source": "payload/results/relax/energy.json",
        "path": "results/relax/energy.json",
        "sha256": sha(ENERGY),
    }
