"""vasprun.xml, read in bounded memory at close to the speed of reading the file.

Why not ``iterparse`` over the whole document: an XML parser driving Python callbacks reads a few tens
of MB per second, and nearly all of a large vasprun.xml is what a workflow never reads (per-step
structures of a long run, eigenvalues, densities of states, projections). The reader therefore splits
the work: the document's head (``generator``, ``incar``, ``kpoints``, ``parameters``, ``atominfo``, the
initial structure) is parsed with ElementTree; each ``<calculation>`` is located with ``bytes.find`` and
only its summary -- the number of electronic ``<scstep>``s, and the final ``<structure>``, ``forces``,
``stress`` and ``<energy>`` that follow the last scstep -- is cut out and parsed, after which the
reader skips to ``</calculation>`` without looking at what lies between (eigenvalues and DOS sit there).
Memory is one read chunk plus one calculation's summary; time is dominated by ``find`` and ``count``.

The layout relied on is VASP's: within a calculation, scsteps come first and the final energy is the
first ``<energy>`` after them. A document cut short (the run died, or is still running) is read up to
its last complete calculation; :attr:`Vasprun.complete` says whether ``</modeling>`` was reached.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import VaspOutputError
from ._scan import CHUNK_BYTES, number

_OPEN = b"<calculation>"
_CLOSE = b"</calculation>"
_END = b"</modeling>"
_HEAD_LIMIT = 1 << 26


@dataclass
class VasprunStep:
    """One ionic step (``<calculation>``) of vasprun.xml."""

    free_energy: float | None
    energy_wo_entropy: float | None
    energy: float | None
    electronic_steps: int


@dataclass
class Vasprun:
    """What vasprun.xml says (see the module docstring)."""

    version: str | None = None
    incar: dict[str, object] = field(default_factory=dict)
    kpoints: dict[str, object] = field(default_factory=dict)
    elements: list[str] = field(default_factory=list)
    pseudopotentials: list[str] = field(default_factory=list)
    steps: list[VasprunStep] = field(default_factory=list)
    lattice: list[list[float]] | None = None
    positions: list[list[float]] | None = None
    forces: list[list[float]] | None = None
    stress: list[list[float]] | None = None
    complete: bool = False


def read_vasprun(path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> Vasprun:
    """Read vasprun.xml (see the module docstring).

    Raises
    ------
    VaspOutputError
        When the file cannot be read, or its head is not XML.

    Examples
    --------
    >>> run = read_vasprun(Path("run/vasprun.xml"))  # doctest: +SKIP
    >>> run.complete, len(run.steps), run.steps[-1].energy  # doctest: +SKIP
    (True, 8, -17.72137374)
    """
    result = Vasprun()
    try:
        with open(path, "rb") as stream:
            _Reader(stream, result, chunk_bytes).read()
    except OSError as exc:
        raise VaspOutputError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    except ET.ParseError as exc:
        raise VaspOutputError(f"is not a vasprun.xml: {exc}", path=path) from exc
    return result


class _Reader:
    def __init__(self, stream: object, result: Vasprun, chunk_bytes: int) -> None:
        from typing import BinaryIO, cast

        self._stream = cast(BinaryIO, stream)
        self._result = result
        self._size = chunk_bytes
        self._pending = b""

    def _more(self) -> bool:
        data = self._stream.read(self._size)
        self._pending += data
        return bool(data)

    def read(self) -> None:
        while (start := self._pending.find(_OPEN)) < 0:
            if _END in self._pending or len(self._pending) > _HEAD_LIMIT or not self._more():
                break
        head = self._pending if start < 0 else self._pending[:start]
        self._head(head)
        if start < 0:
            self._result.complete = _END in self._pending
            return
        self._pending = self._pending[start:]
        while self._calculation():
            pass

    def _head(self, head: bytes) -> None:
        end = head.find(_END)
        document = head[: end + len(_END)] if end >= 0 else head + _END
        root = ET.fromstring(document)
        for item in root.iterfind("generator/i"):
            if item.get("name") == "version":
                self._result.version = (item.text or "").strip()
        for item in root.iterfind("incar/i"):
            self._result.incar[item.get("name", "")] = _typed(item.get("type"), item.text or "")
        generation = root.find("kpoints/generation")
        if generation is not None:
            divisions = generation.find("v[@name='divisions']")
            self._result.kpoints = {
                "style": generation.get("param"),
                "mesh": [int(x) for x in (divisions.text or "").split()] if divisions is not None else None,
            }
        for row in root.iterfind("atominfo/array[@name='atoms']/set/rc"):
            self._result.elements.append((row[0].text or "").strip())
        for row in root.iterfind("atominfo/array[@name='atomtypes']/set/rc"):
            if len(row) >= 5:
                self._result.pseudopotentials.append((row[4].text or "").strip())
        initial = root.find("structure[@name='initialpos']")
        if initial is not None:
            self._structure(initial)

    def _calculation(self) -> bool:
        """Read one calculation at the start of the pending bytes; whether another may follow."""
        while (structure := self._pending.find(b"<structure", len(_OPEN))) < 0 and self._pending.find(
            _CLOSE
        ) < 0:
            if not self._more():
                return False  # cut short inside its electronic steps
        close = self._pending.find(_CLOSE)
        if structure < 0 or (0 <= close < structure):
            return self._skip_to_close()
        while (energy_end := self._pending.find(b"</energy>", structure)) < 0:
            if not self._more():
                return False
        summary = self._pending[structure : energy_end + len(b"</energy>")]
        scsteps = self._pending.count(b"<scstep>", 0, structure)
        self._summary(summary, scsteps)
        self._pending = self._pending[energy_end:]
        return self._skip_to_close()

    def _summary(self, summary: bytes, scsteps: int) -> None:
        root = ET.fromstring(b"<summary>" + summary + b"</summary>")
        values = {item.get("name"): number((item.text or "").strip()) for item in root.iterfind("energy/i")}
        self._result.steps.append(
            VasprunStep(
                values.get("e_fr_energy"), values.get("e_wo_entrp"), values.get("e_0_energy"), scsteps
            )
        )
        structure = root.find("structure")
        if structure is not None:
            self._structure(structure)
        for name in ("forces", "stress"):
            array = root.find(f"varray[@name='{name}']")
            if array is not None:
                setattr(self._result, name, _rows(array))

    def _structure(self, element: ET.Element) -> None:
        basis = element.find("crystal/varray[@name='basis']")
        positions = element.find("varray[@name='positions']")
        if basis is not None:
            self._result.lattice = _rows(basis)
        if positions is not None:
            self._result.positions = _rows(positions)

    def _skip_to_close(self) -> bool:
        """Drop bytes up to and including ``</calculation>``; whether the document goes on."""
        while (close := self._pending.find(_CLOSE)) < 0:
            self._pending = self._pending[-len(_CLOSE) :]  # a tag may straddle two reads
            if not self._more():
                return False
        self._pending = self._pending[close + len(_CLOSE) :]
        while (start := self._pending.find(_OPEN)) < 0:
            if _END in self._pending:
                self._finalpos()
                return False
            keep = max(len(_OPEN), len(_END))
            if len(self._pending) > _HEAD_LIMIT:
                self._pending = self._pending[-keep:]
            if not self._more():
                self._result.complete = _END in self._pending
                return False
        self._pending = self._pending[start:]
        return True

    def _finalpos(self) -> None:
        self._result.complete = True
        start = self._pending.find(b'<structure name="finalpos"')
        end = self._pending.find(b"</structure>", start)
        if start >= 0 and end >= 0:
            self._structure(ET.fromstring(self._pending[start : end + len(b"</structure>")]))


def _rows(array: ET.Element) -> list[list[float]]:
    return [[float(x) for x in (row.text or "").split()] for row in array.iterfind("v")]


def _typed(kind: str | None, text: str) -> object:
    text = text.strip()
    if kind == "logical":
        return text.upper().startswith(("T", ".T"))
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            return text
    if kind == "string":
        return text
    value = number(text) if " " not in text else None
    return text if value is None else value
