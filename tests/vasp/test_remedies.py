"""Remedies, the ladder's climb with its budgets, backups and the undo of a half-applied remedy."""

from __future__ import annotations

from pathlib import Path

import pytest
from httk.workflow.vasp import REMEDIES, Calculation, Incar, Kpoints, apply_change, next_remedy, parse_poscar
from httk.workflow.vasp._catalog import Problem, Rung, problem
from httk.workflow.vasp._ladder import apply_with_record, back_up, climbed, digest, restore

from tests.vasp.vaspkit import SILICON


def calc(tmp_path: Path, incar: str = "IBRION = 2\nNSW = 40\n", **overrides: object) -> Calculation:
    structure = parse_poscar(SILICON)
    (tmp_path / "INCAR").write_text(incar)
    base = Calculation(
        workdir=tmp_path,
        incar=Incar.parse(incar),
        structure=structure,
        kpoints=Kpoints(style="Monkhorst-Pack", mesh=(4, 4, 4)),
        contcar=structure.strained(0.99),
        ionic_steps=3,
        nbands=12,
    )
    return base._replace(**overrides)  # type: ignore[arg-type]


def test_every_remedy_changes_something_or_declines(tmp_path: Path) -> None:
    c = calc(tmp_path)
    for name, remedy in REMEDIES.items():
        change = remedy(c)
        assert change is None or change.description, name
    assert REMEDIES["no_symmetry"](c).incar == {"ISYM": 0}  # type: ignore[union-attr]
    assert REMEDIES["halve_potim"](c).incar == {"POTIM": 0.25}  # type: ignore[union-attr]
    assert REMEDIES["more_bands"](c).incar == {"NBANDS": 13}  # type: ignore[union-attr]
    assert REMEDIES["gamma_centred_mesh"](c).kpoints.style == "Gamma"  # type: ignore[union-attr]
    assert REMEDIES["continue_from_contcar"](c).poscar == c.contcar  # type: ignore[union-attr]
    assert REMEDIES["expand_cell"](c).poscar.volume == pytest.approx(c.contcar.volume * 1.05**3)  # type: ignore[union-attr]


def test_a_remedy_that_would_change_nothing_declines(tmp_path: Path) -> None:
    c = calc(tmp_path, incar="ISYM = 0\nISMEAR = 0\nSIGMA = 0.05\nLREAL = .FALSE.\n")
    for name in (
        "no_symmetry",
        "gaussian_smearing",
        "lreal_false",
        "halve_potim",
        "quasi_newton",
        "continue_from_contcar",
    ):
        assert REMEDIES[name](c) is None, name  # the last three: not a relaxation
    assert REMEDIES["gamma_centred_mesh"](calc(tmp_path, kpoints=Kpoints(style=None, text="k\n1\n"))) is None
    assert REMEDIES["continue_from_contcar"](calc(tmp_path, contcar=None)) is None


def test_a_ladder_skips_what_does_not_apply_and_spends_each_budget(tmp_path: Path) -> None:
    row = Problem(
        "demo", None, "a demo", ("X",), (Rung("lreal_false"), Rung("no_symmetry", 2), Rung("algo_all"))
    )
    c = calc(tmp_path, incar="LREAL = .FALSE.\n")
    ladders: dict[str, object] = {}
    taken = []
    while (chosen := next_remedy(row, ladders, c)) is not None:
        rung, name, _ = chosen
        taken.append(name)
        ladders = climbed(ladders, "demo", rung)
    assert taken == ["no_symmetry", "no_symmetry", "algo_all"]
    assert ladders == {"demo": {"rung": 2, "uses": 1}}


def test_a_backup_comes_first_and_an_interrupted_remedy_is_undone(tmp_path: Path) -> None:
    c = calc(tmp_path)
    (tmp_path / "WAVECAR").write_bytes(b"w")
    change = REMEDIES["perturb_structure"](c)
    assert change is not None
    (tmp_path / "POSCAR").write_text(SILICON)
    record = back_up(tmp_path, 1, "zpotrf", change)
    assert (tmp_path / record["backup"] / "POSCAR").read_text() == SILICON
    done = apply_with_record(c, change, record)
    assert done["after"]["POSCAR"] != done["before"]["POSCAR"] and not (tmp_path / "WAVECAR").exists()
    assert (
        restore(tmp_path, record) == ["POSCAR"] and digest(tmp_path / "POSCAR") == record["before"]["POSCAR"]
    )
    assert restore(tmp_path, record) == []  # already as before


def test_apply_change_rewrites_only_what_the_change_names(tmp_path: Path) -> None:
    c = calc(tmp_path, incar="ISMEAR = 1\nNSW = 40\n")
    (tmp_path / "KPOINTS").write_text("untouched\n")
    change = REMEDIES["gaussian_smearing"](c)
    assert change is not None and change.files() == ["INCAR"]
    apply_change(c, change)
    assert Incar.parse((tmp_path / "INCAR").read_text()).typed() == {"ISMEAR": 0, "NSW": 40, "SIGMA": 0.05}
    assert (tmp_path / "KPOINTS").read_text() == "untouched\n"


def test_the_catalog_knows_its_rows() -> None:
    assert problem("zpotrf").ladder[0] == Rung("no_symmetry")
    with pytest.raises(KeyError, match="no problem 'x'"):
        problem("x")
