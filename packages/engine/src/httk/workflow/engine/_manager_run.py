"""Running a manager for the command line: validate its labels, log, banner, run, summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from httk.workflow.protocol import validate_capability, validate_placement, validate_pool

from . import _logging
from ._manager import Manager, RunSummary
from ._manager_config import ManagerConfig


def check_config(config: ManagerConfig) -> None:
    """Refuse malformed labels before anything is written to the workspace."""
    for pool in config.pools:
        validate_pool(pool)
    for capability in config.capabilities:
        validate_capability(capability)
    for prefix in config.placement_prefixes:
        validate_placement(prefix)


def banner(manager: Manager, log_file: Path) -> str:
    config = manager.config
    return (
        f"httk manager {manager.manager_id} serving {manager.workspace.root} "
        f"(log {log_file}; pools {','.join(config.pools)}; "
        f"capabilities {','.join(config.capabilities) or '-'}; executors path; workers {config.workers})"
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
) -> RunSummary:
    check_config(config)
    _logging.level_number(log_level)  # refused before the manager writes anything
    manager = Manager(workspace, config)
    manager.start()
    path = log_file or manager.workspace.managers_dir / manager.manager_id / "log"
    with _logging.routed(manager.manager_id, path, level=log_level, json_logs=json_logs):
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
