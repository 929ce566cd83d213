"""Detached transfers (detached-transfer-v1): detach, import, acknowledgement, abort, and their refusals.

Everything runs against real workspaces and a real manager: a job finished in one workspace is carried
to another with its history, a queued one is run to completion where it lands, and every refusal is
checked to change nothing at all.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._sealed import SEALED_DIR, sealed_markers
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import Workspace, attach, init, probe_marker
from httk.workflow.engine.maintenance._gc import collect_garbage
from httk.workflow.engine.ops._extensions import enable_extension
from httk.workflow.engine.ops._history import job_history
from httk.workflow.engine.ops._inspect import workspace_status
from httk.workflow.engine.ops._select import SelectorError
from httk.workflow.engine.ops._transfer_detach import detach_jobs
from httk.workflow.engine.ops._transfer_import import ImportStatus, import_bundles
from httk.workflow.engine.ops._transfers import abort_transfer, list_transfers, show_transfer
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.models import validator
from httk.workflow.protocol import TransferError

from tests.engine.maintenance.test_gc import AGGRESSIVE, make_old_tree, set_retention
from tests.joinkit import PARENT_PLACEMENT, join_of, manager_state, running_parent
from tests.runners import RUNNER_NAME, current_marker, job_key
from tests.transferkit import EXTENSION, jobs_in, run_manager, transfer_workspace


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry below ``root`` with its bytes (``None`` for a directory): a snapshot to compare."""
    found: dict[str, bytes | None] = {}
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(directory, name), root)] = None
        for name in filenames:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


@pytest.fixture
def spaces(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two transfer workspaces and an existing --to directory."""
    transfer_workspace(tmp_path / "a").close()
    transfer_workspace(tmp_path / "b").close()
    (tmp_path / "out").mkdir()
    return tmp_path / "a", tmp_path / "b", tmp_path / "out"


def finished_jobs(root: Path, scratch: Path, count: int) -> list[dict[str, Any]]:
    ws = attach(root)
    jobs = jobs_in(ws, scratch, count)
    ws.close()
    run_manager(root)
    return jobs


def history_kinds(ws: Workspace, job: dict[str, Any], placement: str) -> list[tuple[int, str | None, str]]:
    entries = job_history(ws, current_marker(ws, job, placement))
    assert all("problem" not in entry for entry in entries), entries
    return [(entry["generation"], entry["from"], entry["kind"]) for entry in entries]


# -- the round trip -----------------------------------------------------------------------------------
def test_a_finished_job_moves_with_its_history_runner_and_files(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    key = job_key(job)
    source = attach(a)
    before = history_kinds(source, job, "p")
    files = {
        name: data for name, data in tree(source.payload_path("p", key)).items() if SEALED_DIR not in name
    }

    [detached] = detach_jobs(source, [key], out)

    assert probe_marker(source, "p", key) is None and not source.payload_path("p", key).exists()
    assert detached.bundle == out / key and detached.prior_kind == "succeeded"
    manifest = json.loads((out / key / SEALED_DIR / "manifest.json").read_text())
    assert validator("transfer-manifest").is_valid(manifest)
    assert [runner["name"] for runner in manifest["runners"]] == [RUNNER_NAME]
    assert [str(name) for name in sealed_markers(out / key)] == [manifest["marker"]["name"]]
    assert [row["state"] for row in list_transfers(source)] == ["detached"]

    target = attach(b)
    [imported] = import_bundles(target, [out / key], "imported/x")

    assert (imported.status, imported.kind, imported.acknowledgement) == (
        ImportStatus.IMPORTED,
        "succeeded",
        "delivered",
    )
    assert not (out / key).exists()  # the bundle was renamed into the target: same filesystem
    payload = target.payload_path("imported/x", key)
    assert {name: data for name, data in tree(payload).items() if SEALED_DIR not in name} == files
    assert sealed_markers(payload) == []  # the provenance stays, the marker is out
    assert (target.runners_dir / RUNNER_NAME).read_bytes() == (source.runners_dir / RUNNER_NAME).read_bytes()
    after = history_kinds(target, job, "imported/x")
    assert after[: len(before)] == before
    assert after[len(before) :] == [
        (before[-1][0] + 1, "succeeded", "transferring"),
        (before[-1][0] + 2, "transferring", "succeeded"),
    ]
    ledger = json.loads(
        (source.control / "transfers" / "retired" / f"{detached.transfer_id}.json").read_text()
    )
    assert validator("transfer-ledger").is_valid(ledger) and ledger["outcome"] == "imported"
    assert validator("transfer-ack").is_valid(ledger["acknowledgement"])
    assert [row["state"] for row in list_transfers(source)] == ["retired"]
    assert [row["state"] for row in list_transfers(target)] == ["imported"]
    assert set(show_transfer(source, detached.transfer_id)) >= {"retired", "retired_bundle"}
    assert not (source.control / "transfers" / "acks").exists()  # the ledger carries the acknowledgement


def test_a_ready_job_runs_where_it_was_imported(spaces: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, out = spaces
    source = attach(a)
    [job] = jobs_in(source, tmp_path, 1)
    source.close()
    run_manager_once_registered(a)
    source = attach(a)
    assert current_marker(source, job).kind is Kind.READY
    [detached] = detach_jobs(source, [job_key(job)], out)
    assert detached.prior_kind == "ready"

    import_bundles(attach(b), [out / job_key(job)], "p")
    run_manager(b)

    target = attach(b)
    kinds = [kind for _, _, kind in history_kinds(target, job, "p")]
    assert kinds == ["ready", "transferring", "ready", "claimed", "running", "committing", "succeeded"]


def run_manager_once_registered(root: Path) -> None:
    """Register the submitted jobs without running them: a manager whose only pool nobody uses."""
    from httk.workflow.engine.manager._manager import Manager
    from httk.workflow.engine.manager._state import ManagerConfig

    Manager(attach(root), ManagerConfig(pools=("nobody",))).run()


def test_a_job_can_come_back_to_the_workspace_it_left(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    key = job_key(job)
    detach_jobs(attach(a), [key], out)
    import_bundles(attach(b), [out / key], "p")
    detach_jobs(attach(b), [key], out)
    [back] = import_bundles(attach(a), [out / key], "p")

    assert back.acknowledgement == "delivered"
    kinds = [kind for _, _, kind in history_kinds(attach(a), job, "p")]
    assert kinds[-4:] == ["transferring", "succeeded", "transferring", "succeeded"]
    assert sorted(row["state"] for row in list_transfers(attach(b))) == ["imported", "retired"]


def test_status_counts_a_detached_job_as_transferring_until_its_import_is_acknowledged(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    jobs = finished_jobs(a, tmp_path, 2)
    key = job_key(jobs[0])
    detach_jobs(attach(a), [key], out)

    held = workspace_status(attach(a), by_placement=1)
    assert (held.kinds["succeeded"], held.kinds["transferring"], held.total) == (1, 1, 2)
    assert held.by_placement == {"p": {"succeeded": 1, "transferring": 1}}

    import_bundles(attach(b), [out / key], "q")

    assert (workspace_status(attach(a)).kinds["transferring"], workspace_status(attach(a)).total) == (0, 1)
    arrived = workspace_status(attach(b), by_placement=1)
    assert (arrived.kinds["succeeded"], arrived.kinds["transferring"]) == (1, 0)
    assert arrived.by_placement == {"q": {"succeeded": 1}}
    assert "transferring" not in workspace_status(init(tmp_path / "plain", durable=False)).kinds


# -- refusals change nothing --------------------------------------------------------------------------
def test_the_extension_must_be_enabled(tmp_path: Path) -> None:
    ws = init(tmp_path / "plain", durable=False)
    (tmp_path / "out").mkdir()
    with pytest.raises(TransferError, match=f"does not enable {EXTENSION}.*extension enable"):
        detach_jobs(ws, ["x"], tmp_path / "out")


def test_queued_and_owned_jobs_are_refused_and_nothing_moves(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _b, out = spaces
    ws = attach(a)
    [job] = jobs_in(ws, tmp_path, 1)
    before = tree(a)
    with pytest.raises(
        TransferError, match=r"nothing was detached: .* is submitted: a manager has not registered"
    ):
        detach_jobs(ws, [job_key(job)], out)
    assert tree(a) == before and os.listdir(out) == []


def test_a_tag_two_jobs_share_is_refused_as_ambiguous_and_nothing_moves(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _b, out = spaces
    jobs = finished_jobs(a, tmp_path, 2)
    [tag] = {job_key(job).split("--")[0] for job in jobs}
    before = tree(a)

    with pytest.raises(SelectorError, match="matches 2 jobs"):
        detach_jobs(attach(a), [tag], out)

    assert tree(a) == before and list(out.iterdir()) == []


def test_a_waiting_parent_and_a_child_its_join_names_are_refused(tmp_path: Path) -> None:
    init(tmp_path / "ws", durable=False, extensions=(EXTENSION,)).close()
    ws = attach(tmp_path / "ws")
    state = manager_state(ws)
    pub = running_parent(state)
    bundle = pub.bundle("kid")
    pub.publish(pub.outcome("wait", next_step="gather", join=join_of([bundle])), [bundle])
    from httk.workflow.engine.manager import _commit
    from httk.workflow.engine.publish._outcome import read_outcome

    _commit.commit(pub.state, pub.marker, pub.frame, pub.job, outcome=read_outcome(pub.control))
    (tmp_path / "out").mkdir()
    before = tree(tmp_path / "ws")
    with pytest.raises(TransferError, match="is waiting: its join resolves its children"):
        detach_jobs(ws, [pub.key], tmp_path / "out")
    with pytest.raises(TransferError, match="a waiting job's join names it"):
        detach_jobs(ws, [bundle.key], tmp_path / "out")
    assert tree(tmp_path / "ws") == before
    assert probe_marker(ws, PARENT_PLACEMENT, pub.key) is not None


def test_an_existing_bundle_in_the_destination_is_refused(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    (out / job_key(job)).mkdir()
    with pytest.raises(TransferError, match="already exists"):
        detach_jobs(attach(a), [job_key(job)], out)
    assert current_marker(attach(a), job).kind is Kind.SUCCEEDED


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda bundle: (bundle / "run" / "added").write_text("x"), "payload's digest"),
        (lambda bundle: (bundle / "job.json").write_text("{}"), "job.json: its digest"),
        (
            lambda bundle: (bundle / SEALED_DIR / f"runner.{RUNNER_NAME}").write_text("echo\n"),
            "carried runner",
        ),
        (lambda bundle: (bundle / SEALED_DIR / "history.json").write_text("{}"), "history.json: its digest"),
        (lambda bundle: bundle.rename(bundle.with_name("renamed")), "no such bundle"),
        (
            lambda bundle: [
                p.unlink()
                for p in (bundle / SEALED_DIR).iterdir()
                if not p.name.endswith("json") and p.is_file()
            ],
            "must seal exactly",
        ),
    ],
)
def test_a_damaged_bundle_is_refused_whole(
    spaces: tuple[Path, Path, Path], tmp_path: Path, damage: Any, message: str
) -> None:
    a, b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    detach_jobs(attach(a), [job_key(job)], out)
    damage(out / job_key(job))
    before = tree(b)
    with pytest.raises(TransferError, match=message):
        import_bundles(attach(b), [out / job_key(job)], "p")
    assert tree(b) == before


def test_a_transfer_is_imported_once_and_a_job_the_target_has_is_refused(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    key = job_key(job)
    detach_jobs(attach(a), [key], out)
    spares = [tmp_path / f"spare{n}" / key for n in range(2)]
    for spare in spares:
        shutil.copytree(out / key, spare)
    import_bundles(attach(b), [out / key], "p")
    before = tree(b)

    [again] = import_bundles(attach(b), [spares[0]], "elsewhere")

    assert (again.status, again.placement) == (ImportStatus.ALREADY_IMPORTED, "p")
    assert tree(b) == before and not spares[0].exists()  # the copy is consumed, nothing else changes
    c = transfer_workspace(tmp_path / "c")
    detach_jobs(attach(b), [key], out)
    import_bundles(c, [out / key], "p")
    before = tree(c.root)
    with pytest.raises(TransferError, match=f"job {job['id']} already has a marker in this workspace"):
        import_bundles(attach(c.root), [spares[1]], "q")
    assert tree(c.root) == before and spares[1].is_dir()


def test_a_runner_of_the_same_name_with_other_content_is_refused(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    detach_jobs(attach(a), [job_key(job)], out)
    c = transfer_workspace(tmp_path / "c")
    (tmp_path / "other-runner").write_text("#!/bin/sh\nexit 0\n")
    publish_runner(c, RUNNER_NAME, tmp_path / "other-runner")
    before = tree(c.root)
    with pytest.raises(TransferError, match="has other content"):
        import_bundles(c, [out / job_key(job)], "p")
    assert tree(c.root) == before and (out / job_key(job)).is_dir()


# -- abort --------------------------------------------------------------------------------------------
def test_abort_puts_the_job_back_and_refuses_a_late_acknowledgement(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    key = job_key(job)
    [detached] = detach_jobs(attach(a), [key], out)
    spare = tmp_path / "spare" / key
    shutil.copytree(out / key, spare)

    aborted = abort_transfer(attach(a), detached.transfer_id)

    assert (aborted.kind, aborted.removed_copy) == ("succeeded", str(out / key))
    source = attach(a)
    assert current_marker(source, job).kind is Kind.SUCCEEDED and not (out / key).exists()
    assert [kind for _, _, kind in history_kinds(source, job, "p")][-2:] == ["transferring", "succeeded"]
    assert [row["state"] for row in list_transfers(source)] == ["aborted"]
    with pytest.raises(TransferError, match="no transfer"):
        abort_transfer(source, detached.transfer_id)

    [late] = import_bundles(attach(b), [spare], "p")
    assert late.acknowledgement.startswith("refused: ") and "was aborted" in late.acknowledgement


def test_enable_then_detach_through_the_command_line(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    ws.close()
    changed, live = enable_extension(attach(tmp_path / "ws"), EXTENSION)
    assert changed and not live
    assert EXTENSION in attach(tmp_path / "ws").extensions


def test_collection_keeps_the_journal_a_sealed_bundle_names(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    [detached] = detach_jobs(attach(a), [job_key(job)], out)
    source = attach(a)
    set_retention(source, **AGGRESSIVE)
    make_old_tree(a)

    report = collect_garbage(attach(a))

    assert "journal_segment" not in report.skipped and report.errors == ()
    abort_transfer(attach(a), detached.transfer_id)
    kinds = [kind for _, _, kind in history_kinds(attach(a), job, "p")]
    assert kinds[-3:] == ["succeeded", "transferring", "succeeded"]


def test_collection_takes_retired_bundles_and_delivered_receipts_after_trash_days(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    [detached] = detach_jobs(attach(a), [job_key(job)], out)
    import_bundles(attach(b), [out / job_key(job)], "p")
    transfers_a, transfers_b = a / ".httk-workflow" / "transfers", b / ".httk-workflow" / "transfers"
    tid = detached.transfer_id
    kept = [transfers_a / "retired" / tid, transfers_b / "imported" / f"{tid}.json"]
    assert all(path.exists() for path in kept)
    assert "delivered_at" in json.loads(kept[1].read_text())
    for root in (a, b):
        set_retention(attach(root), trash_days=1)

    young = [collect_garbage(attach(root)) for root in (a, b)]

    assert [report.categories["retired_bundles"].candidates for report in young] == [0, 0]
    assert [report.categories["transfer_receipts"].candidates for report in young] == [0, 0]
    assert all(path.exists() for path in kept)
    make_old_tree(a / ".httk-workflow" / "transfers", days=2)
    make_old_tree(b / ".httk-workflow" / "transfers", days=2)

    source, target = collect_garbage(attach(a)), collect_garbage(attach(b))

    assert (source.categories["retired_bundles"].removed, source.categories["transfer_receipts"].removed) == (
        1,
        0,
    )
    assert target.categories["transfer_receipts"].removed == 1
    assert not any(path.exists() for path in kept)
    assert [row["state"] for row in list_transfers(attach(a))] == ["retired"]  # the ledger stays
    assert current_marker(attach(b), job, "p").kind is Kind.SUCCEEDED


def test_an_import_record_whose_acknowledgement_was_never_delivered_is_kept(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    [job] = finished_jobs(a, tmp_path, 1)
    [detached] = detach_jobs(attach(a), [job_key(job)], out)
    a.rename(tmp_path / "a-elsewhere")  # the source cannot be reached from here
    [imported] = import_bundles(attach(b), [out / job_key(job)], "p")
    assert imported.acknowledgement == "unreachable"
    record = b / ".httk-workflow" / "transfers" / "imported" / f"{detached.transfer_id}.json"
    set_retention(attach(b), trash_days=1)
    make_old_tree(b / ".httk-workflow" / "transfers", days=2)

    report = collect_garbage(attach(b))

    assert report.categories["transfer_receipts"].candidates == 0 and record.is_file()
    assert "delivered_at" not in json.loads(record.read_text())
