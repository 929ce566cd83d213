"""Hostile publications: an outcome, its spawn set, a child's job.json and a transaction manifest, generated.

A real attempt publishes through the Python SDK (``publication.py``); each example replaces one document
of that publication with hostile bytes (``tests/strategies.py``: the real document mutated, its bytes
broken, junk) and runs the manager's commit step 1 on it. The verdict is either an accepted outcome or
the ``protocol_error`` the manager would commit, whose message names the document and a member the
schema finds at fault; any other exception would reach the manager as a traceback. Step 1 reads only:
the whole workspace is the same afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hostile.fuzzkit import assert_clear_refusal, unchanged
from tests.hostile.publication import Published, published_attempt
from tests.strategies import hostile_bytes


def _judge(published: Published, target: Path, data: bytes, *, document: str, schema: str | None) -> None:
    """Publish ``data`` as ``target`` and run step 1: accepted, or refused clearly; nothing written."""
    original = target.read_bytes()
    target.write_bytes(data)
    try:
        with unchanged(published.state.workspace.root):
            refusal = published.refusal()
        if refusal is not None:
            assert_clear_refusal(refusal, document=document, schema=schema, data=data)
    finally:
        target.write_bytes(original)


def _fuzz(published: Published, target: Path, *, document: str, schema: str | None) -> Callable[[], None]:
    base = json.loads(target.read_bytes())

    @given(hostile_bytes([base]))
    def run(data: bytes) -> None:
        _judge(published, target, data, document=document, schema=schema)

    return run


@pytest.mark.parametrize("publication", ["children", "transaction", "plain"])
def test_a_hostile_outcome_json_is_refused_clearly(tmp_path: Path, publication: str) -> None:
    published = published_attempt(tmp_path, publication)
    _fuzz(published, published.ready / "outcome.json", document="outcome", schema="outcome")()


def test_a_hostile_spawn_json_is_refused_clearly(tmp_path: Path) -> None:
    published = published_attempt(tmp_path, "children")
    _fuzz(published, published.ready / "children" / "spawn.json", document="spawn", schema="spawn")()


def test_a_hostile_child_job_json_is_refused_clearly(tmp_path: Path) -> None:
    published = published_attempt(tmp_path, "children")
    bundles = sorted((published.ready / "children" / "jobs").iterdir())
    base = [json.loads((bundle / "job.json").read_bytes()) for bundle in bundles]

    @given(st.sampled_from(bundles), hostile_bytes(base))
    def run(bundle: Path, data: bytes) -> None:
        _judge(published, bundle / "job.json", data, document="job.json", schema="job")

    run()


def test_a_hostile_transaction_manifest_is_refused_clearly(tmp_path: Path) -> None:
    published = published_attempt(tmp_path, "transaction")
    manifest = published.ready / "transaction" / "manifest.json"
    _fuzz(published, manifest, document="transaction", schema="transaction")()
