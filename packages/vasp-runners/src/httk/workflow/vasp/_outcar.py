"""OUTCAR, read in one streaming pass: the header's parameters, every ionic step's energies, the last
step's forces, stress, cell and magnetization, and whether the run finished.

The header (everything before the first electronic iteration) is read line by line: the VASP version,
the POTCAR ``TITEL`` lines and the start parameters (NIONS, NELM, NSW, IBRION, ISIF, EDIFF, EDIFFG,
NBANDS, NELECT). The rest is scanned in chunks of whole lines (:mod:`._scan`): each single-line fact is
found by ``bytes.find`` on its literal text (C speed, no regular expression) and only its line decoded,
and multi-line blocks (forces, the cell, magnetization) are only located -- their last offset kept -- and
read once after the scan. Memory is one chunk plus one record per ionic step, whatever the file's size.

A run finished when the timing banner ("General timing and accounting informations for this job")
is present; an OUTCAR without it belongs to a run that died or was stopped, and its last step may be
incomplete, so only steps whose energy block was written count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import VaspOutputError
from ._scan import chunks, number, tail

_HEADER_END = "Iteration"
_VERSION = re.compile(r"^\s*vasp\.(\S+)")
_TITEL = re.compile(r"^\s*TITEL\s*=\s*(.+?)\s*$")
_PARAMETERS = {
    "nions": re.compile(r"NIONS\s*=\s*(\d+)"),
    "nbands": re.compile(r"NBANDS\s*=\s*(\d+)"),
    "nelm": re.compile(r"^\s*NELM\s*=\s*(-?\d+)"),
    "nsw": re.compile(r"^\s*NSW\s*=\s*(-?\d+)"),
    "ibrion": re.compile(r"^\s*IBRION\s*=\s*(-?\d+)"),
    "isif": re.compile(r"^\s*ISIF\s*=\s*(-?\d+)"),
    "ediff": re.compile(r"^\s*EDIFF\s*=\s*(\S+)"),
    "ediffg": re.compile(r"^\s*EDIFFG\s*=\s*(\S+)"),
    "nelect": re.compile(r"^\s*NELECT\s*=\s*(\S+)"),
}
_FREE = b"free  energy   TOTEN  ="
_SIGMA = b"energy  without entropy="
_STRESS = b"  in kB "
_TAIL_BYTES = 1 << 16
_FINISHED = b"General timing and accounting informations for this job"
_REACHED = b"reached required accuracy - stopping structural energy minimisation"
_BLOCKS = {
    "forces": b" POSITION      ",
    "cell": b"direct lattice vectors",
    "magnetization": b" magnetization (x)",
}


@dataclass
class OutcarStep:
    """The energies of one ionic step (eV)."""

    free_energy: float
    energy_wo_entropy: float | None = None
    energy: float | None = None


@dataclass
class Outcar:
    """What an OUTCAR says about its run (see the module docstring)."""

    version: str | None = None
    version_line: str | None = None
    titels: list[str] = field(default_factory=list)
    parameters: dict[str, float | int] = field(default_factory=dict)
    steps: list[OutcarStep] = field(default_factory=list)
    finished: bool = False
    reached_accuracy: bool = False
    forces: list[tuple[float, float, float]] | None = None
    positions: list[tuple[float, float, float]] | None = None
    stress: list[float] | None = None
    lattice: list[tuple[float, float, float]] | None = None
    magnetization: list[float] | None = None
    total_magnetization: float | None = None

    def parameter(self, name: str) -> int | None:
        """An integer start parameter (``nelm``, ``nsw``, ...), or ``None`` when the header has none."""
        value = self.parameters.get(name)
        return None if value is None else int(value)


def read_outcar(path: Path) -> Outcar:
    """Read an OUTCAR (see the module docstring).

    Raises
    ------
    VaspOutputError
        When the file cannot be read.

    Examples
    --------
    >>> outcar = read_outcar(Path("run/OUTCAR"))  # doctest: +SKIP
    >>> outcar.finished, outcar.parameter("nsw"), outcar.steps[-1].energy  # doctest: +SKIP
    (True, 40, -17.72137374)
    """
    result = Outcar()
    try:
        start = _read_header(path, result)
        last: dict[str, int] = {}
        for offset, buffer in chunks(path, start=start):
            _scan_chunk(buffer, offset, result, last)
        _read_blocks(path, result, last)
        _read_tail(path, result)
    except OSError as exc:
        raise VaspOutputError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    return result


def _read_header(path: Path, result: Outcar) -> int:
    """Read the header line by line; return the offset where the iterations begin."""
    offset = 0
    with open(path, "rb") as stream:
        for raw in stream:
            line = raw.decode("ascii", errors="replace")
            if _HEADER_END in line and "---" in line:
                return offset
            offset += len(raw)
            if result.version is None and (match := _VERSION.match(line)):
                result.version, result.version_line = match.group(1), line.strip()
            elif match := _TITEL.match(line):
                if match.group(1) not in result.titels:
                    result.titels.append(match.group(1))
            else:
                _parameters(line, result)
    return offset


def _parameters(line: str, result: Outcar) -> None:
    for name, pattern in _PARAMETERS.items():
        if name not in result.parameters and (match := pattern.search(line)):
            value = number(match.group(1).rstrip(";"))
            if value is not None:
                result.parameters[name] = int(value) if value.is_integer() and name != "ediff" else value


def _scan_chunk(buffer: bytes, offset: int, result: Outcar, last: dict[str, int]) -> None:
    """The energies of every ionic step in ``buffer``, and where its last multi-line blocks start.

    One forward pass of ``bytes.find`` over the free-energy line of each ionic step; the sigma -> 0
    line two lines below is read from the same place (or, when the chunk ends between the two, from
    the start of the next chunk: ``last["pending"]``).
    """
    position = 0
    if last.pop("pending", 0) and result.steps:
        position = _sigma(buffer, buffer.find(_SIGMA), result.steps[-1])
    while (position := buffer.find(_FREE, position)) >= 0:
        end = buffer.find(b"\n", position)
        energy = number(buffer[position + len(_FREE) : end].split(b"eV")[0].strip().decode())
        position = end
        if energy is None:
            continue
        step = OutcarStep(energy)
        result.steps.append(step)
        sigma = buffer.find(_SIGMA, end, end + 400)
        if sigma < 0 and len(buffer) - end < 400:
            last["pending"] = 1
        elif sigma >= 0:
            position = _sigma(buffer, sigma, step)
    stress = buffer.rfind(_STRESS)
    if stress >= 0:
        end = buffer.find(b"\n", stress)
        line = buffer[stress + len(_STRESS) : end if end >= 0 else None]
        values = [number(token) for token in line.decode().split()]
        if len(values) == 6 and all(v is not None for v in values):
            result.stress = [v for v in values if v is not None]
    for name, needle in _BLOCKS.items():
        where = buffer.rfind(needle)
        if where >= 0:
            last[name] = offset + where


def _sigma(buffer: bytes, position: int, step: OutcarStep) -> int:
    """Read the sigma -> 0 line at ``position`` into ``step``; the offset after it."""
    if position < 0:
        return 0
    end = buffer.find(b"\n", position)
    end = len(buffer) if end < 0 else end
    without, _, sigma0 = buffer[position + len(_SIGMA) : end].partition(b"energy(sigma->0) =")
    step.energy_wo_entropy = number(without.strip().decode())
    step.energy = number(sigma0.strip().decode())
    return end


def _read_tail(path: Path, result: Outcar) -> None:
    """What only the end of an OUTCAR says: the relaxation's verdict and the closing banner."""
    _, data = tail(path, _TAIL_BYTES)
    result.finished = _FINISHED in data
    result.reached_accuracy = _REACHED in data


def _read_blocks(path: Path, result: Outcar, last: dict[str, int]) -> None:
    """Read the last forces, cell and magnetization blocks the scan located."""
    nions = result.parameter("nions")
    with open(path, "rb") as stream:
        if "forces" in last and nions:
            rows = _rows(stream, last["forces"], nions + 2)[2:]
            table = [[number(x) for x in row.split()] for row in rows]
            if len(table) == nions and all(len(r) == 6 and None not in r for r in table):
                result.positions = [(r[0], r[1], r[2]) for r in table]  # type: ignore[misc]
                result.forces = [(r[3], r[4], r[5]) for r in table]  # type: ignore[misc]
        if "cell" in last:
            cell = [[number(x) for x in row.split()[:3]] for row in _rows(stream, last["cell"], 4)[1:]]
            if len(cell) == 3 and all(len(r) == 3 and None not in r for r in cell):
                result.lattice = [(r[0], r[1], r[2]) for r in cell]  # type: ignore[misc]
        if "magnetization" in last and nions:
            rows = _rows(stream, last["magnetization"], nions + 6)[4:]
            sites = [number(row.split()[-1]) for row in rows[:nions] if row.split()]
            if len(sites) == nions and None not in sites:
                result.magnetization = sites  # type: ignore[assignment]
            total = [row for row in rows[nions:] if row.split()[:1] == ["tot"]]
            if total:
                result.total_magnetization = number(total[0].split()[-1])


def _rows(stream: object, offset: int, count: int) -> list[str]:
    from typing import BinaryIO, cast

    binary = cast(BinaryIO, stream)
    binary.seek(offset)
    rows = []
    for _ in range(count):
        raw = binary.readline()
        if not raw:
            break
        rows.append(raw.decode("ascii", errors="replace").rstrip("\n"))
    return rows
