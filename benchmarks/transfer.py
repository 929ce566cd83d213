"""Detached transfer against submission: moving N ready jobs to another workspace vs submitting them.

In one run, on non-durable workspaces and through the command line: ``job submit`` of N payload
directories into workspace A (timed), a manager that claims nothing registers them (untimed), then
``transfer detach A <placement> --to DIR`` and ``transfer import B DIR/* --placement P`` (each timed).
Prints the three figures and the ratio submit / (detach + import). Goal (issue 14): >= 0.5.

Then, over ssh: a real sshd on 127.0.0.1 (the test suite's ``tests/sshkit.py``), a remote reaching it
whose ``httk`` has configuration of its own, and ``transfer send B <placement> --to REMOTE:C`` of the
same N jobs (timed: detach, one tar stream over the shared connection, import, acknowledgement).
Prints its figure and its ratio to the local detach + import (no goal: a figure).

    ./dev bench transfer [--jobs 1000] [--dir DIR] [--no-ssh]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def httk(*args: str) -> float:
    """Run one ``httk`` command; its wall time in seconds."""
    start = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).with_name("httk")), *args], check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - start


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
    parser.add_argument("--dir", type=Path, default=None, help="where to build the workspaces (a tmp dir)")
    parser.add_argument("--no-ssh", action="store_true", help="leave out the figure over ssh")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="httk-bench-transfer-", dir=args.dir))
    # Its own user directories, so that the workspaces it makes are not left in the user's registry.
    os.environ["HTTK_CONFIG_HOME"] = str(base / "desk" / "config")
    os.environ["HTTK_DATA_HOME"] = str(base / "desk" / "data")
    try:
        print(f"transfer benchmark in {base} ({os.cpu_count()} cores), {args.jobs} jobs, non-durable")
        source, target, paths = prepare(base, args.jobs)
        submit = httk("workflow", "job", "submit", str(source), *paths, "--placement", PLACEMENT)
        register(source)
        out = base / "out"
        out.mkdir()
        detach = httk("workflow", "transfer", "detach", str(source), PLACEMENT, "--to", str(out))
        bundles = sorted(str(path) for path in out.iterdir())
        assert len(bundles) == args.jobs, len(bundles)
        imported = httk("workflow", "transfer", "import", str(target), *bundles, "--placement", PLACEMENT)
        moved = detach + imported
        print(f"{'command':<36} {'seconds':>8} {'jobs/s':>8}")
        for name, seconds in (
            ("job submit", submit),
            ("transfer detach", detach),
            ("transfer import", imported),
            ("detach + import", moved),
        ):
            print(f"{name:<36} {seconds:>8.2f} {args.jobs / seconds:>8.0f}")
        print(f"submit / (detach + import): {submit / moved:.2f} (goal >= 0.5)")
        if not args.no_ssh:
            sent = over_ssh(base, target)
            print(f"{'transfer send over localhost ssh':<36} {sent:>8.2f} {args.jobs / sent:>8.0f}")
            print(f"(detach + import) / send over ssh: {moved / sent:.2f} (a figure, no goal)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
