"""VASP_INPUTS_FIX_ERROR and VASP_INPUTS_ADJUST: the next rung of the VASP package's ladder, kept as v1 did.

v1 called these inside a transaction (the current directory ``ht.tmp.atomic.<N>`` in the run directory),
read the last run's ``../ht.controlled.msgs``, and wrote ``ht.remedy.<problem>`` files into the
transaction -- line 1 the rung reached, then the remedy's keywords -- which the commit published and
which ``VASP_PREPARE_INCAR`` and ``VASP_PREPARE_KPOINTS`` applied every time a step rebuilt its inputs
from the template's INCAR. The helpers keep that shape and take the rest from the VASP package: the
problem is the first catalog problem of the run, the rung is the next one of that problem's ladder
that applies (:func:`next_remedy`, each rung used at most its budget of times), and the remedy is the
package's :data:`REMEDIES` entry, judged on the run's INCAR, POSCAR, KPOINTS and CONTCAR.

What a remedy changes is written so that it lasts as v1's did:

- INCAR tags become ``TAG=VALUE`` lines (``-TAG`` to remove one) in ``ht.remedy.<problem>``, which
  ``VASP_PREPARE_INCAR`` applies after the template's INCAR is copied again, with the remedies of the
  problem's earlier rungs before them; the remedied INCAR itself is put into the transaction too;
- k-point changes become v1's keywords (``GAMMA_KPTS``, ``BUMP_KPTS``; ``MONKHORST_KPTS`` for the
  other style) for ``VASP_PREPARE_KPOINTS``, and the remedied KPOINTS goes into the transaction;
- a new POSCAR (a relaxation continued from its CONTCAR, atoms displaced) goes into the transaction;
  a template that rebuilds its POSCAR every step replaces it, as v1's templates did with v1's;
- files the remedy deletes (WAVECAR, CHGCAR) are deleted by the commit (renamed to ht.tmp.atomic.*);
- ``expand_cell`` is v1's return code 2 ("the cell is too small"), answered by templates with their
  own cell scaling (``fix_too_close``): the rung is counted, nothing else is written.

Called outside a transaction the helpers write into the current directory directly. Line 1 of an
``ht.remedy.<problem>`` file they write is ``<rung> <uses> <remedy>`` (a v1 reader takes its first
field, the rung); a v1 file of an imported task keeps its keyword lines, which still apply.

Return codes: VASP_INPUTS_FIX_ERROR 0 (a remedy was applied: run the step again), 2 (expand the
cell), 3 (give up: no known problem, its ladder is spent, or ``vasp.max_remedies`` (10) remedies were
applied); VASP_INPUTS_ADJUST 0 (a remedy was applied) or 1 (nothing to adjust).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from ._library import number_setting, problems_in, read_messages, vasp, write_text

APPLIED, EXPAND, GIVE_UP, NOTHING = 0, 2, 3, 1
REMEDY_PREFIX = "ht.remedy."
ATOMIC_PREFIX = "ht.tmp.atomic."
EXPAND_CELL = "expand_cell"
_STYLE_KEYWORDS = {"Gamma": "GAMMA_KPTS", "Monkhorst-Pack": "MONKHORST_KPTS"}


class Ladder(NamedTuple):
    """What an ``ht.remedy.<problem>`` file says: the rung reached, its uses, the effect lines."""

    rung: int
    uses: int
    effects: list[str]


def remedy(directory: Path, *, fix: bool) -> int:
    """FIX_ERROR (``fix``) or ADJUST in DIRECTORY (a transaction, or the run directory itself)."""
    base = directory.parent if directory.name.startswith(ATOMIC_PREFIX) else directory
    module = vasp()
    problems = problems_in(read_messages(base), module.CATALOG)
    if not problems:
        return _nothing("the last run shows no problem of the VASP package's catalog", fix)
    used = sum(ladder.uses for ladder in _all_ladders(base))
    limit = int(number_setting("vasp.max_remedies", 10))
    if used >= limit:
        return _nothing(f"{problems[0]}: all {limit} remedies of vasp.max_remedies were applied", fix)
    return _climb(module, problems[0], _calculation(module, base, seed=used + 1), directory, fix=fix)


def _climb(module: Any, problem: str, calculation: Any, directory: Path, *, fix: bool) -> int:
    """Apply the next rung of PROBLEM's ladder for CALCULATION and write its ht.remedy file into DIRECTORY."""
    row = next(r for r in module.CATALOG if r.name == problem)
    ladder = _read_ladder(calculation.workdir / f"{REMEDY_PREFIX}{problem}")
    chosen = module.next_remedy(row, {problem: {"rung": ladder.rung, "uses": ladder.uses}}, calculation)
    if chosen is None:
        return _nothing(f"{problem} persists: every remedy of its ladder was tried ({row.meaning})", fix)
    rung, name, change = chosen
    if name == EXPAND_CELL and not fix:
        return _nothing(f"{problem}: the next remedy expands the cell, which only FIX_ERROR asks for", fix)
    effects = ladder.effects
    if name != EXPAND_CELL:
        effects = _merge(effects, _stage_change(module, calculation, change, directory))
    uses = ladder.uses + 1 if rung == ladder.rung else 1
    lines = [f"{rung} {uses} {name}", *effects]
    write_text(directory / f"{REMEDY_PREFIX}{problem}", "".join(f"{line}\n" for line in lines))
    where = f"rung {rung + 1} of {len(row.ladder)}"
    print(f"{_helper(fix)}: {problem}: {name} ({where}): {change.description}", flush=True)
    return EXPAND if name == EXPAND_CELL else APPLIED


def _helper(fix: bool) -> str:
    return "VASP_INPUTS_FIX_ERROR" if fix else "VASP_INPUTS_ADJUST"


def _nothing(message: str, fix: bool) -> int:
    print(f"{_helper(fix)}: {message}", flush=True)
    return GIVE_UP if fix else NOTHING


def _read_ladder(path: Path) -> Ladder:
    """The ladder position and effects an ``ht.remedy.<problem>`` file holds (none when it is missing).

    A file v1 wrote (line 1 a lone rung number of v1's own ladder) contributes its keywords only: its
    rung counts on a different ladder.
    """
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return Ladder(0, 0, [])
    first = lines[0].split() if lines else []
    effects = [line.strip() for line in lines[1:] if line.strip()]
    if len(first) == 3 and first[0].isdigit() and first[1].isdigit():
        return Ladder(int(first[0]), int(first[1]), effects)
    return Ladder(0, 0, effects)


def _all_ladders(base: Path) -> list[Ladder]:
    return [_read_ladder(path) for path in sorted(base.glob(f"{REMEDY_PREFIX}*")) if path.is_file()]


def _calculation(module: Any, base: Path, *, seed: int) -> Any:
    """What a remedy looks at: the run's INCAR, POSCAR, KPOINTS, its CONTCAR when usable, its steps."""
    incar = module.Incar.parse((base / "INCAR").read_text(encoding="utf-8"), path=str(base / "INCAR"))
    poscar = module.parse_poscar((base / "POSCAR").read_text(encoding="ascii", errors="replace"))
    try:
        kpoints = module.parse_kpoints((base / "KPOINTS").read_text(encoding="ascii", errors="replace"))
    except FileNotFoundError:
        kpoints = module.Kpoints(style=None, text="")  # no mesh: the k-point remedies pass over
    steps = module.read_oszicar(base / "OSZICAR") if (base / "OSZICAR").is_file() else []
    outcar = module.read_outcar(base / "OUTCAR") if (base / "OUTCAR").is_file() else None
    return module.Calculation(
        workdir=base,
        incar=incar,
        structure=poscar,
        kpoints=kpoints,
        contcar=module.usable_contcar(base, poscar),
        ionic_steps=len(steps),
        nbands=outcar.parameter("nbands") if outcar is not None else None,
        seed=seed,
    )


def _stage_change(module: Any, calculation: Any, change: Any, directory: Path) -> list[str]:
    """Write CHANGE's files into DIRECTORY (deletions as renames the commit carries out); its effect lines."""
    effects: list[str] = []
    if change.incar or change.unset:
        incar = calculation.incar.copy()
        for tag in change.unset:
            incar.pop(tag, None)
            effects.append(f"-{tag.upper()}")
        for tag, value in change.incar.items():
            incar[tag] = value
            effects.append(f"{tag.upper()}={incar[tag]}")
        write_text(directory / "INCAR", incar.format())
    if change.kpoints is not None:
        old, new = calculation.kpoints, change.kpoints
        if new.style != old.style:
            effects.append(_STYLE_KEYWORDS[new.style])
        if tuple(new.mesh) != tuple(old.mesh):
            effects.append("BUMP_KPTS")
        write_text(directory / "KPOINTS", new.format())
    if change.poscar is not None:
        write_text(directory / "POSCAR", module.format_poscar(change.poscar))
    base = calculation.workdir
    for name in change.delete:
        if not (base / name).exists():
            continue
        if directory == base:
            (base / name).unlink()
        elif not (directory / f"ht.atommv.{name}").exists():
            write_text(directory / f"ht.atommv.{name}", f"{ATOMIC_PREFIX}removed.{name}\n")
    return effects


def _merge(effects: list[str], new: list[str]) -> list[str]:
    """EFFECTS with NEW after them, an earlier line about a tag NEW sets again left out."""
    tags = {line.lstrip("-").split("=", 1)[0] for line in new if "=" in line or line.startswith("-")}
    kept = [line for line in effects if line.lstrip("-").split("=", 1)[0] not in tags]
    return kept + new
