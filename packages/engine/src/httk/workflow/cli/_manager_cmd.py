"""``httk workflow manager run|stop`` and ``httk workflow run``: task managers, launched or inline.

``run`` and ``manager run`` are one command (DECISIONS D16): ``--inline`` runs one manager in this
process; otherwise the launcher the workspace setting ``manager.launch`` names starts ``--count``
managers (default ``manager.count``, else 1), each running ``manager run --inline`` with the same
options. With no ``manager.launch``, one manager and no ``--detach``, the manager runs in this process,
as it always did. ``--detach`` returns once they are started, one line per manager or Slurm job; without
it, local processes are waited for and their summaries printed.

A manager prints one banner line when it starts (manager id, workspace, log file,
pools, capabilities, executors, resources) and one summary line when it stops, classifying every job left.
``--worker-resource NAME N`` (repeatable) advertises a capacity; inside a SLURM allocation the manager
also derives ``procs``, ``gpus``, ``nodes`` and ``mem`` from it, and the command line's values win. By
default it serves until nothing it can progress remains; ``--idle`` keeps it serving. SIGTERM or SIGINT
drains it (stop claiming, stop running attempts, keep committing for ``--drain-timeout`` seconds); a
second signal exits at once.

Several WORKSPACE arguments, or ``--watch-root DIR`` (repeatable), are served by one manager in this
process (no launcher: ``--count`` and ``--detach`` are refused), its ``--workers`` shared round-robin;
watch roots are rescanned every ``--rescan-interval`` seconds (``engine.manager._watch``).
"""

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._options import (
    DurableOpt,
    JsonOpt,
    ModuleOpt,
    SearchPathOpt,
    UsageError,
    WorkspaceArg,
    WorkspaceOpt,
    bind,
)
from ._remote_run import RemoteWorkspaceError, remote_arguments

if TYPE_CHECKING:
    from httk.workflow.engine import RunPlan

app = typer.Typer(name="manager", help="Run task managers.", no_args_is_help=True)

WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", min=1, help="Attempts run at once [default: manager.workers, else 1]."),
]
CountOpt = Annotated[
    int | None,
    typer.Option("--count", min=1, help="Managers to launch [default: manager.count, else 1]."),
]
DetachOpt = Annotated[bool, typer.Option("--detach", help="Start the managers and return.")]
InlineOpt = Annotated[
    bool, typer.Option("--inline", help="Run one manager in this process, ignoring manager.launch.")
]
ManagerIdOpt = Annotated[
    str | None,
    typer.Option("--manager-id", metavar="UUID", help="The id of this manager (launchers choose it)."),
]
HostShareOpt = Annotated[
    str | None,
    typer.Option(
        "--host-share",
        metavar="I/N",
        help="Manager I of N on this host: injected host capacities are split N ways (launchers set it).",
    ),
]
DrainBeforeEndOpt = Annotated[
    float | None,
    typer.Option(
        "--drain-before-end",
        metavar="SECONDS",
        min=1.0,
        help="Inside a Slurm job, drain once its end is this close (the Slurm launcher sets it).",
    ),
]
PoolOpt = Annotated[
    list[str] | None,
    typer.Option("--pool", metavar="POOL", help="A pool to claim from (repeatable) [default: default]."),
]
CapabilityOpt = Annotated[
    list[str] | None, typer.Option("--capability", metavar="LABEL", help="A capability offered (repeatable).")
]


PAIR: Any = (str, str)
"""``NAME N``: click makes a tuple of types one composite parameter type taking two words."""


WorkerResourceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--worker-resource",
        metavar="NAME N",
        click_type=PAIR,
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
NoConfineOpt = Annotated[
    bool,
    typer.Option(
        "--no-confine",
        help="Run runners without their Landlock confinement (by default they may write only their "
        "workdir, attempt control, .httk-job/, logs/, temporary space, home and declared paths).",
    ),
]
WorkspacesArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[WORKSPACE]...",
        show_default=False,
        help="The workspaces to serve (or one with --workspace); several are served by one manager.",
    ),
]
WatchRootOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--watch-root",
        metavar="DIR",
        help="Also serve every workspace found below DIR, rescanning it while serving (repeatable).",
    ),
]
RescanOpt = Annotated[
    float,
    typer.Option(
        "--rescan-interval",
        metavar="SECONDS",
        min=0.0,
        help="Seconds between rescans of the watch roots and checks for detach requests.",
    ),
]
LabelOpt = Annotated[
    str | None, typer.Option("--label", help="A stable administrative name for this manager.")
]


@app.command("run")
@remote_arguments("--detach")
def run(
    ctx: typer.Context,
    *,
    workspaces: WorkspacesArg = None,
    workspace_option: WorkspaceOpt = None,
    watch_root: WatchRootOpt = None,
    rescan_interval: RescanOpt = 10.0,
    count: CountOpt = None,
    detach: DetachOpt = False,
    inline: InlineOpt = False,
    workers: WorkersOpt = None,
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
    no_confine: NoConfineOpt = False,
    durable: DurableOpt = None,
    as_json: JsonOpt = False,
    manager_id: ManagerIdOpt = None,
    host_share: HostShareOpt = None,
    drain_before_end: DrainBeforeEndOpt = None,
) -> None:
    """Run task managers on a workspace until idle (or forever with --idle), through its launcher.

    Several workspaces, or --watch-root, are served by one manager in this process, its workers shared.
    """
    words = list(workspaces or ())
    several = len(words) + (workspace_option is not None) > 1 or bool(watch_root)
    if several:
        if count not in (None, 1) or detach:
            raise UsageError(
                "several workspaces or --watch-root are served by one manager in this process: "
                "--count and --detach launch managers for one workspace"
            )
        plan = None
    else:
        (root,) = bind(words[:1], [("WORKSPACE", workspace_option)], writes=True)
        from httk.workflow.engine import plan_run

        plan = plan_run(Path(root), count=count, detach=detach, inline=inline)
        if not plan.inline:
            _launch(ctx, plan, detach=detach, as_json=as_json)
            return
    from httk.workflow.engine import ManagerConfig, run_manager, run_workspaces

    options = ManagerConfig(
        workers=plan.workers(workers) if plan is not None else workers or 1,
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
        manager_id=manager_id,
        drain_before_end=drain_before_end,
        confine=not no_confine,
    )
    if plan is None:
        run_workspaces(
            _served([*([workspace_option] if workspace_option else []), *words]),
            list(watch_root or ()),
            options,
            rescan_interval=rescan_interval,
            host_share=_host_share(host_share),
            log_level=log_level,
            log_file=log_file,
            json_logs=json_logs,
            as_json=as_json,
            echo=typer.echo,
        )
        return
    run_manager(
        plan.root,
        options,
        host_share=_host_share(host_share),
        rescan_interval=rescan_interval,
        log_level=log_level,
        log_file=log_file,
        json_logs=json_logs,
        as_json=as_json,
        echo=typer.echo,
    )


def _served(words: list[str]) -> list[Path]:
    """The workspaces named on the command line (paths or registered names; none may be remote)."""
    from ._options import resolve

    paths = []
    for word in words:
        try:
            paths.append(Path(resolve(word, writes=False).path))
        except RemoteWorkspaceError:
            raise UsageError(
                f"{word!r} is a remote workspace: a manager serves only local workspaces together "
                "(run one on the remote with `httk workflow run --workspace REMOTE:WS`)"
            ) from None
    return paths


@app.command("stop")
def stop(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    manager: Annotated[
        list[str] | None, typer.Option("--manager", metavar="ID", help="A manager to stop (repeatable).")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every live manager.")] = False,
) -> None:
    """Ask live managers to drain: SIGTERM on this host, scancel --batch --signal=TERM for Slurm jobs."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    if bool(manager) == every:
        raise UsageError("give --manager ID (repeatable) or --all")
    from httk.workflow.engine import attach, stop_managers

    attached = attach(root, writable=False)
    results = stop_managers(attached, tuple(manager or ()))
    for result in results:
        typer.echo(result.line())
    if not results:
        typer.echo("no live manager to stop")
    if not all(result.signalled for result in results):
        raise typer.Exit(1)


LAUNCH_OPTIONS = frozenset(
    {
        "workspaces",
        "workspace_option",
        "watch_root",
        "count",
        "detach",
        "inline",
        "as_json",
        "manager_id",
        "host_share",
    }
)
"""Parameters that say how to launch, not how a manager runs: never passed on to the managers."""


def _launch(ctx: typer.Context, plan: "RunPlan", *, detach: bool, as_json: bool) -> None:
    """Start the managers through the launcher; print them, or wait for local ones and their summaries."""
    import json

    from httk.workflow.engine import launch_managers, wait_for_managers

    arguments = [
        "workflow",
        "manager",
        "run",
        "--inline",
        *manager_arguments(ctx),
        "--workspace",
        str(plan.root),
    ]
    report = launch_managers(plan, arguments)
    if detach or not report.waits:
        if as_json:
            typer.echo(json.dumps(report.as_dict()))
        else:
            for line in report.lines():
                typer.echo(line)
        return
    status = wait_for_managers(report, typer.echo)
    if status:
        raise typer.Exit(1)


def manager_arguments(ctx: typer.Context) -> list[str]:
    """The options this command line gave, spelled again for ``manager run --inline`` (paths absolute)."""
    words: list[str] = []
    for param in ctx.command.params:
        name = param.name or ""
        value = ctx.params.get(name)
        if name in LAUNCH_OPTIONS or not param.opts or value is None or value == param.default:
            continue
        option = param.opts[0]
        if getattr(param, "is_flag", False):
            secondary = getattr(param, "secondary_opts", None) or []
            if value:
                words.append(option)
            elif secondary:
                words.append(secondary[0])
            continue
        for item in value if getattr(param, "multiple", False) else [value]:
            parts = item if isinstance(item, tuple | list) else (item,)
            words += [
                option,
                *(os.path.abspath(part) if isinstance(part, Path) else str(part) for part in parts),
            ]
    return words


def _host_share(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise UsageError(f"--host-share must be I/N with 0 <= I < N, not {text!r}")
    return int(index), int(count)


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
