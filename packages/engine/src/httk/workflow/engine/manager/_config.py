"""What one task manager is configured to do; every member has the command line's default."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_POLL_INTERVAL = 0.005
DEFAULT_IDLE_POLL_INTERVAL = 0.25
DEFAULT_SCAN_INTERVAL = 0.25
DEFAULT_WINDOW_SECONDS = 1.0
"""How long unclaimed candidates of one ready pass stay usable before the window is refilled."""


@dataclass(frozen=True)
class ManagerConfig:
    """Deployment policy of one manager process.

    ``lease_seconds`` ``None`` follows the workspace policy. ``idle`` keeps serving when there is nothing
    to do; without it the manager exits once nothing it can progress remains (jobs it can never claim are
    reported, not waited for), or after ``idle_timeout`` seconds of waiting on work other managers hold.
    ``only_jobs`` (job keys) restricts every discovery — the marker streams and the request pass — to
    those jobs; ``job debug`` runs such a private manager, which claims no unrelated work.

    ``resources`` are the capacities the manager schedules against (``--worker-resource`` and SLURM's;
    :mod:`._resources`). ``None``, the library default and ``job debug``'s, schedules no resources at
    all: requirements are neither checked nor reserved. A manager started from the command line always
    has a mapping, so one with no capacities never claims a job that declares a positive amount.
    """

    workers: int = 1
    pools: tuple[str, ...] = ("default",)
    capabilities: tuple[str, ...] = ()
    resources: Mapping[str, int] | None = None
    lease_seconds: float | None = None
    idle: bool = False
    idle_timeout: float | None = None
    placement_prefixes: tuple[str, ...] = ()
    runner_search_path: tuple[Path, ...] = ()
    runner_modules: tuple[str, ...] = ("httk.workflow",)
    takeover_grace_factor: float = 2.0
    unsafe_persistent_takeover: bool = False
    unsafe_isolated_takeover: bool = False
    join_grace_seconds: float = 3600.0
    cancel_grace_seconds: float = 10.0  # SIGTERM to SIGKILL of a cancelled attempt's process group
    drain_timeout: float = 60.0
    label: str | None = None
    durable: bool | None = None
    bash_api: Path | None = None
    discovery_budget: int = 4096
    maximum_pass_markers: int = 256
    poll_interval: float = DEFAULT_POLL_INTERVAL
    scan_interval: float = DEFAULT_SCAN_INTERVAL
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    idle_poll_interval: float = DEFAULT_IDLE_POLL_INTERVAL
    only_jobs: frozenset[str] | None = None
    gc_interval: float | None = None  # seconds between garbage collections at the end of a tick; None: never

    def heartbeat_interval(self, lease_seconds: float) -> float:
        """Beat often enough that two missed beats still leave most of the lease."""
        return min(lease_seconds / 4.0, 30.0)
