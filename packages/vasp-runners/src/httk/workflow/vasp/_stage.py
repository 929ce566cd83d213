"""One attempt of a VASP stage (``relax`` or ``static``): recover, prepare, run, and decide the outcome.

:func:`run_stage` is the whole step of every packaged VASP workflow, shared by the Python runner (which
publishes the returned :class:`Decision` through ``Attempt``) and the Bash API (which
publishes it through ``httk-workflow.sh``), so both end with the same documents. In order:

1. **Settings**: ``vasp.command`` and the other knobs (:mod:`._knobs`); no command fails the job with
   ``vasp.command_missing`` before anything is touched.
2. **Recovery**, whatever the attempt's reason: a VASP a dead runner left running is stopped
   (``.httk-vasp/process.json``); a remedy its predecessor left half-applied is undone from its backup;
   a run that was in progress when the previous attempt died (job state says so) is judged -- a usable
   CONTCAR becomes the next POSCAR, an incomplete WAVECAR or CHGCAR is deleted, the truncated outputs
   are archived -- so the new run continues where the old one was, never from stale files.
3. **Preparation**, once per stage: the inputs are written into the workdir (:mod:`._inputs`); the
   static stage of a relax-then-static job starts from the relaxed structure.
4. **The run**, supervised (:mod:`._process`), its output watched for the errors VASP runs on with.
5. **The decision** (:mod:`._decide`): a remedy (``retry``), a repeat (``advance`` to the same step),
   the next stage, success with results.json, or a failure with a namespaced code.

Job state (``.httk-job/state.json``, member ``vasp``) is saved before VASP starts (``running``) and
before the outcome is published, so every crash point leaves a state the next attempt understands.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType

from httk.workflow.sdk import Attempt, SdkError

from . import _knobs
from ._errors import PseudoLibraryError, VaspCommandError, VaspInputError
from ._files import read_text, write_atomically
from ._process import RunReport, run_vasp, stop_leftover
from ._record import NamedTuple
from ._structure import format_poscar, parse_poscar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STATE_KEY = "vasp"
STATE_VERSION = 1


class Decision(NamedTuple):
    """What one attempt publishes: ``advance``, ``retry``, ``succeed`` or ``fail``, with its members.

    For ``succeed``, ``results`` (results.json) and ``structure`` (the final CONTCAR) are the bytes to
    put into the job's transactional data.
    """

    action: str
    message: str
    next_step: str | None = None
    reason: str | None = None
    code: str | None = None
    details: Mapping[str, Any] = MappingProxyType({})
    results: bytes | None = None
    structure: bytes | None = None


def record_event(attempt: Attempt, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
    """A runner-reported event; a record that cannot be written never costs the calculation."""
    try:
        attempt.record_event(kind, message, details)
    except SdkError as exc:
        print(f"httk.workflow.vasp: cannot record an event: {exc}", flush=True)


def failure(attempt: Attempt, code: str, message: str, details: dict[str, Any]) -> Decision:
    """Fail the job with ``code``, recorded as a ``vasp.failed`` event first."""
    record_event(attempt, "vasp.failed", message, {"code": code, **details})
    return Decision("fail", message, code=code, details=details)


def load_state(attempt: Attempt) -> dict[str, Any]:
    """The VASP part of the job state, with every member present."""
    state = dict(attempt.state.get(STATE_KEY) or {})
    state.setdefault("version", STATE_VERSION)
    for member, empty in (("prepared", {}), ("runs", []), ("remedies", []), ("ladders", {})):
        state.setdefault(member, empty)
    state.setdefault("running", None)
    state.setdefault("pending", None)
    return state


def save_state(attempt: Attempt, state: dict[str, Any]) -> None:
    """Replace the VASP part of the job state (synchronized when the workspace is durable)."""
    attempt.save_state({**attempt.state, STATE_KEY: state})


def run_stage(attempt: Attempt, workflow: str) -> Decision:
    """Run one attempt of the current stage and return what to publish (see the module docstring)."""
    stage = attempt.step
    state = load_state(attempt)
    try:
        knobs = _knobs.resolve(attempt.setting, int(attempt.resources.get("procs", 1) or 1))
    except VaspCommandError as exc:
        return failure(attempt, exc.code, exc.message, {"setting": "vasp.command"})
    except VaspInputError as exc:
        return failure(attempt, "vasp.input_invalid", exc.message, {})
    recover(attempt, state, stage, knobs.kill_grace)
    if stage not in state["prepared"]:
        try:
            prepare_stage(attempt, state, stage)
        except (VaspInputError, PseudoLibraryError) as exc:
            return failure(attempt, "vasp.input_invalid", str(exc), {"stage": stage})
    try:
        index, report = run_once(attempt, state, knobs)
    except VaspCommandError as exc:
        return failure(attempt, exc.code, exc.message, {"argv": knobs.argv})
    from ._decide import after_run

    return after_run(attempt, workflow, state, index, report=report, knobs=knobs)


def prepare_stage(
    attempt: Attempt, state: dict[str, Any], stage: str, *, digest: bool = False
) -> dict[str, Any]:
    """Write the inputs of ``stage`` into the workdir and record their provenance (job state, an event).

    The static stage after a relaxation starts from the relaxed structure (the workdir's POSCAR). The
    POTCAR datasets' SHA-256 are left to the run (:func:`run_once` takes them while VASP runs) unless
    ``digest`` asks for them now.

    Raises
    ------
    VaspInputError, PseudoLibraryError
        An input cannot be used.
    """
    from ._inputs import prepare

    workdir = attempt.directory("workdir")
    structure = None
    if stage == "static" and "relax" in state["prepared"]:
        poscar = os.path.join(workdir, "POSCAR")
        structure = parse_poscar(read_text(poscar), path=poscar)
    prepared = prepare(
        stage,
        workdir,
        attempt.directory("job_dir"),
        attempt.inputs,
        attempt.setting,
        structure=structure,
        digest=digest,
    )
    state["prepared"][stage] = prepared
    record_event(attempt, "vasp.prepared", f"{stage} inputs written", _prepared_summary(prepared))
    return prepared


def run_once(attempt: Attempt, state: dict[str, Any], knobs: _knobs.Knobs) -> tuple[int, RunReport]:
    """Run VASP once for the current stage, supervised; its run number and how it ended.

    The run is recorded as ``running`` in job state before VASP starts, so that an attempt that dies
    with it leaves what the next one needs to judge its files (:func:`recover`). While it runs, the
    runner loads what it needs afterwards and records the POTCAR digests :func:`prepare_stage` left
    out (:func:`_while_vasp_runs`).

    Raises
    ------
    VaspCommandError
        ``vasp.command`` cannot be started (job state no longer says it runs).
    """
    index = len(state["runs"]) + 1
    state["running"] = {"run": index, "stage": attempt.step, "attempt_id": attempt.attempt_id}
    save_state(attempt, state)
    monitor: list[Callable[[], str | None]] = []  # the watch _while_vasp_runs makes
    try:
        report = run_vasp(
            knobs.argv,
            attempt.directory("workdir"),
            timeout=knobs.timeout,
            stop_grace=knobs.stop_grace,
            kill_grace=knobs.kill_grace,
            poll_seconds=knobs.poll_seconds,
            monitor=lambda: monitor[0](),  # noqa: PLW0108 -- made only once VASP runs
            on_start=lambda: monitor.append(_while_vasp_runs(attempt, state)),
        )
    except VaspCommandError:
        state["running"] = None
        save_state(attempt, state)
        raise
    return index, report


def _while_vasp_runs(attempt: Attempt, state: dict[str, Any]) -> Callable[[], str | None]:
    """What the runner does once VASP has started, before it waits for VASP: work kept off VASP's start.

    Returns the watch of VASP's output for the errors VASP would run on with (the catalog's
    ``stop_running`` rows), which the supervision polls. The catalog with its detection, the parsers,
    restart judging, archiving, results.json and the SDK's transaction staging are needed only once VASP
    runs or has ended; loading them here puts their cost beside VASP's time rather than before or after
    it (VASP computes on its own cores meanwhile). The POTCAR datasets' digests (``hashlib`` loads
    OpenSSL) are taken from the POTCAR VASP reads, for whichever prepared stage still lacks them: an
    attempt that died before recording them leaves them to the next run.

    The installed runner starts with the cyclic garbage collector off; what start-up made is frozen
    (never traversed again) and the collector is on again for the hours VASP may run.
    """
    from httk.workflow.sdk import _transaction_stage  # noqa: F401  # what publishing results needs

    from . import _decide, _results  # noqa: F401
    from ._catalog import CATALOG
    from ._detect import TextScanner
    from ._potcar import digests

    workdir = attempt.directory("workdir")
    datasets = [d for p in state["prepared"].values() for d in p["potcar"]["datasets"]]
    if any(d.get("sha256") is None for d in datasets):
        with open(os.path.join(workdir, "POTCAR"), encoding="ascii", errors="replace") as potcar:
            taken = digests(potcar.read())
        for prepared in state["prepared"].values():
            for dataset, sha256 in zip(prepared["potcar"]["datasets"], taken, strict=False):
                dataset["sha256"] = sha256
        save_state(attempt, state)
    gc.freeze()
    gc.enable()
    return TextScanner(workdir, [row for row in CATALOG if row.stop_running]).first


def _prepared_summary(prepared: dict[str, Any]) -> dict[str, Any]:
    return {
        "kpoints": prepared["kpoints"],
        "potcar": [d["titel"] for d in prepared["potcar"]["datasets"]],
        "incar_defaults": prepared["incar"]["defaults"],
    }


def recover(attempt: Attempt, state: dict[str, Any], stage: str, grace: float) -> None:
    """Step 2 of the module docstring: leave the workdir as a finished run would have left it."""
    workdir = attempt.directory("workdir")
    leftover = stop_leftover(workdir, grace)
    if leftover is not None:
        record_event(
            attempt, "vasp.leftover", f"a VASP left by an earlier attempt: {leftover}", {"verdict": leftover}
        )
    pending = state.get("pending")
    if pending:
        from ._ladder import restore

        restored = restore(workdir, pending)
        state["pending"] = None
        record_event(
            attempt,
            "vasp.remedy_undone",
            f"an interrupted remedy was undone ({pending.get('remedy')})",
            {"restored": restored, **{k: pending.get(k) for k in ("problem", "remedy", "run")}},
        )
    running = state.get("running")
    if running is None and not os.path.exists(os.path.join(workdir, "OUTCAR")):
        return
    from ._decide import run_record
    from ._restart import archive_outputs, judge_restart_files, read_outputs, usable_contcar

    index = running["run"] if running else len(state["runs"]) + 1
    run_stage_name = running["stage"] if running else stage
    poscar_path = os.path.join(workdir, "POSCAR")
    poscar = parse_poscar(read_text(poscar_path), path=poscar_path)
    outputs = read_outputs(workdir)
    contcar = usable_contcar(workdir, poscar)
    verdicts = judge_restart_files(workdir)
    run = run_record(attempt, index, run_stage_name, outputs, None)
    run.update(
        outcome="interrupted" if running else "stale", restart_files=verdicts, contcar=contcar is not None
    )
    run["archive"] = archive_outputs(workdir, index, run_stage_name)
    moved = contcar is not None and len(outputs.oszicar) >= 1 and run_stage_name == "relax"
    if moved:
        write_atomically(poscar_path, format_poscar(contcar))  # type: ignore[arg-type]
    state["runs"].append(run)
    state["running"] = None
    record_event(
        attempt,
        "vasp.restart",
        f"run {index} was interrupted after {len(outputs.oszicar)} ionic steps; "
        + ("continuing from its CONTCAR" if moved else "starting it again from its POSCAR"),
        {
            "run": index,
            "restart_files": verdicts,
            "contcar": contcar is not None,
            "unclean": attempt.is_unclean_restart,
        },
    )
    save_state(attempt, state)
