"""One test per row of the fault table in ``docs/faults.md``, and a test keeping the two in step.

Each row's fault is injected once, at a chosen mutation of the two-job case of
:mod:`tests.faults._faultkit` (the ``advance`` plan), in a real manager process; besides the matrix's
oracle (no traceback, at most a few error lines, the other job served, convergence, fsck clean) each
test checks what the table says the engine does about that fault.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._faults import Fault
from httk.workflow.engine.core._workspace import attach

from tests.crash._scenarios import (
    chain,
    expire_heartbeats,
    normalized_trace,
    read_executions,
    recover_until_settled,
)
from tests.crash._scenarios import single_marker as marker_of
from tests.faults._faultkit import (
    RECOVERY,
    Case,
    Reference,
    check_faulted_run,
    check_settled,
    new_case,
    reference,
    run_manager,
    settled,
)

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "faults.md"
_REFERENCES: dict[bool, Reference] = {}


def advance_reference(tmp_path_factory: pytest.TempPathFactory, durable: bool) -> Reference:
    if durable not in _REFERENCES:
        base = tmp_path_factory.mktemp(f"table-reference-{'durable' if durable else 'fast'}")
        _REFERENCES[durable] = reference(base / "case", "advance", durable=durable)
    return _REFERENCES[durable]


def first(ref: Reference, pattern: str) -> int:
    """The first mutation whose normalized trace line matches ``pattern`` (a regular expression)."""
    for k, line in enumerate(ref.trace, 1):
        if re.search(pattern, line):
            return k
    raise AssertionError(f"no mutation matches {pattern!r}")


def preceding(ref: Reference, k: int, pattern: str) -> int:
    """The last mutation before ``k`` matching ``pattern`` (the frame a marker rename publishes)."""
    return max(j for j in range(1, k) if re.search(pattern, ref.trace[j - 1]))


def inject(base: Path, k: int, fault: Fault, *, durable: bool = False) -> tuple[Case, str, Any]:
    """Run the case with ``fault`` at mutation ``k``; return it, the manager's stderr and its trace."""
    case = new_case(base, "advance", durable=durable)
    trace = base / "trace"
    result = run_manager(case.root, fault=f"{k}:{fault.value}", trace=trace)
    check_faulted_run(result)
    return case, result.stderr, normalized_trace(trace, case.root)


def converge(case: Case) -> None:
    expire_heartbeats(attach(case.root))
    for job in case.jobs:
        recover_until_settled(case.root, job.key, RECOVERY)
    check_settled(case)


def served_in_one_run(case: Case) -> None:
    """The faulted manager itself finished both jobs: the fault cost a retry, never a job."""
    assert all(settled(case.root, job) for job in case.jobs)
    check_settled(case)


def frames_of(case: Case, index: int = 0) -> list[dict[str, Any]]:
    workspace = attach(case.root, writable=False)
    return chain(workspace, marker_of(workspace, case.jobs[index].key))


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "injected:" in line]


# -- the rows ----------------------------------------------------------------------------------------
Row = Callable[[pytest.TempPathFactory, Path], None]


def test_row_write_enospc(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The claim's frame cannot be appended: claiming pauses, resumes once a write works, the job runs."""
    ref = advance_reference(tmp_path_factory, False)
    claim_frame = preceding(ref, first(ref, r"^rename <ws>/\.httk-workflow/state/claimed/"), r"^append ")
    case, stderr, _trace = inject(tmp_path / "case", claim_frame, Fault.WRITE_ENOSPC)
    assert "storage is failing (JournalError, ENOSPC): claiming paused" in stderr, stderr
    assert "claiming resumed" in stderr, stderr
    served_in_one_run(case)


def test_row_write_eio(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The attempt's context.json cannot be written: the claim is given back, and claimed again."""
    ref = advance_reference(tmp_path_factory, False)
    context = first(ref, r"^write <ws>/proj/a/.*/\.context\.json\.tmp")
    case, stderr, _trace = inject(tmp_path / "case", context, Fault.WRITE_EIO)
    assert len(errors(stderr)) >= 1 and "cannot launch" in stderr, stderr
    served_in_one_run(case)
    given_back = [f for f in frames_of(case) if f.get("reason") == "released_stale_claim"]
    assert len(given_back) == 1 and "injected: write-eio" in given_back[0]["released_claim"]["storage_error"]
    assert read_executions(case.jobs[0].exec_log).total == 2  # one per step: the given-back claim never ran


def test_row_fsync_enospc(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The commit's frame cannot be synchronized: the commit is kept, tried again and done in the run."""
    ref = advance_reference(tmp_path_factory, True)
    commit_frame = preceding(ref, first(ref, r"^rename <ws>/\.httk-workflow/state/committing/"), r"^append ")
    case, stderr, _trace = inject(tmp_path / "case", commit_frame, Fault.FSYNC_ENOSPC, durable=True)
    assert "cannot commit the attempt of" in stderr, stderr
    served_in_one_run(case)
    assert read_executions(case.jobs[0].exec_log).total == 2  # a published outcome is never rerun


def test_row_fsync_eio(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The manager's record cannot be synchronized at start: it publishes it again, then serves."""
    ref = advance_reference(tmp_path_factory, True)
    manifest = first(ref, r"^write <ws>/\.httk-workflow/managers/<id>/manager\.json$")
    case, stderr, _trace = inject(tmp_path / "case", manifest, Fault.FSYNC_EIO, durable=True)
    assert "cannot publish the record of manager" in stderr, stderr
    served_in_one_run(case)


def test_row_rename_enospc(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The launch's marker rename fails once: the verified rename tries again and the launch goes on."""
    ref = advance_reference(tmp_path_factory, False)
    running = first(ref, r"^rename <ws>/\.httk-workflow/state/running/")
    case, stderr, trace = inject(tmp_path / "case", running, Fault.RENAME_ENOSPC)
    assert errors(stderr) == [], stderr  # absorbed: nothing was left undone
    assert trace == ref.trace  # the same transitions: the rename that failed is done again, counted once
    served_in_one_run(case)


def test_row_rename_eio(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The rename publishing context.json fails: the claim is given back (a transient error), not failed."""
    ref = advance_reference(tmp_path_factory, False)
    context = first(ref, r"^rename <ws>/proj/a/.*/context\.json$")
    case, stderr, _trace = inject(tmp_path / "case", context, Fault.RENAME_EIO)
    assert "cannot launch" in stderr, stderr
    served_in_one_run(case)
    assert [f["kind"] for f in frames_of(case) if f["kind"] == "failed"] == []


def test_row_rename_reports_failure(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The claim's rename happens but reports EIO: the verified rename finds its own name and wins."""
    ref = advance_reference(tmp_path_factory, False)
    claim = first(ref, r"^rename <ws>/\.httk-workflow/state/claimed/proj/a/")
    case, stderr, trace = inject(tmp_path / "case", claim, Fault.RENAME_REPORTS_FAILURE)
    assert errors(stderr) == [], stderr
    assert trace == ref.trace  # nothing redone: the transition was recognized as done
    served_in_one_run(case)


def test_row_eintr(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The first journal append is interrupted: the seam retries the call, invisibly."""
    ref = advance_reference(tmp_path_factory, False)
    case, stderr, trace = inject(tmp_path / "case", first(ref, r"^append "), Fault.EINTR)
    assert errors(stderr) == [] and trace == ref.trace
    served_in_one_run(case)


def test_row_late_name(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The journal's first segment stays invisible for a moment: readers wait it out, nothing is damaged."""
    ref = advance_reference(tmp_path_factory, False)
    segment = first(ref, r"^create <ws>/\.httk-workflow/journal/<id>/0\.hwj$")
    case, stderr, trace = inject(tmp_path / "case", segment, Fault.LATE_NAME)
    assert "unreadable frame" not in stderr and trace == ref.trace, stderr
    served_in_one_run(case)


def test_row_stale_listing(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """Listings keep showing a claimed job as ready for a moment: no second claim, no corruption."""
    ref = advance_reference(tmp_path_factory, False)
    claim = first(ref, r"^rename <ws>/\.httk-workflow/state/claimed/proj/a/")
    case, stderr, _trace = inject(tmp_path / "case", claim, Fault.STALE_LISTING)
    assert "corruption" not in stderr, stderr
    # Its commit back to ready may come while the listing is still stale: the manager may then see only
    # the name the job left and go idle, leaving it ready, at its last commit point, for the next one.
    converge(case)
    claims = [f for f in frames_of(case) if f["kind"] == "claimed"]
    assert len(claims) == 2  # one per step, none for a job already claimed


# -- the table and the tests ---------------------------------------------------------------------------
def table_rows() -> dict[str, str]:
    """``docs/faults.md``'s fault table: fault name -> the test named in its row."""
    rows: dict[str, str] = {}
    for line in TABLE.read_text().splitlines():
        match = re.match(r"\| `([a-z-]+)` \|.*\| `(test_row_[a-z_]+)` \|$", line)
        if match:
            rows[match[1]] = match[2]
    return rows


def test_the_fault_table_and_its_tests_are_in_step() -> None:
    rows = table_rows()
    assert set(rows) == {fault.value for fault in Fault}, "a fault without a row, or a row without a fault"
    for fault, test in rows.items():
        assert test == "test_row_" + fault.replace("-", "_"), (fault, test)
    tests = {name for name in globals() if name.startswith("test_row_")}
    assert tests == set(rows.values()), "a row without a test, or a test without a row"
