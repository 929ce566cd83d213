"""What a runner pays per attempt for the authoring SDKs: whole-process cost of a no-op step.

Prints the median wall time of each command over ``--runs`` runs, next to the bare interpreter, and the
difference against the goal. Runs of all commands are interleaved round by round, so a change in machine
load affects every row alike. Each SDK run reads a real attempt context (context.json, the manager's
``HTTK_WORKFLOW_*`` variables) and publishes a real ``succeed`` outcome; the outcome is removed between
runs, outside the timing.

Python rows (same interpreter as this script):

* ``python -c pass`` -- the baseline;
* ``python -c 'import httk.workflow.sdk'`` -- the import alone;
* the no-op step: ``@step def noop(a): a.succeed()`` and ``raise SystemExit(dispatch())``;
* the same step reading one setting (which loads the protocol package's name rules).

Goal (issue): the Python SDK adds at most 40 ms over bare python.

Bash rows (:func:`bash_rows`): ``bash -c true`` against a no-op step that sources
``sdk-bash/httk-workflow.sh`` and calls ``httk_workflow_succeed``, when that library exists.

    ./dev bench runner_overhead [--runs 30]
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

ROOT = Path(__file__).resolve().parents[1]
BASH_API = ROOT / "sdk-bash" / "httk-workflow.sh"
PYTHON_GOAL_MS = 40.0
JOB_ID = "01234567-89ab-cdef-0123-456789abcdef"

NOOP_RUNNER = """\
from httk.workflow.sdk import Attempt, dispatch, step


@step
def noop(a: Attempt) -> None:
    a.succeed()


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""

SETTING_RUNNER = NOOP_RUNNER.replace(
    "    a.succeed()", '    a.succeed(message=str(a.setting("bench.value", 1)))'
)


class Case:
    """One command to time, with what to undo after each run."""

    def __init__(self, label: str, argv: list[str], env: dict[str, str], reset: Callable[[], None]) -> None:
        self.label = label
        self.argv = argv
        self.env = env
        self.reset = reset
        self.samples: list[float] = []

    def run_once(self) -> None:
        start = time.perf_counter()
        subprocess.run(self.argv, env=self.env, check=True, stdout=subprocess.DEVNULL)
        self.samples.append(time.perf_counter() - start)
        self.reset()

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000


def make_attempt(root: Path) -> dict[str, str]:
    """An attempt laid out as the manager lays it out; returns the environment the manager would set."""
    job_dir = root / "ws" / "p" / JOB_ID
    control = job_dir / ".httk-attempt.a6c2c973-29e1-44e2-9649-ae419e340ac4"
    workdir = job_dir / "run"
    control.mkdir(parents=True)
    workdir.mkdir()
    (job_dir / "job.json").write_text(json.dumps({"format": "httk-workflow-job", "id": JOB_ID}) + "\n")
    context = {
        "format": "httk-workflow-attempt-context",
        "format_version": 1,
        "workspace_id": "b588833b-87ea-4da2-b860-1c9e768cfbc1",
        "job_id": JOB_ID,
        "job_key": JOB_ID,
        "placement": "p",
        "step": "noop",
        "activation_id": "e7f86a0e-34d6-45a7-b92d-3f4b2dc98c54",
        "activation_ordinal": 1,
        "attempt_id": control.name.removeprefix(".httk-attempt."),
        "attempt_ordinal": 1,
        "is_restart": False,
        "is_unclean_restart": False,
        "attempt_reason": "initial",
        "previous_attempt_id": None,
        "workdir_mode": "persistent",
        "durable": False,
        "settings": {},
        "children": [],
        "workspace_dir": str(root / "ws"),
        "job_dir": str(job_dir),
        "control_dir": str(control),
        "workdir": str(workdir),
    }
    (control / "context.json").write_text(json.dumps(context, indent=2) + "\n")
    return {
        **os.environ,
        "HTTK_WORKFLOW_CONTEXT": str(control / "context.json"),
        "HTTK_WORKFLOW_CONTROL_DIR": str(control),
        "HTTK_WORKFLOW_WORKSPACE_DIR": str(root / "ws"),
        "HTTK_WORKFLOW_JOB_DIR": str(job_dir),
        "HTTK_WORKFLOW_WORKDIR": str(workdir),
        "HTTK_WORKFLOW_IS_RESTART": "0",
        "HTTK_WORKFLOW_UNCLEAN_RESTART": "0",
        "HTTK_WORKFLOW_DURABLE": "0",
        "HTTK_WORKFLOW_ATTEMPT_REASON": "initial",
        "HTTK_WORKFLOW_STEP": "noop",
        "HTTK_WORKFLOW_PYTHON": sys.executable,
    }


def remover(env: dict[str, str]) -> Callable[[], None]:
    """Remove the attempt's published outcome, so that the next run can publish again."""
    ready = Path(env["HTTK_WORKFLOW_CONTROL_DIR"]) / "outcome.ready"

    def reset() -> None:
        if not ready.is_dir():
            raise SystemExit(f"the step published no outcome at {ready}")
        shutil.rmtree(ready)

    return reset


def nothing() -> None:
    pass


def python_rows(root: Path) -> tuple[Case, list[Case]]:
    """The Python baseline and the Python SDK cases.

    Every row but the last runs with a bytecode cache (``PYTHONPYCACHEPREFIX`` in the scratch directory,
    filled by the warm-up run), as an installed wheel has one. The last row shows an editable install
    under ``PYTHONDONTWRITEBYTECODE=1``, where every attempt compiles the SDK's sources again.
    """
    env = make_attempt(root / "python")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    uncached = {key: value for key, value in env.items() if key != "PYTHONPYCACHEPREFIX"}
    uncached["PYTHONDONTWRITEBYTECODE"] = "1"
    runner = root / "noop.py"
    runner.write_text(NOOP_RUNNER)
    with_setting = root / "setting.py"
    with_setting.write_text(SETTING_RUNNER)
    baseline = Case("python -c pass", [sys.executable, "-c", "pass"], env, nothing)
    cases = [
        Case("import httk.workflow.sdk", [sys.executable, "-c", "import httk.workflow.sdk"], env, nothing),
        Case("no-op Python step (succeed)", [sys.executable, str(runner)], env, remover(env)),
        Case("  ... reading one setting", [sys.executable, str(with_setting)], env, remover(env)),
        Case("  ... without a bytecode cache", [sys.executable, str(runner)], uncached, remover(env)),
    ]
    return baseline, cases


def bash_rows(root: Path) -> tuple[Case, list[Case]] | None:
    """The Bash API rows: ``bash -c true`` against a no-op step sourcing the Bash API.

    ``None`` while ``sdk-bash/httk-workflow.sh`` does not exist (it is written separately).
    """
    bash = shutil.which("bash")
    if bash is None or not BASH_API.is_file():
        return None
    env = make_attempt(root / "bash")
    env["HTTK_WORKFLOW_BASH_API"] = str(BASH_API)
    step = 'source "$HTTK_WORKFLOW_BASH_API" && httk_workflow_succeed'
    baseline = Case("bash -c true", [bash, "-c", "true"], env, nothing)
    return baseline, [Case("no-op Bash step (succeed)", [bash, "-c", step], env, remover(env))]


def report(title: str, baseline: Case, cases: list[Case], goal_ms: float | None) -> None:
    print(f"\n{title}")
    print(f"{'command':<34} {'median ms':>10} {'+ms vs base':>12} {'x base':>7}")
    print(f"{baseline.label:<34} {baseline.median_ms:>10.1f} {'':>12} {'':>7}")
    for case in cases:
        extra = case.median_ms - baseline.median_ms
        ratio = case.median_ms / baseline.median_ms
        print(f"{case.label:<34} {case.median_ms:>10.1f} {extra:>+12.1f} {ratio:>6.2f}x")
    if goal_ms is not None:
        step = next(case for case in cases if case.label.startswith("no-op"))
        extra = step.median_ms - baseline.median_ms
        verdict = "meets" if extra <= goal_ms else "MISSES"
        print(
            f"goal: the SDK adds at most {goal_ms:.0f} ms; it adds {extra:.1f} ms "
            f"({extra / goal_ms:.0%} of the budget): {verdict} the goal"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        python = python_rows(root)
        bash = bash_rows(root)
        groups = [python] if bash is None else [python, bash]
        every = [case for baseline, cases in groups for case in (baseline, *cases)]
        for case in every:  # warm the page cache and the bytecode caches
            case.run_once()
            case.samples.clear()
        for _ in range(args.runs):
            for case in every:
                case.run_once()
        load = os.getloadavg()[0]
        print(f"{args.runs} runs each, interleaved; {os.cpu_count()} CPUs, load average {load:.2f}")
        report("Python SDK", *python, PYTHON_GOAL_MS)
        if bash is None:
            print(f"\nBash API: {BASH_API.relative_to(ROOT)} does not exist yet; its rows are skipped")
        else:
            report("Bash API", *bash, None)


if __name__ == "__main__":
    main()
