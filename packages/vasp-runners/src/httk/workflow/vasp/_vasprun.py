"""vasprun.xml, read in bounded memory at close to the speed of reading the file, without an XML parser.

Why not an XML parser: one driving Python callbacks reads a few tens of MB per second, and nearly all of
a large vasprun.xml is what a workflow never reads (electronic steps, per-step structures of a long run,
eigenvalues, densities of states, projections). The reader finds the few elements it wants with
``bytes.find`` instead, relying on the layout VASP writes (a fixed set of elements, each opened as
``<name`` and closed as ``</name>``, attributes in double quotes):

* the document's head -- ``generator`` (the version), ``incar`` (its ``<i>`` items, typed),
  ``kpoints`` (the generation style and divisions), ``atominfo`` (elements and pseudopotentials) and the
  initial structure -- is everything before the first ``<calculation>``;
* then the file is read in chunks of whole lines (:mod:`._scan`), and in each chunk every
  ``<calculation>`` is located: its ``<structure>`` (after its electronic steps), the final ``<energy>``
  after that structure, and then ``</calculation>`` without looking at what lies between (eigenvalues
  and DOS sit there). That is one forward pass over the bytes. Only the last calculation's summary (its
  structure, forces, stress and energy) is kept, and read at the end. A calculation a chunk cuts before
  its final energy is read again from its start in the next chunk (a larger one when a single
  calculation's head outgrows a chunk); memory is one chunk plus that summary.

The electronic steps of each ionic step are OSZICAR's to count (:mod:`._oszicar`): counting them here
would read every byte a second time.

A document cut short (the run died, or is still running) is read up to its last complete calculation;
:attr:`Vasprun.complete` says whether ``</modeling>`` was reached. A file that is not a vasprun.xml (no
``<modeling>`` element in its head), or whose head or last calculation holds an element this reader
cannot read (a vector that is not numbers, say), is a :class:`VaspOutputError` naming what is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ._errors import VaspOutputError
from ._record import Record
from ._scan import CHUNK_BYTES, number, read_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from io import FileIO

    from httk.workflow.sdk._files import StrPath

_OPEN = b"<calculation>"
_CLOSE = b"</calculation>"
_END = b"</modeling>"
_STRUCTURE = b"<structure>"  # a calculation's own: the document's others carry a name
_ENERGY = b"<energy>"
_ENERGY_END = b"</energy>"
_FINAL = b'<structure name="finalpos"'
_HEAD_LIMIT = 1 << 26


class _UnreadableError(Exception):
    """An element the reader cannot read; :func:`read_vasprun` names the file."""


class VasprunStep(Record):
    """One ionic step (``<calculation>``) of vasprun.xml."""

    __slots__ = ("energy", "energy_wo_entropy", "free_energy")

    def __init__(
        self, free_energy: float | None, energy_wo_entropy: float | None, energy: float | None
    ) -> None:
        self.free_energy = free_energy
        self.energy_wo_entropy = energy_wo_entropy
        self.energy = energy


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


def read_vasprun(path: StrPath, *, chunk_bytes: int = CHUNK_BYTES) -> Vasprun:
    """Read vasprun.xml (see the module docstring).

    Raises
    ------
    VaspOutputError
        When the file cannot be read, is not a vasprun.xml, or holds an element that cannot be read.

    Examples
    --------
    >>> run = read_vasprun("run/vasprun.xml")  # doctest: +SKIP
    >>> run.complete, len(run.steps), run.steps[-1].energy  # doctest: +SKIP
    (True, 8, -17.72137374)
    """
    result = Vasprun()
    try:
        with open(path, "rb", buffering=0) as stream:
            _Reader(stream, result, chunk_bytes).read()
    except OSError as exc:
        raise VaspOutputError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    except _UnreadableError as exc:
        raise VaspOutputError(f"is not a vasprun.xml VASP wrote: {exc}", path=path) from None
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
        offset = self._head()
        length = os.fstat(self._stream.fileno()).st_size
        size = self._size
        while not self._done:
            buffer, end = read_lines(self._stream, offset, size)
            if not end:
                break
            at_end = offset + len(buffer) >= length
            if at_end:  # what is read is closed by its tags: a last line without its newline counts
                end = len(buffer)
            consumed = self._scan(buffer, end, at_end)
            if consumed == 0 and not at_end:
                size *= 2  # one calculation's head is larger than a chunk: read it whole
                continue
            size, offset = self._size, offset + consumed
        if self._summary is not None:
            buffer, start, stop = self._summary
            self._parse_summary(buffer[start:stop])
        if self._final is not None:
            self._structure(self._final, "the final structure")

    def _head(self) -> int:
        """Read the head; the offset of the first calculation (the reader is done when there is none)."""
        head, end = read_lines(self._stream, 0, self._size)
        while (start := _first(head, end)) < 0 and 0 < end < _HEAD_LIMIT:
            more, more_end = read_lines(self._stream, end, self._size)
            if not more_end:
                break
            head, end = head[:end] + more, end + more_end
        root = head.find(b"<modeling>", 0, end)
        if root < 0 or (head[:root].strip() and not head.startswith(b"<?xml")):
            raise _UnreadableError("it has no <modeling> element at its start")
        if start < 0 and end >= _HEAD_LIMIT:
            raise _UnreadableError(f"no <calculation> in the first {_HEAD_LIMIT} bytes")
        self._head_document(head[root : start if start >= 0 else end])
        if start >= 0 and head.startswith(_END, start):  # a document without calculations
            self._result.complete = self._done = True
        else:
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
            self._result.steps.append(VasprunStep(*_energies(buffer[energy:stop])))
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

    def _head_document(self, head: bytes) -> None:
        result = self._result
        for attributes, text in _elements(_block(head, b"generator"), b"i"):
            if _attribute(attributes, b"name") == b"version":
                result.version = _text(text).strip()
        for attributes, text in _elements(_block(head, b"incar"), b"i"):
            name = _attribute(attributes, b"name")
            if name is not None:
                result.incar[_text(name)] = _typed(_attribute(attributes, b"type"), _text(text))
        generation = _block(head, b"generation", with_tag=True)
        if generation:
            divisions = _named(generation, b"v", b"divisions")
            style = _attribute(generation[: generation.find(b">") + 1], b"param")
            result.kpoints = {
                "style": None if style is None else _text(style),
                "mesh": None if divisions is None else _integers(divisions, "the k-point divisions"),
            }
        atominfo = _block(head, b"atominfo")
        for row in _rows_of(_named(atominfo, b"array", b"atoms")):
            result.elements.append(_text(row[0]).strip() if row else "")
        for row in _rows_of(_named(atominfo, b"array", b"atomtypes")):
            if len(row) >= 5:
                result.pseudopotentials.append(_text(row[4]).strip())
        initial = head.find(b'<structure name="initialpos"')
        if initial >= 0:
            self._structure(head[initial : head.find(b"</structure>", initial)], "the initial structure")

    def _parse_summary(self, summary: bytes) -> None:
        stop = summary.find(b"</structure>")
        if stop >= 0:
            self._structure(summary[:stop], "the last calculation's structure")
        for name in ("forces", "stress"):
            rows = _named(summary, b"varray", name.encode())
            if rows is not None:
                setattr(self._result, name, _vectors(rows, f"the last calculation's {name}"))

    def _structure(self, structure: bytes, what: str) -> None:
        basis = _named(structure, b"varray", b"basis")
        positions = _named(structure, b"varray", b"positions")
        if basis is not None:
            self._result.lattice = _vectors(basis, f"the basis of {what}")
        if positions is not None:
            self._result.positions = _vectors(positions, f"the positions of {what}")


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


def _block(document: bytes, tag: bytes, *, with_tag: bool = False) -> bytes:
    """The first ``<tag>`` element's content (with its opening tag when asked), or ``b""``."""
    start = document.find(b"<" + tag)
    while start >= 0 and document[start + len(tag) + 1 : start + len(tag) + 2] not in (b">", b" "):
        start = document.find(b"<" + tag, start + 1)
    if start < 0:
        return b""
    stop = document.find(b"</" + tag + b">", start)
    content = start if with_tag else document.find(b">", start) + 1
    return document[content : stop if stop >= 0 else len(document)]


def _elements(block: bytes, tag: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(attributes, text)`` of every ``<tag ...>text</tag>`` in ``block``, in order."""
    opening, closing = b"<" + tag, b"</" + tag + b">"
    at = block.find(opening)
    while at >= 0:
        after = at + len(opening)
        if block[after : after + 1] in (b">", b" "):
            head_end = block.find(b">", after)
            if head_end < 0:
                return
            if block[head_end - 1 : head_end] == b"/":  # <tag ... />
                yield block[after : head_end - 1], b""
                at = head_end
            else:
                stop = block.find(closing, head_end)
                if stop < 0:
                    return
                yield block[after:head_end], block[head_end + 1 : stop]
                at = stop
        at = block.find(opening, at + 1)


def _attribute(attributes: bytes, name: bytes) -> bytes | None:
    """The value of attribute ``name`` among an element's attributes (double-quoted, as VASP writes)."""
    key = b" " + name + b'="'
    start = attributes.find(key)
    if start < 0:
        return None
    start += len(key)
    stop = attributes.find(b'"', start)
    return attributes[start:stop] if stop >= 0 else None


def _named(block: bytes, tag: bytes, name: bytes) -> bytes | None:
    """The content of the first ``<tag name="name" ...>`` in ``block``, or ``None``."""
    for attributes, text in _elements(block, tag):
        if _attribute(attributes, b"name") == name:
            return text
    return None


def _rows_of(array: bytes | None) -> list[list[bytes]]:
    """The ``<c>`` cells of each ``<rc>`` row of an ``<array>``'s ``<set>``."""
    if array is None:
        return []
    return [[cell for _, cell in _elements(row, b"c")] for _, row in _elements(array, b"rc")]


def _vectors(varray: bytes, what: str) -> list[list[float]]:
    """The ``<v>`` rows of a ``<varray>`` as numbers."""
    try:
        return [[float(word) for word in row.split()] for _, row in _elements(varray, b"v")]
    except ValueError:
        raise _UnreadableError(f"{what} has a row that is not numbers") from None


def _integers(row: bytes, what: str) -> list[int]:
    try:
        return [int(word) for word in row.split()]
    except ValueError:
        raise _UnreadableError(f"{what} are not integers: {_text(row).strip()[:80]!r}") from None


def _text(data: bytes) -> str:
    return data.decode("ascii", errors="replace")


def _typed(kind: bytes | None, text: str) -> object:
    text = text.strip()
    if kind == b"logical":
        return text.upper().startswith(("T", ".T"))
    if kind == b"int":
        try:
            return int(text)
        except ValueError:
            return text
    if kind == b"string":
        return text
    value = number(text) if " " not in text else None
    return text if value is None else value
