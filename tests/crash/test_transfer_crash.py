"""Detach and import, stopped after each of their mutations in turn, converge on a rerun; so does an abort.

The template holds a source workspace with one succeeded job (its store runner, its full history), an
empty target workspace and the ``--to`` directory. The scenario is one process detaching the job and
importing the bundle into the target; it is traced once to learn its mutations, then for EVERY k a
fresh copy is run stopped right after mutation k. Before recovering, the crashed tree must show the job
schedulable in at most one state tree, and a bundle either sealed or published, never both. Recovery
is what an operator does: rerun the interrupted command (detach, while no copy of the bundle exists
yet), then the import. The result must be the reference run's: the job in the target only, history
unbroken from submission across the move, the source's original retired with its ledger entry, no
bundle, partial copy or staging left.

A representative subset of storage faults (``HTTK_WORKFLOW_FAULT``) at the protocol's commit points
must end the process with one clear error line or be absorbed, and converge on the same rerun.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._faults import FAULT_VARIABLE
from httk.workflow.engine.core._fsops import CRASH_EXIT_STATUS
from httk.workflow.engine.core._sealed import SEALED_DIR, sealed_markers
from httk.workflow.engine.core._states import CORE_KINDS
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.ops._history import job_history
from httk.workflow.engine.ops._transfer_detach import detach_jobs
from httk.workflow.engine.ops._transfer_import import import_bundles
from httk.workflow.engine.ops._transfers import abort_transfer

from tests.crashkit import count_mutations, crash_at_every_point
from tests.runners import RUNNER_NAME, job_key
from tests.transferkit import jobs_in, run_manager, transfer_workspace

PLACEMENT = "imported/x"
SCENARIO = """
import sys
from pathlib import Path
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.ops._transfer_detach import detach_jobs
from httk.workflow.engine.ops._transfer_import import import_bundles
from httk.workflow.engine.ops._transfers import abort_transfer
from httk.workflow.protocol import WorkflowError
root = Path({root!r})
try:
    detach_jobs(attach(root / "a"), [{key!r}], root / "out")
    {then}
except (WorkflowError, OSError) as exc:
    print("error: " + str(exc), file=sys.stderr)
    sys.exit(1)
"""
IMPORT = f'import_bundles(attach(root / "b"), [root / "out" / {{key!r}}], {PLACEMENT!r})'
ABORT = 'abort_transfer(attach(root / "a"), {key!r})'


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("transfer-template")
    source = transfer_workspace(root / "a")
    transfer_workspace(root / "b").close()
    (root / "out").mkdir()
    [job] = jobs_in(source, root / "scratch", 1)
    source.close()
    run_manager(root / "a")
    return root, job_key(job)


def scenario(root: Path | str, key: str, then: str) -> str:
    """The scenario's code; with ``root`` ``"{root}"``, :func:`crash_at_every_point` fills it in per copy."""
    return SCENARIO.format(root=str(root), key=key, then=then.format(key=key))


def _markers(root: Path, key: str) -> list[str]:
    """Every marker of the job in either state tree, as ``ws/kind/placement``."""
    found = []
    for ws in ("a", "b"):
        state = root / ws / ".httk-workflow" / "state"
        for directory, _dirs, files in os.walk(state):
            found += [
                f"{ws}/{os.path.relpath(directory, state)}" for name in files if name.startswith(key + ".")
            ]
    return sorted(found)


def _sealed_bundles(root: Path, key: str) -> list[str]:
    """Every directory that seals a marker of the job, anywhere in the tree (a copy is named by the job
    key, the source's original by its transfer id)."""
    return sorted(
        os.path.relpath(directory, root)
        for directory, dirs, _files in os.walk(root)
        if SEALED_DIR in dirs and any(str(name.key) == key for name in sealed_markers(Path(directory)))
    )


def check_invariants(root: Path, key: str) -> None:
    """Between any two mutations: schedulable in at most one state tree; a published bundle unsealed."""
    schedulable = [m for m in _markers(root, key) if m.split("/")[1] in {k.value for k in CORE_KINDS}]
    assert len(schedulable) <= 1, schedulable
    placed = root / "b" / PLACEMENT / key
    if any(m.startswith("b/") for m in schedulable):
        assert sealed_markers(placed) == [], "published and still sealed"
    if any(m.startswith("a/") for m in schedulable):
        assert _sealed_bundles(root, key) == [], "schedulable at the source while sealed elsewhere"


def recover_import(root: Path, key: str) -> None:
    check_invariants(root, key)
    if not (root / "out" / key).exists() and not (root / "b" / PLACEMENT / key).exists():
        detach_jobs(attach(root / "a"), [key], root / "out")
    import_bundles(attach(root / "b"), [root / "out" / key], PLACEMENT)


def imported_outcome(root: Path, key: str) -> dict[str, Any]:
    target = attach(root / "b", writable=False)
    transfers = root / "a" / ".httk-workflow" / "transfers"
    ledgers = [json.loads(p.read_text())["outcome"] for p in (transfers / "retired").glob("*.json")]
    history = job_history(target, _current(target, PLACEMENT, key))
    return {
        "markers": _markers(root, key),
        "sealed": _sealed_bundles(root, key),
        "outgoing": sorted(os.listdir(transfers / "outgoing")) if (transfers / "outgoing").exists() else [],
        "ledgers": ledgers,
        "acks": len(list((transfers / "acks").glob("*.json"))),
        "imported": len(list((root / "b" / ".httk-workflow" / "transfers" / "imported").glob("*.json"))),
        "out": sorted(os.listdir(root / "out")),
        "history": [(e.get("generation"), e.get("from"), e.get("kind"), "problem" in e) for e in history],
        "runner": (root / "b" / ".httk-workflow" / "runners" / RUNNER_NAME).is_file(),
        # a crash inside runner publication leaves its staging file: scratch that collection removes
        "tmp": sorted(
            n for n in os.listdir(root / "b" / ".httk-workflow" / "tmp") if not n.startswith("runner.")
        ),
    }


def _current(ws: Any, placement: str, key: str) -> Any:
    from httk.workflow.engine.core._workspace import probe_marker

    marker = probe_marker(ws, placement, key)
    assert marker is not None
    return marker


def test_a_crash_at_any_mutation_of_detach_or_import_converges_on_rerun(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    root, key = template
    code = scenario("{root}", key, IMPORT)
    expected, failures = crash_at_every_point(
        root, tmp_path, code, lambda r: recover_import(r, key), lambda r: imported_outcome(r, key)
    )
    assert failures == []
    assert expected["markers"] == [f"b/succeeded/{PLACEMENT}"] and expected["sealed"] == []
    assert expected["ledgers"] == ["imported"] and expected["out"] == [] and expected["outgoing"] == []
    kinds = [kind for _, _, kind, problem in expected["history"] if not problem]
    assert kinds[-3:] == ["succeeded", "transferring", "succeeded"] and len(kinds) == len(expected["history"])


def recover_abort(root: Path, key: str) -> None:
    check_invariants(root, key)
    if not (root / "out" / key).exists() and not _abort_begun(root):
        detach_jobs(attach(root / "a"), [key], root / "out")  # the detach was interrupted: finish it
    if _abortable(root, key):
        abort_transfer(attach(root / "a"), key)


def _abort_begun(root: Path) -> bool:
    return any((root / "a" / ".httk-workflow" / "transfers" / "retired").glob("*.json"))


def _abortable(root: Path, key: str) -> bool:
    transfers = root / "a" / ".httk-workflow" / "transfers"
    pending = any(transfers.glob("outgoing/*")) or any(
        "record_ref" not in json.loads(p.read_text()) for p in transfers.glob("retired/*.json")
    )
    transferring = any(m.startswith("a/transferring") for m in _markers(root, key))
    return pending or transferring


def aborted_outcome(root: Path, key: str) -> dict[str, Any]:
    source = attach(root / "a", writable=False)
    transfers = root / "a" / ".httk-workflow" / "transfers"
    history = job_history(source, _current(source, "p", key))
    return {
        "markers": _markers(root, key),
        "sealed": _sealed_bundles(root, key),
        "ledgers": [json.loads(p.read_text())["outcome"] for p in (transfers / "retired").glob("*.json")],
        "outgoing": sorted(os.listdir(transfers / "outgoing")) if (transfers / "outgoing").exists() else [],
        "out": sorted(os.listdir(root / "out")),
        "kinds": [e.get("kind") for e in history if "problem" not in e][-3:],
    }


def test_a_crash_at_any_mutation_of_an_abort_converges_on_rerun(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    root, key = template
    code = scenario("{root}", key, ABORT)
    expected, failures = crash_at_every_point(
        root, tmp_path, code, lambda r: recover_abort(r, key), lambda r: aborted_outcome(r, key)
    )
    assert failures == []
    assert expected == {
        "markers": ["a/succeeded/p"],
        "sealed": [],
        "ledgers": ["aborted"],
        "outgoing": [],
        "out": [],
        "kinds": ["succeeded", "transferring", "succeeded"],
    }


# -- storage faults at the commit points --------------------------------------------------------------
FAULTS = ("rename-reports-failure", "rename-eio", "write-enospc", "late-name")


def _fault_points(trace: list[str]) -> list[tuple[int, str]]:
    """Each fault at the mutations where it applies and the protocol commits: marker and bundle renames,
    the manifest and the import record."""
    points: list[tuple[int, str]] = []
    for k, line in enumerate(trace, start=1):
        _number, what, path = line.split("\t")
        commit = (
            ".httk-workflow/state/" in path or SEALED_DIR in path or "transfers/" in path or "/out/" in path
        )
        if not commit:
            continue
        for fault in FAULTS:
            renames = fault.startswith("rename") or fault == "late-name"
            if (what == "rename") == renames and (what in ("rename", "create") or fault == "late-name"):
                points.append((k, fault))
    return points


def test_storage_faults_at_the_commit_points_are_reported_and_converge(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    root, key = template
    reference = tmp_path / "reference"
    shutil.copytree(root, reference)
    trace = count_mutations(scenario(reference, key, IMPORT), tmp_path / "trace")
    expected = imported_outcome(reference, key)
    points = _fault_points(trace)
    assert len(points) >= 10, trace
    failures = []
    for k, fault in points:
        case = tmp_path / f"{fault}-{k}"
        shutil.copytree(root, case)
        env = {**os.environ, FAULT_VARIABLE: f"{k}:{fault}"}
        done = subprocess.run(
            [sys.executable, "-c", scenario(case, key, IMPORT)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if (
            done.returncode not in (0, 1)
            or done.returncode == CRASH_EXIT_STATUS
            or "Traceback" in done.stderr
        ):
            failures.append(f"{fault} at {k}: exit {done.returncode}: {done.stderr[-400:]}")
            continue
        if done.returncode == 1 and len(done.stderr.strip().splitlines()) != 1:
            failures.append(f"{fault} at {k}: not one error line: {done.stderr!r}")
        recover_import(case, key)
        got = imported_outcome(case, key)
        if got != expected:
            failures.append(f"{fault} at {k} ({trace[k - 1]}): {got} != {expected}")
    assert failures == []
