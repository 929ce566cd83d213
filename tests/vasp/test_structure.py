"""POSCAR/CONTCAR reading and writing."""

from __future__ import annotations

import re

import pytest
from httk.workflow.vasp import VaspInputError, format_poscar, parse_poscar

from tests.vasp.vaspkit import IRON_OXIDE, SILICON

CARTESIAN = "cubic\n2.0\n1 0 0\n0 1 0\n0 0 1\nNa Cl\n1 1\nCartesian\n0 0 0\n1 1 1\n"


def test_a_vasp5_poscar_reads_into_species_counts_and_fractions() -> None:
    s = parse_poscar(SILICON)
    assert s.species == ("Si",) and s.counts == (2,) and s.natoms == 2
    assert s.lattice[0] == (0.0, 2.8, 2.8) and s.positions[1] == (0.25, 0.24, 0.26)
    assert s.volume == pytest.approx(5.6**3 / 4)
    assert parse_poscar(IRON_OXIDE).elements == ("Fe", "O")


def test_cartesian_positions_are_scaled_like_the_lattice() -> None:
    s = parse_poscar(CARTESIAN)
    assert s.lattice[0] == (2.0, 0.0, 0.0)
    assert s.positions[1] == pytest.approx((1.0, 1.0, 1.0))  # (1,1,1) x 2 Å in a 2 Å cell


def test_a_negative_scale_is_the_volume_and_three_scales_are_per_axis() -> None:
    by_volume = parse_poscar(CARTESIAN.replace("2.0\n", "-27.0\n", 1))
    assert by_volume.volume == pytest.approx(27.0)
    per_axis = parse_poscar(CARTESIAN.replace("2.0\n", "1 2 3\n", 1))
    assert per_axis.volume == pytest.approx(6.0)


def test_selective_dynamics_and_suffixed_species() -> None:
    text = "x\n1\n3 0 0\n0 3 0\n0 0 3\nFe_pv/abc1\n1\nSelective dynamics\nDirect\n0 0 0 T F T\n"
    s = parse_poscar(text)
    assert s.selective == ((True, False, True),) and s.elements == ("Fe",)
    assert parse_poscar(format_poscar(s)) == s


def test_writing_and_reading_back_is_the_same_structure() -> None:
    for text in (SILICON, IRON_OXIDE, CARTESIAN):
        s = parse_poscar(text)
        assert parse_poscar(format_poscar(s)) == s


def test_the_species_override_replaces_or_supplies_the_species_line() -> None:
    without = "\n".join(line for i, line in enumerate(SILICON.splitlines()) if i != 5) + "\n"
    assert parse_poscar(without, species=["Ge"]).species == ("Ge",)
    assert parse_poscar(SILICON, species=["Ge"]).species == ("Ge",)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "line 1 is missing"),
        ("x\n1\n0 0 0\n0 1 0\n0 0 1\nSi\n1\nDirect\n0 0 0\n", "span no volume"),
        ("x\nzero\n", "line 2: must hold a scale factor"),
        ("x\n1\n1 0 0\n0 1 0\n0 0 1\nSi\n1\n0 0 0\n", "line 8: must say Direct or Cartesian"),
        ("x\n1\n1 0 0\n0 1 0\n0 0 1\nSi O\n1\nDirect\n0 0 0\n", "names 2 species (Si O) but counts 1 types"),
        ("x\n1\n1 0 0\n0 1 0\n0 0 1\nSi\n2\nDirect\n0 0 0\n", "line 10 is missing"),
        ("x\n1\n1 0 0\n0 1 0\n0 0 1\n2\nDirect\n0 0 0\n0 0 0\n", "line 6: has no species line"),
        ("x\n1\n1 0 0\n0 1 0\n0 0 1\nSi\n1\nS\nDirect\n0 0 0\n", "line 10: must end in three T/F flags"),
    ],
)
def test_malformed_poscars_are_refused_naming_the_line(text: str, fragment: str) -> None:
    with pytest.raises(VaspInputError, match=re.escape(fragment)):
        parse_poscar(text)


def test_geometry_helpers() -> None:
    s = parse_poscar(SILICON)
    assert s.strained(1.1).volume == pytest.approx(s.volume * 1.331)
    moved = s.rattled(0.02, seed=3)
    assert moved == s.rattled(0.02, seed=3) and moved != s and moved.counts == s.counts
    b = parse_poscar(CARTESIAN).reciprocal_lengths()
    assert b == pytest.approx((0.5, 0.5, 0.5))
