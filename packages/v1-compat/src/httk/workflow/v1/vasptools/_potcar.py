"""VASP_PREPARE_POTCAR: the POTCAR of a POSCAR's species, chosen from a library the way v1 chose.

v1 took, for each species on the POSCAR's sixth line, the first directory ``<element><suffix>`` of
``$VASP_PSEUDOLIB`` that exists, trying the suffixes ``_3 _2 _d _pv _sv "" _h _s`` in that order (Ru,
and in v1's last version K and Rb, try ``_sv`` where the others try ``_pv``), and concatenated their
POTCARs. The choice is v1's; reading and checking each dataset (one dataset of that element per file,
compressed or not) is the VASP package's :func:`assemble_potcar`. A ``POTCAR.Z`` (old libraries ship
them; the VASP package reads ``.gz`` and ``.bz2``) is decompressed with ``gzip -dc`` and checked with
its :func:`parse_potcar`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from ._library import VaspPackageError, vasp, write_text

SUFFIXES = ("_3", "_2", "_d", "_pv", "_sv", "", "_h", "_s")
SV_FIRST = frozenset({"Ru", "K", "Rb"})
FILES = ("POTCAR", "POTCAR.gz", "POTCAR.bz2", "POTCAR.Z")


def choice_of(library: Path, element: str) -> str:
    """The library directory v1 takes for ``element``; :class:`VaspPackageError` when there is none."""
    suffixes = [("_sv" if s == "_pv" else s) for s in SUFFIXES] if element in SV_FIRST else list(SUFFIXES)
    for suffix in dict.fromkeys(suffixes):
        folder = library / f"{element}{suffix}"
        if any((folder / name).is_file() for name in FILES):
            return folder.name
    tried = ", ".join(f"{element}{s}" for s in dict.fromkeys(suffixes))
    raise VaspPackageError(f"the POTCAR library {library} has no POTCAR for {element} (tried {tried})")


def prepare_potcar(library: Path, poscar: Path, output: Path) -> list[str]:
    """Write the POTCAR of POSCAR's species to OUTPUT; the library directories used, in order."""
    module = vasp()
    if not library.is_dir():
        raise VaspPackageError(f"VASP_PSEUDOLIB ({library}) is not a directory of POTCARs")
    structure = module.parse_poscar(poscar.read_text(encoding="ascii", errors="replace"), path=str(poscar))
    parts: list[str] = []
    choices: list[str] = []
    for species in structure.species:
        element = species.split("_", 1)[0].split("/", 1)[0]  # a species line may say Fe_pv or Fe/abc
        choice = choice_of(library, element)
        folder = library / choice
        if any((folder / name).is_file() for name in FILES[:3]):
            text, _ = module.assemble_potcar(library, [element], {element: choice})
        else:
            text = _read_z(module, folder / "POTCAR.Z", element)
        parts.append(text)
        choices.append(choice)
    write_text(output, "".join(parts))
    return choices


def _read_z(module: Any, path: Path, element: str) -> str:
    """A ``compress``-ed POTCAR's text, checked to hold one dataset of ``element``."""
    done = subprocess.run(["gzip", "-dc", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        raise VaspPackageError(
            f"{path}: cannot be decompressed: {done.stderr.decode(errors='replace').strip()}"
        )
    text = done.stdout.decode("ascii", errors="replace")
    datasets = module.parse_potcar(text, path=str(path))
    if len(datasets) != 1 or datasets[0].element != element:
        raise VaspPackageError(f"{path}: must hold exactly one dataset for {element}")
    return text if text.endswith("\n") else text + "\n"
