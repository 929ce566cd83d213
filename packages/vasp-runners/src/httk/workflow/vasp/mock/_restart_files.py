"""The mock's WAVECAR and CHGCAR: small, in VASP's layout, and cut short when a run dies writing them.

WAVECAR is VASP's direct-access binary file: fixed-length records of ``RECL`` bytes, the first holding
``RECL``, the spin count and the precision tag, the second the k-point count, band count, cutoff and the
lattice, then per spin and k-point one header record and one record per band -- so a complete file is
exactly ``RECL * (2 + NSPIN * NKPTS * (NBANDS + 1))`` bytes. The mock's coefficients are zeros.

CHGCAR is the structure in POSCAR form, a blank line, the grid ``NGX NGY NGZ`` and ``NGX*NGY*NGZ``
values five to a line (a second block follows for a spin-polarized run).
"""

from __future__ import annotations

import struct
from pathlib import Path

from httk.workflow.vasp._structure import Structure, format_poscar

RECORD_LENGTH = 256
PRECISION_TAG = 53300.0  # VASP 6, complex double precision coefficients
GRID = (8, 8, 8)


def wavecar_bytes(structure: Structure, nspin: int, nkpts: int, nbands: int, encut: float) -> bytes:
    """A complete WAVECAR of the given dimensions."""
    first = struct.pack("<3d", float(RECORD_LENGTH), float(nspin), PRECISION_TAG)
    lattice = [x for row in structure.lattice for x in row]
    second = struct.pack("<12d", float(nkpts), float(nbands), encut, *lattice)
    records = 2 + nspin * nkpts * (nbands + 1)
    body = first.ljust(RECORD_LENGTH, b"\0") + second.ljust(RECORD_LENGTH, b"\0")
    return body + b"\0" * (RECORD_LENGTH * (records - 2))


def chgcar_text(structure: Structure, nspin: int, electrons: float) -> str:
    """A complete CHGCAR: a uniform density holding ``electrons`` electrons (times the volume, as VASP)."""
    count = GRID[0] * GRID[1] * GRID[2]
    value = electrons  # VASP stores rho * V; a uniform density is NELECT everywhere
    block = f"\n{GRID[0]:5d}{GRID[1]:5d}{GRID[2]:5d}\n"
    rows = []
    for start in range(0, count, 5):
        rows.append("".join(f" {value:17.11E}" for _ in range(min(5, count - start))))
    block += "\n".join(rows) + "\n"
    text = format_poscar(structure) + block
    if nspin == 2:
        text += block.replace(f"{value:17.11E}", f"{0.0:17.11E}")
    return text


def write_truncated(path: Path, data: bytes, fraction: float) -> None:
    """Write only the first ``fraction`` of ``data``: the file a process killed while writing leaves."""
    path.write_bytes(data[: max(1, int(len(data) * fraction))])
