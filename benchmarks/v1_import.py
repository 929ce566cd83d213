"""The httk v1 compatibility package: importing a large v1 tree, and what the v1 runner adds per step.

Import (issue "httk v1 compatibility", goal: at least 0.5 of ``cp -a``): builds a v1 tree of N tasks
(default 10,000) in 100 project directories, shaped like a VASP campaign of v1 templates
(:func:`build_tree`: 11 entries per task on average); then, round by round, times ``cp -a`` of
the tree and ``import_tree`` of it into a fresh non-durable workspace on the same filesystem, in
alternating order with the page cache written back before each (:func:`time_import`), and prints the
medians and their ratio (cp time / import time). The import is timed in-process: the command's own
start-up is what ``./dev bench startup`` measures.

Runner (goal: the v1 runner adds at most one bare interpreter start, ``python -c pass``, over the bare
``ht_steps`` call): an attempt laid out as the manager lays it out (context.json, the staged runner tree
below the control directory, the ``HTTK_WORKFLOW_*`` variables) for a v1 task whose step writes
``ht.nextstep`` and exits 2; each run of the runner replays, runs the step, renames the status view and
publishes the advance outcome. It is timed against ``../ht_steps start`` run directly in
``ht.run.current`` and against ``python -c pass`` (with a bytecode cache, as an installed interpreter
has), interleaved round by round so that machine load affects every row alike; and against the Bash
SDK floor, a five-line runner that sources the Bash API, runs the same step and publishes its advance,
which splits the overhead into what any Bash runner pays and what the v1 runner adds.

    ./dev bench v1_import [--tasks 10000] [--rounds 4] [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from httk.workflow.engine import init
from httk.workflow.v1 import ImportOptions, import_tree, runner_root

IMPORT_GOAL = 0.5
STEPS = '#!/bin/bash\ncd "$HT_TASK_CURRENT_DIR" || exit 1\necho second >ht.nextstep\nexit 2\n'
SHIPPED_BASH_API = "httk/workflow/sdk/bash/httk-workflow.sh"
SDK_FLOOR = """#!/bin/bash
# What any Bash runner pays for the same step: the Bash API, the step run, its advance published.
set -euo pipefail
. "$HTTK_WORKFLOW_BASH_API"
../ht_steps start </dev/null >>../ht.taskmgr.stdout 2>&1 || :
read -r next <ht.nextstep
httk_workflow_advance "$next" --message "v1 next step $next"
"""


# -- import ------------------------------------------------------------------------------------------
def build_tree(root: Path, tasks: int) -> int:
    """A tree shaped like a VASP campaign of v1 templates; returns the number of entries below ``root``.

    Every task holds what an instantiated relaxation template holds (ht_steps, POSCAR, three INCARs,
    ht_instantiate.py); every other one is between steps, with the ht.run.current files of a first step
    and its log: 11 entries per task on average.
    """
    script = STEPS + "# " + "a line of the template's step script\n# " * 60
    entries = 0
    for index in range(tasks):
        waiting = index % 2 == 1
        status = "relax.0.unclaimed.3.waitstep" if waiting else "start.0.unclaimed.3.waitstart"
        task = root / f"project-{index % 100:02d}" / f"ht.task.any.t{index:05d}.{status}"
        task.mkdir(parents=True)
        files = {
            "POSCAR": f"Si{index}\n5.43\n" + "0.0 0.5 0.5\n" * 3 + "Si\n2\nDirect\n0 0 0\n0.25 0.25 0.25\n",
            "INCAR.prerelax": "PREC = Normal\nNSW = 20\n" * 4,
            "INCAR.relax": "PREC = Accurate\nNSW = 60\nIBRION = 2\n" * 4,
            "INCAR.relax2": "PREC = Accurate\nNSW = 60\nICHARG = 1\n" * 4,
            "ht_instantiate.py": "# written by the template\n" * 10,
        }
        if waiting:
            files.update(
                {
                    "ht.taskmgr.stdout": "(log of the prerelax step)\n" * 40,
                    "ht.run.current/ht.nextstep": "relax\n",
                    "ht.run.current/ht.vars": "RELAXSTEP=1\n",
                    "ht.run.current/ht.RUNLOG": "=====\nPOSCAR\n=====\n" * 30,
                    "ht.run.current/CONTCAR.last": "Si\n" * 12,
                    "ht.run.current/OSZICAR.last": "   1 F= -.10E+02 E0= -.10E+02\n" * 20,
                    "ht.run.current/OUTCAR.cleaned.prerelax": "OUTCAR line\n" * 200,
                }
            )
            (task / "ht.run.current").mkdir()
            entries += 1
        (task / "ht_steps").write_text(script)
        (task / "ht_steps").chmod(0o755)
        for name, text in files.items():
            (task / name).write_text(text)
        entries += 2 + len(files)
    return entries + 100


def time_import(base: Path, tree: Path, rounds: int) -> tuple[list[float], list[float], int]:
    """``cp -a`` and ``import_tree`` of the tree, ``rounds`` times each, in alternating order (cp first
    in even rounds, the import first in odd ones) and with the page cache written back before each
    timing: creating and removing 100,000 files leaves the filesystem slower for a while, and which of
    the two came second would otherwise decide the ratio."""
    copies: list[float] = []
    imports: list[float] = []
    jobs = 0

    def copy(number: int) -> None:
        target = base / f"copy-{number}"
        os.sync()
        start = time.perf_counter()
        subprocess.run(["cp", "-a", str(tree), str(target)], check=True)
        copies.append(time.perf_counter() - start)
        shutil.rmtree(target)

    def imported(number: int) -> None:
        nonlocal jobs
        workspace = init(base / f"ws-{number}", name="bench", durable=False)
        os.sync()
        start = time.perf_counter()
        report = import_tree(workspace.root, tree, ImportOptions())
        imports.append(time.perf_counter() - start)
        jobs = report.counts.get("imported", 0)
        shutil.rmtree(workspace.root)

    for number in range(rounds):
        for measure in (copy, imported) if number % 2 == 0 else (imported, copy):
            measure(number)
    return copies, imports, jobs


# -- runner ------------------------------------------------------------------------------------------
class Case:
    """One command to time, and what to undo (outside the timing) after each run."""

    def __init__(
        self,
        label: str,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        reset: Callable[[], None],
        *,
        status: int = 0,
    ) -> None:
        self.label, self.argv, self.cwd, self.env, self.reset = label, argv, cwd, env, reset
        self.status = status
        self.samples: list[float] = []

    def run_once(self) -> None:
        start = time.perf_counter()
        result = subprocess.run(self.argv, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, check=False)
        self.samples.append(time.perf_counter() - start)
        if result.returncode != self.status:
            raise SystemExit(f"{self.label}: exit status {result.returncode}, not {self.status}")
        self.reset()

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000


def bash_api() -> Path:
    for entry in sys.path:
        candidate = Path(entry) / SHIPPED_BASH_API
        if candidate.is_file():
            return candidate
    raise SystemExit(f"{SHIPPED_BASH_API} is not installed")


def v1_attempt(root: Path) -> tuple[dict[str, str], Path, Callable[[], None]]:
    """A v1 job's attempt as the manager prepares it; returns its environment, the task's run directory
    (where ``ht_steps`` runs) and the reset between runs."""
    workspace = root / "ws"
    payload = workspace / "v1" / "t--0d3b6a6e-7b9e-4c7b-9c52-1c1e3f6b2a10"
    control = payload / ".httk-attempt.a6c2c973-29e1-44e2-9649-ae419e340ac4"
    workdir = payload / "task"  # the job's workdir holds the task directory, named as its status view
    view = workdir / "ht.task.any.t.start.0.unclaimed.3.waitstart"
    run_dir = view / "ht.run.current"
    for directory in (control, run_dir, workspace / ".httk-workflow"):
        directory.mkdir(parents=True)
    (view / "ht_steps").write_text(STEPS)
    (view / "ht_steps").chmod(0o755)
    shutil.copytree(runner_root(), control / "runner")
    context = {
        "format": "httk-workflow-attempt-context",
        "format_version": 1,
        "workspace_id": "b588833b-87ea-4da2-b860-1c9e768cfbc1",
        "job_id": "0d3b6a6e-7b9e-4c7b-9c52-1c1e3f6b2a10",
        "job_key": payload.name,
        "placement": "v1",
        "step": "start",
        "activation_id": "e7f86a0e-34d6-45a7-b92d-3f4b2dc98c54",
        "activation_ordinal": 1,
        "activation_reason": "initial",
        "attempt_id": control.name.removeprefix(".httk-attempt."),
        "attempt_ordinal": 1,
        "total_attempts": 1,
        "is_restart": False,
        "is_unclean_restart": False,
        "attempt_reason": "initial",
        "previous_attempt_id": None,
        "workdir_mode": "persistent",
        "durable": False,
        "settings": {},
        "inputs": {"v1.name": view.name, "v1.attempts": 10},
        "children": [],
        "workspace_dir": str(workspace),
        "job_dir": str(payload),
        "control_dir": str(control),
        "workdir": str(workdir),
    }
    (control / "context.json").write_text(json.dumps(context, indent=2) + "\n")
    env = {
        **os.environ,
        "HTTK_WORKFLOW_CONTEXT": str(control / "context.json"),
        "HTTK_WORKFLOW_CONTROL_DIR": str(control),
        "HTTK_WORKFLOW_WORKSPACE_DIR": str(workspace),
        "HTTK_WORKFLOW_JOB_DIR": str(payload),
        "HTTK_WORKFLOW_WORKDIR": str(workdir),
        "HTTK_WORKFLOW_IS_RESTART": "0",
        "HTTK_WORKFLOW_UNCLEAN_RESTART": "0",
        "HTTK_WORKFLOW_DURABLE": "0",
        "HTTK_WORKFLOW_ATTEMPT_REASON": "initial",
        "HTTK_WORKFLOW_STEP": "start",
        "HTTK_WORKFLOW_PYTHON": sys.executable,
        "HTTK_WORKFLOW_BASH_API": str(bash_api()),
        "HT_TASK_CURRENT_DIR": str(run_dir),
    }

    def reset() -> None:
        outcome = control / "outcome.ready" / "outcome.json"
        if json.loads(outcome.read_text())["next_step"] != "second":
            raise SystemExit(f"the runner published an unexpected outcome: {outcome.read_text()}")
        shutil.rmtree(control / "outcome.ready")
        advanced = workdir / "ht.task.any.t.second.0.unclaimed.3.waitstep"
        (advanced / "ht.run.current" / "ht.nextstep").unlink()
        advanced.rename(view)

    return env, run_dir, reset


def runner_cases(root: Path) -> list[Case]:
    env, run_dir, reset = v1_attempt(root)
    python_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    python_env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    run = Path(env["HTTK_WORKFLOW_CONTROL_DIR"]) / "runner" / "run"

    control = Path(env["HTTK_WORKFLOW_CONTROL_DIR"])
    floor = control / "sdk-floor"
    floor.write_text(SDK_FLOOR)
    floor.chmod(0o755)

    def bare_reset() -> None:
        (run_dir / "ht.nextstep").unlink()

    def floor_reset() -> None:
        shutil.rmtree(control / "outcome.ready")
        bare_reset()

    return [
        Case("python -c pass", [sys.executable, "-c", "pass"], root, python_env, lambda: None),
        Case("bare ../ht_steps start", ["../ht_steps", "start"], run_dir, env, bare_reset, status=2),
        Case("Bash SDK floor", [str(floor)], run_dir, env, floor_reset),
        Case("v1 runner, one step", [str(run)], Path(env["HTTK_WORKFLOW_WORKDIR"]), env, reset),
    ]


def instructions(case: Case, logs: Path) -> int:
    """Instructions ``case``'s own process executes, counted by valgrind's callgrind.

    The programs it starts run uncounted: for the v1 runner that is its own Bash work (the parsing of
    the Bash API and its libraries included), without the step program and the coreutils it starts or
    the kernel's work for their forks and executions. Each process valgrind follows (a forked shell,
    until it executes a program) writes its own log below ``logs``; the count is the started process's.
    Under valgrind a signal can miss a forked shell while it executes a program, so the watchdog's
    ``sleep`` may outlive the runner: it is given a minute, and nothing waits for it.
    """
    logs.mkdir(exist_ok=True)
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={logs}/%p"]
    process = subprocess.Popen(
        [*valgrind, *case.argv],
        cwd=case.cwd, env={**case.env, "HT_TASKMGR_TIMEOUT": "60"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    if process.wait() != case.status:
        raise SystemExit(f"{case.label} under valgrind: exit status {process.returncode}, not {case.status}")
    case.reset()
    log = (logs / str(process.pid)).read_text()
    return next(int(line.split()[-1]) for line in log.splitlines() if "Collected :" in line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        base = Path(tmp)
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
        tree = base / "Runs"
        entries = build_tree(tree, args.tasks)
        copies, imports, jobs = time_import(base, tree, args.rounds)
        cp_s, import_s = statistics.median(copies), statistics.median(imports)
        ratio = cp_s / import_s
        shape = f"{entries} entries, {jobs} jobs, {args.rounds} rounds, non-durable"
        print(f"\nimport of {args.tasks} v1 tasks ({shape})")
        print(f"  cp -a of the tree   {cp_s:8.2f} s   {args.tasks / cp_s:8.0f} tasks/s")
        print(f"  import_tree         {import_s:8.2f} s   {args.tasks / import_s:8.0f} tasks/s")
        verdict = "meets" if ratio >= IMPORT_GOAL else "MISSES"
        print(f"  cp -a / import = {ratio:.2f} (goal at least {IMPORT_GOAL}): {verdict} the goal")
        cases = runner_cases(base / "runner")
        for case in cases:  # warm the page cache and the bytecode cache
            case.run_once()
            case.samples.clear()
        for _ in range(args.runs):
            for case in cases:
                case.run_once()
        python, bare, floor, runner = (case.median_ms for case in cases)
        print(f"\nthe v1 runner per step, {args.runs} runs each, interleaved")
        for case in cases:
            print(f"  {case.label:<26} {case.median_ms:8.1f} ms")
        extra = runner - bare
        verdict = "meets" if extra <= python else "MISSES"
        print(
            f"  the runner adds {extra:.1f} ms to the bare step; one bare interpreter start is "
            f"{python:.1f} ms ({extra / python:.2f} of it): {verdict} the goal"
        )
        print(
            f"  of that, the Bash SDK floor (any Bash runner's step) is {floor - bare:.1f} ms "
            f"({(floor - bare) / python:.2f} of a start), the v1 runner's own work {runner - floor:.1f} ms"
        )
        if shutil.which("valgrind") is not None:  # the figure load does not move
            logs = base / "valgrind"
            counted = {case.label: instructions(case, logs) for case in (cases[0], cases[2], cases[3])}
            start, sdk, v1 = counted.values()
            print(
                f"  instructions (valgrind, the runner's own process): python -c pass {start / 1e6:.1f} M, "
                f"Bash SDK floor {sdk / 1e6:.1f} M ({sdk / start:.2f} starts), "
                f"v1 runner {v1 / 1e6:.1f} M ({v1 / start:.2f} starts)"
            )


if __name__ == "__main__":
    main()
