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

import bisect
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import VaspOutputError
from ._scan import CHUNK_BYTES, number

_OPEN = b"<calculation>"
_CLOSE = b"</calculation>"
_END = b"</modeling>"
_HEAD_LIMIT = 1 << 26
_OPEN_RE = re.compile(re.escape(_OPEN))
_SCSTEP = re.compile(rb"<scstep>")
_FINAL_ENERGY = re.compile(
    rb"</varray>\s*<energy>\s*"
    rb'<i name="e_fr_energy">\s*([^<]*?)\s*</i>\s*'
    rb'<i name="e_wo_entrp">\s*([^<]*?)\s*</i>\s*'
    rb'<i name="e_0_energy">\s*([^<]*?)\s*</i>\s*</energy>'
)
_ENERGY = re.compile(rb'<i name="(e_fr_energy|e_wo_entrp|e_0_energy)">\s*([^<]*?)\s*</i>')


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
    """A cursor over the document's bytes: ``_data[_at:]`` is what is left to read (see the docstring).

    Offsets into ``_data`` stay valid until :meth:`_compact` or :meth:`_skip_to`, which drop what lies
    behind the cursor and are called only where the reader holds no offset.
    """

    def __init__(self, stream: object, result: Vasprun, chunk_bytes: int) -> None:
        from typing import BinaryIO, cast

        self._stream = cast(BinaryIO, stream)
        self._result = result
        self._size = chunk_bytes
        self._data = b""
        self._at = 0
        self._summary: bytes | None = None  # the last calculation's structure, forces, stress and energy
        self._final: bytes | None = None

    def _more(self) -> bool:
        chunk = self._stream.read(self._size)
        self._data += chunk
        return bool(chunk)

    def _compact(self) -> None:
        self._data = self._data[self._at :]
        self._at = 0

    def _first_of(self, needles: tuple[bytes, ...], start: int) -> tuple[int, int]:
        """The earliest of ``needles`` from ``start``: (which, offset), reading on; (-1, -1) at the end."""
        while True:
            best, which = -1, -1
            for index, needle in enumerate(needles):
                # Only as far as the best hit so far: a needle absent nearby must not cost the whole buffer.
                stop = len(self._data) if best < 0 else best + len(needle)
                offset = self._data.find(needle, start, stop)
                if offset >= 0 and (best < 0 or offset < best):
                    best, which = offset, index
            if best >= 0:
                return which, best
            if not self._more():
                return -1, -1

    def _skip_to(self, needle: bytes) -> int:
        """Move the cursor to ``needle``, dropping what it passes; its offset, or -1 at the end."""
        while (found := self._data.find(needle, self._at)) < 0:
            self._at = max(self._at, len(self._data) - len(needle))
            self._compact()
            if not self._more():
                return -1
        self._at = found
        return found

    def read(self) -> None:
        which, start = self._first_of((_OPEN, _END), 0)
        if start > _HEAD_LIMIT:
            raise ET.ParseError(f"no <calculation> in the first {_HEAD_LIMIT} bytes")
        self._head(self._data if start < 0 else self._data[:start])
        if which == 0:
            self._at = start
            while self._calculation():
                pass
        self._result.complete = self._result.complete or which == 1 or self._final is not None
        if self._summary is not None:
            self._parse_summary(self._summary)
        if self._final is not None:
            self._structure(ET.fromstring(self._final))

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

    def _calculations(self) -> None:
        """The fast path: every calculation that lies whole in the buffer, read with a few regular
        expression scans over all of them instead of a dozen calls each; the cursor moves past them."""
        limit = self._data.rfind(_CLOSE, self._at)
        if limit < 0:
            return
        limit += len(_CLOSE)
        starts = [m.start() for m in _OPEN_RE.finditer(self._data, self._at, limit)]
        energies = list(_FINAL_ENERGY.finditer(self._data, self._at, limit))
        scsteps = [m.start() for m in _SCSTEP.finditer(self._data, self._at, limit)]
        if len(energies) != len(starts):
            return  # a calculation without its final energy: the careful path reads each one
        for index, match in enumerate(energies):
            first = bisect.bisect_left(scsteps, starts[index])
            count = bisect.bisect_left(scsteps, match.start()) - first
            free, without, sigma0 = match.groups()
            self._result.steps.append(VasprunStep(_value(free), _value(without), _value(sigma0), count))
        last = energies[-1]
        structure = self._data.rfind(b"<structure", starts[-1], last.start())
        self._summary = self._data[structure : last.end()] if structure >= 0 else None
        self._at = limit

    def _calculation(self) -> bool:
        """Read the calculation at the cursor; whether another one follows."""
        if self._at > self._size:  # not at every calculation: each compaction copies what is left
            self._compact()
        self._calculations()
        which, offset = self._first_of((_OPEN, _END), self._at)
        if which != 0:
            if which == 1:
                return self._after(self._at - len(_CLOSE))
            return False
        self._at = offset
        which, structure = self._first_of((b"<structure", _CLOSE), self._at + len(_OPEN))
        if which != 0:
            return which == 1 and self._after(structure)  # a calculation without a structure
        _, energy_end = self._first_of((b"</energy>",), structure)
        if energy_end < 0:
            return False  # cut short before its final energy
        summary = self._data[structure : energy_end + len(b"</energy>")]
        scsteps = self._data.count(b"<scstep>", self._at, structure)
        energies = dict(_ENERGY.findall(summary[summary.rfind(b"<energy>") :]))
        self._result.steps.append(
            VasprunStep(
                _value(energies.get(b"e_fr_energy")),
                _value(energies.get(b"e_wo_entrp")),
                _value(energies.get(b"e_0_energy")),
                scsteps,
            )
        )
        self._summary = summary
        self._at = energy_end
        close = self._skip_to(_CLOSE)  # eigenvalues, DOS, projections: passed over, not parsed
        return close >= 0 and self._after(close)

    def _after(self, close: int) -> bool:
        """Move past ``</calculation>`` at ``close``; whether another calculation follows."""
        self._at = close + len(_CLOSE)
        which, offset = self._first_of((_OPEN, _END), self._at)
        if which == 0:
            self._at = offset
            return True
        if which == 1:
            start = self._data.find(b'<structure name="finalpos"', self._at, offset)
            stop = self._data.find(b"</structure>", start, offset) if start >= 0 else -1
            self._final = self._data[start : stop + len(b"</structure>")] if stop >= 0 else b""
            if not self._final:
                self._final = None
                self._result.complete = True
        return False

    def _parse_summary(self, summary: bytes) -> None:
        root = ET.fromstring(b"<summary>" + summary + b"</summary>")
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


def _value(raw: bytes | None) -> float | None:
    return None if raw is None else number(raw.decode("ascii", errors="replace"))
