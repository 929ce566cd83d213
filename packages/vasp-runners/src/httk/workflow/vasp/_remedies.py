"""Remedies: small, named functions from a failed calculation to the change of its inputs that may cure it.

A remedy looks at the :class:`Calculation` (the INCAR, POSCAR, KPOINTS now in the workdir, the failed
run's CONTCAR when it is usable, how far the run got) and returns the :class:`Change` to make, or
``None`` when it does not apply -- the setting is already what it would set, there is no CONTCAR to
continue from, the KPOINTS is not an automatic mesh -- so that a ladder moves on to its next rung rather
than spend a retry on a change that changes nothing. Remedies never write; :func:`apply_change` does,
after the caller has backed up what it will replace.

The catalog (:mod:`._catalog`) orders remedies into ladders; each remedy's one-line meaning is what the
README's table shows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ._files import write_atomically
from ._incar import Incar, spell
from ._kpoints import GAMMA, MONKHORST_PACK, Kpoints
from ._record import NamedTuple
from ._structure import Structure, format_poscar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

MAX_NELM = 400


class Calculation(NamedTuple):
    """What a remedy may look at."""

    workdir: StrPath
    incar: Incar
    structure: Structure
    kpoints: Kpoints
    contcar: Structure | None = None
    ionic_steps: int = 0
    nbands: int | None = None
    seed: int = 0

    @property
    def relaxation(self) -> bool:
        """Whether ions move (NSW > 0 and IBRION 1, 2 or 3)."""
        return (self.incar.get_int("NSW", 0) or 0) > 0 and self.incar.get_int("IBRION", 0) in (1, 2, 3)


class Change(NamedTuple):
    """Changes to the inputs: INCAR tags set and removed, a new KPOINTS or POSCAR, files deleted."""

    description: str
    incar: Mapping[str, object] = MappingProxyType({})
    unset: tuple[str, ...] = ()
    kpoints: Kpoints | None = None
    poscar: Structure | None = None
    delete: tuple[str, ...] = ()

    def files(self) -> list[str]:
        """The input files the change rewrites (what is backed up first)."""
        names = ["INCAR"] if self.incar or self.unset else []
        names += ["KPOINTS"] if self.kpoints is not None else []
        return names + (["POSCAR"] if self.poscar is not None else [])


def apply_change(calculation: Calculation, change: Change) -> None:
    """Write the change into the workdir."""
    if change.incar or change.unset:
        incar = calculation.incar.copy()
        for tag in change.unset:
            if tag in incar:
                del incar[tag]
        for tag, value in change.incar.items():
            incar[tag] = value
        write_atomically(os.path.join(calculation.workdir, "INCAR"), incar.format())
    if change.kpoints is not None:
        write_atomically(os.path.join(calculation.workdir, "KPOINTS"), change.kpoints.format())
    if change.poscar is not None:
        write_atomically(os.path.join(calculation.workdir, "POSCAR"), format_poscar(change.poscar))
    for name in change.delete:
        try:
            os.unlink(os.path.join(calculation.workdir, name))
        except FileNotFoundError:
            continue


def _set(c: Calculation, description: str, delete: tuple[str, ...] = (), **tags: object) -> Change | None:
    """Set INCAR tags; ``None`` when every one already has that value."""
    if all(c.incar.get_str(tag) == spell(value) for tag, value in tags.items()):
        return None
    return Change(description, incar=tags, delete=delete)


def _continuing(c: Calculation) -> Structure | None:
    """The structure to continue a relaxation from: the failed run's CONTCAR, when it moved."""
    return c.contcar if c.contcar is not None and c.relaxation and c.ionic_steps >= 1 else None


def continue_from_contcar(c: Calculation) -> Change | None:
    start = _continuing(c)
    return None if start is None else Change("continue from CONTCAR", poscar=start)


def rerun(c: Calculation) -> Change | None:
    return Change("run again with the same inputs")


def gaussian_smearing(c: Calculation) -> Change | None:
    return _set(c, "Gaussian smearing (ISMEAR = 0, SIGMA = 0.05)", ISMEAR=0, SIGMA=0.05)


def gamma_centred_mesh(c: Calculation) -> Change | None:
    if not c.kpoints.is_mesh or c.kpoints.style == GAMMA:
        return None
    return Change("a Gamma-centred k-point mesh", kpoints=c.kpoints.with_style(GAMMA))


def monkhorst_pack_mesh(c: Calculation) -> Change | None:
    if not c.kpoints.is_mesh or c.kpoints.style == MONKHORST_PACK:
        return None
    return Change("a Monkhorst-Pack k-point mesh", kpoints=c.kpoints.with_style(MONKHORST_PACK))


def denser_mesh(c: Calculation) -> Change | None:
    if not c.kpoints.is_mesh:
        return None
    return Change("one more k-point subdivision along each axis", kpoints=c.kpoints.bumped())


def no_symmetry(c: Calculation) -> Change | None:
    return _set(c, "symmetry off (ISYM = 0)", ISYM=0)


def tight_symprec(c: Calculation) -> Change | None:
    current = c.incar.get_float("SYMPREC", 1e-5) or 1e-5
    return (
        None
        if current <= 1e-8
        else Change("a tight symmetry tolerance (SYMPREC = 1e-8)", incar={"SYMPREC": 1e-8})
    )


def symprec_tenth(c: Calculation) -> Change | None:
    current = c.incar.get_float("SYMPREC", 1e-5) or 1e-5
    return Change(f"SYMPREC a tenth ({current / 10:g})", incar={"SYMPREC": float(f"{current / 10:.3g}")})


def symprec_hundredfold(c: Calculation) -> Change | None:
    current = c.incar.get_float("SYMPREC", 1e-5) or 1e-5
    return Change(
        f"SYMPREC a hundred times larger ({current * 100:g})",
        incar={"SYMPREC": float(f"{current * 100:.3g}")},
    )


def kerker_mixing(c: Calculation) -> Change | None:
    return _set(c, "Kerker mixing (IMIX = 1)", IMIX=1)


def soft_mixing(c: Calculation) -> Change | None:
    return _set(
        c,
        "soft charge mixing from atomic charges (AMIX = 0.1, BMIX = 0.01)",
        ("CHGCAR",),
        AMIX=0.1,
        BMIX=0.01,
        ICHARG=2,
    )


def lreal_false(c: Calculation) -> Change | None:
    if c.incar.get_str("LREAL", ".FALSE.") in (".FALSE.", "F", ".F.", "FALSE"):
        return None
    return Change("reciprocal-space projection (LREAL = .FALSE.)", incar={"LREAL": False})


def accurate_precision(c: Calculation) -> Change | None:
    return (
        None
        if (c.incar.get_str("PREC") or "").lower().startswith("a")
        else Change("accurate precision (PREC = Accurate)", incar={"PREC": "Accurate"})
    )


def algo_all(c: Calculation) -> Change | None:
    return _set(c, "all-band minimization (ALGO = All), charge density from scratch", ("CHGCAR",), ALGO="All")


def algo_normal(c: Calculation) -> Change | None:
    return _set(c, "blocked Davidson (ALGO = Normal)", ALGO="Normal")


def algo_damped(c: Calculation) -> Change | None:
    return _set(c, "damped minimization (ALGO = Damped, TIME = 0.05)", ALGO="Damped", TIME=0.05)


def algo_exact(c: Calculation) -> Change | None:
    return _set(c, "exact diagonalization (ALGO = Exact)", ALGO="Exact")


def halve_potim(c: Calculation) -> Change | None:
    if not c.relaxation:
        return None
    potim = c.incar.get_float("POTIM", 0.5) or 0.5
    return Change(
        f"half the ionic step (POTIM = {potim / 2:g})", incar={"POTIM": potim / 2}, poscar=_continuing(c)
    )


def larger_potim(c: Calculation) -> Change | None:
    if not c.relaxation:
        return None
    potim = c.incar.get_float("POTIM", 0.5) or 0.5
    return Change(f"a larger ionic step (POTIM = {potim + 0.1:g})", incar={"POTIM": round(potim + 0.1, 6)})


def quasi_newton(c: Calculation) -> Change | None:
    if not c.relaxation or c.incar.get_int("IBRION") == 1:
        return None
    return Change("quasi-Newton ionic steps (IBRION = 1)", incar={"IBRION": 1}, poscar=_continuing(c))


def smaller_ediff(c: Calculation) -> Change | None:
    ediff = c.incar.get_float("EDIFF", 1e-4) or 1e-4
    if ediff <= 1e-8:
        return None
    return Change(
        f"a tighter electronic tolerance (EDIFF = {ediff / 10:g})",
        incar={"EDIFF": float(f"{ediff / 10:.3g}")},
        poscar=_continuing(c),
    )


def more_bands(c: Calculation) -> Change | None:
    current = c.incar.get_int("NBANDS") or c.nbands
    if current is None:
        return None
    wanted = int(current * 1.1) + (1 if int(current * 1.1) == current else 0)
    return Change(f"more bands (NBANDS = {wanted})", incar={"NBANDS": wanted})


def more_electronic_steps(c: Calculation) -> Change | None:
    nelm = c.incar.get_int("NELM", 60) or 60
    if nelm >= MAX_NELM:
        return None
    return Change(
        f"more electronic steps (NELM = {min(2 * nelm, MAX_NELM)})",
        incar={"NELM": min(2 * nelm, MAX_NELM)},
        poscar=_continuing(c),
    )


def perturb_structure(c: Calculation) -> Change | None:
    base = _continuing(c) or c.structure
    return Change(
        "atoms displaced by up to 0.02 Å",
        poscar=base.rattled(0.02, seed=c.seed),
        delete=("WAVECAR", "CHGCAR"),
    )


def expand_cell(c: Calculation) -> Change | None:
    base = _continuing(c) or c.structure
    return Change(
        "the cell expanded by 5 % in each direction", poscar=base.strained(1.05), delete=("WAVECAR", "CHGCAR")
    )


def fresh_start(c: Calculation) -> Change | None:
    present = tuple(name for name in ("WAVECAR", "CHGCAR") if os.path.exists(os.path.join(c.workdir, name)))
    if not present and c.incar.get_int("ISTART") == 0 and c.incar.get_int("ICHARG") == 2:
        return None
    return Change(
        "start from scratch (ISTART = 0, ICHARG = 2, no WAVECAR or CHGCAR)",
        incar={"ISTART": 0, "ICHARG": 2},
        delete=("WAVECAR", "CHGCAR"),
    )


def small_amin(c: Calculation) -> Change | None:
    return _set(c, "a small minimal mixing (AMIN = 0.01)", AMIN=0.01)


def swap_axes(c: Calculation) -> Change | None:
    s = c.structure
    lattice = (s.lattice[0], s.lattice[2], s.lattice[1])
    positions = tuple((p[0], p[2], p[1]) for p in s.positions)
    return Change(
        "the second and third lattice vectors exchanged",
        poscar=s._replace(lattice=lattice, positions=positions),
    )


Remedy = Callable[[Calculation], Change | None]

REMEDIES: dict[str, Remedy] = {
    function.__name__: function
    for function in (
        continue_from_contcar,
        rerun,
        gaussian_smearing,
        gamma_centred_mesh,
        monkhorst_pack_mesh,
        denser_mesh,
        no_symmetry,
        tight_symprec,
        symprec_tenth,
        symprec_hundredfold,
        kerker_mixing,
        soft_mixing,
        lreal_false,
        accurate_precision,
        algo_all,
        algo_normal,
        algo_damped,
        algo_exact,
        halve_potim,
        larger_potim,
        quasi_newton,
        smaller_ediff,
        more_bands,
        more_electronic_steps,
        perturb_structure,
        expand_cell,
        fresh_start,
        small_amin,
        swap_axes,
    )
}
"""Every remedy by name: the names the catalog's ladders and job state use."""
