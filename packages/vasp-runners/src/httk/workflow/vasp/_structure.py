"""Crystal structures in VASP's POSCAR/CONTCAR format: reading, writing, and the geometry remedies need.

Reading accepts what VASP 5 and 6 write and read: a comment line, one scale factor (a negative one is
the cell volume) or three per-axis factors, three lattice vectors, the species line (required unless
``species`` is given), the counts, an optional ``Selective dynamics`` line, ``Direct`` or ``Cartesian``
coordinates with optional ``T``/``F`` flags. Velocities and predictor blocks after the positions are
ignored (a restart from CONTCAR then starts without them, which is what a remedy wants). A species
entry may carry VASP 6's POTCAR suffixes (``Fe_pv``, ``Si/3a9f``); :attr:`Structure.elements` strips them.

Writing produces one canonical form: VASP 5 layout, scale ``1.0``, the lattice in Å and ``Direct``
coordinates, 16 significant digits -- so a structure that is read back is the same structure.

No numpy: a cell is three 3-vectors, and the arithmetic a runner needs (volume, reciprocal lengths, a
uniform strain, a small displacement) is a few lines of plain Python.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._errors import VaspInputError
from ._record import NamedTuple

Vector = tuple[float, float, float]
Matrix = tuple[Vector, Vector, Vector]


class Structure(NamedTuple):
    """One crystal structure: a cell, species with counts, and fractional positions.

    Parameters
    ----------
    comment
        The first line of the POSCAR.
    lattice
        The three lattice vectors in Å (rows).
    species
        The species of each type, as the POSCAR names them (``Fe``, ``Fe_pv``).
    counts
        The number of atoms of each type.
    positions
        Fractional coordinates of every atom, type by type.
    selective
        Per-atom ``Selective dynamics`` flags, or ``None`` when the POSCAR has none.

    Examples
    --------
    >>> from httk.workflow.vasp import parse_poscar
    >>> s = parse_poscar("Si\\n5.43\\n0 .5 .5\\n.5 0 .5\\n.5 .5 0\\nSi\\n2\\nDirect\\n0 0 0\\n.25 .25 .25\\n")
    >>> s.natoms, round(s.volume, 3), s.elements
    (2, 40.026, ('Si', 'Si'))
    """

    comment: str
    lattice: Matrix
    species: tuple[str, ...]
    counts: tuple[int, ...]
    positions: tuple[Vector, ...]
    selective: tuple[tuple[bool, bool, bool], ...] | None = None

    @property
    def natoms(self) -> int:
        """The number of atoms."""
        return len(self.positions)

    @property
    def elements(self) -> tuple[str, ...]:
        """The chemical element of every atom, in order (POTCAR suffixes stripped)."""
        names = [element_of(name) for name in self.species]
        return tuple(name for name, count in zip(names, self.counts, strict=True) for _ in range(count))

    @property
    def volume(self) -> float:
        """The cell volume in Å³."""
        return abs(determinant(self.lattice))

    def reciprocal_lengths(self) -> Vector:
        """The lengths of the reciprocal lattice vectors in 1/Å, without the factor 2π."""
        a, b, c = self.lattice
        volume = determinant(self.lattice)
        rows = (_cross(b, c), _cross(c, a), _cross(a, b))
        return (_norm(rows[0]) / abs(volume), _norm(rows[1]) / abs(volume), _norm(rows[2]) / abs(volume))

    def cartesian(self) -> tuple[Vector, ...]:
        """Cartesian positions in Å."""
        return tuple(row_times(f, self.lattice) for f in self.positions)

    def strained(self, factor: float) -> Structure:
        """The same structure with every lattice vector multiplied by ``factor`` (fractions kept)."""
        lattice = tuple(tuple(x * factor for x in row) for row in self.lattice)
        return self._replace(lattice=lattice)  # type: ignore[arg-type]

    def rattled(self, amplitude: float, seed: int) -> Structure:
        """Every atom displaced by up to ``amplitude`` Å in each Cartesian direction (deterministic)."""
        import random  # only a remedy perturbs a structure

        rng = random.Random(seed)
        inverse = _inverse(self.lattice)
        moved = []
        for position in self.cartesian():
            shifted = tuple(x + rng.uniform(-amplitude, amplitude) for x in position)
            moved.append(_wrap(row_times(shifted, inverse)))
        return self._replace(positions=tuple(moved))

    def same_atoms(self, other: Structure) -> bool:
        """Whether ``other`` has the same species and counts (a CONTCAR of this calculation does)."""
        return tuple(map(element_of, self.species)) == tuple(map(element_of, other.species)) and (
            self.counts == other.counts
        )


def element_of(species: str) -> str:
    """The element of a POSCAR species entry: ``Fe_pv`` -> ``Fe``, ``Si/3a9f`` -> ``Si``."""
    return species.split("/", 1)[0].split("_", 1)[0]


def parse_poscar(text: str, *, path: str = "POSCAR", species: Sequence[str] | None = None) -> Structure:
    """Read a POSCAR or CONTCAR.

    Parameters
    ----------
    text
        The file's contents.
    path
        Named in errors.
    species
        The species of each type, replacing (or standing in for a missing) species line.

    Returns
    -------
    Structure
        The structure, lattice in Å, positions fractional.

    Raises
    ------
    VaspInputError
        When the text is not a POSCAR, naming the line at fault.

    Examples
    --------
    >>> from httk.workflow.vasp import parse_poscar
    >>> parse_poscar("x\\n1\\n3 0 0\\n0 3 0\\n0 0 3\\n1\\nDirect\\n0 0 0\\n", species=["Po"]).species
    ('Po',)
    """
    lines = text.splitlines()
    reader = _Lines(lines, path)
    comment = reader.line(1)
    scale = reader.numbers(2, "a scale factor (one number, or three)")
    if len(scale) not in (1, 3) or any(x == 0 for x in scale) or (len(scale) == 3 and min(scale) < 0):
        raise VaspInputError("must hold one scale factor or three positive ones", path=path, line=2)
    vectors = [reader.vector(3 + i, "a lattice vector") for i in range(3)]
    lattice = _scaled_lattice(vectors, scale, path)
    index = 6
    tokens = reader.line(index).split()
    if tokens and all(_is_int(token) for token in tokens):
        if species is None:
            raise VaspInputError(
                "has no species line (VASP 5 format names the species above the counts); give the "
                "species input instead",
                path=path,
                line=index,
            )
        names = tuple(species)
    else:
        names = tuple(species) if species is not None else tuple(tokens)
        index += 1
        tokens = reader.line(index).split()
    counts = _counts(tokens, path, index)
    if len(names) != len(counts):
        raise VaspInputError(
            f"names {len(names)} species ({' '.join(names) or 'none'}) but counts {len(counts)} types",
            path=path,
            line=index,
        )
    index += 1
    selective = reader.line(index).strip()[:1] in ("S", "s")
    if selective:
        index += 1
    mode = reader.line(index).strip()[:1]
    if mode not in ("D", "d", "C", "c", "K", "k"):
        raise VaspInputError("must say Direct or Cartesian", path=path, line=index)
    cartesian = mode in ("C", "c", "K", "k")
    inverse = _inverse(lattice) if cartesian else None
    factors = _axis_factors(vectors, scale)
    positions: list[Vector] = []
    flags: list[tuple[bool, bool, bool]] = []
    for atom in range(sum(counts)):
        number = index + 1 + atom
        fields = reader.line(number).split()
        vector = reader.vector(number, "a position")
        if inverse is not None:  # Cartesian positions are scaled like the lattice (VASP's convention)
            vector = row_times(tuple(x * f for x, f in zip(vector, factors, strict=True)), inverse)
        positions.append(vector)
        if selective:
            if len(fields) < 6 or any(flag not in ("T", "F") for flag in fields[3:6]):
                raise VaspInputError(
                    "must end in three T/F flags (Selective dynamics)", path=path, line=number
                )
            flags.append((fields[3] == "T", fields[4] == "T", fields[5] == "T"))
    return Structure(comment, lattice, names, counts, tuple(positions), tuple(flags) if selective else None)


def format_poscar(structure: Structure) -> str:
    """The structure as a VASP 5 POSCAR (scale 1, lattice in Å, Direct coordinates).

    Examples
    --------
    >>> from httk.workflow.vasp import format_poscar, parse_poscar
    >>> text = "Si\\n1\\n3 0 0\\n0 3 0\\n0 0 3\\nSi\\n1\\nDirect\\n0 0 0\\n"
    >>> parse_poscar(format_poscar(parse_poscar(text))) == parse_poscar(text)
    True
    """
    lines = [structure.comment.replace("\n", " "), "1.0"]
    lines += ["  " + "  ".join(f"{x:.16g}" for x in row) for row in structure.lattice]
    lines += ["  " + "  ".join(structure.species), "  " + "  ".join(str(n) for n in structure.counts)]
    if structure.selective is not None:
        lines.append("Selective dynamics")
    lines.append("Direct")
    for atom, position in enumerate(structure.positions):
        text = "  " + "  ".join(f"{x:.16g}" for x in position)
        if structure.selective is not None:
            text += "  " + "  ".join("T" if flag else "F" for flag in structure.selective[atom])
        lines.append(text)
    return "\n".join(lines) + "\n"


class _Lines:
    """Line access with errors that name the line."""

    def __init__(self, lines: list[str], path: str) -> None:
        self._lines = lines
        self._path = path

    def line(self, number: int) -> str:
        if number > len(self._lines):
            raise VaspInputError(
                f"ends at line {len(self._lines)}; line {number} is missing", path=self._path
            )
        return self._lines[number - 1]

    def numbers(self, number: int, what: str) -> list[float]:
        try:
            values = [float(token) for token in self.line(number).split()[:3]]
        except ValueError:
            raise VaspInputError(f"must hold {what}", path=self._path, line=number) from None
        if not values or not all(math.isfinite(x) for x in values):
            raise VaspInputError(f"must hold {what}", path=self._path, line=number)
        return values

    def vector(self, number: int, what: str) -> Vector:
        values = self.numbers(number, f"{what} (three numbers)")
        if len(values) != 3:
            raise VaspInputError(f"must hold {what} (three numbers)", path=self._path, line=number)
        return (values[0], values[1], values[2])


def _is_int(token: str) -> bool:
    return token.isdigit()


def _counts(tokens: list[str], path: str, line: int) -> tuple[int, ...]:
    if not tokens or not all(_is_int(token) for token in tokens):
        raise VaspInputError("must hold the number of atoms of each species", path=path, line=line)
    counts = tuple(int(token) for token in tokens)
    if sum(counts) == 0 or 0 in counts:
        raise VaspInputError("must count at least one atom of every species", path=path, line=line)
    return counts


def _axis_factors(vectors: list[Vector], scale: list[float]) -> Vector:
    """The factor each Cartesian axis is scaled by: three given ones, one, or one from a target volume."""
    if len(scale) == 3:
        return (scale[0], scale[1], scale[2])
    factor = _volume_factor(vectors, scale[0]) if scale[0] < 0 else scale[0]
    return (factor, factor, factor)


def _scaled_lattice(vectors: list[Vector], scale: list[float], path: str) -> Matrix:
    factors = _axis_factors(vectors, scale)
    rows = [tuple(x * f for x, f in zip(row, factors, strict=True)) for row in vectors]
    lattice: Matrix = (rows[0], rows[1], rows[2])  # type: ignore[assignment]
    if abs(determinant(lattice)) < 1e-8:
        raise VaspInputError("has lattice vectors that span no volume", path=path, line=3)
    return lattice


def _volume_factor(vectors: list[Vector], negative_volume: float) -> float:
    volume = abs(determinant((vectors[0], vectors[1], vectors[2])))
    return (abs(negative_volume) / volume) ** (1.0 / 3.0) if volume else 1.0


def determinant(m: Sequence[Sequence[float]]) -> float:
    """The determinant of a 3x3 matrix."""
    return (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )


def _cross(a: Sequence[float], b: Sequence[float]) -> Vector:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _norm(v: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def row_times(v: Sequence[float], m: Sequence[Sequence[float]]) -> Vector:
    """The row vector ``v`` times the matrix ``m`` (fractional to Cartesian with ``m`` a lattice)."""
    return (
        v[0] * m[0][0] + v[1] * m[1][0] + v[2] * m[2][0],
        v[0] * m[0][1] + v[1] * m[1][1] + v[2] * m[2][1],
        v[0] * m[0][2] + v[1] * m[1][2] + v[2] * m[2][2],
    )


def _inverse(m: Matrix) -> Matrix:
    det = determinant(m)
    a, b, c = m
    # The inverse's columns are the reciprocal rows divided by the determinant.
    rows = (_cross(b, c), _cross(c, a), _cross(a, b))
    return (
        (rows[0][0] / det, rows[1][0] / det, rows[2][0] / det),
        (rows[0][1] / det, rows[1][1] / det, rows[2][1] / det),
        (rows[0][2] / det, rows[1][2] / det, rows[2][2] / det),
    )


def _wrap(v: Vector) -> Vector:
    return (v[0] % 1.0, v[1] % 1.0, v[2] % 1.0)
