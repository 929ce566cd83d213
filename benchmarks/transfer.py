"""Detached transfer against submission: moving N ready jobs to another workspace vs submitting them.

In one run, on non-durable workspaces and through the command line: ``job submit`` of N payload
directories into workspace A (timed), a manager that claims nothing registers them (untimed), then
``transfer detach A <placement> --to DIR`` and ``transfer import B DIR/* --placement P`` (each timed).
Prints the three figures and the ratio submit / (detach + import). Goal (issue 14): >= 0.5.

Each timed command starts after ``sync``: creating an inode here costs a fifth of a millisecond or
several, depending on how much the writeback of what came just before (the payloads ``prepare``
wrote, the bundles detach wrote) competes with it, and without it submit paid for the untimed setup.
``--repeat N`` runs N rounds, each on fresh workspaces, and prints the median of the per-round ratios.
Each command's user and system CPU seconds are printed too, and ``--valgrind-jobs N`` adds rounds of 1
and N jobs with each command under callgrind: its instructions per job, which the load does not move.

Then, over ssh: a real sshd on 127.0.0.1 (the test suite's ``tests/sshkit.py``), a remote reaching it
whose ``httk`` has configuration of its own, and ``transfer send B <placement> --to REMOTE:C`` of the
same N jobs (timed: detach, one tar stream over the shared connection, import, acknowledgement).
Prints its figure and its ratio to the local detach + import (no goal: a figure).

    ./dev bench transfer [--jobs 1000] [--repeat 1] [--valgrind-jobs N] [--dir DIR] [--no-ssh]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test suite's sshd kit

PLACEMENT = "flat"
RUNNER_NAME = "bench-runner"


def job_document(index: int, runner: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": str(uuid.uuid4()),
        "tag": f"bench-{index}",
        "runner": runner,
        "workdir": {"mode": "persistent", "path": "run"},
        "data": {"mode": "none"},
        "initial_step": "start",
        "priority": 500,
        "claim": {"pool": "default", "required_capabilities": []},
        "inputs": {"index": index},
    }


CPU: dict[str, float] = {}
"""The user and system CPU seconds of the last command :func:`httk` ran: its ``user`` and ``sys``."""


VALGRIND: list[str] = []
"""The directory of the callgrind logs, when :func:`httk` runs the counted commands under callgrind."""


def _valgrind(label: str) -> list[str]:
    if not (VALGRIND and label):
        return []
    return [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        f"--log-file={VALGRIND[0]}/{label}.%p",
    ]


def httk(*args: str, counted: str = "") -> float:
    """Run one ``httk`` command; its wall time in seconds (its CPU times in :data:`CPU`). A ``counted``
    one runs under :data:`VALGRIND` when that is set, logging to ``<counted>.<pid>`` there."""
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [*_valgrind(counted), str(Path(sys.executable).with_name("httk")), *args],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.update(user=after.ru_utime - before.ru_utime, sys=after.ru_stime - before.ru_stime)
    return seconds


def prepare(base: Path, jobs: int) -> tuple[Path, Path, list[str]]:
    """Two transfer workspaces, the store runner in A, and N payload directories to submit."""
    source, target = base / "a", base / "b"
    for root in (source, target):
        httk(
            "workflow", "workspace", "init", str(root), "--no-durable", "--extension", "detached-transfer-v1"
        )
    runner_file = base / "runner"
    runner_file.write_text("#!/bin/sh\nexit 0\n")
    runner_file.chmod(0o755)
    httk("workflow", "runner", "publish", str(source), str(runner_file), "--name", RUNNER_NAME)
    from httk.workflow.engine.core._workspace import attach
    from httk.workflow.engine.publish._runners import stored_digest

    digest = stored_digest(attach(source, writable=False), RUNNER_NAME)
    runner: dict[str, Any] = {"source": "workspace", "path": RUNNER_NAME, "sha256": digest, "arguments": []}
    payloads = base / "payloads"
    payloads.mkdir()
    paths = []
    for index in range(jobs):
        payload = payloads / f"p{index}"
        payload.mkdir()
        (payload / "job.json").write_text(json.dumps(job_document(index, runner), indent=2))
        (payload / "files").mkdir()
        (payload / "files" / "INCAR").write_text(f"SYSTEM = bench {index}\nENCUT = 520\n")
        paths.append(str(payload))
    return source, target, paths


def register(root: Path) -> None:
    """Register the submitted jobs with a manager of a pool no job asks for: they stay ready."""
    from httk.workflow.engine.core._workspace import attach
    from httk.workflow.engine.manager._manager import Manager
    from httk.workflow.engine.manager._state import ManagerConfig

    Manager(attach(root), ManagerConfig(pools=("nobody",))).run()


def over_ssh(base: Path, source: Path) -> float:
    """``transfer send`` of every job in ``source`` to a workspace on a localhost ssh remote; seconds."""
    import shlex

    from tests.sshkit import running_server

    for variable, name in (("HTTK_CONFIG_HOME", "config"), ("HTTK_DATA_HOME", "data")):
        os.environ[variable] = str(base / "desk" / name)  # this process's remotes and outbox, its children's
    far = base / "far"
    homes = {"HTTK_CONFIG_HOME": far / "config", "HTTK_DATA_HOME": far / "data"}
    command = "env " + " ".join(f"{name}={shlex.quote(str(path))}" for name, path in homes.items())
    with running_server() as server:
        settings = {
            **server.settings(),
            "ssh_config": "none",
            "httk_command": f"{command} {Path(sys.executable).with_name('httk')}",
        }
        httk("workflow", "remote", "add", "--template", "ssh", "bench")
        httk(
            "workflow",
            "remote",
            "configure",
            *[w for k, v in settings.items() for w in ("--set", f"{k}={v}")],
            "bench",
        )
        httk(
            "workflow",
            "workspace",
            "init",
            "--no-durable",
            "--extension",
            "detached-transfer-v1",
            f"bench:{far / 'c'}",
        )
        return httk("workflow", "transfer", "send", str(source), PLACEMENT, "--to", f"bench:{far / 'c'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=1, help="rounds, each on fresh workspaces")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the workspaces (a tmp dir)")
    parser.add_argument("--no-ssh", action="store_true", help="leave out the figure over ssh")
    parser.add_argument(
        "--valgrind-jobs", type=int, default=0, help="rounds of 1 and N jobs counting instructions (N > 1)"
    )
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="httk-bench-transfer-", dir=args.dir))
    try:
        print(f"transfer benchmark in {base} ({os.cpu_count()} cores), {args.jobs} jobs, non-durable")
        print(f"{'round':<6} {'command':<30} {'seconds':>8} {'jobs/s':>8} {'user':>6} {'sys':>6}")
        ratios, target, moved = [], base, 0.0
        for index in range(args.repeat):
            target, ratio, moved = one_round(base / f"round-{index}", args.jobs, index)
            ratios.append(ratio)
        if args.repeat > 1:
            listed = ", ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"per round: {listed}; median {statistics.median(ratios):.2f} (goal >= 0.5)")
        if args.valgrind_jobs:
            instructions(base / "valgrind", args.valgrind_jobs)
        if not args.no_ssh:
            sent = over_ssh(base, target)
            print(f"{'transfer send over localhost ssh':<36} {sent:>8.2f} {args.jobs / sent:>8.0f}")
            print(f"(detach + import) / send over ssh: {moved / sent:.2f} (a figure, no goal)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def instructions(base: Path, jobs: int) -> None:
    """Rounds of one job and of ``jobs`` jobs with each timed command under callgrind: the instructions
    each executes per job, the difference of the two over ``jobs - 1`` (so the interpreter's start and
    imports, the same in both, drop out). User space only: the kernel's work for the inodes it creates
    is not counted."""
    one, many = _counted_round(base / "one", 1), _counted_round(base / "many", jobs)
    per_job = [(large - small) / (jobs - 1) for small, large in zip(one, many, strict=True)]
    print(
        f"instructions per job, 1 and {jobs} jobs under callgrind (user space; the load does not move them):"
    )
    names = ("job submit", "transfer detach", "transfer import")
    for name, count, small, large in zip(names, per_job, one, many, strict=True):
        print(
            f"  {name:<30} {count / 1e6:8.2f} M  (1 job {small / 1e6:.0f} M, {jobs} jobs {large / 1e6:.0f} M)"
        )
    submit, detach, imported = per_job
    print(f"  submit / (detach + import): {submit / (detach + imported):.2f}")


def _counted_round(base: Path, jobs: int) -> list[int]:
    """The instructions of submit, detach and import in one round of ``jobs`` jobs under callgrind."""
    logs = base / "logs"
    logs.mkdir(parents=True)
    VALGRIND[:] = [str(logs)]
    try:
        with open(os.devnull, "w") as quiet:
            saved, sys.stdout = sys.stdout, quiet
            try:
                one_round(base / "round", jobs, 0)
            finally:
                sys.stdout = saved
    finally:
        VALGRIND.clear()
    return [
        next(int(line.split()[-1]) for line in log.read_text().splitlines() if "Collected :" in line)
        for label in ("submit", "detach", "import")
        for log in logs.glob(f"{label}.*")
    ]


def one_round(base: Path, jobs: int, index: int) -> tuple[Path, float, float]:
    """Submit, register, detach and import ``jobs`` jobs in fresh workspaces below ``base``: the target
    workspace, the round's ratio submit / (detach + import) and its detach + import in seconds."""
    base.mkdir()
    for variable, name in (("HTTK_CONFIG_HOME", "config"), ("HTTK_DATA_HOME", "data")):
        os.environ[variable] = str(
            base / "desk" / name
        )  # its own registry, so the workspaces it makes stay out of the user's
    source, target, paths = prepare(base, jobs)
    submit = httk(
        "workflow", "job", "submit", str(source), *paths, "--placement", PLACEMENT, counted="submit"
    )
    cpu = {"job submit": dict(CPU)}
    register(source)
    out = base / "out"
    out.mkdir()
    detach = httk(
        "workflow", "transfer", "detach", str(source), PLACEMENT, "--to", str(out), counted="detach"
    )
    cpu["transfer detach"] = dict(CPU)
    bundles = sorted(str(path) for path in out.iterdir())
    assert len(bundles) == jobs, len(bundles)
    imported = httk(
        "workflow", "transfer", "import", str(target), *bundles, "--placement", PLACEMENT, counted="import"
    )
    cpu["transfer import"] = dict(CPU)
    cpu["detach + import"] = {
        part: cpu["transfer detach"][part] + cpu["transfer import"][part] for part in ("user", "sys")
    }
    moved = detach + imported
    for name, seconds in (
        ("job submit", submit),
        ("transfer detach", detach),
        ("transfer import", imported),
        ("detach + import", moved),
    ):
        used = cpu[name]
        print(
            f"{index:<6} {name:<30} {seconds:>8.2f} {jobs / seconds:>8.0f} "
            f"{used['user']:>6.2f} {used['sys']:>6.2f}"
        )
    print(f"{index:<6} submit / (detach + import): {submit / moved:.2f} (goal >= 0.5)")
    return target, submit / moved, moved


if __name__ == "__main__":
    main()
