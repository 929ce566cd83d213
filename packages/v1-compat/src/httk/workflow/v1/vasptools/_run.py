"""VASP_RUN_CONTROLLED: VASP run once in the current directory, watched by the VASP package's catalog.

v1 ran VASP beside three checker processes that followed its standard output, OSZICAR and OUTCAR for
known error texts, stopped it on a fatal one, and summed up the run in its return code and in tokens
in ``ht.controlled.msgs``. Here the VASP package runs it (:func:`run_vasp`: its own process group, a
STOPCAR before SIGTERM before SIGKILL, standard output in ``vasp.out``), polling the catalog rows VASP
would run on with (:class:`TextScanner`), and the run is diagnosed with every row afterwards
(:func:`diagnose`), so a v1 template sees the same problems the packaged workflows see.

Return codes, v1's:

====  ===========================================================================================
0     VASP wrote its closing banner (the problems of a finished run, if any, are in the messages)
2     it did not (it stopped on an error, crashed, or the catalog stopped it), or it cannot start
4     it finished, but the last ionic step reached NELM or the relaxation used up NSW (v1's
      ``LAST BADCONV``)
99    TIMEOUT seconds passed (then VASP is stopped; 0 or less: no limit)
3     the helper received SIGTERM (VASP is stopped first)
100   it received SIGINT (the Bash helper then declares the task broken, as v1 did)
====  ===========================================================================================

The graces between the stop stages are the VASP package's settings ``vasp.stop_grace`` (60 s) and
``vasp.kill_grace`` (30 s), and the polling interval ``vasp.poll_seconds`` (5 s), read from the
environment the manager exports them in (``HTTK_VASP_STOP_GRACE``, ...).
"""

from __future__ import annotations

import signal
from contextlib import suppress
from pathlib import Path
from typing import Any

from ._library import FINISHED, MSGS, TIMEOUT, number_setting, token, vasp, write_text

FINISHED_CODE, NOT_FINISHED, BADCONV, TIMED_OUT, TERMINATED, INTERRUPTED = 0, 2, 4, 99, 3, 100
UNCONVERGED = frozenset({"nelm", "ionic"})
STATE_DIR = ".httk-vasp"


def run_controlled(workdir: Path, timeout: float, argv: list[str]) -> int:
    """Run ARGV in WORKDIR as VASP_RUN_CONTROLLED does; its return code (see the module docstring)."""
    module = vasp()
    (workdir / MSGS).unlink(missing_ok=True)
    rows = [row for row in module.CATALOG if row.stop_running]
    watch = module.TextScanner(workdir, rows)
    try:
        report = module.run_vasp(
            argv,
            workdir,
            timeout=timeout if timeout > 0 else None,
            stop_grace=number_setting("vasp.stop_grace", 60.0),
            kill_grace=number_setting("vasp.kill_grace", 30.0),
            poll_seconds=number_setting("vasp.poll_seconds", 5.0),
            monitor=watch.first,
        )
    except module.VaspCommandError as exc:
        write_text(workdir / MSGS, "")
        print(f"VASP_RUN_CONTROLLED: {exc}", flush=True)
        return NOT_FINISHED
    finally:
        with suppress(OSError):  # the package's folder for VASP's identity, empty once VASP has ended
            (workdir / STATE_DIR).rmdir()
    outputs = module.read_outputs(workdir)
    diagnosis = module.diagnose(workdir, outputs, report, _incar(module, workdir))
    lines = [token(name) for name in diagnosis.problems]
    lines += [FINISHED] if outputs.finished else []
    lines += [TIMEOUT] if report.stopped == "timeout" else []
    write_text(workdir / MSGS, "".join(f"{line}\n" for line in lines))
    code = _code(report, outputs.finished, diagnosis.problems)
    print(_summary(report, code, diagnosis), flush=True)
    return code


def _incar(module: Any, workdir: Path) -> Any:
    """The INCAR VASP ran with (empty when there is none or it does not parse: VASP used its defaults)."""
    try:
        return module.Incar.parse((workdir / "INCAR").read_text(encoding="utf-8", errors="replace"))
    except (OSError, module.VaspError):
        return module.Incar()


def _code(report: Any, finished: bool, problems: list[str]) -> int:
    if report.runner_signal == signal.SIGINT:
        return INTERRUPTED
    if report.runner_signal is not None:
        return TERMINATED
    if report.stopped == "timeout":
        return TIMED_OUT
    if not finished or report.stopped is not None:
        return NOT_FINISHED
    return BADCONV if UNCONVERGED.intersection(problems) else FINISHED_CODE


def _summary(report: Any, code: int, diagnosis: Any) -> str:
    how = (
        f"stopped ({report.stopped}, {report.stop_stage})"
        if report.stopped
        else f"exit status {report.status}"
    )
    found = ", ".join(f"{name} ({diagnosis.evidence[name]})" for name in diagnosis.problems) or "none"
    return f"VASP_RUN_CONTROLLED: VASP ran {report.seconds:.1f} s, {how}; problems: {found}; returns {code}"
