"""INCAR, KPOINTS and POTCAR files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from httk.workflow.vasp import (
    Incar,
    Kpoints,
    PseudoLibraryError,
    VaspInputError,
    assemble_potcar,
    mesh_for_density,
    parse_kpoints,
    parse_poscar,
    parse_potcar,
)
from httk.workflow.vasp._potcar import check_potcar_species, digests, parse_choices

from tests.vasp.vaspkit import SILICON, pseudo_library


def test_incar_statements_comments_continuations_and_case() -> None:
    incar = Incar.parse(
        'system = "a; b" ! c\nISMEAR=0;SIGMA = 0.05 # x\nMAGMOM = 2*5.0 \\\n 1*0.6\nlwave=.F.\n'
    )
    assert dict(incar) == {
        "SYSTEM": "a; b",
        "ISMEAR": "0",
        "SIGMA": "0.05",
        "MAGMOM": "2*5.0 1*0.6",
        "LWAVE": ".F.",
    }
    assert (
        incar.get_int("ISMEAR") == 0 and incar.get_float("SIGMA") == 0.05 and incar.get_bool("LWAVE") is False
    )
    assert incar.get_float("EDIFF", 1e-4) == 1e-4 and "ismear" in incar
    assert Incar.parse("EDIFF = 1D-5\n").get_float("EDIFF") == 1e-5


def test_incar_writes_one_canonical_line_per_tag() -> None:
    incar = Incar({"ISYM": 0, "LREAL": False, "ENCUT": 520.0, "ALGO": "All"})
    assert incar.format() == "ISYM = 0\nLREAL = .FALSE.\nENCUT = 520.0\nALGO = All\n"
    assert Incar.parse(incar.format()).typed() == {"ISYM": 0, "LREAL": False, "ENCUT": 520.0, "ALGO": "All"}


@pytest.mark.parametrize(
    ("text", "fragment"), [("ISMEAR 0\n", "is not TAG = value"), ("= 3\n", "is not TAG")]
)
def test_malformed_incar_statements_are_refused_with_their_line(text: str, fragment: str) -> None:
    with pytest.raises(VaspInputError, match=fragment):
        Incar.parse(text)
    with pytest.raises(VaspInputError, match="not a number"):
        Incar.parse("NSW = lots\n").get_int("NSW")


def test_automatic_meshes_and_verbatim_kpoints() -> None:
    gamma = parse_kpoints("k\n0\nG\n4 4 2\n0.5 0 0\n")
    assert (gamma.style, gamma.mesh, gamma.shift) == ("Gamma", (4, 4, 2), (0.5, 0.0, 0.0))
    assert parse_kpoints("k\n0\nmonkhorst\n3 3 3\n").style == "Monkhorst-Pack"
    explicit = parse_kpoints("k\n2\nReciprocal\n0 0 0 1\n.5 .5 .5 1\n")
    assert not explicit.is_mesh and explicit.format().startswith("k\n2\nReciprocal")
    assert gamma.bumped().mesh == (5, 5, 3) and gamma.equalized().mesh == (4, 4, 4)
    assert parse_kpoints(Kpoints(style="Monkhorst-Pack", mesh=(2, 3, 4)).format()).mesh == (2, 3, 4)
    with pytest.raises(VaspInputError, match="three positive subdivisions"):
        parse_kpoints("k\n0\nGamma\n0 1 1\n")


def test_a_density_per_reciprocal_atom_gives_a_mesh_in_proportion() -> None:
    silicon = parse_poscar(SILICON)
    mesh = mesh_for_density(silicon, 1000).mesh
    assert mesh[0] == mesh[1] == mesh[2] and mesh[0] ** 3 * silicon.natoms >= 1000
    slab = parse_poscar("x\n1\n3 0 0\n0 3 0\n0 0 30\nSi\n1\nDirect\n0 0 0\n")
    a, b, c = mesh_for_density(slab, 1000).mesh
    assert a == b and c < a and a * b * c * slab.natoms >= 1000
    with pytest.raises(ValueError, match="positive"):
        mesh_for_density(silicon, 0)


def test_potcar_datasets_and_assembly_with_provenance(tmp_path: Path) -> None:
    library = pseudo_library(tmp_path / "lib", "Fe", "Fe_pv", "O")
    (library / "O" / "POTCAR.gz").write_bytes(gzip.compress((library / "O" / "POTCAR").read_bytes()))
    (library / "O" / "POTCAR").unlink()
    text, used = assemble_potcar(library, ["Fe", "O"], {"Fe": "Fe_pv"})
    assert [d.element for d in parse_potcar(text)] == ["Fe", "O"]
    assert [(d.choice, d.file, d.titel) for d in used] == [
        ("Fe_pv", "Fe_pv/POTCAR", "PAW_PBE Fe_pv mock"),
        ("O", "O/POTCAR.gz", "PAW_PBE O mock"),
    ]
    assert all(d.sha256 is not None and len(d.sha256) == 64 and d.zval > 0 and d.enmax == 300.0 for d in used)


def test_potcar_digests_taken_later_are_those_of_the_library_datasets(tmp_path: Path) -> None:
    library = pseudo_library(tmp_path / "lib", "Fe", "O")
    fe = library / "Fe" / "POTCAR"
    fe.write_text("\n" + fe.read_text() + "\n\n")  # blank lines around a dataset belong to none
    text, used = assemble_potcar(library, ["Fe", "O"], digest=False)
    assert [d.sha256 for d in used] == [None, None]
    _, digested = assemble_potcar(library, ["Fe", "O"])
    assert (
        digests(text)
        == [d.sha256 for d in digested]
        == [parse_potcar((library / name / "POTCAR").read_text())[0].sha256 for name in ("Fe", "O")]
    )


def test_missing_library_entries_list_what_exists(tmp_path: Path) -> None:
    library = pseudo_library(tmp_path / "lib", "Fe_pv", "Fe_sv")
    with pytest.raises(PseudoLibraryError, match="has no Fe/POTCAR; it has Fe_pv, Fe_sv"):
        assemble_potcar(library, ["Fe"])
    with pytest.raises(PseudoLibraryError, match="nothing for Si"):
        assemble_potcar(library, ["Si"])
    with pytest.raises(PseudoLibraryError, match="is not a directory"):
        assemble_potcar(tmp_path / "none", ["Fe"])


def test_potcar_checks() -> None:
    one = (
        "  PAW_PBE Si mock\n 4.0\n   TITEL  = PAW_PBE Si mock\n   POMASS = 28; ZVAL = 4.0\n End of Dataset\n"
    )
    check_potcar_species(parse_potcar(one), ["Si"], path="POTCAR")
    with pytest.raises(VaspInputError, match="holds datasets for Si, but the structure's species are Si O"):
        check_potcar_species(parse_potcar(one), ["Si", "O"], path="POTCAR")
    with pytest.raises(VaspInputError, match="without its closing"):
        parse_potcar(one.replace(" End of Dataset\n", ""))
    with pytest.raises(VaspInputError, match="without its ZVAL"):
        parse_potcar(one.replace("ZVAL = 4.0", ""))
    assert parse_choices("Fe=Fe_pv O=O_s,Ti=Ti_sv") == {"Fe": "Fe_pv", "O": "O_s", "Ti": "Ti_sv"}
    with pytest.raises(ValueError, match="is not ELEMENT=CHOICE"):
        parse_choices("Fe=../x")
