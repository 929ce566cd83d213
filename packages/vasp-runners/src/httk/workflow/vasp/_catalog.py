"""The error catalog: what VASP prints when a calculation goes wrong, and the ladder of remedies for it.

The catalog is a table, not a cascade of ``if``: each :class:`Problem` is a row with its signatures (the
text VASP prints and the files it appears in), the name custodian's ``VaspErrorHandler`` gives the same
error (for users who know that table), whether the runner stops VASP as soon as it sees the error
(VASP runs on with some of them, wasting the allocation), an ordered ladder of remedies each with its
own budget of uses, and the failure code the job fails with when the ladder is exhausted. The order of
the rows is their priority when one run shows several problems.

Four rows have no text of their own to match, or not only text: ``nelm`` (the last ionic step's
electronic minimization reached NELM), ``ionic`` (a relaxation used its NSW steps without reaching
EDIFFG), ``walltime`` (a time limit stopped the run: the batch system's or ``vasp.timeout``) and
``crash`` (the run ended without VASP's closing banner and without any other known error). Their
conditions are computed by :mod:`._detect` from the parsed outputs; ``Problem.derived`` names them.

The catalog and its ladders are documented as a table in packages/vasp-runners/README.md, and tests keep
that table and this one the same, check that every rung names a remedy of :mod:`._remedies` with a
budget of at least one, and that every row is triggered by a mock fault. (The catalog does not import
the remedies: a clean run reads the table and never climbs a ladder.)
"""

from __future__ import annotations

from ._record import NamedTuple

STDOUT = "stdout"
OUTCAR = "OUTCAR"
UNRECOVERABLE = "vasp.unrecoverable"
NONCONVERGENT = "vasp.nonconvergent"
INTERRUPTED = "vasp.interrupted"


class Rung(NamedTuple):
    """One remedy of a ladder and how many times it may be used."""

    remedy: str
    budget: int = 1


class Problem(NamedTuple):
    """One row of the catalog (see the module docstring)."""

    name: str
    custodian: str | None
    meaning: str
    signatures: tuple[str, ...]
    ladder: tuple[Rung, ...]
    where: tuple[str, ...] = (STDOUT,)
    stop_running: bool = False
    failure: str = UNRECOVERABLE
    derived: bool = False


def _ladder(*remedies: str | tuple[str, int]) -> tuple[Rung, ...]:
    return tuple(Rung(r) if isinstance(r, str) else Rung(*r) for r in remedies)


CATALOG: tuple[Problem, ...] = (
    Problem(
        "tet",
        "tet",
        "the tetrahedron method cannot be used with this k-point mesh",
        (
            "Tetrahedron method fails",
            "Fatal error detecting k-mesh",
            "Fatal error: unable to match k-point",
            "BZINTS",
        ),
        _ladder("gaussian_smearing", "gamma_centred_mesh", "denser_mesh"),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "inv_rot_mat",
        "inv_rot_mat",
        "INVGRP/INVROT: the inverse of a symmetry rotation was not found",
        ("inverse of rotation matrix was not found",),
        _ladder("tight_symprec", "no_symmetry"),
    ),
    Problem(
        "brmix",
        "brmix",
        "BRMIX: the charge-density mixing failed",
        ("BRMIX: very serious problems",),
        _ladder("continue_from_contcar", "kerker_mixing", "gamma_centred_mesh", "no_symmetry", "fresh_start"),
        stop_running=True,
    ),
    Problem(
        "subspacematrix",
        "subspacematrix",
        "the sub-space matrix of the Davidson step is not hermitian",
        ("WARNING: Sub-Space-Matrix is not hermitian in DAV",),
        _ladder("lreal_false", "accurate_precision", "algo_all"),
        stop_running=True,
    ),
    Problem(
        "edddav",
        "edddav",
        "EDDDAV/ZHEGV: the Davidson diagonalization failed",
        ("Error EDDDAV: Call to ZHEGV failed",),
        _ladder("algo_all", "algo_damped"),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "eddrmm",
        "eddrmm",
        "EDDRMM/ZHEGV: the RMM-DIIS diagonalization failed",
        ("WARNING in EDDRMM: call to ZHEGV failed",),
        _ladder("algo_normal", "halve_potim"),
        stop_running=True,
    ),
    Problem(
        "zpotrf",
        "zpotrf",
        "ZPOTRF: the Cholesky decomposition failed (often atoms too close)",
        ("LAPACK: Routine ZPOTRF failed",),
        _ladder("no_symmetry", "halve_potim", "perturb_structure", "expand_cell"),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "real_optlay",
        "real_optlay",
        "REAL_OPTLAY: real-space projection cannot be optimized",
        ("REAL_OPTLAY: internal error", "REAL_OPT: internal ERROR"),
        _ladder("lreal_false"),
    ),
    Problem(
        "rspher", "rspher", "RSPHER: real-space projection failed", ("ERROR RSPHER",), _ladder("lreal_false")
    ),
    Problem(
        "zbrent",
        "zbrent",
        "ZBRENT: the line search of the ionic step could not bracket a minimum",
        ("ZBRENT: fatal internal in", "ZBRENT: fatal error in bracketing"),
        _ladder("quasi_newton", "smaller_ediff", "continue_from_contcar"),
    ),
    Problem(
        "pricel",
        "pricel",
        "PRICEL: the primitive cell could not be found",
        ("internal error in subroutine PRICEL",),
        _ladder("tight_symprec", "no_symmetry"),
    ),
    Problem(
        "posmap",
        "posmap",
        "POSMAP: a symmetry-equivalent atom was not found",
        ("POSMAP",),
        _ladder("symprec_tenth", "symprec_hundredfold", "no_symmetry"),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "too_few_bands",
        "too_few_bands",
        "too few bands for the electrons",
        ("TOO FEW BANDS",),
        _ladder(("more_bands", 3)),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "grad_not_orth",
        "grad_not_orth",
        "EDWAV: the gradient is not orthogonal",
        ("EDWAV: internal error, the gradient is not orthogonal",),
        _ladder("algo_normal", "fresh_start"),
    ),
    Problem(
        "fexcf",
        None,
        "FEXCF: the exchange-correlation table is too small (the structure exploded)",
        ("ERROR FEXCF: supplied exchange-correlation table",),
        _ladder("halve_potim", "expand_cell"),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "rot_matrix",
        "rot_matrix",
        "SGRCON: a rotation matrix has non-integer elements",
        ("Found some non-integer element in rotation matrix", "SGRCON"),
        _ladder("gamma_centred_mesh", "no_symmetry"),
    ),
    Problem(
        "tetirr",
        "tetirr",
        "TETIRR: the tetrahedra need special k-points",
        ("Routine TETIRR needs special values",),
        _ladder("gamma_centred_mesh", "gaussian_smearing"),
    ),
    Problem(
        "incorrect_shift",
        "incorrect_shift",
        "the k-point mesh shift is not compatible with the symmetry",
        ("Could not get correct shifts",),
        _ladder("gamma_centred_mesh"),
    ),
    Problem(
        "dentet",
        "dentet",
        "DENTET: the tetrahedron density of states did not reach its precision",
        ("DENTET",),
        _ladder("gaussian_smearing", "denser_mesh"),
        stop_running=True,
    ),
    Problem(
        "brions",
        "brions",
        "BRIONS: the ionic step should be larger",
        ("BRIONS problems: POTIM should be increased",),
        _ladder(("larger_potim", 2)),
    ),
    Problem(
        "zheev",
        "zheev",
        "EDDIAG/ZHEEV: the diagonalization failed",
        ("ERROR EDDIAG: Call to routine ZHEEV failed",),
        _ladder("algo_exact"),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "pssyevx",
        "pssyevx",
        "PSSYEVX: the subspace rotation found too few eigenvalues",
        ("ERROR in subspace rotation PSSYEVX",),
        _ladder("algo_normal"),
        where=(STDOUT, OUTCAR),
    ),
    Problem(
        "amin",
        "amin",
        "a lattice vector longer than 50 Å with the default AMIN",
        ("One of the lattice vectors is very long (>50 A), but AMIN",),
        _ladder("small_amin"),
        stop_running=True,
    ),
    Problem(
        "triple_product",
        "triple_product",
        "the lattice vectors are left-handed",
        ("ERROR: the triple product of the basis vectors",),
        _ladder("swap_axes"),
    ),
    Problem(
        "walltime",
        "WalltimeHandler",
        "a time limit stopped the run (the batch system's, or vasp.timeout)",
        ("DUE TO TIME LIMIT", "process killed (SIGTERM)"),
        _ladder(("continue_from_contcar", 5), "rerun"),
        derived=True,
        failure=INTERRUPTED,
    ),
    Problem(
        "nelm",
        "UnconvergedErrorHandler (electronic)",
        "the electronic minimization of the last ionic step reached NELM",
        (),
        _ladder("more_electronic_steps", "soft_mixing", "algo_all", "algo_damped"),
        derived=True,
        failure=NONCONVERGENT,
    ),
    Problem(
        "ionic",
        "UnconvergedErrorHandler (ionic)",
        "the relaxation used its NSW ionic steps without reaching EDIFFG",
        (),
        _ladder(("continue_from_contcar", 3), "quasi_newton"),
        derived=True,
        failure=NONCONVERGENT,
    ),
    Problem(
        "crash",
        None,
        "VASP ended without its closing banner and without a known error",
        ("segmentation fault occurred", "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"),
        _ladder(("continue_from_contcar", 2), "fresh_start"),
        derived=True,
    ),
)
"""Every row, in priority order."""

BY_NAME = {problem.name: problem for problem in CATALOG}


def problem(name: str) -> Problem:
    """The catalog row ``name`` (``KeyError`` names the known ones)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no problem {name!r} in the catalog; known: {', '.join(BY_NAME)}") from None
