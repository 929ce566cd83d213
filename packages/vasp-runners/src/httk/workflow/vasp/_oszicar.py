"""OSZICAR: one line per electronic step and one summary line per ionic step.

An electronic line starts with the algorithm's label (``DAV:``, ``RMM:``, ``CG :``, ``SDA:``...) and its
iteration number; an ionic line with the ionic step number and ``F=`` (free energy), ``E0=`` (energy at
sigma -> 0), ``d E =`` and, for spin-polarized runs, ``mag=``. Molecular dynamics lines add ``T=`` and
``E=``; they are read the same way. The file is read line by line (it grows by about a hundred bytes per
electronic step, so even a long run's OSZICAR is small) and what is kept is one small record per ionic
step.
"""

from __future__ import annotations

import re

from ._errors import VaspOutputError
from ._record import Record
from ._scan import number

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

_ELECTRONIC = re.compile(r"^\s*[A-Z][A-Za-z ]{1,4}:\s+\d+\s")
_IONIC = re.compile(r"^\s*(\d+)\s+(?:T=.*?)?F=\s*(\S+)\s+E0=\s*(\S+)")
_MAG = re.compile(r"mag=\s*(\S+)")


class OszicarStep(Record):
    """One ionic step as OSZICAR records it.

    Parameters
    ----------
    index
        The ionic step number (1-based).
    free_energy
        ``F=``, the free energy TOTEN in eV.
    energy
        ``E0=``, the energy extrapolated to sigma -> 0 in eV.
    electronic_steps
        How many electronic iterations the step took.
    magnetization
        ``mag=``, the total magnetic moment, or ``None`` for a non-spin-polarized run.
    """

    __slots__ = ("electronic_steps", "energy", "free_energy", "index", "magnetization")

    def __init__(
        self,
        index: int,
        free_energy: float,
        energy: float,
        electronic_steps: int,
        magnetization: float | None,
    ) -> None:
        self.index = index
        self.free_energy = free_energy
        self.energy = energy
        self.electronic_steps = electronic_steps
        self.magnetization = magnetization


def read_oszicar(path: StrPath) -> list[OszicarStep]:
    """The ionic steps of an OSZICAR, in order; an unfinished last step is left out.

    Raises
    ------
    VaspOutputError
        When the file cannot be read.

    Examples
    --------
    >>> steps = read_oszicar("run/OSZICAR")  # doctest: +SKIP
    >>> [round(s.energy, 3) for s in steps]  # doctest: +SKIP
    [-17.614, -17.689, -17.712]
    """
    steps: list[OszicarStep] = []
    electronic = 0
    try:
        with open(path, encoding="ascii", errors="replace") as stream:
            for line in stream:
                if _ELECTRONIC.match(line):
                    electronic += 1
                    continue
                match = _IONIC.match(line)
                if match is None:
                    continue
                free, energy = number(match.group(2)), number(match.group(3))
                if free is None or energy is None:
                    continue
                mag = _MAG.search(line)
                steps.append(
                    OszicarStep(
                        index=int(match.group(1)),
                        free_energy=free,
                        energy=energy,
                        electronic_steps=electronic,
                        magnetization=number(mag.group(1)) if mag else None,
                    )
                )
                electronic = 0
    except OSError as exc:
        raise VaspOutputError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    return steps
