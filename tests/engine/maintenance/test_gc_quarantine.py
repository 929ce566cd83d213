"""``quarantine/`` is outside collection except for the one name a crash can strand there: the staging file
``write_file_atomic`` creates for an audit record and renames away in the same operation.

The first test strands it for real — the quarantining ``fsck --repair`` is stopped right after each
mutation of a record's temporary name (``tests/crashkit.py``) and then run again, as an operator would —
so the name gc matches is the one the mutation seam actually writes. A retired request's record has the
same kind of staging name in ``requests/retired/``. Ages are modification times set into the past;
nothing sleeps.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.maintenance._gc import always_safe_census, collect_garbage
from httk.workflow.engine.maintenance._gc_control import QUARANTINE_STAGING

from tests.crashkit import count_mutations, run_crashing
from tests.engine.maintenance.test_fsck_repair import REPAIR_CODE, repair, unrepairable_workspace
from tests.engine.maintenance.test_gc import make_old

ENTRY = "request-" + "0123456789abcdef" * 2


def quarantine_of(root: Path) -> Path:
    return root / ".httk-workflow" / "quarantine"


def age_all(directory: Path, days: float) -> None:
    for path in directory.iterdir():
        make_old(path, days)


def test_a_record_stranded_by_a_crash_goes_after_a_day_and_the_quarantine_stays(tmp_path: Path) -> None:
    template = tmp_path / "template"
    unrepairable_workspace(template)  # a damaged marker and a stray file: two entries, two records
    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    trace = count_mutations(REPAIR_CODE.format(root=str(reference)), tmp_path / "trace")
    published = sorted(path.name for path in quarantine_of(reference).iterdir())
    assert len(published) == 4 and not [name for name in published if name.startswith(".")]
    stranding = [k for k, line in enumerate(trace, 1) if ".quarantine.tmp." in line.split("\t")[2]]
    assert len(stranding) >= 2, trace  # each record's temporary name is created, then written

    for k in stranding:
        root = tmp_path / f"crash-{k}"
        shutil.copytree(template, root)
        run_crashing(REPAIR_CODE.format(root=str(root)), k)
        repair(root, quarantine=True)
        quarantine = quarantine_of(root)
        stranded = [path for path in quarantine.iterdir() if path.name.startswith(".")]
        assert len(stranded) == 1 and QUARANTINE_STAGING.match(stranded[0].name), (k, stranded)
        entries = sorted(p.name for p in quarantine.iterdir() if p not in stranded)
        assert len(entries) == len(published)  # the names follow the inodes, so they differ per copy
        ws = attach(root)

        age_all(quarantine, 0.99)
        assert always_safe_census(ws)["tmp_entries"] == 0
        assert collect_garbage(ws).categories["tmp_entries"].candidates == 0 and stranded[0].exists()

        age_all(quarantine, 400)  # entries and records are kept however old they are
        assert always_safe_census(ws)["tmp_entries"] == 1
        report = collect_garbage(ws)
        assert report.categories["tmp_entries"].removed == 1, k
        assert sorted(path.name for path in quarantine.iterdir()) == entries
        ws.close()


def test_only_a_records_staging_name_is_collected_from_quarantine(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    quarantine = ws.quarantine_dir  # init creates it
    kept = {
        ENTRY: b"{}",  # a quarantined request
        f"{ENTRY}.quarantine": b'{"reason": "malformed"}',  # its audit record
        f"{ENTRY}.tmp.1.0a1b2c3d": b"",  # not hidden: no staging name of ours
        f".{ENTRY}.tmp.1.0a1b2c3d": b"",  # hidden, but the staging name of no record
        f".{ENTRY}.quarantine.tmp.x.0a1b2c3d": b"",  # not a process id
        ".operator-notes": b"look at request 17",
    }
    for name, data in kept.items():
        (quarantine / name).write_bytes(data)
    stranded = quarantine / f".{ENTRY}.quarantine.tmp.4242.0a1b2c3d"
    stranded.write_bytes(b'{"reason": "mal')
    (quarantine / ".marker-directory.quarantine.tmp.7.00000000").mkdir()  # not a file: left alone
    age_all(quarantine, 400)

    assert always_safe_census(ws)["tmp_entries"] == 1
    report = collect_garbage(ws, dry_run=True)
    assert report.categories["tmp_entries"].candidate_bytes == len(b'{"reason": "mal') and stranded.exists()
    report = collect_garbage(ws)

    assert (report.categories["tmp_entries"].removed, report.frame_ref is not None) == (1, True)
    remaining = {path.name for path in quarantine.iterdir()}
    assert remaining == {*kept, ".marker-directory.quarantine.tmp.7.00000000"}


def test_a_stranded_retirement_record_goes_after_a_day_and_retired_requests_keep_their_month(
    tmp_path: Path,
) -> None:
    ws = init(tmp_path / "ws", durable=False)
    retired = ws.requests_dir / "retired"
    retired.mkdir(parents=True, exist_ok=True)
    request = "0123456789abcdef0123456789abcdef.json"
    (retired / request).write_bytes(b"{}")
    (retired / f"{request}.retirement").write_bytes(b'{"reason": "generation_moved"}')
    stranded = retired / f".{request}.retirement.tmp.4242.0a1b2c3d"
    stranded.write_bytes(b'{"reason": "gen')
    age_all(retired, 0.99)
    assert collect_garbage(ws).categories["tmp_entries"].candidates == 0 and stranded.exists()

    age_all(retired, 2)  # past a day, inside the month a retired request is kept
    assert always_safe_census(ws)["tmp_entries"] == 1
    report = collect_garbage(ws)
    assert report.categories["tmp_entries"].removed == 1
    assert report.categories["retired_requests"].removed == 0
    assert sorted(path.name for path in retired.iterdir()) == [request, f"{request}.retirement"]
