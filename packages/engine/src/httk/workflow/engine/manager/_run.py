"""Running a manager for the command line: validate its labels, its capacities, log, banner, run, summary.

A manager started here always schedules resources: its capacities are the SLURM allocation's (only
inside one, :mod:`._slurm_resources`) overridden by ``--worker-resource``, possibly none at all.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from httk.workflow.protocol import InvalidNameError, validate_capability, validate_placement, validate_pool
from httk.workflow.protocol._job_rules import MAX_COUNT

from . import _logging
from ._config import ManagerConfig
from ._manager import Manager, RunSummary
from ._resources import describe
from ._slurm_resources import merged, slurm_capacities

log = logging.getLogger("httk.workflow.manager")


def check_config(config: ManagerConfig) -> None:
    """Refuse malformed labels before anything is written to the workspace."""
    for pool in config.pools:
        validate_pool(pool)
    for capability in config.capabilities:
        validate_capability(capability)
    for prefix in config.placement_prefixes:
        validate_placement(prefix)
    for label, amount in (config.resources or {}).items():
        check_capacity(label, amount)


def check_capacity(label: str, amount: object) -> None:
    """A capacity is a resource label (job.json's syntax) and an amount from 0 to 2**63 - 1."""
    try:
        validate_capability(label)
    except InvalidNameError as exc:
        raise InvalidNameError("resource name", label, exc.rule) from None
    if type(amount) is not int or not 0 <= amount <= MAX_COUNT:
        raise InvalidNameError(f"amount of resource {label}", amount, "must be a non-negative integer")


def with_capacities(config: ManagerConfig, environ: Mapping[str, str]) -> tuple[ManagerConfig, list[str]]:
    """``config`` scheduling the SLURM allocation's capacities overridden by its own; SLURM's warnings."""
    derived, warnings = slurm_capacities(environ)
    return dataclasses.replace(config, resources=merged(derived, config.resources or {})), warnings


def banner(manager: Manager, log_file: Path) -> str:
    config = manager.config
    return (
        f"httk manager {manager.manager_id} serving {manager.workspace.root} "
        f"(log {log_file}; pools {','.join(config.pools)}; "
        f"capabilities {','.join(config.capabilities) or '-'}; executors path; "
        f"resources {describe(config.resources or {})}; workers {config.workers})"
    )


def run_manager(
    workspace: str | Path,
    config: ManagerConfig,
    *,
    log_level: str | None = None,
    log_file: Path | None = None,
    json_logs: bool = False,
    as_json: bool = False,
    echo: Callable[[str], object] = print,
    environ: Mapping[str, str] | None = None,
) -> RunSummary:
    check_config(config)
    _logging.level_number(log_level)  # refused before the manager writes anything
    config, warnings = with_capacities(config, os.environ if environ is None else environ)
    manager = Manager(workspace, config)
    manager.start()
    path = log_file or manager.workspace.managers_dir / manager.manager_id / "log"
    with _logging.routed(manager.manager_id, path, level=log_level, json_logs=json_logs):
        for warning in warnings:
            log.warning("SLURM capacities: %s", warning)
        echo(banner(manager, path))
        summary = manager.run()
    if as_json:
        echo(
            json.dumps(
                {
                    "manager_id": summary.manager_id,
                    "exit_reason": summary.exit_reason,
                    "launched": summary.launched,
                    "committed": summary.committed,
                    **summary.census.as_dict(),
                    "advice": summary.census.advice(),
                }
            )
        )
    else:
        echo(summary.census.line())
        if summary.exit_reason == "idle-timeout":
            for line in summary.census.advice():
                echo(f"advice: {line}")
    return summary
