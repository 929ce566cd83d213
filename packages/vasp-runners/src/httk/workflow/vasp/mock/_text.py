"""The mock's text outputs: OUTCAR, OSZICAR and standard output, written as VASP writes them.

The layout follows VASP 6: the header (version, POTCAR datasets, dimensions, the start parameters a
parser reads NELM, NSW, IBRION, ISIF and NELECT from), then per ionic step its electronic iterations,
forces, stress and energies, and at the end the timing banner ("General timing and accounting
informations for this job") whose absence marks an unfinished run. Every line is flushed as it is
written, so a run that dies leaves exactly the prefix it had reached -- what a crashed VASP leaves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from httk.workflow.vasp._structure import Structure

from ._model import IonicStep, Settings

MOCK_VERSION = "0.1.0"
VERSION_LINE = f" vasp.6.4.2 mock (httk-mock-vasp {MOCK_VERSION}; a model energy landscape, not VASP) complex"
RULE = "-" * 104


def fortran(value: float, digits: int) -> str:
    """A number as VASP's ``E`` format writes it: ``-.10843024E+02``, ``0.10843024E+02``."""
    if value == 0:
        return "0." + "0" * digits + "E+00"
    mantissa, exponent = f"{abs(value):.{digits - 1}e}".split("e")
    shifted = int(exponent) + 1
    digits_text = mantissa.replace(".", "")[:digits]
    sign = "-" if value < 0 else "0"
    return f"{sign}.{digits_text}E{shifted:+03d}"


class Streams:
    """The open output files of one run (line buffered, so a crash leaves complete prefixes)."""

    def __init__(self, outcar: IO[str], oszicar: IO[str], stdout: IO[str]) -> None:
        self.outcar = outcar
        self.oszicar = oszicar
        self.stdout = stdout

    def out(self, text: str) -> None:
        self.outcar.write(text)
        self.outcar.flush()

    def both(self, text: str) -> None:
        """A line VASP prints on standard output and into OUTCAR."""
        self.stdout.write(text)
        self.stdout.flush()
        self.out(text)


@dataclass(frozen=True)
class RunInfo:
    """What the header reports besides the structure and the settings."""

    procs: int
    warm: bool
    nkpts: int
    nbands: int
    nelect: float
    titels: tuple[str, ...]
    zvals: tuple[float, ...]


def header(streams: Streams, structure: Structure, settings: Settings, info: RunInfo) -> None:
    """Standard output's start-up lines and the OUTCAR header."""
    streams.stdout.write(
        f" running on {info.procs:4d} total cores\n"
        f" distrk:  each k-point on {info.procs:4d} cores,    1 groups\n"
        f"{VERSION_LINE}\n POSCAR found type information on POSCAR {' '.join(structure.species)}\n"
        f" POSCAR found :  {len(structure.species)} types and {structure.natoms:7d} ions\n"
        " POSCAR, INCAR and KPOINTS ok, starting setup\n"
    )
    streams.stdout.write(" reading WAVECAR\n" if info.warm else " WAVECAR not read\n")
    streams.stdout.write(
        " entering main loop\n"
        "       N       E                     dE             d eps       ncg     rms          rms(c)\n"
    )
    streams.stdout.flush()
    lines = [VERSION_LINE, "  ", f" running on {info.procs:4d} total cores", "", RULE, "", " INCAR:"]
    lines += [f" POTCAR:    {titel}" for titel in info.titels]
    for titel, zval in zip(info.titels, info.zvals, strict=True):
        lines += [
            f" POTCAR:    {titel}",
            f"   TITEL  = {titel}",
            f"   POMASS =    1.000; ZVAL   = {zval:8.3f}    mass and valenz",
        ]
    lines += ["", f" POSCAR: {' '.join(structure.species)}", "", RULE, ""]
    lines += [
        " Dimension of arrays:",
        f"   k-points           NKPTS = {info.nkpts:6d}   k-points in BZ     NKDIM = {info.nkpts:6d}"
        f"   number of bands    NBANDS= {info.nbands:6d}",
        f"   number of dos      NEDOS =    301   number of ions     NIONS = {structure.natoms:6d}",
        "   ions per type =         " + "".join(f"{n:4d}" for n in structure.counts),
        "",
        " Startparameter for this run:",
        f"   ISTART = {settings.istart:6d}    job   : 0-new  1-cont  2-samecut",
        f"   ISPIN  = {settings.ispin:6d}    spin polarized calculation?",
        " Electronic Relaxation 1",
        f"   NELM   = {settings.nelm:6d};   NELMIN= {settings.nelmin:3d}; NELMDL= -5     # of ELM steps ",
        f"   EDIFF  = {settings.ediff:.1E}   stopping-criterion for ELM",
        " Ionic relaxation",
        f"   EDIFFG = {settings.ediffg:.1E}   stopping-criterion for IOM",
        f"   NSW    = {settings.nsw:6d}    number of steps for IOM",
        f"   IBRION = {settings.ibrion:6d}    ionic relax: 0-MD 1-quasi-New 2-CG",
        f"   ISIF   = {settings.isif:6d}    stress and relaxation",
        f"   POTIM  = {settings.potim:6.4f}    time-step for ionic-motion",
        f"   NELECT = {info.nelect:12.4f}    total number of electrons",
        f"   ISMEAR = {settings.ismear:5d};   SIGMA  = {settings.sigma:6.2f}  broadening in eV",
        "",
        RULE,
        "",
    ]
    lines += _cell_block(structure.lattice, structure.volume)
    streams.out("\n".join(lines) + "\n")


def _cell_block(lattice: Sequence[Sequence[float]], volume: float) -> list[str]:
    lines = [
        f"  volume of cell : {volume:12.2f}",
        "      direct lattice vectors                 reciprocal lattice vectors",
    ]
    lines += ["   " + "".join(f"{x:13.9f}" for x in row) for row in lattice]
    return [*lines, ""]


def electronic_step(streams: Streams, step: IonicStep, number: int, algo: str) -> None:
    """One electronic iteration: its OSZICAR/stdout line and its OUTCAR block."""
    energy = step.scf[number - 1]
    delta = energy - (step.scf[number - 2] if number > 1 else 0.0)
    label = "RMM" if algo == "Veryfast" or (algo == "Fast" and number > 5) else "DAV"
    columns = (fortran(energy, 12), fortran(delta, 5), fortran(-abs(delta) * 3, 5))
    rms = fortran(abs(delta) ** 0.5, 3)
    line = f"{label}: {number:3d}    {'   '.join(columns)}   {16 * number:4d}   {rms}\n"
    streams.oszicar.write(line)
    streams.oszicar.flush()
    streams.stdout.write(line)
    streams.stdout.flush()
    streams.out(
        f"\n{'-' * 41} Iteration {step.index:4d}({number:4d})  {'-' * 39}\n\n"
        "  free energy    TOTEN  = " + f"{energy:18.8f} eV\n\n"
        f"  energy without entropy = {energy:18.8f}  energy(sigma->0) = {energy:18.8f}\n\n"
    )


def ionic_step(streams: Streams, step: IonicStep, previous_energy: float | None, converged_scf: bool) -> None:
    """The end of an ionic step: the OUTCAR's stress, cell, forces and energies; the OSZICAR line."""
    verdict = (
        "aborting loop because EDIFF is reached"
        if converged_scf
        else "aborting loop EDIFF was not reached (unconverged)"
    )
    pressure = step.pressure
    lines = [f"{'-' * 24} {verdict} {'-' * 40}", "", "  FORCE on cell =-STRESS in cart. coord.  units (eV):"]
    lines += [
        f"  in kB  {pressure:12.5f}{pressure:12.5f}{pressure:12.5f}{0.0:12.5f}{0.0:12.5f}{0.0:12.5f}",
        f"  external pressure = {pressure:11.2f} kB  Pullay stress =        0.00 kB",
        "",
        " VOLUME and BASIS-vectors are now :",
        " " + "-" * 77,
    ]
    lines += _cell_block(step.lattice, step.volume)
    lines += [" POSITION                                       TOTAL-FORCE (eV/Angst)", " " + "-" * 83]
    for position, force in zip(_cartesian(step), step.forces, strict=True):
        lines.append(
            " " + "".join(f"{x:13.5f}" for x in position) + "    " + "".join(f"{f:14.6f}" for f in force)
        )
    lines += [
        " " + "-" * 83,
        "    total drift:                                0.000000      0.000000      0.000000",
        "",
    ]
    lines += [
        "  FREE ENERGIE OF THE ION-ELECTRON SYSTEM (eV)",
        "  ---------------------------------------------------",
        f"  free  energy   TOTEN  = {step.free_energy:18.8f} eV",
        "",
        f"  energy  without entropy= {step.energy_wo_entropy:18.8f}  energy(sigma->0) = {step.energy:18.8f}",
        "",
    ]
    if step.moments is not None:
        lines += [" magnetization (x)", " ", "# of ion       s       p       d       tot", "-" * 42]
        lines += [f"{i:5d}        0.000   0.000{m:9.3f}{m:9.3f}" for i, m in enumerate(step.moments, 1)]
        lines += ["-" * 42, f"tot          0.000   0.000{sum(step.moments):9.3f}{sum(step.moments):9.3f}", ""]
    streams.out("\n".join(lines) + "\n")
    change = step.free_energy - (previous_energy if previous_energy is not None else 0.0)
    energies = f"F= {fortran(step.free_energy, 8)} E0= {fortran(step.energy, 8)}"
    line = f"{step.index:4d} {energies}  d E ={fortran(change, 6)}"
    if step.moments is not None:
        line += f"  mag= {sum(step.moments):10.4f}"
    streams.oszicar.write(line + "\n")
    streams.oszicar.flush()
    streams.stdout.write(line + "\n")
    streams.stdout.flush()


def _cartesian(step: IonicStep) -> list[tuple[float, float, float]]:
    from httk.workflow.vasp._structure import row_times

    return [row_times(f, step.lattice) for f in step.positions]


def finish(streams: Streams, *, relaxed: bool, unconverged_scf: bool, elapsed: float) -> None:
    """The end of a run that finished: the relaxation verdict and the timing banner."""
    if relaxed:
        streams.both(" reached required accuracy - stopping structural energy minimisation\n")
    if unconverged_scf:
        warning = (
            "The electronic self-consistency was not achieved in the given\n"
            "number of steps (NELM). The forces and other quantities evaluated\n"
            "might not be reliable so examine the results carefully."
        )
        streams.both(warning_box(warning))
    streams.stdout.write(" writing wavefunctions\n")
    streams.stdout.flush()
    streams.out(
        "\n\n General timing and accounting informations for this job:\n"
        " ========================================================\n\n"
        f"                  Total CPU time used (sec):     {elapsed:8.3f}\n"
        f"                         Elapsed time (sec):     {elapsed:8.3f}\n"
    )


def _box(banner: str, text: str, closing: str | None) -> str:
    width = 77
    rule = " " + "-" * width + " "
    blank = "|" + " " * width + "|"
    lines = [rule, blank, "|" + banner.center(width) + "|", blank]
    lines += ["|     " + line.strip().ljust(width - 5) + "|" for line in text.splitlines()]
    if closing is not None:
        lines += [blank, "|" + closing.center(width) + "|"]
    return "\n".join([*lines, blank, rule]) + "\n"


def warning_box(text: str) -> str:
    """``text`` inside VASP 6's warning box."""
    return _box("W    W    AA    RRRRR   N    N  II  N    N   GGGG   !!!", text, None)


def error_box(text: str) -> str:
    """``text`` inside VASP 6's error box, which ends the run."""
    closing = "---->  I REFUSE TO CONTINUE WITH THIS SICK JOB ... BYE!!! <----"
    return _box("EEEEEEE  RRRRRR   RRRRRR   OOOOOOO  RRRRRR", text, closing)
