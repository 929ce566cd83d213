"""The INCAR tags the packaged workflows set when the user's INCAR does not: domain knowledge as data.

Explicit INCAR tags always win: a default is only ever added for a tag the user's INCAR lacks. The
tables are what packages/vasp-runners/README.md documents, row for row.

Relaxation (``vasp-relax`` and the first stage of ``vasp-relax-static``): a conjugate-gradient
relaxation of ions, cell shape and volume, until the forces are below 0.02 eV/Å, with the electronic
tolerance scaled to the cell size; WAVECAR and CHGCAR written so that a repeat or a restart starts warm.

Static (``vasp-static``, and the second stage of ``vasp-relax-static``): one ionic step with a tight
electronic tolerance and the projections (LORBIT) written. A relax-then-static job's static stage keeps
the user's INCAR tags except those that only make sense for a relaxation (:data:`RELAXATION_ONLY`).

Tags that depend on the structure or the POTCAR are computed: EDIFF from the atom count, ENCUT from the
largest ENMAX (1.3 times it, the customary margin for a changing cell), LREAL from the atom count, and
ISPIN with MAGMOM when the structure holds an element of :data:`MAGNETIC_MOMENTS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

RELAX: Mapping[str, object] = {
    "PREC": "Accurate",
    "IBRION": 2,
    "ISIF": 3,
    "NSW": 99,
    "EDIFFG": -0.02,
    "ISMEAR": 0,
    "SIGMA": 0.05,
    "NELM": 100,
    "LWAVE": True,
    "LCHARG": True,
}
"""Fixed relaxation defaults."""

STATIC: Mapping[str, object] = {
    "PREC": "Accurate",
    "IBRION": -1,
    "NSW": 0,
    "EDIFF": 1e-6,
    "ISMEAR": 0,
    "SIGMA": 0.05,
    "NELM": 100,
    "LORBIT": 11,
    "LWAVE": True,
    "LCHARG": True,
}
"""Fixed static defaults."""

RELAXATION_ONLY = ("IBRION", "ISIF", "NSW", "EDIFFG", "POTIM", "NFREE", "ISTART")
"""User tags a relax-then-static job's static stage leaves out."""

MAGNETIC_MOMENTS: Mapping[str, float] = {
    "Cr": 3.0,
    "Mn": 5.0,
    "Fe": 5.0,
    "Co": 5.0,
    "Ni": 5.0,
    "Ce": 5.0,
    "Nd": 5.0,
    "Sm": 5.0,
    "Eu": 7.0,
    "Gd": 7.0,
    "Tb": 7.0,
    "Dy": 7.0,
}
"""Starting moments (μB) of elements that make a calculation spin-polarized; others start at 0.6."""

ENCUT_FACTOR = 1.3
LREAL_AUTO_ATOMS = 20


def computed(
    kind: str, elements: Sequence[str], counts: Sequence[int], enmax: Sequence[float | None]
) -> dict[str, object]:
    """The structure-dependent defaults of a ``relax`` or ``static`` calculation.

    Parameters
    ----------
    kind
        ``relax`` or ``static``.
    elements
        The element of each species, in POSCAR order.
    counts
        The atoms of each species.
    enmax
        Each species' POTCAR ENMAX (``None`` when the POTCAR does not say).

    Examples
    --------
    >>> computed("relax", ["Fe", "O"], [1, 1], [270.0, 400.0])
    {'EDIFF': 4e-06, 'ENCUT': 520, 'LREAL': '.FALSE.', 'ISPIN': 2, 'MAGMOM': '1*5.0 1*0.6'}
    """
    natoms = sum(counts)
    values: dict[str, object] = {}
    if kind == "relax":
        values["EDIFF"] = round(max(1e-6, 2e-6 * natoms), 12)
    known = [cutoff for cutoff in enmax if cutoff]
    if known:
        values["ENCUT"] = int(math.ceil(ENCUT_FACTOR * max(known) / 10.0) * 10)
    values["LREAL"] = "Auto" if natoms >= LREAL_AUTO_ATOMS else ".FALSE."
    if any(element in MAGNETIC_MOMENTS for element in elements):
        values["ISPIN"] = 2
        values["MAGMOM"] = " ".join(
            f"{count}*{MAGNETIC_MOMENTS.get(element, 0.6)}"
            for element, count in zip(elements, counts, strict=True)
        )
    return values


def defaults(
    kind: str, elements: Sequence[str], counts: Sequence[int], enmax: Sequence[float | None]
) -> dict[str, object]:
    """Every default of a ``relax`` or ``static`` calculation, fixed ones first."""
    fixed = RELAX if kind == "relax" else STATIC
    return {**fixed, **computed(kind, elements, counts, enmax)}
