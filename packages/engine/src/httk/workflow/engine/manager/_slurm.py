"""The packaged ``slurm`` launcher: one batch script, submitted once per manager with ``sbatch``.

The script is written once per launch to ``.httk-workflow/batch/manager-<stamp>-<random>.sh``
(mode 0700, created exclusively) from the workspace settings (validated as the table below says);
the scheduler's output of each job lands next to it as ``manager-<stamp>-<random>-<jobid>.out``. Both stay for
inspection: they are launcher output, not protocol state, and nothing in the engine reads them back.
The script runs the prelude under ``set -e`` and ``exec``\\ s ``manager run --inline`` with the caller's
manager options (:func:`._launchers.shell_script`), plus ``--drain-before-end``, so a manager stops claiming
and drains before its walltime; it is submitted with ``--no-requeue``, because a requeued manager
would only compete with the one the next launch starts.

A manager does not outlive its allocation: to keep ``manager.count`` managers serving across
allocations, launch again (a cron job, or a workflow step that runs ``httk workflow run --detach``);
each new manager recovers what the previous allocation left, which after a drain is nothing.

Partial failure: when ``sbatch`` refuses after accepting some jobs, the launch raises
:class:`LaunchError` whose text contains ``submitted: N`` and ``job_ids: [...]``: those jobs are
queued and will run; cancel them before retrying, or keep them and launch only the rest.

The script's settings:

========================  ======================  ==================================================
setting                   directive               accepted values
========================  ======================  ==================================================
``slurm.account``         ``--account``           a name: letters, digits, ``_ . + -``
``slurm.partition``       ``--partition``         a name, or several separated by commas
``slurm.reservation``     ``--reservation``       a name
``slurm.time_limit``      ``--time``              ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``
``slurm.nodes``           ``--nodes``             a positive integer or ``MIN-MAX``
``slurm.cpus_per_task``   ``--cpus-per-task``     a positive integer
``slurm.ntasks``          ``--ntasks``            a positive integer
``slurm.ntasks_per_node`` ``--ntasks-per-node``   a positive integer
``slurm.mem``             ``--mem``               an integer with an optional ``K``, ``M``, ``G``, ``T``
``slurm.gres``            ``--gres``              ``NAME[:TYPE][:COUNT]``, several separated by commas
``slurm.signal_seconds``  ``--signal``            seconds before the end at which the manager drains
========================  ======================  ==================================================

Why validate what ``#SBATCH`` lines never pass to a shell: a value holding a newline would end the
directive and start a line the batch shell executes, and a value holding a space or ``#`` would be cut
short by sbatch's own parsing. So every value must match its pattern whole, and an unknown
``slurm.*`` setting (a typo would otherwise be ignored silently) is refused like a bad value; the
refusal names the setting and the value, and nothing is written.

The drain margin: the script asks Slurm for ``--signal=B:TERM@S`` (``B:`` signals the batch shell,
which *is* the manager because the script ``exec``\\ s it), and the manager is told ``--drain-before-end
S`` so it also stops claiming on its own once ``squeue`` says less than ``S`` seconds remain. ``S`` is
``slurm.signal_seconds`` (default 300), at most half the time limit, so a short allocation still
spends its first half working.

**Draining before the end** (:class:`AllocationWatch`). The signal alone is not enough: Slurm delivers
it from a periodic check (up to a minute late or early), and an operator's ``scontrol update`` moves
the end. So a manager given ``--drain-before-end S`` also reads its job's end at its first tick and
every :data:`CHECK_SECONDS`, and once fewer than ``S`` seconds remain it drains exactly as on SIGTERM:
no more claims, its attempts stopped and retried as ``lease_lost``, exit 0, nothing left to recover.

**Evidence** (:func:`allocation_evidence`). A persistent-workdir attempt whose process ran on another
host cannot be proven stopped by a kernel here; when its manager's Slurm job ended on a cluster that
kills every process of a job (:class:`..core._liveness.SlurmOracle`), nothing of it runs any more, and
that admits a takeover (rule ``allocation_ended``) or completes a cancellation.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import Clock
from httk.workflow.engine.core._liveness import SlurmOracle, job_end, recorded_batch
from httk.workflow.protocol import LauncherError, LaunchError

from ._launchers import LaunchReport, LaunchRequest, Started, shell_script
from ._state import ManagerState, PerManager

log = logging.getLogger("httk.workflow.manager")

# -- the script from the settings -------------------------------------------------------------------
_NAME = r"[A-Za-z0-9_.+-]{1,128}"
_POSITIVE = r"[1-9][0-9]{0,8}"
PATTERNS: dict[str, tuple[str, str, str]] = {
    # setting: (directive, pattern, what it must be)
    "slurm.account": ("--account", _NAME, "a Slurm account name"),
    "slurm.partition": ("--partition", rf"{_NAME}(,{_NAME})*", "a partition name (or a comma list)"),
    "slurm.reservation": ("--reservation", _NAME, "a reservation name"),
    "slurm.time_limit": (
        "--time",
        r"[0-9]{1,7}(:[0-9]{1,2}){0,2}|[0-9]{1,5}-[0-9]{1,2}(:[0-9]{1,2}){0,2}",
        "a time limit such as 90, 1:30:00 or 2-00:00:00",
    ),
    "slurm.nodes": ("--nodes", rf"{_POSITIVE}(-{_POSITIVE})?", "a node count or MIN-MAX"),
    "slurm.cpus_per_task": ("--cpus-per-task", _POSITIVE, "a positive integer"),
    "slurm.ntasks": ("--ntasks", _POSITIVE, "a positive integer"),
    "slurm.ntasks_per_node": ("--ntasks-per-node", _POSITIVE, "a positive integer"),
    "slurm.mem": ("--mem", r"[0-9]{1,12}[KMGTkmgt]?", "an amount of memory such as 4000 or 16G"),
    "slurm.gres": (
        "--gres",
        r"[A-Za-z0-9_]{1,64}(:[A-Za-z0-9_.-]{1,64}){0,2}(,[A-Za-z0-9_]{1,64}(:[A-Za-z0-9_.-]{1,64}){0,2})*",
        "generic resources such as gpu:2 or gpu:a100:1",
    ),
}
SIGNAL_SETTING = "slurm.signal_seconds"
DEFAULT_SIGNAL_SECONDS = 300
MAX_SIGNAL_SECONDS = 65535  # what sbatch's --signal accepts


@dataclass(frozen=True)
class BatchOptions:
    directives: tuple[tuple[str, str], ...]  # (--option, value) in the table's order
    drain_seconds: int
    time_limit_seconds: int | None


def batch_options(settings: Mapping[str, Any]) -> BatchOptions:
    """The validated directives of ``settings``; :class:`LauncherError` names the first bad one."""
    known = {*PATTERNS, SIGNAL_SETTING}
    unknown = sorted(name for name in settings if name.startswith("slurm.") and name not in known)
    if unknown:
        raise LauncherError(f"unknown Slurm setting {unknown[0]!r}; known: {', '.join(sorted(known))}")
    directives = []
    for name, (option, pattern, what) in PATTERNS.items():
        if name in settings and settings[name] is not None:
            directives.append((option, _checked(name, settings[name], pattern, what)))
    limit = None
    if "slurm.time_limit" in settings and settings["slurm.time_limit"] is not None:
        limit = time_limit_seconds(str(settings["slurm.time_limit"]))
    return BatchOptions(tuple(directives), _drain_seconds(settings, limit), limit)


def _checked(name: str, value: object, pattern: str, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise LauncherError(f"the setting {name} must be {what}, not {value!r}")
    text = str(value)
    if not re.fullmatch(pattern, text):
        raise LauncherError(f"the setting {name} must be {what}, not {text!r}")
    return text


def time_limit_seconds(text: str) -> int:
    """Seconds of a Slurm time limit in one of the forms the table lists."""
    days, _, clock = text.rpartition("-") if "-" in text else ("", "", text)
    parts = [int(part) for part in clock.split(":")]
    if days:
        hours, minutes, seconds = [*parts, 0, 0][:3]
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def _drain_seconds(settings: Mapping[str, Any], limit: int | None) -> int:
    value = settings.get(SIGNAL_SETTING, DEFAULT_SIGNAL_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIGNAL_SECONDS:
        raise LauncherError(
            f"the setting {SIGNAL_SETTING} must be an integer from 1 to {MAX_SIGNAL_SECONDS}, not {value!r}"
        )
    if limit is not None:
        value = max(1, min(value, limit // 2))
    return value


def render(options: BatchOptions, *, job_name: str, output: str, header: str, body: str) -> str:
    """The whole script: ``#SBATCH`` lines, a comment naming its origin, then ``body`` (the command)."""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --output={output}",
        "#SBATCH --no-requeue",
        f"#SBATCH --signal=B:TERM@{options.drain_seconds}",
    ]
    lines += [f"#SBATCH {option}={value}" for option, value in options.directives]
    lines += [f"# {line}" for line in header.splitlines()]
    return "\n".join(lines) + "\n" + body


# -- launching -------------------------------------------------------------------------------------
JOB_NAME = "httk-manager"
_SAFE_PATH = re.compile(r"[^\s%#\\\"']+\Z")
Submit = Callable[[Path], str]


class SlurmLauncher:
    template = "slurm"
    settings = (*PATTERNS, SIGNAL_SETTING)

    def __init__(self, submit: Submit | None = None) -> None:
        self._submit = submit or sbatch

    def launch(self, request: LaunchRequest) -> LaunchReport:
        script, output_pattern = write_script(request)
        job_ids: list[str] = []
        for _ in range(request.count):
            try:
                job_ids.append(self._submit(script))
            except LaunchError as exc:
                raise LaunchError(
                    f"{exc}; submitted: {len(job_ids)}; job_ids: {json.dumps(job_ids)}; "
                    f"cancel them (scancel {' '.join(job_ids) or '...'}) before retrying",
                    tuple(job_ids),
                ) from exc
        started = tuple(
            Started("slurm_job", job_id, Path(output_pattern.replace("%j", job_id))) for job_id in job_ids
        )
        return LaunchReport(request.launcher, self.template, started, script=script)


def write_script(request: LaunchRequest) -> tuple[Path, str]:
    """Compose and write the batch script; its path and the ``--output`` pattern it names."""
    options = batch_options(request.settings)
    directory = request.workspace / ".httk-workflow" / "batch"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    stem = f"manager-{stamp}-{secrets.token_hex(4)}"
    output = str(directory / f"{stem}-%j.out")
    if not _SAFE_PATH.match(str(directory)):
        raise LauncherError(
            f"the workspace path {str(request.workspace)!r} cannot be named in an #SBATCH line "
            "(it holds whitespace, a quote, '#', '%' or a backslash)"
        )
    arguments = [*request.arguments, "--drain-before-end", str(options.drain_seconds)]
    body = shell_script(request.program, arguments, request.settings)
    header = (
        f"httk-workflow manager batch script (launcher {request.launcher}) for {request.workspace}\n"
        f"written {stamp}; submitted once per manager with sbatch"
    )
    text = render(options, job_name=JOB_NAME, output=output, header=header, body=body)
    _fsops.make_dirs(directory, durable=False, mode=0o700)
    path = directory / f"{stem}.sh"
    _fsops.create_file(path, text.encode(), durable=False, mode=0o700, exact_mode=True)
    return path, output


def sbatch(script: Path, environ: Mapping[str, str] | None = None) -> str:
    """Submit ``script`` with ``sbatch --parsable``; the job id. :class:`LaunchError` when refused."""
    base = os.environ if environ is None else environ
    # An allocation the caller runs in must not leak into the new job's request (SLURM_MEM_PER_CPU and
    # friends are read by sbatch as defaults); SLURM_CONF names the cluster and stays.
    env = {
        name: value for name, value in base.items() if not name.startswith("SLURM_") or name == "SLURM_CONF"
    }
    try:
        result = subprocess.run(
            ["sbatch", "--parsable", str(script)],
            cwd=script.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"sbatch could not be run: {exc}") from exc
    job_id = result.stdout.strip().split(";")[0]
    if result.returncode != 0 or not job_id.isdigit():
        message = " ".join(result.stderr.split()) or f"exit status {result.returncode}"
        raise LaunchError(f"sbatch refused {script}: {message}")
    return job_id


# -- draining before the end ------------------------------------------------------------------------
CHECK_SECONDS = 60.0


class AllocationWatch:
    """Says when the allocation ``job_id`` ends within ``margin`` seconds."""

    def __init__(
        self,
        job_id: str,
        margin: float,
        clock: Clock,
        end_of: Callable[[str], datetime | None] = job_end,
        now: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.job_id = job_id
        self.margin = margin
        self._clock = clock
        self._end_of = end_of
        self._now = now
        self._checked = float("-inf")
        self.end: datetime | None = None

    @classmethod
    def of(cls, margin: float | None, environ: Mapping[str, str], clock: Clock) -> AllocationWatch | None:
        job_id = environ.get("SLURM_JOB_ID")
        if margin is None or not job_id:
            return None
        return cls(job_id, margin, clock)

    def ending(self) -> bool:
        """Whether the allocation ends within the margin (the end is re-read every CHECK_SECONDS)."""
        if self._clock.monotonic() - self._checked >= CHECK_SECONDS:
            self._checked = self._clock.monotonic()
            self.end = self._end_of(self.job_id)
        if self.end is None:
            return False
        remaining = (self.end - self._now()).total_seconds()
        if remaining > self.margin:
            return False
        log.info(
            "Slurm job %s ends at %s, in %.0f s (drain margin %.0f s): draining",
            self.job_id,
            self.end.isoformat(),
            remaining,
            self.margin,
        )
        return True


# -- evidence --------------------------------------------------------------------------------------
_ORACLES = PerManager(SlurmOracle)
_BATCHES: PerManager[dict[str, dict[str, Any] | None]] = PerManager(dict)
"""Each manager's recorded batch job by manager id: a manifest is written once, so read once."""


def allocation_evidence(
    state: ManagerState, frame: Mapping[str, Any], oracle: SlurmOracle | None = None
) -> dict[str, Any] | None:
    """What the batch system says about the allocation the frame's manager ran in, once it ended.

    ``None`` when that manager ran in no batch job, or the batch system does not say it ended. The
    record's ``sufficient`` tells whether it proves every process of the attempt gone.
    """
    owner = frame.get("manager_id")
    known = _BATCHES.of(state)
    if not isinstance(owner, str):
        return None
    if owner not in known:
        known[owner] = recorded_batch(state.workspace, owner)
    batch = known[owner]
    if batch is None:
        return None
    evidence = (oracle or _ORACLES.of(state)).evidence(batch)
    if evidence is not None and not evidence["sufficient"] and state.first_time(f"batch {batch['job_id']}"):
        log.info(
            "Slurm reports job %s %s, but under %s a process can escape its job: not proof that the "
            "attempts of manager %s stopped",
            evidence["job_id"],
            evidence["job_state"],
            evidence["proctrack"],
            frame.get("manager_id"),
        )
    return evidence
