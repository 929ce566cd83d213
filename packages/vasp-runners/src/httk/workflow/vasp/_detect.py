"""Finding the catalog's problems in a run: its text streamed as it grows, and its outputs afterwards.

:class:`TextScanner` follows ``vasp.out``, ``vasp.err`` and OUTCAR from where it last stopped, in chunks
of whole lines, looking for every signature of the rows it was given with ``bytes.find``: while VASP runs
the runner polls it with the rows VASP would run on with (``stop_running``), and after the run one scan
with every row reads each file once, however large. :func:`diagnose` adds the derived rows from the
parsed outputs and the run report, and returns the problems in catalog order, each with the evidence
that found it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable

from ._catalog import CATALOG, OUTCAR, STDOUT, Problem
from ._process import STDERR
from ._process import STDOUT as STDOUT_FILE
from ._record import NamedTuple
from ._scan import chunks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

    from ._incar import Incar
    from ._process import RunReport
    from ._restart import Outputs

_FILES = {STDOUT: (STDOUT_FILE, STDERR), OUTCAR: ("OUTCAR",)}


class TextScanner:
    """Signatures of ``rows`` in the run's text files, read incrementally (see the module docstring)."""

    def __init__(self, workdir: StrPath, rows: Iterable[Problem]) -> None:
        self._workdir = workdir
        self._needles: dict[str, list[tuple[bytes, str]]] = {}
        for row in rows:
            for kind in row.where:
                for name in _FILES[kind]:
                    self._needles.setdefault(name, []).extend((s.encode(), row.name) for s in row.signatures)
        self._offsets: dict[str, int] = {}
        self.found: dict[str, str] = {}

    def scan(self) -> dict[str, str]:
        """Read what the files gained since the last scan; every problem found so far, with its evidence."""
        for name, needles in self._needles.items():
            path = os.path.join(self._workdir, name)
            try:
                for offset, buffer, end in chunks(path, start=self._offsets.get(name, 0)):
                    if buffer[end - 1 : end] != b"\n":
                        break  # a line still being written: read it whole next time
                    for needle, problem in needles:
                        if problem not in self.found and buffer.find(needle, 0, end) >= 0:
                            self.found[problem] = f"{name}: {needle.decode()}"
                    self._offsets[name] = offset + end
            except OSError:
                continue
        return self.found

    def first(self) -> str | None:
        """The first problem found so far, in catalog order (what a monitor stops VASP for)."""
        found = self.scan()
        return next((row.name for row in CATALOG if row.name in found), None)


class Diagnosis(NamedTuple):
    """The problems of one run in catalog order, with the evidence of each."""

    problems: list[str]
    evidence: dict[str, str]

    @property
    def first(self) -> str | None:
        return self.problems[0] if self.problems else None


def diagnose(workdir: StrPath, outputs: Outputs, report: RunReport | None, incar: Incar) -> Diagnosis:
    """Every problem of the run: text signatures, then the derived rows (see :mod:`._catalog`)."""
    found = dict(TextScanner(workdir, CATALOG).scan())
    outcar = outputs.outcar
    stopped_by_us = report is not None and report.stopped is not None
    if report is not None and report.stopped == "timeout":
        found.setdefault("walltime", "the runner's vasp.timeout was reached")
    elif report is not None and report.status == -signal.SIGTERM and not stopped_by_us:
        found.setdefault("walltime", "VASP was killed by SIGTERM")
    if outputs.finished and not stopped_by_us:
        nelm = (outcar.parameter("nelm") if outcar else None) or incar.get_int("NELM", 60) or 60
        last = outputs.oszicar[-1] if outputs.oszicar else None
        if last is not None and last.electronic_steps >= nelm:
            steps = f"ionic step {last.index} took {last.electronic_steps} electronic steps"
            found.setdefault("nelm", f"OSZICAR: {steps} (NELM = {nelm})")
        nsw = incar.get_int("NSW", 0) or 0
        relaxes = nsw > 1 and incar.get_int("IBRION", 0) in (1, 2, 3)
        if relaxes and outcar is not None and not outcar.reached_accuracy and len(outputs.oszicar) >= nsw:
            found.setdefault(
                "ionic", f"OUTCAR: {len(outputs.oszicar)} of NSW = {nsw} ionic steps without reaching EDIFFG"
            )
    if not outputs.finished and not found and not stopped_by_us:
        status = "none" if report is None else report.status
        found["crash"] = f"VASP ended without its closing banner (exit status {status})"
    problems = [row.name for row in CATALOG if row.name in found]
    return Diagnosis(problems, {name: found[name] for name in problems})
