"""A manager stopped after each of its mutations in turn; a fresh manager must finish the job unchanged.

For every scenario the uncrashed run is traced once to learn its mutation list (N entries). Then for
EVERY k in 1..N: a fresh workspace and job, a manager process stopped by ``HTTK_WORKFLOW_CRASH_AFTER=k``
(exit 86), its heartbeat made old (it is dead: nobody will refresh it, so aging the file stands in for
the lease running out), and fresh managers in this process until the job settles. The job must end
exactly as the uncrashed run did:

- exactly one marker for the job in the whole state tree, of the same final kind and step;
- the chain of frames from that marker back to the submission readable, generations descending by one;
- no attempt executed twice (the runner's exclusive-create log), every executed attempt on the chain, and
  an activation executed again only after a retry frame that justifies it: one the step requested, or a
  ``lease_lost`` takeover whose evidence proves the old process gone.

The crash points are split into shards by residue so that xdist spreads them; together the shards cover
every k exactly once. Each crash run is also traced, and its trace must be the reference's first k
entries: that is what proves "after mutation k" is the same point in every run. A failing crash point
does not stop the enumeration: the shard reports every failing k at once.

The last test names the crash points of the specification's interruption table (required outcome
processing order) in the reference trace and checks, per row, the state the crash leaves and that the
recovery is the one the table prescribes: revalidate, retry, apply without rerunning, replay, or nothing.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from httk.workflow.engine.core._fsops import CRASH_EXIT_STATUS
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.manager._state import ManagerConfig

from tests.crash._scenarios import (
    LEASE_SECONDS,
    chain,
    check_reexecutions,
    crash_points,
    expire_heartbeats,
    markers_by_job,
    new_case,
    normalized_trace,
    read_executions,
    recover_until_settled,
    run_manager_process,
    single_marker,
)


@dataclass(frozen=True)
class Expected:
    """How the uncrashed run of a plan ends (asserted on the reference run itself, too)."""

    kind: Kind
    step: str
    executions: tuple[int, ...]  # executions per activation, in activation order
    requested_retries: int = 0
    failure_code: str | None = None


EXPECTED = {
    "advance": Expected(Kind.SUCCEEDED, "collect", (1, 1)),
    "succeed": Expected(Kind.SUCCEEDED, "prepare", (1,)),
    "fail": Expected(Kind.FAILED, "prepare", (1,), failure_code="test.declared"),
    "retry": Expected(Kind.SUCCEEDED, "prepare", (2,), requested_retries=1),
    "pause": Expected(Kind.PAUSED, "prepare", (1,)),
}


@dataclass(frozen=True)
class Shard:
    """Crash points ``shard + 1``, ``shard + 1 + shards``, ... of one scenario."""

    plan: str
    durable: bool
    shard: int
    shards: int


SCENARIOS = [  # (plan, durable, shards): the costly durable one first, in more shards, for xdist balance
    ("advance", True, 8),
    ("advance", False, 4),
    ("retry", False, 4),
    ("succeed", False, 3),
    ("fail", False, 3),
    ("pause", False, 3),
]
SHARDS = [
    pytest.param(
        Shard(plan, durable, shard, shards), id=f"{plan}{'-durable' if durable else ''}-{shard + 1}of{shards}"
    )
    for plan, durable, shards in SCENARIOS
    for shard in range(shards)
]
RECOVERY = ManagerConfig(workers=1, lease_seconds=LEASE_SECONDS)


@dataclass(frozen=True)
class Reference:
    trace: list[str]
    expected: Expected


References = Callable[[str, bool], Reference]


@pytest.fixture(scope="session")
def references(tmp_path_factory: pytest.TempPathFactory) -> References:
    """The traced uncrashed run of each (plan, durable), computed once per test process."""
    cache: dict[tuple[str, bool], Reference] = {}

    def get(plan: str, durable: bool) -> Reference:
        if (plan, durable) not in cache:
            base = tmp_path_factory.mktemp(f"reference-{plan}-{'durable' if durable else 'fast'}")
            case = new_case(base / "case", plan, durable=durable)
            trace = base / "trace"
            result = run_manager_process(case.root, trace=trace)
            assert result.returncode == 0, result.stderr
            expected = EXPECTED[plan]
            check_settled(case.root, case.exec_log, case.job_key, expected, exact=True)
            cache[(plan, durable)] = Reference(normalized_trace(trace, case.root), expected)
        return cache[(plan, durable)]

    return get


def check_settled(
    root: Path, exec_log: Path, job_key: str, expected: Expected, *, exact: bool = False
) -> None:
    """The job ended as ``expected``, with one marker, an intact chain and justified executions only.

    ``exact`` (the uncrashed run) also requires the expected number of executions of each activation.
    """
    workspace = attach(root, writable=False)
    everything = markers_by_job(workspace)
    assert list(everything) == [job_key], f"markers of other jobs or none: {everything}"
    marker = single_marker(workspace, job_key)
    assert marker.kind is expected.kind, f"ended {marker.kind}, the uncrashed run ends {expected.kind}"
    frames = chain(workspace, marker)
    final = frames[0]
    assert final["step"] == expected.step, final
    if expected.failure_code is not None:
        assert final["failure"]["code"] == expected.failure_code, final
    executions = read_executions(exec_log)
    check_reexecutions(frames, executions, requested=expected.requested_retries)
    activations = [f["activation_id"] for f in reversed(frames) if f["kind"] == "claimed"]
    executed = [len(executions.attempts[a]) for a in dict.fromkeys(activations) if a in executions.attempts]
    assert len(executed) == len(expected.executions), (executed, expected.executions)
    if exact:
        assert tuple(executed) == expected.executions, (executed, expected.executions)


def test_reference_runs_are_deterministic_and_durability_only_adds_fsyncs(references: References) -> None:
    """Crash point k means the same operation in every run, and durable mode mutates the same names.

    Durability changes where fsync happens, never which names are created, written, renamed or removed:
    so the durable scenario's enumeration covers the same crash points as the fast one.
    """
    fast, durable = references("advance", False), references("advance", True)
    assert durable.trace == fast.trace
    counts = {plan: len(references(plan, False).trace) for plan in EXPECTED}
    assert all(count >= 40 for count in counts.values()), counts


@pytest.mark.parametrize("part", SHARDS)
def test_every_crash_of_a_manager_is_recovered_as_if_it_never_happened(
    references: References, tmp_path: Path, part: Shard
) -> None:
    reference = references(part.plan, part.durable)
    failures: list[str] = []
    points = list(crash_points(len(reference.trace), part.shard, part.shards))
    assert points, "every shard has crash points"
    for after in points:
        try:
            crash_and_recover(tmp_path / f"k{after}", part, after, reference)
        except Exception:  # every failing crash point is reported, not only the first
            failures.append(
                f"{part} k={after} ({reference.trace[after - 1]}):\n{traceback.format_exc(limit=-2)}"
            )
    assert not failures, f"{len(failures)} of {len(points)} crash points failed:\n" + "\n".join(failures)


def crash_and_recover(base: Path, part: Shard, after: int, reference: Reference) -> None:
    case = new_case(base, part.plan, durable=part.durable)
    trace = base / "trace"
    result = run_manager_process(case.root, crash_after=after, trace=trace)
    assert result.returncode == CRASH_EXIT_STATUS, (result.returncode, result.stderr)
    assert normalized_trace(trace, case.root) == reference.trace[:after], "the run diverged before k"
    workspace = attach(case.root)
    expire_heartbeats(workspace)
    recover_until_settled(case.root, case.job_key, RECOVERY)
    check_settled(case.root, case.exec_log, case.job_key, reference.expected)


# -- the interruption table of the outcome-processing order, row by row ---------------------------------
def _rename_to(trace: list[str], kind: str, nth: int = 1) -> int:
    """The crash point (1-based) right after the ``nth`` marker rename into ``kind``."""
    hits = [
        i + 1 for i, line in enumerate(trace) if line.startswith(f"rename <ws>/.httk-workflow/state/{kind}/")
    ]
    return hits[nth - 1]


def _frame_for(trace: list[str], rename: int) -> int:
    """The crash point right after the journal append of the frame that ``rename`` publishes."""
    return max(i + 1 for i, line in enumerate(trace[: rename - 1]) if line.startswith("append "))


ROWS = [
    "in submitted",
    "before outcome.ready",
    "after outcome publication",
    "after destination frame",
    "after marker rename",
]


@pytest.mark.parametrize("row", ROWS)
def test_each_interruption_row_is_reached_and_recovered_as_the_table_says(
    references: References, tmp_path: Path, row: str
) -> None:
    """The enumeration above reaches every row of the specification's table; here each is pinned down.

    The crash points are found by name in the reference trace of the two-step job, so this stays true
    when the engine adds or removes mutations elsewhere.
    """
    reference = references("advance", False)
    trace = reference.trace
    after = {
        "in submitted": _frame_for(trace, _rename_to(trace, "ready")),
        "before outcome.ready": _rename_to(trace, "running"),  # the gate is never released
        "after outcome publication": _frame_for(trace, _rename_to(trace, "committing")),
        "after destination frame": _frame_for(trace, _rename_to(trace, "ready", nth=2)),
        "after marker rename": _rename_to(trace, "ready", nth=2),
    }[row]
    case = new_case(tmp_path / "case", "advance")
    assert run_manager_process(case.root, crash_after=after).returncode == CRASH_EXIT_STATUS
    workspace = attach(case.root)
    marker = single_marker(workspace, case.job_key)
    job_dir = workspace.payload_path(marker.placement, case.job_key)
    outcomes = sorted(job_dir.glob(".httk-attempt.*/outcome.ready"))
    executed = read_executions(case.exec_log).total
    state = {
        "in submitted": (Kind.SUBMITTED, 0, 0),
        "before outcome.ready": (Kind.RUNNING, 0, 0),
        "after outcome publication": (Kind.RUNNING, 1, 1),
        "after destination frame": (Kind.COMMITTING, 1, 1),
        "after marker rename": (Kind.READY, 1, 1),  # the old attempt's control dir is left to cleanup
    }[row]
    assert (marker.kind, len(outcomes), executed) == state

    expire_heartbeats(workspace)
    recover_until_settled(case.root, case.job_key, RECOVERY)
    check_settled(case.root, case.exec_log, case.job_key, reference.expected)
    frames = chain(attach(case.root), single_marker(attach(case.root), case.job_key))
    takeovers = [f for f in frames if f.get("attempt_reason") == "lease_lost" and f["kind"] == "ready"]
    assert len(takeovers) == (1 if row == "before outcome.ready" else 0), takeovers
    assert read_executions(case.exec_log).total == 2  # one per step: a published outcome is never rerun
