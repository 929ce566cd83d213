"""KPOINTS files: automatic Gamma-centred and Monkhorst-Pack meshes, and a mesh from a k-point density.

An automatic mesh (``0`` k-points, then ``Gamma`` or ``Monkhorst-Pack`` and three subdivisions) is read
into a :class:`Kpoints`; any other KPOINTS (an explicit list, line mode, the fully automatic length form)
is kept verbatim as ``text`` and handed to VASP untouched -- a remedy that would change the mesh then does
not apply.

The density rule: a density ``d`` per reciprocal atom asks for at least ``d / N`` k-points for ``N``
atoms, spread over the axes in proportion to the reciprocal lattice vector lengths ``|b_i|``:
``n_i = max(1, ceil(c * |b_i|))`` with ``c = (d / (N |b_1| |b_2| |b_3|))^(1/3)``, so that
``n_1 n_2 n_3 N >= d`` up to rounding of the proportion. Large cells get few k-points, small ones many, at
the same sampling quality.
"""

from __future__ import annotations

import math

from ._errors import VaspInputError
from ._record import NamedTuple
from ._structure import Structure

GAMMA = "Gamma"
MONKHORST_PACK = "Monkhorst-Pack"
STYLES = (GAMMA, MONKHORST_PACK)


class Kpoints(NamedTuple):
    """A KPOINTS file: an automatic mesh, or verbatim text VASP reads as it is.

    Parameters
    ----------
    style
        ``Gamma`` or ``Monkhorst-Pack`` for a mesh; ``None`` for verbatim text.
    mesh
        The three subdivisions of a mesh.
    shift
        The optional shift of a mesh.
    comment
        The first line.
    text
        The whole file, for a KPOINTS that is not an automatic mesh.

    Examples
    --------
    >>> from httk.workflow.vasp import Kpoints
    >>> print(Kpoints(style="Gamma", mesh=(4, 4, 4)).format(), end="")
    Automatic mesh
    0
    Gamma
    4 4 4
    0 0 0
    """

    style: str | None = GAMMA
    mesh: tuple[int, int, int] = (1, 1, 1)
    shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    comment: str = "Automatic mesh"
    text: str | None = None

    @property
    def is_mesh(self) -> bool:
        """Whether this is an automatic mesh a remedy may change."""
        return self.style is not None

    def with_style(self, style: str) -> Kpoints:
        """The same mesh in another style (``Gamma`` or ``Monkhorst-Pack``)."""
        return self._replace(style=style)

    def bumped(self, step: int = 1) -> Kpoints:
        """Every subdivision increased by ``step``."""
        a, b, c = self.mesh
        return self._replace(mesh=(a + step, b + step, c + step))

    def equalized(self) -> Kpoints:
        """Every subdivision set to the largest one."""
        top = max(self.mesh)
        return self._replace(mesh=(top, top, top))

    def describe(self) -> dict[str, object]:
        """What results.json records of the k-points."""
        if self.style is None:
            return {"style": "explicit", "text": self.text}
        return {"style": self.style, "mesh": list(self.mesh), "shift": list(self.shift)}

    def format(self) -> str:
        """The KPOINTS text."""
        if self.text is not None:
            return self.text
        shift = " ".join(f"{x:g}" for x in self.shift)
        return f"{self.comment}\n0\n{self.style}\n{' '.join(map(str, self.mesh))}\n{shift}\n"


def parse_kpoints(text: str, *, path: str = "KPOINTS") -> Kpoints:
    """Read a KPOINTS file: an automatic mesh into its parts, anything else verbatim.

    Raises
    ------
    VaspInputError
        When the file is too short to be a KPOINTS or its mesh line is not three positive integers.

    Examples
    --------
    >>> from httk.workflow.vasp import parse_kpoints
    >>> parse_kpoints("k\\n0\\nMonkhorst-Pack\\n6 6 4\\n").mesh
    (6, 6, 4)
    """
    lines = text.splitlines()
    if len(lines) < 3:
        raise VaspInputError("is not a KPOINTS file (it needs at least three lines)", path=path)
    count = lines[1].split()[:1]
    letter = lines[2].strip()[:1].upper()
    if count != ["0"] or letter not in ("G", "M"):
        return Kpoints(style=None, text=text if text.endswith("\n") else text + "\n", comment=lines[0])
    if len(lines) < 4:
        raise VaspInputError("must give the three subdivisions of its mesh", path=path, line=4)
    try:
        numbers = [int(token) for token in lines[3].split()[:3]]
    except ValueError:
        numbers = []
    if len(numbers) != 3 or min(numbers) < 1:
        raise VaspInputError("must give three positive subdivisions", path=path, line=4)
    shift = (0.0, 0.0, 0.0)
    if len(lines) > 4 and lines[4].split():
        try:
            values = [float(token) for token in lines[4].split()[:3]]
        except ValueError:
            raise VaspInputError("must give three numbers as the mesh shift", path=path, line=5) from None
        if len(values) == 3:
            shift = (values[0], values[1], values[2])
    style = GAMMA if letter == "G" else MONKHORST_PACK
    return Kpoints(style=style, mesh=(numbers[0], numbers[1], numbers[2]), shift=shift, comment=lines[0])


def mesh_for_density(structure: Structure, density: float, style: str = GAMMA) -> Kpoints:
    """The automatic mesh for ``density`` k-points per reciprocal atom (the rule in the module header).

    Parameters
    ----------
    structure
        The structure (its reciprocal lattice and atom count).
    density
        k-points per reciprocal atom, such as 1000.
    style
        ``Gamma`` or ``Monkhorst-Pack``.

    Examples
    --------
    >>> from httk.workflow.vasp import mesh_for_density, parse_poscar
    >>> cell = "Si\\n5.43\\n0 .5 .5\\n.5 0 .5\\n.5 .5 0\\n"
    >>> si = parse_poscar(cell + "Si\\n2\\nDirect\\n0 0 0\\n.25 .25 .25\\n")
    >>> mesh_for_density(si, 1000).mesh
    (8, 8, 8)
    """
    if not (isinstance(density, int | float) and math.isfinite(density) and density > 0):
        raise ValueError(f"the k-point density must be a positive number, not {density!r}")
    if style not in STYLES:
        raise ValueError(f"the k-point style must be one of {', '.join(STYLES)}, not {style!r}")
    lengths = structure.reciprocal_lengths()
    factor = (density / (structure.natoms * lengths[0] * lengths[1] * lengths[2])) ** (1.0 / 3.0)
    # The small tolerance keeps a product that is an integer up to rounding from gaining a division.
    mesh = tuple(max(1, math.ceil(factor * length - 1e-6)) for length in lengths)
    comment = f"Automatic mesh, {density:g} k-points per reciprocal atom"
    return Kpoints(style=style, mesh=(mesh[0], mesh[1], mesh[2]), comment=comment)
