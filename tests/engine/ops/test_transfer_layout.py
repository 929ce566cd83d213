"""The flat bundle layout, and the layout before it still read: nothing in flight is stranded by an upgrade.

A detach now makes one directory in the source (``.httk-transfer/``, with ``runner.<name>`` beside the
documents) and keeps the sealed original as ``transfers/outgoing/<transfer-id>/`` itself. Bundles and
source trees made by the code before it carry runners as ``.httk-transfer/runners/<name>`` and nest
the original as ``outgoing/<transfer-id>/<job-key>/``; each test below rewrites a fresh detach into
that older shape, exactly as the previous code left it, and checks that import, acknowledgement,
abort, listing and collection still handle it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._sealed import SEALED_DIR, sealed_markers
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.maintenance._gc import collect_garbage
from httk.workflow.engine.ops._transfer_detach import detach_jobs
from httk.workflow.engine.ops._transfer_import import ImportStatus, import_bundles
from httk.workflow.engine.ops._transfers import abort_transfer, list_transfers, show_transfer
from httk.workflow.engine.publish._submit import Submitter
from httk.workflow.protocol import TransferError

from tests.engine.maintenance.test_gc import AGGRESSIVE, make_old_tree, set_retention
from tests.runners import RUNNER_NAME, current_marker, job_key, publish_scripted_runner, scripted_job, submit
from tests.transferkit import run_manager, transfer_workspace


@pytest.fixture(params=["tagged", "untagged"])
def detached(
    tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[Path, Path, Path, str, str, dict[str, Any]]:
    """A finished job of workspace ``a`` detached into ``out``: (a, b, out, key, transfer id, job). An
    untagged job's key is a bare UUID, like the transfer id beside it."""
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    source = transfer_workspace(a)
    transfer_workspace(b).close()
    out.mkdir()
    job = scripted_job(
        {"prepare": {"action": "succeed"}}, publish_scripted_runner(source, tmp_path / "scratch")
    )
    if request.param == "untagged":
        del job["tag"]
    submit(source, job)
    source.close()
    run_manager(a)
    [result] = detach_jobs(attach(a), [job_key(job)], out)
    return a, b, out, job_key(job), result.transfer_id, job


def test_a_detach_makes_the_flat_layout(detached: tuple[Path, Path, Path, str, str, dict[str, Any]]) -> None:
    a, _b, out, key, transfer_id, _job = detached
    original = a / ".httk-workflow" / "transfers" / "outgoing" / transfer_id
    for bundle in (original, out / key):
        entries = sorted(os.listdir(bundle / SEALED_DIR))
        assert [name for name in entries if not name.startswith(key)] == [
            "history.json",
            "manifest.json",
            f"runner.{RUNNER_NAME}",
        ]
        assert [str(name.key) for name in sealed_markers(bundle)] == [key]
    # the copy's immutable files are the original's, linked: the empty marker among them
    marker = str(sealed_markers(out / key)[0])
    assert os.stat(out / key / SEALED_DIR / marker).st_ino == os.stat(original / SEALED_DIR / marker).st_ino
    assert [(row["state"], row["job_key"]) for row in list_transfers(attach(a))] == [("detached", key)]


def _old_runners(bundle: Path) -> None:
    """Carry the runner as the layout before the flat one did: ``.httk-transfer/runners/<name>``."""
    sealed = bundle / SEALED_DIR
    (sealed / "runners").mkdir()
    (sealed / f"runner.{RUNNER_NAME}").rename(sealed / "runners" / RUNNER_NAME)


def _old_original(a: Path, transfer_id: str, key: str) -> Path:
    """Nest the source's sealed original as the layout before the flat one did; its new path."""
    outgoing = a / ".httk-workflow" / "transfers" / "outgoing"
    (outgoing / transfer_id).rename(outgoing / "moving")
    (outgoing / transfer_id).mkdir()
    (outgoing / "moving").rename(outgoing / transfer_id / key)
    _old_runners(outgoing / transfer_id / key)
    return outgoing / transfer_id / key


def test_a_bundle_and_a_source_of_the_layout_before_are_imported_and_retired(
    detached: tuple[Path, Path, Path, str, str, dict[str, Any]],
) -> None:
    a, b, out, key, transfer_id, job = detached
    _old_runners(out / key)
    nested = _old_original(a, transfer_id, key)
    assert [(row["state"], row["job_key"]) for row in list_transfers(attach(a))] == [("detached", key)]

    [imported] = import_bundles(attach(b), [out / key], "p")

    assert (imported.status, imported.acknowledgement) == (ImportStatus.IMPORTED, "delivered")
    target = attach(b)
    assert current_marker(target, job).kind is Kind.SUCCEEDED
    assert (target.runners_dir / RUNNER_NAME).is_file()
    retired = a / ".httk-workflow" / "transfers" / "retired" / transfer_id / key
    assert not nested.exists() and retired.is_dir() and sealed_markers(retired) == []
    ledger = json.loads((retired.parent.parent / f"{transfer_id}.json").read_text())
    assert (ledger["outcome"], ledger["job_key"]) == ("imported", key)
    assert show_transfer(attach(a), transfer_id)["retired_bundle"] == str(retired)


def test_a_source_of_the_layout_before_is_aborted_and_its_journal_kept(
    detached: tuple[Path, Path, Path, str, str, dict[str, Any]],
) -> None:
    a, _b, out, key, transfer_id, job = detached
    _old_original(a, transfer_id, key)
    set_retention(attach(a), **AGGRESSIVE)
    make_old_tree(a)
    assert collect_garbage(attach(a)).errors == ()  # the nested original's marker keeps its frames

    aborted = abort_transfer(attach(a), key)

    assert (aborted.transfer_id, aborted.kind, aborted.removed_copy) == (
        transfer_id,
        "succeeded",
        str(out / key),
    )
    assert current_marker(attach(a), job).kind is Kind.SUCCEEDED
    assert not (a / ".httk-workflow" / "transfers" / "outgoing" / transfer_id).exists()


def test_an_acknowledgement_recorded_the_way_before_still_refuses_an_abort(
    detached: tuple[Path, Path, Path, str, str, dict[str, Any]],
) -> None:
    a, _b, _out, _key, transfer_id, _job = detached
    acks = a / ".httk-workflow" / "transfers" / "acks"
    acks.mkdir()
    (acks / f"{transfer_id}.json").write_text("{}")  # written first by the retirement before

    with pytest.raises(TransferError, match="was acknowledged"):
        abort_transfer(attach(a), transfer_id)


@pytest.mark.parametrize(("workdir", "linked"), [("run", True), ("files/work", False)])
def test_the_copy_links_files_unless_a_workdir_lies_in_it(tmp_path: Path, workdir: str, linked: bool) -> None:
    """spec/01 makes ``files/`` the submitted, immutable inputs, so the copy in DIR shares its inodes
    with the sealed original, unless the job's persistent workdir is inside it (a runner writes there):
    then it is copied, and a write through the copy cannot reach what an abort would put back."""
    a, out = tmp_path / "a", tmp_path / "out"
    source = transfer_workspace(a)
    out.mkdir()
    job = scripted_job(
        {"prepare": {"action": "succeed"}}, publish_scripted_runner(source, tmp_path / "scratch")
    )
    job["workdir"] = {"mode": "persistent", "path": workdir}
    payload = tmp_path / "payload"
    (payload / "files").mkdir(parents=True)
    (payload / "job.json").write_text(json.dumps(job))
    (payload / "files" / "INCAR").write_text("ENCUT = 520\n")
    Submitter(source).submit_payload(payload, "p")
    source.close()
    run_manager(a)

    [result] = detach_jobs(attach(a), [job_key(job)], out)

    original = result.source_bundle / "files" / "INCAR"
    copy = out / job_key(job) / "files" / "INCAR"
    assert copy.read_text() == "ENCUT = 520\n"
    assert (os.stat(copy).st_ino == os.stat(original).st_ino) is linked
