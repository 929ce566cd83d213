"""One run of the mock VASP in its working directory: read the inputs, relax, write, suffer faults.

The run honours what a VASP workflow relies on: it reads INCAR, POSCAR, KPOINTS and POTCAR (refusing a
POTCAR whose datasets do not match the species, as VASP does), starts warm from a complete WAVECAR when
ISTART allows, rewrites CONTCAR after every ionic step, reads STOPCAR at every electronic step
(``LSTOP`` ends the run after the current ionic step, ``LABORT`` at once, both with complete outputs),
and dies on SIGTERM as Intel Fortran's runtime does. Outputs it does not know the final contents of
yet are written as the run goes, never replaced atomically -- a killed run leaves VASP's kind of debris.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.vasp._errors import VaspInputError
from httk.workflow.vasp._incar import Incar
from httk.workflow.vasp._kpoints import Kpoints, parse_kpoints
from httk.workflow.vasp._potcar import PotcarDataset, parse_potcar
from httk.workflow.vasp._structure import Structure, format_poscar, parse_poscar

from . import _faults
from ._faults import Fault
from ._model import IonicStep, Landscape, Settings, settings_from
from ._restart_files import RECORD_LENGTH, chgcar_text, wavecar_bytes, write_truncated
from ._text import RunInfo, Streams, electronic_step, error_box, finish, header, ionic_step
from ._xml import VasprunWriter

OUTPUTS = ("OUTCAR", "OSZICAR", "vasprun.xml", "CONTCAR")


@dataclass(frozen=True)
class Inputs:
    incar: Incar
    structure: Structure
    kpoints: Kpoints
    potcar: list[PotcarDataset]


class InputProblemError(Exception):
    """An input VASP would refuse; the message is what VASP prints."""


def read_inputs(workdir: Path) -> Inputs:
    """The four input files, or :class:`InputProblemError` with VASP's complaint."""
    texts = {}
    for name in ("INCAR", "POSCAR", "KPOINTS", "POTCAR"):
        try:
            texts[name] = (workdir / name).read_text(encoding="ascii", errors="replace")
        except OSError:
            raise InputProblemError(f"ERROR: the file {name} is missing or cannot be read") from None
    try:
        incar = Incar.parse(texts["INCAR"])
        structure = parse_poscar(texts["POSCAR"])
        kpoints = parse_kpoints(texts["KPOINTS"])
        potcar = parse_potcar(texts["POTCAR"])
    except VaspInputError as exc:
        raise InputProblemError(f"ERROR: {exc}") from None
    if len(potcar) != len(structure.species):
        raise InputProblemError(
            "ERROR: number of potentials on File POTCAR incompatible with number of species"
        )
    return Inputs(incar, structure, kpoints, potcar)


def _wavecar_complete(path: Path) -> bool:
    try:
        size = path.stat().st_size
        with open(path, "rb") as stream:
            first = stream.read(24)
            stream.seek(RECORD_LENGTH)
            second = stream.read(24)
    except OSError:
        return False
    if len(first) < 24 or len(second) < 24:
        return False
    import struct

    recl, nspin, _tag = struct.unpack("<3d", first)
    nkpts, nbands, _encut = struct.unpack("<3d", second)
    return size == int(recl) * (2 + int(nspin) * int(nkpts) * (int(nbands) + 1))


class MockRun:
    """The mock VASP process."""

    def __init__(
        self, workdir: Path, faults: list[Fault], *, step_seconds: float = 0.0, procs: int = 1
    ) -> None:
        self.workdir = workdir
        self.faults = {fault.name: fault for fault in faults}
        self.step_seconds = step_seconds
        self.procs = procs
        self.warnings: list[str] = []

    def run(self) -> int:
        try:
            inputs = read_inputs(self.workdir)
        except InputProblemError as problem:
            print(f" {problem}", flush=True)
            return 1
        signal.signal(signal.SIGTERM, _killed_by_sigterm)
        for name in OUTPUTS:
            (self.workdir / name).unlink(missing_ok=True)
        settings = settings_from(inputs.incar, inputs.structure.natoms)
        warm = settings.istart >= 1 and _wavecar_complete(self.workdir / "WAVECAR")
        landscape = Landscape(
            inputs.structure,
            settings,
            ionic_ratio=0.97 if "nsw" in self.faults else None,
            warm_start=warm,
        )
        nelect = sum(d.zval * n for d, n in zip(inputs.potcar, inputs.structure.counts, strict=True))
        mesh = inputs.kpoints.mesh if inputs.kpoints.is_mesh else (1, 1, 1)
        nkpts = max(1, (mesh[0] * mesh[1] * mesh[2] + 7) // 8)
        nbands = settings.nbands or max(int(nelect / 2 + inputs.structure.natoms / 2), 8)
        info = RunInfo(
            procs=self.procs,
            warm=warm,
            nkpts=nkpts,
            nbands=nbands,
            nelect=nelect,
            titels=tuple(d.titel for d in inputs.potcar),
            zvals=tuple(d.zval for d in inputs.potcar),
        )
        with (
            open(self.workdir / "OUTCAR", "w", encoding="ascii") as outcar,
            open(self.workdir / "OSZICAR", "w", encoding="ascii") as oszicar,
            open(self.workdir / "vasprun.xml", "w", encoding="ascii") as xml,
        ):
            streams = Streams(outcar, oszicar, sys.stdout)
            header(streams, inputs.structure, settings, info)
            vasprun = VasprunWriter(xml)
            vasprun.start(
                inputs.structure, inputs.incar.typed(), inputs.kpoints.describe(), info.titels, info.zvals
            )
            return self._relax(
                inputs=inputs,
                settings=settings,
                landscape=landscape,
                info=info,
                streams=streams,
                vasprun=vasprun,
            )

    def _relax(
        self,
        *,
        inputs: Inputs,
        settings: Settings,
        landscape: Landscape,
        info: RunInfo,
        streams: Streams,
        vasprun: VasprunWriter,
    ) -> int:
        started = time.monotonic()
        previous: IonicStep | None = None
        trajectory = landscape.trajectory()
        unconverged_scf = relaxed = False
        while True:
            if "nelm" in self.faults and (previous.index + 1 if previous else 1) >= self.faults["nelm"].step:
                landscape.electrons_ratio = 0.95
            step = next(trajectory)
            stop = self._electronic_steps(step, streams, settings)
            if isinstance(stop, int):
                return stop
            ionic_step(streams, step, previous.free_energy if previous else None, step.scf_converged)
            vasprun.calculation(step)
            unconverged_scf = not step.scf_converged
            relaxed = settings.relaxes and landscape.converged(step, previous)
            last = (
                not settings.relaxes or relaxed or step.index >= settings.nsw or stop in ("LSTOP", "LABORT")
            )
            contcar = step if last else _moved(landscape, step)
            fault = self._strikes(("crash",), step.index)
            if fault is not None:
                return self._crash(inputs, contcar, info)
            (self.workdir / "CONTCAR").write_text(format_poscar(_as_structure(inputs.structure, contcar)))
            previous = step
            if last:
                break
        finish(streams, relaxed=relaxed, unconverged_scf=unconverged_scf, elapsed=time.monotonic() - started)
        vasprun.finish(step)
        self._restart_files(inputs, settings, step, info)
        return 0

    def _strikes(self, names: tuple[str, ...], index: int) -> Fault | None:
        for name in names:
            fault = self.faults.get(name)
            if fault is not None and fault.step == index:
                return fault
        return None

    def _electronic_steps(self, step: IonicStep, streams: Streams, settings: Settings) -> int | str | None:
        """Write the electronic steps; an exit status when the run ends here, a STOPCAR verdict, or None."""
        for number in range(1, len(step.scf) + 1):
            if number == 1:
                status = self._faults_at(step, streams)
                if status is not None:
                    return status
            if self.step_seconds:
                time.sleep(self.step_seconds)
            electronic_step(streams, step, number, settings.algo)
            for warning in self.warnings:
                streams.stdout.write(f" {warning}\n")
            verdict = _stopcar(self.workdir)
            if verdict == "LABORT":
                del step.scf[number:]
                step.scf_converged = False
                return verdict
            if verdict == "LSTOP" and number == len(step.scf):
                return verdict
        return None

    def _faults_at(self, step: IonicStep, streams: Streams) -> int | None:
        """Strike every fault due at this ionic step; an exit status when one ends the run."""
        for name, fault in self.faults.items():
            if fault.step != step.index:
                continue
            message = _faults.MESSAGES.get(name)
            if message is not None:
                text = (
                    error_box(message.text)
                    if message.boxed
                    else "".join(f" {line}\n" for line in message.text.splitlines())
                )
                if message.boxed:
                    streams.both(text)
                else:
                    streams.stdout.write(text)
                    streams.stdout.flush()
                if message.fatal:
                    return message.status
                self.warnings.append(message.text.splitlines()[0].strip())
            elif name in ("hang", "hang-hard"):
                if name == "hang-hard":
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
                while True:
                    time.sleep(3600)
            elif name == "walltime":
                sys.stderr.write(
                    f"slurmstepd: error: *** STEP {os.getpid()}.0 ON mocknode CANCELLED AT "
                    f"{time.strftime('%Y-%m-%dT%H:%M:%S')} DUE TO TIME LIMIT ***\n"
                )
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(60)  # the signal is delivered before this returns
        return None

    def _crash(self, inputs: Inputs, step: IonicStep, info: RunInfo) -> int:
        """Die by SIGSEGV halfway through writing CONTCAR, WAVECAR and CHGCAR."""
        structure = _as_structure(inputs.structure, step)
        write_truncated(self.workdir / "CONTCAR", format_poscar(structure).encode(), 0.4)
        wavecar = wavecar_bytes(structure, 1, info.nkpts, info.nbands, 400.0)
        write_truncated(self.workdir / "WAVECAR", wavecar, 0.5)
        write_truncated(self.workdir / "CHGCAR", chgcar_text(structure, 1, info.nelect).encode(), 0.5)
        sys.stdout.flush()
        sys.stderr.write("forrtl: severe (174): SIGSEGV, segmentation fault occurred\n")
        sys.stderr.flush()
        os._exit(174)

    def _restart_files(self, inputs: Inputs, settings: Settings, step: IonicStep, info: RunInfo) -> None:
        structure = _as_structure(inputs.structure, step)
        if settings.lwave:
            data = wavecar_bytes(structure, settings.ispin, info.nkpts, info.nbands, 400.0)
            (self.workdir / "WAVECAR").write_bytes(data)
        if settings.lcharg:
            (self.workdir / "CHGCAR").write_text(chgcar_text(structure, settings.ispin, info.nelect))


def _moved(landscape: Landscape, step: IonicStep) -> IonicStep:
    """Where the next ionic step will start (what CONTCAR holds while a relaxation goes on)."""
    lattice, positions = landscape.next_geometry(step)
    return landscape.evaluate(step.index + 1, lattice, positions)


def _as_structure(template: Structure, step: IonicStep) -> Structure:

    return template._replace(lattice=step.lattice, positions=step.positions)


def _stopcar(workdir: Path) -> str | None:
    try:
        incar = Incar.parse((workdir / "STOPCAR").read_text(encoding="ascii", errors="replace"))
    except (OSError, VaspInputError):
        return None
    if incar.get_bool("LABORT", False):
        return "LABORT"
    if incar.get_bool("LSTOP", False):
        return "LSTOP"
    return None


def _killed_by_sigterm(signum: int, frame: object) -> None:
    """Intel Fortran's runtime: one line on stderr, then the signal's default action."""
    sys.stdout.flush()
    os.write(2, b"forrtl: error (78): process killed (SIGTERM)\n")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
