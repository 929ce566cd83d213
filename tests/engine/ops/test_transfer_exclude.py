"""``transfer detach --exclude``: large workdir files left at the source, recorded and never lost.

A finished job's persistent workdir holds a large file (a WAVECAR); the bundle travels without it, the
manifest says so, import validates exactly the rest, the imported job says what it lacks, and the
source keeps the file after the transfer is acknowledged and its retired bundle is collected.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._sealed import SEALED_DIR
from httk.workflow.engine.core._workspace import attach, probe_marker
from httk.workflow.engine.maintenance._gc import collect_garbage
from httk.workflow.engine.ops._show import show_job
from httk.workflow.engine.ops._transfer_detach import detach_jobs
from httk.workflow.engine.ops._transfer_import import import_bundles
from httk.workflow.engine.ops._transfers import abort_transfer, show_transfer
from httk.workflow.models import validator
from httk.workflow.protocol import TransferError

from tests.engine.maintenance.test_gc import make_old_tree, set_retention
from tests.engine.ops.test_transfers import finished_jobs, spaces, tree
from tests.runners import current_marker, job_key

__all__ = ["spaces"]  # the fixture, imported to be used here

WAVECAR = os.urandom(1 << 16)


def finished_with_workdir_files(root: Path, scratch: Path) -> tuple[dict[str, Any], str, Path]:
    """One succeeded job of ``root`` whose persistent workdir holds large files: it, its key, its payload."""
    [job] = finished_jobs(root, scratch, 1)
    payload = attach(root).payload_path("p", job_key(job))
    (payload / "run" / "big").mkdir(parents=True, exist_ok=True)
    (payload / "run" / "WAVECAR").write_bytes(WAVECAR)
    (payload / "run" / "big" / "CHGCAR").write_bytes(b"charge")
    (payload / "run" / "OUTCAR").write_bytes(b"kept")
    return job, job_key(job), payload


def test_excluded_files_stay_at_the_source_and_the_rest_is_imported_and_validated(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    job, key, _payload = finished_with_workdir_files(a, tmp_path)
    source = attach(a)

    [detached] = detach_jobs(source, [key], out, ["run/WAVECAR", "run/b*", "nothing/*"])

    assert detached.left_behind == ["run/WAVECAR", "run/big"]
    manifest = json.loads((out / key / SEALED_DIR / "manifest.json").read_text())
    assert validator("transfer-manifest").is_valid(manifest)
    assert manifest["left_behind"] == {
        "patterns": ["run/WAVECAR", "run/b*", "nothing/*"],
        "paths": ["run/WAVECAR", "run/big"],
        "bytes": len(WAVECAR) + len(b"charge"),
    }
    assert not (out / key / "run" / "WAVECAR").exists() and not (out / key / "run" / "big").exists()
    assert (out / key / "run" / "OUTCAR").read_bytes() == b"kept"
    sealed_original = source.control / "transfers" / "outgoing" / detached.transfer_id
    assert (sealed_original / "run" / "WAVECAR").read_bytes() == WAVECAR

    target = attach(b)
    [imported] = import_bundles(target, [out / key], "p")

    assert imported.acknowledgement == "delivered"
    report = show_job(target, current_marker(target, job, "p"))
    assert report["left_behind"] == {
        "transfer_id": detached.transfer_id,
        "source_workspace_id": source.workspace_id,
        "paths": ["run/WAVECAR", "run/big"],
    }
    record = show_transfer(target, detached.transfer_id)["imported"]
    assert validator("transfer-ack").is_valid(record)
    assert record["left_behind"]["paths"] == ["run/WAVECAR", "run/big"]
    ledger = show_transfer(source, detached.transfer_id)["retired"]
    assert validator("transfer-ledger").is_valid(ledger)
    kept = Path(ledger["left_behind"]["kept_in"])
    assert kept == source.control / "transfers" / "left-behind" / detached.transfer_id / key
    assert (kept / "run" / "WAVECAR").read_bytes() == WAVECAR
    assert (kept / "run" / "big" / "CHGCAR").read_bytes() == b"charge"

    set_retention(source, trash_days=1)
    make_old_tree(source.control / "transfers", days=2)
    collected = collect_garbage(attach(a))

    assert collected.categories["retired_bundles"].removed == 1
    assert (kept / "run" / "WAVECAR").read_bytes() == WAVECAR  # gc never takes what was left behind


def test_an_aborted_detach_keeps_every_file_and_reports_nothing_left_behind(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _b, out = spaces
    job, key, payload = finished_with_workdir_files(a, tmp_path)
    files = tree(payload)
    source = attach(a)
    [detached] = detach_jobs(source, [key], out, ["run/WAVECAR"])

    abort_transfer(source, detached.transfer_id)

    back = {name: data for name, data in tree(payload).items() if SEALED_DIR not in name}
    assert back == files
    assert "left_behind" not in show_job(source, current_marker(source, job, "p"))


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("job.json", "matches job.json"),
        ("*", "always travel with the job"),  # whichever protected entry it reaches first
        ("data/*", "matches data/input.txt"),
        ("data", "matches data in"),
        (".httk-job", "matches .httk-job"),
        ("**", "matches ."),
        ("../elsewhere", "a pattern is a glob relative to the payload"),
        ("/run/WAVECAR", "a pattern is a glob relative to the payload"),
        ("run/./WAVECAR", "a pattern is a glob relative to the payload"),
    ],
)
def test_a_pattern_that_would_leave_a_part_the_job_needs_is_refused_and_nothing_moves(
    spaces: tuple[Path, Path, Path], tmp_path: Path, pattern: str, says: str
) -> None:
    a, _b, out = spaces
    _job, key, payload = finished_with_workdir_files(a, tmp_path)
    (payload / "data").mkdir(exist_ok=True)
    (payload / "data" / "input.txt").write_text("committed")
    (payload / ".httk-transfer").mkdir(exist_ok=True)
    before = tree(a)

    with pytest.raises(TransferError, match=r"nothing was detached|a pattern is a glob") as refused:
        detach_jobs(attach(a), [key], out, ["run/WAVECAR", pattern])

    assert says in str(refused.value)
    assert tree(a) == before and os.listdir(out) == []
    assert probe_marker(attach(a), "p", key) is not None


def test_a_bundle_holding_a_path_its_manifest_left_behind_is_refused(
    spaces: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, out = spaces
    _job, key, _payload = finished_with_workdir_files(a, tmp_path)
    detach_jobs(attach(a), [key], out, ["run/WAVECAR"])
    (out / key / "run" / "WAVECAR").write_bytes(b"not what was left behind")
    before = tree(b)

    with pytest.raises(TransferError, match="holds run/WAVECAR, which its manifest says was left behind"):
        import_bundles(attach(b), [out / key], "p")

    assert tree(b) == before
