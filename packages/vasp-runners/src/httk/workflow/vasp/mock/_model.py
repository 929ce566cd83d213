"""The mock's model energy landscape: what a relaxation computes, ionic step by ionic step.

This is a model, not physics; it is built so that the calculations a VASP workflow has to manage happen
for the same reasons they do with VASP:

* Atoms sit in harmonic wells around equilibrium sites (the input's fractional positions snapped to a
  grid of 1/8), so a rattled structure needs several ionic steps.
* The cell has an equilibrium volume (the sum of per-element atomic volumes) and a bulk stiffness; a run
  that relaxes the cell (ISIF >= 3) is also held towards the volume it *started* from by a second,
  equally stiff term -- the Pulay stress of a plane-wave basis fixed at the start. A run therefore stops
  halfway to the equilibrium volume, and the next run, started from its CONTCAR, goes half the remaining
  way again: the final energies of consecutive runs converge, and a relaxation that started far from
  equilibrium needs repeats, exactly the situation the repeat rule is for.
* Each ionic step moves every coordinate a fixed fraction of the way to its minimum (faster for a
  larger POTIM), so NSW, EDIFFG and POTIM matter the way they do.
* Each ionic step's electronic minimization converges geometrically from an initial error (large from
  scratch, small from a WAVECAR) until the change is below EDIFF, within NELMIN and NELM.

Everything is deterministic: the same inputs give the same outputs, byte for byte.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from httk.workflow.vasp._incar import Incar
from httk.workflow.vasp._structure import Matrix, Structure, Vector, determinant, element_of, row_times

EV_PER_A3_IN_KBAR = 1602.1766208
_STIFFNESS = 4.0  # eV/Å², the harmonic well of every atom
_BULK = 0.5  # eV/Å³, the cell's stiffness around its equilibrium volume
_PULAY = 0.5  # eV/Å³, the stiffness towards the volume a run started from
_MOMENTS = {"Fe": 2.2, "Co": 1.6, "Ni": 0.6, "Mn": 3.1, "Cr": 1.1, "Gd": 7.0}


def _hashed(element: str, salt: str, low: float, high: float) -> float:
    digest = hashlib.sha256(f"{salt}:{element}".encode()).digest()
    return low + (high - low) * int.from_bytes(digest[:4], "big") / 2**32


def cohesive_energy(element: str) -> float:
    """The model energy per atom of ``element`` at equilibrium, in eV (between -9 and -2)."""
    return _hashed(element, "energy", -9.0, -2.0)


def atomic_volume(element: str) -> float:
    """The model equilibrium volume per atom of ``element``, in Å³ (between 10 and 25)."""
    return _hashed(element, "volume", 10.0, 25.0)


@dataclass(frozen=True)
class Settings:
    """The INCAR tags the mock obeys, with VASP's defaults."""

    nsw: int
    ibrion: int
    isif: int
    ediff: float
    ediffg: float
    nelm: int
    nelmin: int
    potim: float
    ispin: int
    magmom: tuple[float, ...] | None
    istart: int
    lwave: bool
    lcharg: bool
    algo: str
    sigma: float
    ismear: int
    nbands: int | None

    @property
    def relaxes(self) -> bool:
        """Whether ions move (IBRION 1, 2 or 3 with NSW > 0)."""
        return self.nsw > 0 and self.ibrion in (1, 2, 3)

    @property
    def relaxes_volume(self) -> bool:
        """Whether the cell volume is relaxed too (ISIF 3, 6 or 7)."""
        return self.relaxes and self.isif in (3, 6, 7)


def settings_from(incar: Incar, natoms: int) -> Settings:
    """The mock's settings from an INCAR."""
    nsw = incar.get_int("NSW", 0) or 0
    ibrion = incar.get_int("IBRION", -1 if nsw in (0, 1) else 0)
    ediff = incar.get_float("EDIFF", 1e-4) or 1e-4
    magmom = None
    if "MAGMOM" in incar:
        magmom = tuple(_expand(incar["MAGMOM"]))
    return Settings(
        nsw=nsw,
        ibrion=-1 if ibrion is None else ibrion,
        isif=incar.get_int("ISIF", 2) or 0,
        ediff=ediff,
        ediffg=incar.get_float("EDIFFG", ediff * 10) or ediff * 10,
        nelm=incar.get_int("NELM", 60) or 60,
        nelmin=incar.get_int("NELMIN", 2) or 2,
        potim=incar.get_float("POTIM", 0.5) or 0.5,
        ispin=incar.get_int("ISPIN", 1) or 1,
        magmom=magmom if magmom is None or len(magmom) == natoms else None,
        istart=incar.get_int("ISTART", 1) or 0,
        lwave=bool(incar.get_bool("LWAVE", True)),
        lcharg=bool(incar.get_bool("LCHARG", True)),
        algo=(incar.get_str("ALGO", "Normal") or "Normal").capitalize(),
        sigma=incar.get_float("SIGMA", 0.2) or 0.2,
        ismear=incar.get_int("ISMEAR", 1) or 0,
        nbands=incar.get_int("NBANDS"),
    )


def _expand(text: str) -> list[float]:
    """MAGMOM's ``2*5.0 1.0`` shorthand."""
    values: list[float] = []
    for token in text.split():
        count, star, value = token.partition("*")
        values += [float(value)] * int(count) if star else [float(token)]
    return values


@dataclass
class IonicStep:
    """One ionic step: the geometry, its energies, forces and pressure, and the electronic steps."""

    index: int
    lattice: Matrix
    positions: tuple[Vector, ...]
    energy_wo_entropy: float
    free_energy: float
    energy: float  # sigma -> 0
    forces: tuple[Vector, ...]
    pressure: float  # kB, positive when the cell wants to expand
    scf: list[float] = field(default_factory=list)
    scf_converged: bool = True
    moments: tuple[float, ...] | None = None

    @property
    def volume(self) -> float:
        return abs(determinant(self.lattice))

    @property
    def max_force(self) -> float:
        return max((math.sqrt(sum(x * x for x in f)) for f in self.forces), default=0.0)


class Landscape:
    """The model of one run: its equilibrium, and the trajectory a relaxation follows.

    Parameters
    ----------
    structure
        The run's starting structure (POSCAR).
    settings
        The INCAR settings.
    electrons_ratio
        The factor by which the electronic error shrinks per step (0.3 normally; close to 1 never
        converges within NELM).
    ionic_ratio
        The fraction of the remaining displacement an ionic step keeps; default from POTIM.
    warm_start
        Whether the run starts from a complete WAVECAR (a small initial electronic error).
    """

    def __init__(
        self,
        structure: Structure,
        settings: Settings,
        *,
        electrons_ratio: float | None = None,
        ionic_ratio: float | None = None,
        warm_start: bool = False,
    ) -> None:
        self.structure = structure
        self.settings = settings
        elements = structure.elements
        self._sites = tuple(tuple(round(x * 8) / 8 for x in f) for f in structure.positions)
        self._v_eq = sum(atomic_volume(element_of(e)) for e in elements)
        self._v_start = structure.volume
        self._base = sum(cohesive_energy(e) for e in elements)
        self.electrons_ratio = (
            electrons_ratio if electrons_ratio is not None else _ALGO_RATIO.get(settings.algo, 0.3)
        )
        self._r = ionic_ratio if ionic_ratio is not None else 1.0 - 0.9 * min(settings.potim, 1.0)
        self._warm = warm_start
        self.moments = self._moments(elements)

    def _moments(self, elements: tuple[str, ...]) -> tuple[float, ...] | None:
        if self.settings.ispin != 2:
            return None
        start = self.settings.magmom or tuple(1.0 for _ in elements)
        return tuple(
            math.copysign(_MOMENTS.get(e, 0.0), m) if abs(m) > 0.1 else 0.0
            for e, m in zip(elements, start, strict=True)
        )

    def target_volume(self) -> float:
        """Where this run's volume relaxation ends: between equilibrium and the starting volume."""
        a, b = _BULK / self._v_eq, 2 * _PULAY / self._v_start
        return (a * self._v_eq + b * self._v_start) / (a + b)

    def evaluate(self, index: int, lattice: Matrix, positions: tuple[Vector, ...]) -> IonicStep:
        """Energies, forces and pressure of one geometry (the electronic steps are added later)."""
        volume = abs(determinant(lattice))
        forces: list[Vector] = []
        well = 0.0
        for f, site in zip(positions, self._sites, strict=True):
            delta = tuple(_wrapped(x - s) for x, s in zip(f, site, strict=True))
            cart = row_times(delta, lattice)
            well += 0.5 * _STIFFNESS * sum(x * x for x in cart)
            forces.append((-_STIFFNESS * cart[0], -_STIFFNESS * cart[1], -_STIFFNESS * cart[2]))
        bulk = 0.5 * _BULK * (volume - self._v_eq) ** 2 / self._v_eq
        pulay = (
            _PULAY * (volume - self._v_start) ** 2 / self._v_start if self.settings.relaxes_volume else 0.0
        )
        slope = _BULK * (volume - self._v_eq) / self._v_eq
        if self.settings.relaxes_volume:
            slope += 2 * _PULAY * (volume - self._v_start) / self._v_start
        magnetic = -0.1 * sum(m * m for m in self.moments or ())
        e_wo = self._base + well + bulk + pulay + magnetic
        entropy = 0.04 * self.settings.sigma * self.structure.natoms if self.settings.ismear >= 0 else 0.0
        return IonicStep(
            index=index,
            lattice=lattice,
            positions=positions,
            energy_wo_entropy=e_wo,
            free_energy=e_wo - entropy,
            energy=e_wo - entropy / 2,
            forces=tuple(forces),
            pressure=-slope * EV_PER_A3_IN_KBAR,
            moments=self.moments,
        )

    def electronic_steps(self, step: IonicStep, previous: IonicStep | None) -> None:
        """Fill in the electronic steps of ``step``: energies converging onto its free energy."""
        natoms = self.structure.natoms
        if previous is None:
            error = 0.3 * natoms if self._warm else 20.0 * natoms
        else:
            error = max(5.0 * abs(step.free_energy - previous.free_energy), 1e-3 * natoms)
        energies = [step.free_energy + error]
        converged = False
        while len(energies) < self.settings.nelm:
            energies.append(step.free_energy + error * self.electrons_ratio ** len(energies))
            if (
                len(energies) >= self.settings.nelmin
                and abs(energies[-1] - energies[-2]) < self.settings.ediff
            ):
                converged = True
                break
        step.scf = energies
        step.scf_converged = converged

    def next_geometry(self, step: IonicStep) -> tuple[Matrix, tuple[Vector, ...]]:
        """The geometry the ionic step after ``step`` evaluates: every coordinate nearer its minimum."""
        positions = tuple(
            tuple(s + self._r * _wrapped(x - s) for x, s in zip(f, site, strict=True))
            for f, site in zip(step.positions, self._sites, strict=True)
        )
        lattice = step.lattice
        if self.settings.relaxes_volume:
            target = self.target_volume()
            new_volume = target + self._r * (step.volume - target)
            factor = (new_volume / step.volume) ** (1.0 / 3.0)
            lattice = tuple(tuple(x * factor for x in row) for row in lattice)  # type: ignore[assignment]
        return lattice, positions  # type: ignore[return-value]

    def trajectory(self) -> Iterator[IonicStep]:
        """The ionic steps of the run, each evaluated with its electronic steps, for as long as asked.

        The caller decides when the run ends (convergence, NSW, a stop request) with :meth:`converged`.
        """
        lattice, positions = self.structure.lattice, self.structure.positions
        previous: IonicStep | None = None
        index = 1
        while True:
            step = self.evaluate(index, lattice, positions)
            self.electronic_steps(step, previous)
            yield step
            previous = step
            index += 1
            lattice, positions = self.next_geometry(step)

    def converged(self, step: IonicStep, previous: IonicStep | None) -> bool:
        """Whether the ionic relaxation has reached EDIFFG after ``step``."""
        ediffg = self.settings.ediffg
        if ediffg < 0:
            volume_done = True
            if self.settings.relaxes_volume:
                volume_done = abs(step.volume - self.target_volume()) < 1e-3 * step.volume
            return step.max_force < -ediffg and volume_done
        return previous is not None and abs(step.energy_wo_entropy - previous.energy_wo_entropy) < ediffg


_ALGO_RATIO = {"Normal": 0.3, "Fast": 0.35, "Veryfast": 0.4, "All": 0.25, "Damped": 0.3}


def _wrapped(x: float) -> float:
    """A fractional difference brought into [-0.5, 0.5)."""
    return x - math.floor(x + 0.5)
