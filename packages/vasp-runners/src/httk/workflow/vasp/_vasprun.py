"""vasprun.xml, read in bounded memory at close to the speed of reading the file.

Why not ``iterparse`` over the whole document: an XML parser driving Python callbacks reads a few tens
of MB per second, and nearly all of a large vasprun.xml is what a workflow never reads (per-step
structures of a long run, eigenvalues, densities of states, projections). The reader therefore splits
the work: the document's head (``generator``, ``incar``, ``kpoints``, ``parameters``, ``atominfo``, the
initial structure) is parsed with ElementTree; then the file is read in chunks of whole lines
(:mod:`._scan`), and in each chunk every ``<calculation>`` is located with ``bytes.find``: its electronic
steps are counted (``bytes.count`` of ``<scstep>`` up to its first ``<structure``), its final energy is
read from the ``<energy>`` block after that structure, and the reader skips to ``</calculation>`` without
looking at what lies between (eigenvalues and DOS sit there). Only the last calculation's summary (its
structure, forces, stress and energy) is kept, and parsed with ElementTree at the end. A calculation a
chunk cuts before its final energy is read again from its start in the next chunk (a larger one when a
single calculation's head outgrows a chunk); memory is one chunk plus that summary.

The layout relied on is VASP's: every calculation has its ``<structure>``, after its scsteps, and its
final energy is the first ``<energy>`` after that structure. (Checking each calculation for a missing
structure would cost one more search of its scsteps; only the last calculation of a document is passed
over when it has none.) A document cut short (the run died, or is still
running) is read up to its last complete calculation; :attr:`Vasprun.complete` says whether
``</modeling>`` was reached.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._errors import VaspOutputError
from ._record import Record
from ._scan import CHUNK_BYTES, number, read_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from io import FileIO
    from xml.etree.ElementTree import Element

_OPEN = b"<calculation>"
_CLOSE = b"</calculation>"
_END = b"</modeling>"
_STRUCTURE = b"<structure>"  # a calculation's own: the document's others carry a name
_SCSTEP = b"<scstep>"
_ENERGY = b"<energy>"
_ENERGY_END = b"</energy>"
_FINAL = b'<structure name="finalpos"'
_HEAD_LIMIT = 1 << 26


class VasprunStep(Record):
    """One ionic step (``<calculation>``) of vasprun.xml."""

    __slots__ = ("electronic_steps", "energy", "energy_wo_entropy", "free_energy")

    def __init__(
        self,
        free_energy: float | None,
        energy_wo_entropy: float | None,
        energy: float | None,
        electronic_steps: int,
    ) -> None:
        self.free_energy = free_energy
        self.energy_wo_entropy = energy_wo_entropy
        self.energy = energy
        self.electronic_steps = electronic_steps


class Vasprun(Record):
    """What vasprun.xml says (see the module docstring); every member starts empty."""

    __slots__ = (
        "complete",
        "elements",
        "forces",
        "incar",
        "kpoints",
        "lattice",
        "positions",
        "pseudopotentials",
        "steps",
        "stress",
        "version",
    )

    def __init__(self) -> None:
        self.version: str | None = None
        self.incar: dict[str, object] = {}
        self.kpoints: dict[str, object] = {}
        self.elements: list[str] = []
        self.pseudopotentials: list[str] = []
        self.steps: list[VasprunStep] = []
        self.lattice: list[list[float]] | None = None
        self.positions: list[list[float]] | None = None
        self.forces: list[list[float]] | None = None
        self.stress: list[list[float]] | None = None
        self.complete = False


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
    from xml.etree.ElementTree import ParseError

    result = Vasprun()
    try:
        with open(path, "rb", buffering=0) as stream:
            _Reader(stream, result, chunk_bytes).read()
    except OSError as exc:
        raise VaspOutputError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    except ParseError as exc:
        raise VaspOutputError(f"is not a vasprun.xml: {exc}", path=path) from exc
    return result


class _Reader:
    """The calculations of one document, chunk by chunk (see the module docstring).

    ``_inside`` is where the reader is between chunks: ``False`` between calculations, ``True`` inside
    one whose final energy it has read (skipping to its ``</calculation>``).
    """

    def __init__(self, stream: FileIO, result: Vasprun, chunk_bytes: int) -> None:
        self._stream = stream
        self._result = result
        self._size = chunk_bytes
        self._inside = False
        self._done = False
        # The last calculation's structure, forces, stress and energy: where they lie, cut out only once
        # a chunk is done with (a copy per calculation would cost as much as the search).
        self._summary: tuple[bytes, int, int] | None = None
        self._final: bytes | None = None

    def read(self) -> None:
        from xml.etree.ElementTree import fromstring

        offset = self._head()
        length = os.fstat(self._stream.fileno()).st_size
        size = self._size
        while not self._done:
            buffer, end = read_lines(self._stream, offset, size)
            if not end:
                break
            at_end = offset + len(buffer) >= length
            consumed = self._scan(buffer, end, at_end)
            if consumed == 0 and not at_end:
                size *= 2  # one calculation's head is larger than a chunk: read it whole
                continue
            size, offset = self._size, offset + consumed
        if self._summary is not None:
            buffer, start, stop = self._summary
            self._parse_summary(fromstring(b"<summary>" + buffer[start:stop] + b"</summary>"))
        if self._final is not None:
            self._structure(fromstring(self._final))

    def _head(self) -> int:
        """Parse the head; the offset of the first calculation (the reader is done when there is none)."""
        from xml.etree.ElementTree import ParseError, fromstring

        head, end = read_lines(self._stream, 0, self._size)
        while (start := _first(head, end)) < 0 and 0 < end < _HEAD_LIMIT:
            more, more_end = read_lines(self._stream, end, self._size)
            if not more_end:
                break
            head, end = head[:end] + more, end + more_end
        if start < 0 and end >= _HEAD_LIMIT:
            raise ParseError(f"no <calculation> in the first {_HEAD_LIMIT} bytes")
        if start >= 0 and head.startswith(_END, start):  # a document without calculations
            self._head_document(fromstring(head[: start + len(_END)]))
            self._result.complete = self._done = True
            return start
        self._head_document(fromstring((head[:start] if start >= 0 else head[:end]) + _END))
        self._done = start < 0
        return start

    def _scan(self, buffer: bytes, end: int, at_end: bool) -> int:
        """Read the calculations in ``buffer[:end]``; how much of it is done with (the rest is read again)."""
        find, at = buffer.find, 0
        while True:
            if self._inside:
                close = find(_CLOSE, at, end)
                if close < 0:
                    return end
                at, self._inside = close + len(_CLOSE), False
            start = find(_OPEN, at, end)
            if start < 0:
                return self._closing(buffer, at, end, at_end)
            structure = find(_STRUCTURE, start, end)
            if structure < 0 and (close := find(_CLOSE, start, end)) >= 0:
                at = close + len(_CLOSE)  # a calculation without a structure: no ionic step
                continue
            energy = find(_ENERGY, structure, end) if structure >= 0 else -1
            stop = find(_ENERGY_END, energy, end) if energy >= 0 else -1
            if stop < 0:
                if at_end:
                    self._done = True  # cut short before its final energy
                    return end
                return start  # cut by the chunk: read again from its start
            stop += len(_ENERGY_END)
            steps = buffer.count(_SCSTEP, start, structure)
            self._result.steps.append(VasprunStep(*_energies(buffer[energy:stop]), steps))
            self._summary = (buffer, structure, stop)
            at, self._inside = stop, True

    def _closing(self, buffer: bytes, at: int, end: int, at_end: bool) -> int:
        """After the chunk's last calculation: ``</modeling>`` and the final structure, or more to read."""
        close = buffer.find(_END, at, end)
        if close < 0:
            if at_end:
                self._done = True
            return end if at_end or at == 0 else at
        start = buffer.find(_FINAL, at, close)
        stop = buffer.find(b"</structure>", start, close) if start >= 0 else -1
        if stop >= 0:
            self._final = buffer[start : stop + len(b"</structure>")]
        self._result.complete = True
        self._done = True
        return end

    def _head_document(self, root: Element) -> None:
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

    def _parse_summary(self, root: Element) -> None:
        structure = root.find("structure")
        if structure is not None:
            self._structure(structure)
        for name in ("forces", "stress"):
            array = root.find(f"varray[@name='{name}']")
            if array is not None:
                setattr(self._result, name, _rows(array))

    def _structure(self, element: Element) -> None:
        basis = element.find("crystal/varray[@name='basis']")
        positions = element.find("varray[@name='positions']")
        if basis is not None:
            self._result.lattice = _rows(basis)
        if positions is not None:
            self._result.positions = _rows(positions)


def _first(buffer: bytes, end: int) -> int:
    """The offset of the first ``<calculation>`` or ``</modeling>`` in ``buffer[:end]``, or -1."""
    hits = [hit for hit in (buffer.find(_OPEN, 0, end), buffer.find(_END, 0, end)) if hit >= 0]
    return min(hits) if hits else -1


def _energies(block: bytes) -> tuple[float | None, float | None, float | None]:
    r"""The free energy, the energy without entropy and sigma -> 0 of an ``<energy>`` block.

    VASP writes the three in that order: read so, they cost a split and three ``float``\ s (this runs
    once per ionic step); any other block is read item by item, by name.
    """
    parts = block.split(b'">', 3)
    if (
        len(parts) == 4
        and parts[0].endswith(b"e_fr_energy")
        and parts[1].endswith(b"e_wo_entrp")
        and parts[2].endswith(b"e_0_energy")
    ):
        try:
            free = float(parts[1].split(b"<", 1)[0])
            without = float(parts[2].split(b"<", 1)[0])
            sigma0 = float(parts[3].split(b"<", 1)[0])
        except ValueError:
            pass
        else:
            if free - free == without - without == sigma0 - sigma0 == 0.0:  # none is inf or nan
                return free, without, sigma0
    values: dict[bytes, float | None] = {}
    for item in block.split(b'<i name="')[1:]:
        name, _, rest = item.partition(b'">')
        values[name] = number(rest.split(b"<", 1)[0])
    return values.get(b"e_fr_energy"), values.get(b"e_wo_entrp"), values.get(b"e_0_energy")


def _rows(array: Element) -> list[list[float]]:
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
