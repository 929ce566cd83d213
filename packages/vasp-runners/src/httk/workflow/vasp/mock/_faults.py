"""Faults the mock can be told to suffer, and what each one looks like in VASP's output.

A fault is asked for as ``NAME[@STEP][*RUNS]``: ``NAME`` one of :data:`FAULTS`, ``STEP`` the ionic step
at which it strikes (default 1), ``RUNS`` how many runs in the same directory it strikes (default: every
run). The mock counts the runs a fault struck in ``.httk-mock-vasp-faults.json`` in its working directory,
so ``zpotrf*1`` fails the first run and lets the next one (the remedied retry) succeed, while ``zpotrf``
fails every run until a ladder is exhausted. Several faults are separated by commas or spaces.

They come from, in this order: ``--fault`` options, the variable ``HTTK_MOCK_VASP_FAULTS``, and the file
named by ``HTTK_MOCK_VASP_FAULT_FILE`` (default ``MOCK_FAULTS`` in the working directory).

The messages are VASP's own wording as VASP 5 and 6 print them -- the mock is tested against the runner's
error catalog, so the catalog's signatures must be found in text the mock writes independently of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

COUNTER_FILE = ".httk-mock-vasp-faults.json"
FAULT_VARIABLE = "HTTK_MOCK_VASP_FAULTS"
FAULT_FILE_VARIABLE = "HTTK_MOCK_VASP_FAULT_FILE"
DEFAULT_FAULT_FILE = "MOCK_FAULTS"


@dataclass(frozen=True)
class Message:
    """How VASP reports one error: its text, where it appears, and whether VASP stops.

    ``boxed`` messages are printed inside VASP 6's error box (stdout and OUTCAR); others as VASP 5 prints
    them, plain lines on stdout. ``fatal`` ones end the run (``status`` is VASP's exit status then, which
    is 0 for a Fortran STOP); the others are warnings printed at every later electronic step while the
    run goes on.
    """

    text: str
    fatal: bool = True
    boxed: bool = False
    status: int = 1


MESSAGES: dict[str, Message] = {
    "tet": Message("Tetrahedron method fails (number of k-points < 4)\nNKPT=     1", boxed=True),
    "inv_rot_mat": Message(
        "VERY BAD NEWS! internal error in subroutine INVGRP:\n"
        "inverse of rotation matrix was not found (increase SYMPREC)       5",
        status=0,
    ),
    "brmix": Message("BRMIX: very serious problems\n the old and the new charge density differ", fatal=False),
    "subspacematrix": Message(
        "WARNING: Sub-Space-Matrix is not hermitian in DAV            4  -6.1402241629055174E-003",
        fatal=False,
    ),
    "edddav": Message("Error EDDDAV: Call to ZHEGV failed. Returncode =   7 2  16", boxed=True),
    "eddrmm": Message("WARNING in EDDRMM: call to ZHEGV failed, returncode =   6 3      23", fatal=False),
    "zpotrf": Message("LAPACK: Routine ZPOTRF failed!", boxed=True),
    "real_optlay": Message("REAL_OPTLAY: internal error (1)          24          23", status=0),
    "rspher": Message("ERROR RSPHER: running out of buffer            0           0           0", status=0),
    "zbrent": Message(
        "ZBRENT: fatal error in bracketing\n"
        "     please rerun with smaller EDIFF, or copy CONTCAR\n"
        "     to POSCAR and continue",
        status=0,
    ),
    "pricel": Message(
        "internal error in subroutine PRICEL :\n Sorry, number of cells and number of vectors did not agree.",
        status=0,
    ),
    "posmap": Message(
        "POSMAP internal error: symmetry equivalent atom not found,\nincrease SYMPREC", boxed=True
    ),
    "too_few_bands": Message("TOO FEW BANDS !!! Please increase NBANDS in INCAR.", boxed=True),
    "grad_not_orth": Message(
        "EDWAV: internal error, the gradient is not orthogonal      2      1 -4.140E-03"
    ),
    "fexcf": Message(
        "ERROR FEXCF: supplied exchange-correlation table\nis too small, maximal index :   4702", boxed=True
    ),
    "rot_matrix": Message("SGRCON: Found some non-integer element in rotation matrix", status=0),
    "tetirr": Message("Routine TETIRR needs special values", status=0),
    "incorrect_shift": Message("Could not get correct shifts", status=0),
    "dentet": Message(
        "WARNING: DENTET: can't reach specified precision\nNumber of Electrons is NELECT =  8.0", fatal=False
    ),
    "brions": Message("BRIONS problems: POTIM should be increased", status=0),
    "zheev": Message("ERROR EDDIAG: Call to routine ZHEEV failed!", boxed=True),
    "pssyevx": Message("ERROR in subspace rotation PSSYEVX: not enough eigenvalues found", boxed=True),
    "amin": Message(
        "One of the lattice vectors is very long (>50 A), but AMIN\nis rather large. This is highly "
        "inefficient; set AMIN = 0.01",
        fatal=False,
    ),
    "triple_product": Message(
        "ERROR: the triple product of the basis vectors\nis negative exchange two basis vectors", status=0
    ),
}
"""The errors VASP reports in its output, by the mock's fault name."""

BEHAVIOURS = {
    "nelm": "the electronic minimization of every ionic step from STEP on reaches NELM unconverged",
    "nsw": "the relaxation converges so slowly that NSW ionic steps are used up",
    "crash": "at ionic step STEP the process dies by SIGSEGV while writing CONTCAR, WAVECAR and CHGCAR",
    "hang": "at ionic step STEP the process stops writing and waits until it is killed (SIGTERM ends it)",
    "hang-hard": "like hang, but SIGTERM is ignored: only SIGKILL ends it",
    "walltime": "at ionic step STEP the batch system's time limit strikes: SIGTERM, VASP killed",
}
"""The faults that are not a message, and what each does."""

FAULTS = tuple(sorted((*MESSAGES, *BEHAVIOURS)))


@dataclass(frozen=True)
class Fault:
    """One requested fault."""

    name: str
    step: int = 1
    runs: int | None = None

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``NAME[@STEP][*RUNS]``; ``ValueError`` names what is wrong."""
        body, star, runs = text.partition("*")
        name, at, step = body.partition("@")
        if name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; the faults are: {', '.join(FAULTS)}")
        try:
            fault = cls(name, int(step) if at else 1, int(runs) if star else None)
        except ValueError:
            raise ValueError(f"fault {text!r} is not NAME[@STEP][*RUNS] with integers") from None
        if fault.step < 1 or (fault.runs is not None and fault.runs < 0):
            raise ValueError(f"fault {text!r}: STEP must be at least 1 and RUNS at least 0")
        return fault


def requested(options: Iterable[str], environ: Mapping[str, str], workdir: Path) -> list[Fault]:
    """Every fault asked for, from options, the variable and the fault file, in that order."""
    texts = list(options)
    texts.append(environ.get(FAULT_VARIABLE, ""))
    fault_file = Path(environ.get(FAULT_FILE_VARIABLE) or workdir / DEFAULT_FAULT_FILE)
    if fault_file.is_file():
        texts.append(fault_file.read_text(encoding="utf-8"))
    return [Fault.parse(word) for text in texts for word in text.replace(",", " ").split()]


def active(faults: list[Fault], workdir: Path) -> list[Fault]:
    """The faults that strike this run, counting it against each one's ``RUNS``."""
    if not faults:
        return []
    path = workdir / COUNTER_FILE
    try:
        counts: dict[str, int] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        counts = {}
    striking = []
    for fault in faults:
        key = f"{fault.name}@{fault.step}"
        if fault.runs is None or counts.get(key, 0) < fault.runs:
            counts[key] = counts.get(key, 0) + 1
            striking.append(fault)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(counts, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return striking
