"""``httk workflow manager run`` and ``httk workflow run``: a task manager in the foreground.

Both run the same manager. It prints one banner line when it starts (manager id, workspace, log file,
pools, capabilities, executors, resources) and one summary line when it stops, classifying every job left.
``--worker-resource NAME N`` (repeatable) advertises a capacity; inside a SLURM allocation the manager
also derives ``procs``, ``gpus``, ``nodes`` and ``mem`` from it, and the command line's values win. By
default it serves until nothing it can progress remains; ``--idle`` keeps it serving. SIGTERM or SIGINT
drains it (stop claiming, stop running attempts, keep committing for ``--drain-timeout`` seconds); a
second signal exits at once.
"""

import contextlib
import importlib
from pathlib import Path
from typing import Annotated, Any

import typer

from ._options import DurableOpt, JsonOpt, UsageError, WorkspaceArg, WorkspaceOpt, bind

app = typer.Typer(name="manager", help="Run task managers.", no_args_is_help=True)

WorkersOpt = Annotated[int, typer.Option("--workers", min=1, help="Attempts run at once.")]
PoolOpt = Annotated[
    list[str] | None,
    typer.Option("--pool", metavar="POOL", help="A pool to claim from (repeatable) [default: default]."),
]
CapabilityOpt = Annotated[
    list[str] | None, typer.Option("--capability", metavar="LABEL", help="A capability offered (repeatable).")
]


def _pair_type() -> Any:
    """Click's two-string tuple type, from the click this typer runs on (it vendors one since 0.28)."""
    for module in ("typer._click.types", "click.types"):
        with contextlib.suppress(ImportError):
            return importlib.import_module(module).Tuple([str, str])
    raise ImportError("neither typer's vendored click nor click is importable")


WorkerResourceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--worker-resource",
        metavar="NAME N",
        click_type=_pair_type(),
        help="A capacity this manager schedules against, such as procs 32 or mem 128000 (MB); repeatable.",
    ),
]
LeaseOpt = Annotated[
    float | None,
    typer.Option("--lease-seconds", min=1.0, help="This manager's lease [default: the workspace policy]."),
]
IdleOpt = Annotated[bool, typer.Option("--idle", help="Keep serving when there is nothing to do.")]
IdleTimeoutOpt = Annotated[
    float | None,
    typer.Option("--idle-timeout", min=0.0, help="Stop after this many seconds without progressable work."),
]
PrefixOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--placement-prefix", metavar="PREFIX", help="Scan only this placement subtree (repeatable)."
    ),
]
SearchPathOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--runner-search-path", metavar="DIR", help="A root for installed runners (repeatable, ordered)."
    ),
]
ModuleOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--runner-module",
        metavar="MODULE",
        help="Allow pkg:MODULE/... runners (repeatable) [default: httk.workflow].",
    ),
]
GraceFactorOpt = Annotated[
    float,
    typer.Option(
        "--takeover-grace-factor", min=1.0, help="Leases of silence that admit an isolated takeover."
    ),
]
UnsafePersistentOpt = Annotated[
    bool,
    typer.Option(
        "--unsafe-persistent-takeover", help="Relaunch persistent-workdir attempts on lease expiry alone."
    ),
]
UnsafeIsolatedOpt = Annotated[
    bool,
    typer.Option(
        "--unsafe-isolated-takeover", help="Relaunch isolated-workdir attempts on lease expiry alone."
    ),
]
JoinGraceOpt = Annotated[
    float, typer.Option("--join-grace-seconds", min=0.0, help="How long a join child may stay unresolvable.")
]
CancelGraceOpt = Annotated[
    float,
    typer.Option(
        "--cancel-grace-seconds", min=0.0, help="Seconds between SIGTERM and SIGKILL of a cancelled attempt."
    ),
]
DrainOpt = Annotated[
    float, typer.Option("--drain-timeout", min=0.0, help="Seconds to keep committing when draining.")
]
LogLevelOpt = Annotated[
    str | None,
    typer.Option(
        "--log-level",
        help="debug, info, warning or error, for file and console "
        "[default: info to the file, warning to the console].",
    ),
]
LogFileOpt = Annotated[
    Path | None,
    typer.Option("--log-file", help="Where the full log goes [default: .httk-workflow/managers/ID/log]."),
]
JsonLogsOpt = Annotated[bool, typer.Option("--json-logs", help="One JSON object per log line.")]
GcIntervalOpt = Annotated[
    float | None,
    typer.Option(
        "--gc-interval",
        metavar="SECONDS",
        min=0.0,
        help="Also run workspace gc at most once per SECONDS, at the end of a tick [default: never].",
    ),
]
LabelOpt = Annotated[
    str | None, typer.Option("--label", help="A stable administrative name for this manager.")
]


@app.command("run")
def run(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    workers: WorkersOpt = 1,
    pool: PoolOpt = None,
    capability: CapabilityOpt = None,
    worker_resource: WorkerResourceOpt = None,
    lease_seconds: LeaseOpt = None,
    idle: IdleOpt = False,
    idle_timeout: IdleTimeoutOpt = None,
    placement_prefix: PrefixOpt = None,
    runner_search_path: SearchPathOpt = None,
    runner_module: ModuleOpt = None,
    takeover_grace_factor: GraceFactorOpt = 2.0,
    unsafe_persistent_takeover: UnsafePersistentOpt = False,
    unsafe_isolated_takeover: UnsafeIsolatedOpt = False,
    join_grace_seconds: JoinGraceOpt = 3600.0,
    cancel_grace_seconds: CancelGraceOpt = 10.0,
    drain_timeout: DrainOpt = 60.0,
    log_level: LogLevelOpt = None,
    log_file: LogFileOpt = None,
    json_logs: JsonLogsOpt = False,
    label: LabelOpt = None,
    gc_interval: GcIntervalOpt = None,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a task manager on a workspace until it is idle (or forever with --idle)."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)])
    from httk.workflow.engine.manager._run import run_manager
    from httk.workflow.engine.manager._state import ManagerConfig

    options = ManagerConfig(
        workers=workers,
        pools=tuple(pool or ("default",)),
        capabilities=tuple(capability or ()),
        resources=worker_resources(worker_resource),
        lease_seconds=lease_seconds,
        idle=idle,
        idle_timeout=idle_timeout,
        placement_prefixes=tuple(placement_prefix or ()),
        runner_search_path=tuple(runner_search_path or ()),
        runner_modules=tuple(runner_module or ("httk.workflow",)),
        takeover_grace_factor=takeover_grace_factor,
        unsafe_persistent_takeover=unsafe_persistent_takeover,
        unsafe_isolated_takeover=unsafe_isolated_takeover,
        join_grace_seconds=join_grace_seconds,
        cancel_grace_seconds=cancel_grace_seconds,
        drain_timeout=drain_timeout,
        label=label,
        durable=durable,
        gc_interval=gc_interval,
    )
    run_manager(
        root,
        options,
        log_level=log_level,
        log_file=log_file,
        json_logs=json_logs,
        as_json=as_json,
        echo=typer.echo,
    )


def worker_resources(pairs: list[Any] | None) -> dict[str, int]:
    """The ``--worker-resource NAME N`` pairs as capacities (names are checked with the manager's labels)."""
    from httk.workflow.protocol import InvalidNameError

    capacities: dict[str, int] = {}
    for name, amount in pairs or ():
        if name in capacities:
            raise UsageError(f"--worker-resource {name} is given twice")
        if not (amount.isascii() and amount.isdigit()):
            raise InvalidNameError(f"amount of resource {name}", amount, "must be a non-negative integer")
        capacities[name] = int(amount)
    return capacities
