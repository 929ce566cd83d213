"""A manager over many workspaces: its first claim against a manager of one workspace.

Prints, for this machine, the time a fresh manager process's roster needs from its first discovery to
its first claimed marker (the first loop turn of ``manager run --watch-root``: the watch root listed,
every workspace's format.json read, a manager record, journal writer and heartbeat created in each, then
ticks in turn until one claims), for

- a watch root holding one workspace of ``--ready`` ready jobs, and
- a watch root holding ``--workspaces`` workspaces of ``--ready`` ready jobs each,

interleaved in each of ``--repeat`` rounds; the ratio many / one is taken within a round, and the
median of those ratios is compared with the goal of issue 14 (at most 2). The plain one-workspace
manager (``Manager.start()`` and its ticks, no roster) is timed in the same rounds for reference.

How the ready state is built: as ``throughput.py`` part 2 (``submit_jobs`` non-durable, then every
submitted marker registered with ``_launch.register``), once per workspace; the page cache is warm.
Each fresh manager claims one more job of each workspace it served (its attempt runs the minimal
runner), so a round leaves the workspaces with fewer ready jobs than the round before: at most
``--repeat`` of ``--ready``.

    ./dev bench watch [--workspaces 20] [--ready 1000] [--repeat 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from httk.workflow.engine.core._clock import SYSTEM_CLOCK
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._transition import Move, TransitionResult
from httk.workflow.engine.core._workspace import MarkerLocation
from httk.workflow.engine.manager._launch import register
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig, ManagerState
from httk.workflow.engine.manager._watch import WatchRoster, member_maker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the workspace builder beside this file
from benchmarks.throughput import MINIMAL_RUNNER, load, new_workspace

GOAL_RATIO = 2.0
CONFIG = ManagerConfig(workers=2, durable=False, confine=False, resources=None)


def progress(message: str) -> None:
    print(f"[watch] {message}", file=sys.stderr, flush=True)


def build(root: Path, runner_file: Path, count: int) -> None:
    """One workspace of ``count`` ready jobs at ``root``."""
    ws = new_workspace(root, runner_file, count, durable=False)
    state = ManagerState(ws, ManagerConfig(), SYSTEM_CLOCK)
    for marker in walk_markers(ws, Kind.SUBMITTED):
        if isinstance(marker, MarkerLocation):
            register(state, marker)
    ws.close()


class ClaimClock:
    """Notes when the first claim of any manager state in this process completes its group commit."""

    def __init__(self) -> None:
        self.first: float | None = None
        self._move_all = ManagerState.move_all

    def __enter__(self) -> ClaimClock:
        clock, original = self, self._move_all

        def timed(
            state: ManagerState,
            moves: Sequence[Move],
            *,
            failed: Callable[[int, Exception], None] | None = None,
        ) -> list[TransitionResult]:
            results = original(state, moves, failed=failed)
            if clock.first is None and any(frame.kind is Kind.CLAIMED for _, frame, _ in moves):
                clock.first = time.perf_counter()
            return results

        ManagerState.move_all = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *_exc: object) -> None:
        ManagerState.move_all = self._move_all  # type: ignore[method-assign]


def first_claim_of_roster(watch_root: Path) -> float:
    """Seconds from a fresh roster's first discovery of ``watch_root`` to its first claimed marker."""
    roster = WatchRoster([], [watch_root], CONFIG, SYSTEM_CLOCK, member_maker(CONFIG, SYSTEM_CLOCK))
    with ClaimClock() as claims:
        start = time.perf_counter()
        roster.refresh()
        while claims.first is None:
            for member in roster.members():
                member.tick()
                if claims.first is not None:
                    break
        seconds = claims.first - start
    retire(roster.members())
    roster.close()
    return seconds


def first_claim_of_manager(root: Path) -> float:
    """Seconds from a plain manager's ``start()`` to its first claimed marker (the reference)."""
    manager = Manager(root, CONFIG)
    with ClaimClock() as claims:
        start = time.perf_counter()
        manager.start()
        while claims.first is None:
            manager.tick()
        seconds = claims.first - start
    retire([manager])
    return seconds


def retire(members: Sequence[Manager]) -> None:
    for member in members:
        for live in member.live_attempts():
            live.process.wait()
        member.finish()
        member.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workspaces", type=int, default=20)
    parser.add_argument("--ready", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build (default: a temporary directory)"
    )
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-watch-", dir=options.dir))
    try:
        run(base, options.workspaces, options.ready, options.repeat)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(base: Path, workspaces: int, ready: int, repeat: int) -> None:
    print(f"machine: {load()}")
    runner_file = base / "succeed.sh"
    runner_file.write_text(MINIMAL_RUNNER)
    runner_file.chmod(0o755)
    one, many = base / "one", base / "many"
    one.mkdir()
    many.mkdir()
    progress(f"building 1 + {workspaces} workspaces of {ready:,} ready jobs")
    build(one / "ws", runner_file, ready)
    for index in range(workspaces):
        build(many / f"ws-{index:02}", runner_file, ready)
        progress(f"  built {index + 1} of {workspaces}")
    cases: dict[str, Callable[[], float]] = {
        "manager, 1 workspace": lambda: first_claim_of_manager(one / "ws"),
        "watch root, 1 workspace": lambda: first_claim_of_roster(one),
        f"watch root, {workspaces} workspaces": lambda: first_claim_of_roster(many),
    }
    figures: dict[str, list[float]] = {name: [] for name in cases}
    ratios: list[float] = []
    for round_number in range(repeat):
        for name, case in cases.items():
            figures[name].append(case())
        ratios.append(
            figures[f"watch root, {workspaces} workspaces"][-1] / figures["watch root, 1 workspace"][-1]
        )
        progress(f"round {round_number + 1} of {repeat}: ratio {ratios[-1]:.2f}")
    print(
        f"\nfirst claim with {ready:,} ready jobs per workspace "
        f"(median of {repeat} rounds, 2 workers, warm cache)"
    )
    for name, values in figures.items():
        print(f"  {name:<28} {statistics.median(values) * 1000:8.1f} ms")
    median = statistics.median(ratios)
    verdict = "met" if median <= GOAL_RATIO else "missed"
    print(
        f"{workspaces} workspaces / 1 workspace (median of per-round ratios): {median:.2f} "
        f"(goal at most {GOAL_RATIO:g}: {verdict})"
    )
    print(f"machine: {load()}")


if __name__ == "__main__":
    main()
