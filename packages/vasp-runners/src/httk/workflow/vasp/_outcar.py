"""OUTCAR, read in one streaming pass: the header's parameters, every ionic step's energies, the last
step's forces, stress, cell and magnetization, and whether the run finished.

The header (everything before the first electronic iteration) is read line by line: the VASP version,
the POTCAR ``TITEL`` lines and the start parameters (NIONS, NELM, NSW, IBRION, ISIF, EDIFF, EDIFFG,
NBANDS, NELECT), each the word after its ``KEY =`` (string methods: compiling a regular expression
for each would cost a runner more than reading the header). The rest is scanned in chunks of whole lines
(:mod:`._scan`): each single-line fact is found by ``bytes.find`` on its literal text (C speed, no
regular expression) and only its line decoded, and multi-line blocks (forces, the cell, magnetization)
are only located -- their last offset kept -- and read once after the scan. Memory is one chunk plus one
record per ionic step, whatever the file's size.

A run finished when the timing banner ("General timing and accounting informations for this job")
is present; an OUTCAR without it belongs to a run that died or was stopped, and its last step may be
incomplete, so only steps whose energy block was written count.
"""

from __future__ import annotations

from io import BufferedReader

from ._errors import VaspOutputError
from ._record import Record
from ._scan import chunks, number, read_lines, tail

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

_HEADER_END = "Iteration"
# name: (the key, whether the key begins its line); each is read as the word after "KEY =".
_PARAMETERS = {
    "nions": ("NIONS", False),
    "nbands": ("NBANDS", False),
    "nelm": ("NELM", True),
    "nsw": ("NSW", True),
    "ibrion": ("IBRION", True),
    "isif": ("ISIF", True),
    "ediff": ("EDIFF", True),
    "ediffg": ("EDIFFG", True),
    "nelect": ("NELECT", True),
}
_BANNER = b"FREE ENERGIE OF THE ION-ELECTRON SYSTEM (eV)"
_FREE = b"free  energy   TOTEN  ="
_WITHIN = 400
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


class OutcarStep(Record):
    """The energies of one ionic step (eV)."""

    __slots__ = ("energy", "energy_wo_entropy", "free_energy")

    def __init__(
        self, free_energy: float, energy_wo_entropy: float | None = None, energy: float | None = None
    ) -> None:
        self.free_energy = free_energy
        self.energy_wo_entropy = energy_wo_entropy
        self.energy = energy


class Outcar(Record):
    """What an OUTCAR says about its run (see the module docstring); every member starts empty."""

    __slots__ = (
        "finished",
        "forces",
        "lattice",
        "magnetization",
        "parameters",
        "positions",
        "reached_accuracy",
        "steps",
        "stress",
        "titels",
        "total_magnetization",
        "version",
        "version_line",
    )

    def __init__(self) -> None:
        self.version: str | None = None
        self.version_line: str | None = None
        self.titels: list[str] = []
        self.parameters: dict[str, float | int] = {}
        self.steps: list[OutcarStep] = []
        self.finished = False
        self.reached_accuracy = False
        self.forces: list[tuple[float, float, float]] | None = None
        self.positions: list[tuple[float, float, float]] | None = None
        self.stress: list[float] | None = None
        self.lattice: list[tuple[float, float, float]] | None = None
        self.magnetization: list[float] | None = None
        self.total_magnetization: float | None = None

    def parameter(self, name: str) -> int | None:
        """An integer start parameter (``nelm``, ``nsw``, ...), or ``None`` when the header has none."""
        value = self.parameters.get(name)
        return None if value is None else int(value)


def read_outcar(path: StrPath) -> Outcar:
    """Read an OUTCAR (see the module docstring).

    Raises
    ------
    VaspOutputError
        When the file cannot be read.

    Examples
    --------
    >>> outcar = read_outcar("run/OUTCAR")  # doctest: +SKIP
    >>> outcar.finished, outcar.parameter("nsw"), outcar.steps[-1].energy  # doctest: +SKIP
    (True, 40, -17.72137374)
    """
    result = Outcar()
    try:
        start = _read_header(path, result)
        last: dict[str, int] = {}
        with open(path, "rb", buffering=0) as stream:
            offset = start
            while (piece := read_lines(stream, offset))[1]:
                offset += _scan_chunk(*piece, offset, result, last)
        _locate_blocks(path, last.get("previous", start), result, last)
        _read_blocks(path, result, last)
        _read_tail(path, result)
    except OSError as exc:
        raise VaspOutputError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    return result


def _read_header(path: StrPath, result: Outcar) -> int:
    """Read the header line by line; return the offset where the iterations begin."""
    offset = 0
    with open(path, "rb") as stream:
        for raw in stream:
            line = raw.decode("ascii", errors="replace")
            if _HEADER_END in line and "---" in line:
                return offset
            offset += len(raw)
            words = line.split(None, 1)
            if result.version is None and words and words[0].startswith("vasp."):
                result.version, result.version_line = words[0][len("vasp.") :], line.strip()
            elif (titel := _assigned(line, "TITEL", at_start=True, whole=True)) is not None:
                if titel not in result.titels:
                    result.titels.append(titel)
            else:
                _parameters(line, result)
    return offset


def _parameters(line: str, result: Outcar) -> None:
    for name, (key, at_start) in _PARAMETERS.items():
        if key in line and name not in result.parameters:
            word = _assigned(line, key, at_start=at_start)
            value = None if word is None else number(word.rstrip(";"))
            if value is not None:
                result.parameters[name] = int(value) if value.is_integer() and name != "ediff" else value


def _assigned(line: str, key: str, *, at_start: bool, whole: bool = False) -> str | None:
    """What ``KEY = value`` in ``line`` assigns: the word after ``=`` (the rest of the line if ``whole``).

    With ``at_start`` the key must begin the line (after spaces); ``EDIFF`` is not ``EDIFFG``.
    """
    at = line.find(key)
    while at >= 0:
        if at_start and line[:at].strip():
            return None
        rest = line[at + len(key) :].lstrip(" \t")
        if rest.startswith("="):
            value = rest[1:].strip()
            if whole:
                return value or None
            return value.split(None, 1)[0] if value else None
        if at_start:
            return None
        at = line.find(key, at + 1)
    return None


def _scan_chunk(buffer: bytes, end: int, offset: int, result: Outcar, last: dict[str, int]) -> int:
    """The energies of every ionic step in ``buffer[:end]``; how far the scan got (where to go on).

    Each ionic step's energies follow its banner (``FREE ENERGIE OF THE ION-ELECTRON SYSTEM``), a long
    needle ``bytes.find`` skips to at nearly the speed of reading; the free-energy line and the sigma -> 0
    line are searched only in the few hundred bytes after it. A step whose lines the chunk cuts is left
    to the next chunk, which begins at its banner (at the end of the file, it is read as far as it goes).
    ``last["previous"]`` is kept at the banner before the last one: the last step's blocks all lie after
    it.
    """
    find, steps = buffer.find, result.steps
    position = 0
    while (banner := find(_BANNER, position, end)) >= 0:
        free = find(_FREE, banner, min(end, banner + _WITHIN))
        stop = find(b"\n", free, end) if free >= 0 else -1
        sigma = find(_SIGMA, stop, min(end, stop + _WITHIN)) if stop >= 0 else -1
        if sigma < 0 and banner > 0 and end - banner < 2 * _WITHIN:
            return banner  # cut by the chunk: read again from its banner
        if "latest" in last:
            last["previous"] = last["latest"]
        last["latest"] = offset + banner
        position = banner + len(_BANNER)
        if stop < 0:
            continue
        energy = number(buffer[free + len(_FREE) : stop].split(b"eV", 1)[0])
        position = stop
        if energy is None:
            continue
        step = OutcarStep(energy)
        steps.append(step)
        if sigma >= 0:
            stop = find(b"\n", sigma, end)
            tokens = buffer[sigma + len(_SIGMA) : end if stop < 0 else stop].split()
            step.energy_wo_entropy = number(tokens[0]) if tokens else None
            step.energy = number(tokens[-1]) if len(tokens) == 4 else None
            position = sigma
    return end


def _locate_blocks(path: StrPath, start: int, result: Outcar, last: dict[str, int]) -> None:
    """Where the last forces, cell and magnetization blocks begin, and the last stress, from ``start``.

    Only the end of the file is searched, from the free-energy line before the last one: every block
    of the last ionic step (or of a step cut short after it) lies there, and a block a run never writes
    (magnetization without spin) costs a search of one step, not of the whole file.
    """
    for offset, buffer, end in chunks(path, start=start):
        stress = buffer.rfind(_STRESS, 0, end)
        if stress >= 0:
            stop = buffer.find(b"\n", stress, end)
            line = buffer[stress + len(_STRESS) : stop if stop >= 0 else end]
            values = [number(token) for token in line.split()]
            if len(values) == 6 and all(v is not None for v in values):
                result.stress = [v for v in values if v is not None]
        for name, needle in _BLOCKS.items():
            where = buffer.rfind(needle, 0, end)
            if where >= 0:
                last[name] = offset + where


def _read_tail(path: StrPath, result: Outcar) -> None:
    """What only the end of an OUTCAR says: the relaxation's verdict and the closing banner."""
    _, data = tail(path, _TAIL_BYTES)
    result.finished = _FINISHED in data
    result.reached_accuracy = _REACHED in data


def _read_blocks(path: StrPath, result: Outcar, last: dict[str, int]) -> None:
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


def _rows(stream: BufferedReader, offset: int, count: int) -> list[str]:
    stream.seek(offset)
    rows = []
    for _ in range(count):
        raw = stream.readline()
        if not raw:
            break
        rows.append(raw.decode("ascii", errors="replace").rstrip("\n"))
    return rows
