"""The packaged VASP workflows' goals, each against a baseline measured in the same run.

1. Runner overhead per VASP step. A real attempt of ``vasp-static`` (the installed runner, a real
   context.json and job.json, one mock VASP run, results published in a transaction) against the mock
   run alone on the same inputs, and the bare interpreter. Goal: the runner adds at most 3 bare
   interpreter starts to what VASP itself takes. Rounds are interleaved so load affects every row alike.
   Every row runs with a bytecode cache (a ``PYTHONPYCACHEPREFIX`` in the scratch directory, filled by a
   first round that is not counted), as an installed wheel has one; a last row shows the attempt of an
   editable install under ``PYTHONDONTWRITEBYTECODE=1``, which compiles every module it imports again.
   Where valgrind is installed, the instructions of one attempt's runner process are counted against a
   bare start's as well: on a shared machine the one figure that load does not move.
2. Parsing large outputs. A 200 MB OUTCAR and a 200 MB vasprun.xml (a mock run's ionic steps repeated
   until the file is that large) read by the streaming parsers, each in a process of its own whose peak
   RSS is reported, against ``wc -l`` on the same file. Goals: at least 1/10 of ``wc -l``'s speed, peak
   memory at most 100 MB.
3. Mock relaxations end to end. ``--relaxations`` (default 500) vasp-relax jobs submitted with ``httk
   workflow job submit`` and run by one manager with 2 workers; the figures are printed (jobs and VASP
   runs per second), there is no goal. Against them, the same run replays a sample of the finished jobs'
   VASP runs on their archived inputs with the mock alone: what the engine and the runner add per VASP
   run, in bare interpreter starts.

    ./dev bench vasp [--rounds 15] [--megabytes 200] [--relaxations 500] [--parts overhead,parsing,relax]
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

BIN = Path(sys.executable).parent
MOCK = str(BIN / "httk-mock-vasp")
HTTK = str(BIN / "httk")
OVERHEAD_GOAL = 3.0
SPEED_GOAL = 0.1
RELAX_SAMPLE = 10
MEMORY_GOAL_MB = 100.0
SILICON = "Si2\n5.6\n0 .5 .5\n.5 0 .5\n.5 .5 0\nSi\n2\nDirect\n0.01 0.02 0\n.25 .24 .26\n"


def _cached_environment(scratch: Path) -> dict[str, str]:
    """This process's environment with a bytecode cache that is written (see the module docstring)."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return environment


def _timed(argv: list[str], **kwargs: object) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - started


# -- 1. runner overhead --------------------------------------------------------------------------
def _attempt(root: Path, library: Path, base: dict[str, str]) -> tuple[dict[str, str], Path]:
    """A real static attempt below ``root``: its environment and its job directory."""
    job_id = str(uuid.uuid4())
    job_dir = root / "ws" / "bench" / job_id
    control = job_dir / f".httk-attempt.{uuid.uuid4()}"
    (job_dir / "files").mkdir(parents=True)
    control.mkdir()
    (job_dir / "run").mkdir()
    (job_dir / "files" / "POSCAR").write_text(SILICON)
    inputs = {"structure": "files/POSCAR", "vasp.command": MOCK, "vasp.pseudo_library": str(library)}
    (job_dir / "job.json").write_text(
        json.dumps({"format": "httk-workflow-job", "format_version": 1, "id": job_id, "inputs": inputs})
    )
    context = {
        "format": "httk-workflow-attempt-context", "format_version": 1, "workspace_id": str(uuid.uuid4()),
        "job_id": job_id, "job_key": job_id, "placement": "bench", "step": "static",
        "activation_id": str(uuid.uuid4()), "activation_ordinal": 1, "activation_reason": "initial",
        "attempt_id": control.name.split(".", 2)[2], "attempt_ordinal": 1, "total_attempts": 1,
        "is_restart": False,
        "is_unclean_restart": False, "attempt_reason": "initial", "previous_attempt_id": None,
        "workdir_mode": "persistent", "workdir_reused": False, "data_generation": 0, "durable": False,
        "priority": 500, "resources": {}, "settings": {}, "inputs": inputs, "join": None, "children": [],
        "workspace_dir": str(root / "ws"), "job_dir": str(job_dir), "control_dir": str(control),
        "workdir": str(job_dir / "run"), "data_dir": str(job_dir / "data"),
    }  # fmt: skip
    (control / "context.json").write_text(json.dumps(context, indent=2))
    env = {
        **{k: v for k, v in base.items() if not k.startswith("HTTK_")},
        "HTTK_WORKFLOW_CONTEXT": str(control / "context.json"), "HTTK_WORKFLOW_CONTROL_DIR": str(control),
        "HTTK_WORKFLOW_JOB_DIR": str(job_dir), "HTTK_WORKFLOW_WORKDIR": str(job_dir / "run"),
        "HTTK_WORKFLOW_STEP": "static", "HTTK_WORKFLOW_DURABLE": "0", "HTTK_WORKFLOW_PYTHON": sys.executable,
    }  # fmt: skip
    return env, job_dir


def runner_overhead(rounds: int, scratch: Path) -> None:
    from httk.workflow.sdk.packaged import runner_file

    runner = str(runner_file("pkg:httk.workflow.vasp/runners/vasp"))
    library = scratch / "potcars"
    subprocess.run([MOCK, "pseudo-library", str(library), "Si"], check=True)
    cached = _cached_environment(scratch)
    uncached = {k: v for k, v in cached.items() if k != "PYTHONPYCACHEPREFIX"}
    uncached["PYTHONDONTWRITEBYTECODE"] = "1"
    rows: dict[str, list[float]] = {
        "bare python": [],
        "mock VASP alone": [],
        "runner attempt (vasp-static)": [],
        "  ... without a bytecode cache": [],
    }
    for index in range(rounds + 1):
        bare = _timed([sys.executable, "-c", "pass"], env=cached)
        env, job_dir = _attempt(scratch / f"attempt-{index}", library, cached)
        attempt = _timed([runner, "vasp-static"], env=env, cwd=job_dir / "run")
        assert (Path(env["HTTK_WORKFLOW_CONTROL_DIR"]) / "outcome.ready").is_dir(), (
            "the attempt published nothing"
        )
        alone = job_dir / "alone"
        shutil.copytree(job_dir / "run" / "runs" / "01-static", alone)
        shutil.copy(job_dir / "run" / "POTCAR", alone / "POTCAR")
        mock = _timed([MOCK], cwd=alone, env=cached)
        env, job_dir = _attempt(scratch / f"uncached-{index}", library, uncached)
        compiling = _timed([runner, "vasp-static"], env=env, cwd=job_dir / "run")
        if index:  # the first round fills the bytecode cache and warms the page cache
            for name, value in zip(rows, (bare, mock, attempt, compiling), strict=True):
                rows[name].append(value)
        shutil.rmtree(scratch / f"attempt-{index}")
        shutil.rmtree(scratch / f"uncached-{index}")
    medians = {name: statistics.median(values) * 1000 for name, values in rows.items()}
    for name, value in medians.items():
        print(f"  {name:32s} {value:8.1f} ms (median of {rounds})")
    overhead = medians["runner attempt (vasp-static)"] - medians["mock VASP alone"]
    ratio = overhead / medians["bare python"]
    verdict = "meets" if ratio <= OVERHEAD_GOAL else "misses"
    print(
        f"  runner overhead per VASP step   {overhead:8.1f} ms = {ratio:.2f} bare starts "
        f"({verdict} goal <= {OVERHEAD_GOAL:g})"
    )


def runner_instructions(scratch: Path) -> None:
    """The runner's instructions against a bare start's, counted by valgrind: a figure no load moves.

    The attempt's Python process is counted as the installed runner execs it (its Bash line, about a
    million instructions, is not), without the mock VASP it starts (valgrind follows no child).
    """
    import re

    from httk.workflow.sdk.packaged import runner_file

    if shutil.which("valgrind") is None:
        print("  (valgrind is not installed: no instruction counts)")
        return
    text = runner_file("pkg:httk.workflow.vasp/runners/vasp").read_text()
    code = re.search(r"-c \\\n\s*'([^']*)'", text)
    assert code is not None, "the runner's python line was not found"
    library = scratch / "potcars"
    subprocess.run([MOCK, "pseudo-library", str(library), "Si"], check=True)
    cached = _cached_environment(scratch)
    env, job_dir = _attempt(scratch / "warm", library, cached)  # fills the bytecode cache
    subprocess.run(
        [sys.executable, "-P", "-c", code.group(1), "vasp-static"], env=env, cwd=job_dir / "run", check=True
    )
    bare = _instructions([sys.executable, "-c", "pass"], env=cached)
    env, job_dir = _attempt(scratch / "counted", library, cached)
    runner = _instructions(
        [sys.executable, "-P", "-c", code.group(1), "vasp-static"], env=env, cwd=job_dir / "run"
    )
    print(
        f"  instructions: bare python {bare / 1e6:.1f} M, runner attempt {runner / 1e6:.1f} M "
        f"= {runner / bare:.2f} bare starts (the mock VASP's not counted)"
    )


def _instructions(argv: list[str], **kwargs: object) -> int:
    """Instructions ``argv`` executes under valgrind's callgrind (its children not followed)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kwargs,  # type: ignore[call-overload]
    )  # fmt: skip
    counted = [line for line in done.stderr.splitlines() if "Collected :" in line]
    return int(counted[-1].split()[-1])


# -- 2. parsing ----------------------------------------------------------------------------------
def _seed_run(scratch: Path) -> Path:
    """A mock relaxation of a 32-atom cell with slow convergence: many large ionic steps."""
    run = scratch / "seed"
    run.mkdir()
    lines = ["big", "1.0", "11.2 0 0", "0 11.2 0", "0 0 11.2", "Si", "32", "Direct"]
    lines += [
        f"{(i % 4) / 4 + 0.01:.3f} {((i // 4) % 4) / 4:.3f} {(i // 16) / 2 + 0.02:.3f}" for i in range(32)
    ]
    (run / "POSCAR").write_text("\n".join(lines) + "\n")
    (run / "INCAR").write_text(
        "IBRION = 2\nISIF = 3\nNSW = 40\nEDIFF = 1E-6\nEDIFFG = -0.0001\nLWAVE = .FALSE.\nLCHARG = .FALSE.\n"
    )
    (run / "KPOINTS").write_text("k\n0\nGamma\n2 2 2\n")
    subprocess.run([MOCK, "pseudo-library", str(scratch / "lib"), "Si"], check=True)
    shutil.copy(scratch / "lib" / "Si" / "POTCAR", run / "POTCAR")
    subprocess.run([MOCK, "--fault=nsw"], cwd=run, check=True, stdout=subprocess.DEVNULL)
    return run


def _inflate(source: Path, target: Path, begin: bytes, end: bytes, megabytes: float) -> None:
    """``target``: ``source`` with the bytes from the first ``begin`` to the last ``end`` repeated."""
    data = source.read_bytes()
    start, stop = data.index(begin), data.rindex(end) + len(end)
    head, body, tail = data[:start], data[start:stop], data[stop:]
    copies = max(1, int(megabytes * 1e6 / len(body)))
    with open(target, "wb") as stream:
        stream.write(head)
        for _ in range(copies):
            stream.write(body)
        stream.write(tail)


_PARSE = """
import resource, sys, time
from pathlib import Path
from httk.workflow.vasp import read_outcar, read_vasprun
reader = read_outcar if sys.argv[1] == "outcar" else read_vasprun
started = time.perf_counter()
result = reader(Path(sys.argv[2]))
elapsed = time.perf_counter() - started
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(result.steps))
"""


def parsing(megabytes: float, scratch: Path, rounds: int) -> None:
    seed = _seed_run(scratch)
    files = {
        "outcar": (
            scratch / "OUTCAR",
            seed / "OUTCAR",
            b"---------------------------------------- Iteration",
            b"energy(sigma->0)",
        ),
        "vasprun": (scratch / "vasprun.xml", seed / "vasprun.xml", b" <calculation>", b" </calculation>\n"),
    }
    for name, (target, source, begin, end) in files.items():
        _inflate(source, target, begin, end, megabytes)
        size = target.stat().st_size / 1e6
        wc, parse, peak, steps = [], [], 0.0, 0
        _timed(["wc", "-l", str(target)])  # into the page cache
        for _ in range(rounds):
            wc.append(_timed(["wc", "-l", str(target)]))
            out = subprocess.run(
                [sys.executable, "-c", _PARSE, name, str(target)], check=True, capture_output=True, text=True
            )
            elapsed, rss, count = out.stdout.split()
            parse.append(float(elapsed))
            peak, steps = max(peak, float(rss)), int(count)
        ratio = statistics.median(wc) / statistics.median(parse)
        speed = "meets" if ratio >= SPEED_GOAL else "misses"
        memory = "meets" if peak <= MEMORY_GOAL_MB else "misses"
        print(
            f"  {target.name:12s} {size:7.1f} MB, {steps} ionic steps: "
            f"parse {statistics.median(parse):6.2f} s "
            f"({size / statistics.median(parse):6.1f} MB/s), wc -l {statistics.median(wc):6.3f} s -> "
            f"{ratio:.3f} of wc's speed ({speed} goal >= {SPEED_GOAL:g}); peak RSS {peak:.0f} MB "
            f"({memory} goal <= {MEMORY_GOAL_MB:g})"
        )


# -- 3. mock relaxations end to end --------------------------------------------------------------
def relaxations(count: int, scratch: Path) -> None:
    from httk.workflow.engine import init
    from httk.workflow.sdk.packaged import build_payload
    from httk.workflow.vasp import VASP_RELAX

    ws = scratch / "ws"
    init(ws, durable=False, extensions=("transactional-data-v1",)).close()
    library = scratch / "potcars"
    subprocess.run([MOCK, "pseudo-library", str(library), "Si"], check=True)
    for name, value in (("vasp.command", MOCK), ("vasp.pseudo_library", str(library))):
        subprocess.run(
            [HTTK, "workflow", "workspace", "settings", "set", str(ws), name, json.dumps(value)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    (scratch / "POSCAR").write_text(SILICON)
    payloads = []
    for index in range(count):
        payloads.append(
            str(build_payload(VASP_RELAX, {"structure": str(scratch / "POSCAR")}, scratch / f"p{index}"))
        )
    subprocess.run(
        [HTTK, "workflow", "job", "submit", str(ws), *payloads, "--placement", "bench", "--move"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    started = time.perf_counter()
    subprocess.run(
        [HTTK, "workflow", "run", str(ws), "--workers", "2", "--runner-module", "httk.workflow.vasp"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    done = len(list((ws / ".httk-workflow" / "state" / "succeeded" / "bench").iterdir()))
    runs = sum(
        len(json.loads(p.read_text())["vasp"]["runs"]) for p in (ws / "bench").glob("*/.httk-job/state.json")
    )
    print(
        f"  {count} vasp-relax jobs, 2 workers: {done} succeeded in {elapsed:.1f} s; {runs} VASP runs "
        f"({runs / count:.1f} per job): {count / elapsed:.2f} jobs/s, {runs / elapsed:.2f} runs/s"
    )
    jobs = sorted((ws / "bench").iterdir())
    sample = jobs[:: max(1, len(jobs) // RELAX_SAMPLE)][:RELAX_SAMPLE]
    alone, bare = [], []
    for index, job in enumerate(sample):
        alone.append(_replayed(job, scratch / f"alone-{index}"))
        bare.append(_timed([sys.executable, "-c", "pass"]))
    sampled_runs = sum(len(list((job / "run" / "runs").iterdir())) for job in sample)
    worker = 2 * elapsed / count
    mock = sum(alone) / len(sample)
    per_run = (worker - mock) / (runs / count)
    print(
        f"  per job: 2 workers x {elapsed:.1f} s / {count} jobs = {worker:.2f} worker-seconds, of which "
        f"the mock alone on the same inputs takes {mock:.2f} s ({len(sample)} jobs, {sampled_runs} runs "
        f"replayed): the engine and the runner add {per_run * 1000:.0f} ms per VASP run = "
        f"{per_run / statistics.median(bare):.1f} bare starts ({statistics.median(bare) * 1000:.1f} ms)"
    )


def _replayed(job: Path, work: Path) -> float:
    """The mock's time for a finished job's runs, replayed in order on their archived inputs.

    The restart files stay in the working directory between runs, as they stay in the job's ``run/``.
    """
    work.mkdir()
    shutil.copy(job / "run" / "POTCAR", work / "POTCAR")
    seconds = 0.0
    for run in sorted((job / "run" / "runs").iterdir()):
        for name in ("INCAR", "POSCAR", "KPOINTS"):
            shutil.copy(run / name, work / name)
        seconds += _timed([MOCK], cwd=work)
    shutil.rmtree(work)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--megabytes", type=float, default=200.0)
    parser.add_argument("--relaxations", type=int, default=500)
    parser.add_argument("--parts", default="overhead,parsing,relax", help="which goals to measure")
    options = parser.parse_args()
    parts = set(options.parts.split(","))
    with tempfile.TemporaryDirectory(prefix="httk-bench-vasp-") as scratch:
        root = Path(scratch)
        if "overhead" in parts:
            load = os.getloadavg()[0]
            print(f"runner overhead per VASP step ({os.cpu_count()} CPUs, load average {load:.2f}):")
            (root / "overhead").mkdir()
            runner_overhead(options.rounds, root / "overhead")
            (root / "instructions").mkdir()
            runner_instructions(root / "instructions")
            print(f"  (load average {os.getloadavg()[0]:.2f} at the end)")
        if "parsing" in parts:
            print("parsing large outputs:")
            (root / "parse").mkdir()
            parsing(options.megabytes, root / "parse", max(3, options.rounds // 5))
        if "relax" in parts:
            print("mock relaxations end to end:")
            (root / "relax").mkdir()
            relaxations(options.relaxations, root / "relax")
    print(f"(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
