"""vasptools.sh's file helpers (no VASP package needed): INCAR tags, k-points, POSCAR edits, reading
VASP's outputs, and VASP_PREPARE_INCAR with the remedies of ht.remedy.* files, v1's and ours."""

from __future__ import annotations

from pathlib import Path

from tests.v1.vaspkit import SILICON, helpers

ORTHORHOMBIC = "box\n1.0\n4 0 0\n0 5 0\n0 0 10\nSi\n1\nDirect\n0 0 0\n"
FEO_POTCAR = " PAW Fe\n   POMASS =   55.847; ZVAL   =    8.000    mass\n End of Dataset\n" + (
    " PAW O\n   POMASS =   16.000; ZVAL   =    6.000    mass\n End of Dataset\n"
)


def run(cwd: Path, script: str, **env: str) -> str:
    done = helpers(cwd, script, **env)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_incar_tags_are_read_set_and_replaced_keeping_other_statements(tmp_path: Path) -> None:
    (tmp_path / "INCAR").write_text("ISMEAR = 0 ; SIGMA = 0.05  ! smearing\nlreal = Auto\n# a comment\n")
    assert run(tmp_path, "VASP_GET_TAG sigma; VASP_GET_TAG LREAL") == "0.05\nAuto\n"
    run(tmp_path, "VASP_SET_TAG SIGMA 0.1; VASP_SET_TAG lreal .FALSE.")
    assert (
        tmp_path / "INCAR"
    ).read_text() == "ISMEAR = 0 ! smearing\n# a comment\nSIGMA = 0.1\nLREAL = .FALSE.\n"
    assert helpers(tmp_path, "VASP_GET_TAG NSW").returncode == 1


def test_kpoints_follow_the_reciprocal_lengths_and_the_remedies(tmp_path: Path) -> None:
    (tmp_path / "POSCAR").write_text(ORTHORHOMBIC)
    assert run(tmp_path, "VASP_KPOINTSLINE 20") == "6 5 3\n"  # ceil(20 |b| + 0.5), at least 3
    (tmp_path / "POSCAR").write_text(ORTHORHOMBIC.replace("1.0", "-200", 1))  # a volume as the scale
    assert run(tmp_path, "VASP_KPOINTSLINE 20") == "6 5 3\n"
    (tmp_path / "POSCAR").write_text(SILICON)
    assert run(tmp_path, "VASP_KPOINTSLINE 20; VASP_KPOINTSLINE 10") == "7 7 7\n4 4 4\n"
    (tmp_path / "ht.remedy.tet").write_text("0 1 gamma_centred_mesh\nGAMMA_KPTS\nBUMP_KPTS\n")
    (tmp_path / "ht.remedy.kptsclass").write_text("3\nEQUAL_KPTS\n")  # one v1 wrote
    run(tmp_path, "VASP_PREPARE_KPOINTS 20")
    assert (tmp_path / "KPOINTS").read_text().splitlines()[1:] == ["0", "Gamma", "8 8 8", "0 0 0"]


def test_magmom_and_nbands_come_from_the_poscar_potcar_and_incar(tmp_path: Path) -> None:
    (tmp_path / "POSCAR").write_text(
        "FeO [MAGMOM=4 -4]\n4.3\n0 .5 .5\n.5 0 .5\n.5 .5 0\nFe O\n1 1\nD\n0 0 0\n.5 .5 .5\n"
    )
    (tmp_path / "POTCAR").write_text(FEO_POTCAR)
    assert run(tmp_path, "VASP_MAGMOMLINE") == "4 -4\n"
    (tmp_path / "POSCAR").write_text((tmp_path / "POSCAR").read_text().replace(" [MAGMOM=4 -4]", ""))
    assert run(tmp_path, "VASP_MAGMOMLINE") == "1*5 1*5\n"
    (tmp_path / "INCAR").write_text("ISPIN = 1\n")
    assert run(tmp_path, "VASP_NBANDSLINE") == "10\n"  # max(14/2 + 2/2, 0.6 * 14) = 8.4 -> 9 -> even
    (tmp_path / "INCAR").write_text("ISPIN = 2\nNPAR = 4\n")
    assert run(tmp_path, "VASP_NBANDSLINE") == "16\n"  # (14 + 10)/2 + 1 = 13 -> 14 -> a multiple of 4
    (tmp_path / "POTCAR").write_text(FEO_POTCAR.split(" PAW O", maxsplit=1)[0])  # one dataset for two species
    assert helpers(tmp_path, "VASP_NBANDSLINE").returncode == 1


def test_prepare_incar_completes_it_and_applies_every_remedy(tmp_path: Path) -> None:
    (tmp_path / "POSCAR").write_text(SILICON)
    (tmp_path / "POTCAR").write_text(" PAW Si\n   ZVAL   =    4.000\n End of Dataset\n" * 1)
    (tmp_path / "INCAR").write_text("NSW = 20\nICHARG = 1\nLREAL = Auto\nISYM = 2\n")
    (tmp_path / "CHGCAR").write_text("a charge density\n")
    (tmp_path / "ht.remedy.zpotrf").write_text("0 1 no_symmetry\nISYM=0\n-LREAL\n  RWIGS=1.1 0.9 \n")
    (tmp_path / "ht.remedy.elecrelax").write_text("1\nSOFTMIX\n")  # an imported task's, v1's keyword
    run(tmp_path, "VASP_PREPARE_INCAR", HT_NBR_NODES="4")
    tags = dict(line.split(" = ") for line in (tmp_path / "INCAR").read_text().splitlines())
    assert tags == {
        "NSW": "20",
        "EDIFF": "4e-06",  # max(1e-3 * 2 / 500, 1e-6)
        "EDIFFG": "0.002",
        "NPAR": "2",
        "MAGMOM": "2*5",
        "NBANDS": "6",  # max(8/2 + 2/2, 0.6 * 8) = 5 -> even, a multiple of NPAR
        "ICHARG": "2",  # SOFTMIX, and v1's rule: ICHARG=1 with a non-empty CHGCAR becomes 2
        "AMIX": "0.10",
        "BMIX": "0.01",
        "ISYM": "0",
        "RWIGS": "1.1 0.9",
    }


def test_prepare_incar_keeps_icharg_1_beside_an_empty_chgcar_and_tightens_ediff(tmp_path: Path) -> None:
    (tmp_path / "POSCAR").write_text(SILICON)
    (tmp_path / "INCAR").write_text("NSW = 1\nICHARG = 1\n")
    (tmp_path / "CHGCAR").write_text("")
    (tmp_path / "ht.remedy.zbrent").write_text("1\nEDIFF_SMALLER\n")
    run(tmp_path, "VASP_PREPARE_INCAR")
    text = (tmp_path / "INCAR").read_text()
    assert "ICHARG = 1\n" in text and "EDIFF = 6.06061e-06\n" in text and "EDIFFG = 0.0002\n" in text
    assert "NBANDS" not in text  # no POTCAR: VASP chooses


def test_poscar_edits(tmp_path: Path) -> None:
    left = SILICON.replace("0.0 0.5 0.5\n0.5 0.0 0.5", "0.5 0.0 0.5\n0.0 0.5 0.5")  # two rows swapped
    (tmp_path / "POSCAR").write_text(left)
    run(tmp_path, "VASP_CHECK_AND_FIX_POSCAR")
    rows = [[float(x) for x in line.split()] for line in (tmp_path / "POSCAR").read_text().splitlines()[2:5]]
    assert rows == [[-0.5, 0.0, -0.5], [0.0, -0.5, -0.5], [-0.5, -0.5, 0.0]]
    (tmp_path / "POSCAR").write_text(SILICON)
    run(tmp_path, "VASP_CHECK_AND_FIX_POSCAR")
    assert (tmp_path / "POSCAR").read_text() == SILICON  # right-handed: untouched
    run(tmp_path, "VASP_POSCAR_SCALE_VOLUME POSCAR 1.1; VASP_POSCAR_SCALE_VOLUME 2")
    assert (tmp_path / "POSCAR").read_text().splitlines()[1] == "12.32"
    (tmp_path / "CONTCAR").write_text(SILICON.replace("Si2 rattled", "relaxed by VASP"))
    (tmp_path / "ref").write_text(SILICON.replace("Si2 rattled", "Si2 [tag=1]"))
    run(tmp_path, "VASP_CONTCAR_TO_POSCAR CONTCAR ref out")
    assert (tmp_path / "out").read_text() == SILICON.replace("Si2 rattled", "Si2 [tag=1]")


def test_rattling_moves_every_coordinate_a_little_and_keeps_the_rest(tmp_path: Path) -> None:
    selective = SILICON.replace("Direct", "Selective dynamics\nDirect").replace("0.00\n", "0.00 T T F\n")
    (tmp_path / "POSCAR").write_text(selective)
    run(tmp_path, "VASP_RATTLE_POSCAR 0.001")
    before, after = selective.splitlines(), (tmp_path / "POSCAR").read_text().splitlines()
    assert len(after) == len(before) and after[:2] == before[:2] and after[5:9] == before[5:9]
    for old, new in zip(before[2:5] + before[9:], after[2:5] + after[9:], strict=True):
        pairs = list(zip(old.split()[:3], new.split()[:3], strict=True))
        assert all(abs(float(a) - float(b)) <= 0.001 + 1e-12 for a, b in pairs) and old != new
    assert after[9].split()[3:] == ["T", "T", "F"]


def test_vasp_outputs_are_read(tmp_path: Path) -> None:
    (tmp_path / "OSZICAR").write_text(
        "DAV:   1    -.1E+02\n   1 F= -.17729128E+02 E0= -.17721128E+02  d E =-.6E-03\n"
        "   2 F= -.17829128E+02 E0= -.17821128E+02  d E =-.6E-03\n"
    )
    (tmp_path / "vasprun.xml").write_text(
        '<i name="volume">     40.0 </i>\n<i name="volume">     39.5 </i>\n'
    )
    (tmp_path / "OUTCAR").write_text(
        " maximum number of plane-waves:    271\n  opt step  =  0.3150 (harmonic =  0.2986)\n"
        " maximum number of plane-waves:    280\n"
    )
    assert run(tmp_path, "VASP_GET_ENERGY; VASP_GET_VOLUME") == "-.17821128E+02\n39.5\n"
    assert run(tmp_path, "VASP_EXTRACT_NBR_PLANEWAVES; VASP_EXTRACT_POTIM") == "280\n0.3150\n"
    assert helpers(tmp_path, "VASP_GET_ENERGY missing").returncode == 1


def test_clean_outcar_drops_the_per_k_point_blocks(tmp_path: Path) -> None:
    (tmp_path / "OUTCAR").write_text(
        " E-fermi :   5.1\n\n k-point     1 :       0.0000    0.0000    0.0000\n"
        "  band No.  band energies     occupation\n      1      -5.6733      2.00000\n\n"
        " k-point     2 :       0.5000    0.0000    0.0000\n      1      -4.1000      2.00000\n\n"
        " free  energy   TOTEN  =       -17.72 eV\n"
    )
    run(tmp_path, "VASP_CLEAN_OUTCAR")
    assert (
        tmp_path / "OUTCAR.cleaned"
    ).read_text() == " E-fermi :   5.1\n\n free  energy   TOTEN  =       -17.72 eV\n"


def test_potcar_summary_holds_each_datasets_psctr_block(tmp_path: Path) -> None:
    block = " parameters from PSCTR are:\n   VRHFIN =Si: s2p2\n   TITEL  = PAW_PBE Si 05Jan2001\n"
    (tmp_path / "POTCAR").write_text(
        f"  PAW_PBE Si\n 4.0\n{block}   END of PSCTR-controll parameters\n data\n" * 2
    )
    run(tmp_path, "VASP_POTCAR_SUMMARY")
    assert (tmp_path / "POTCAR.summary").read_text() == f"{block}   END of PSCTR-controll parameters\n\n" * 2


def test_preclean_removes_outputs_and_keeps_inputs(tmp_path: Path) -> None:
    names = ["INCAR", "POSCAR", "KPOINTS", "POTCAR", "CONTCAR.last", "OUTCAR", "WAVECAR", "vasp.out", "CHG"]
    for name in names:
        (tmp_path / name).write_text("x\n")
    run(tmp_path, "VASP_PRECLEAN")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "CONTCAR.last",
        "INCAR",
        "KPOINTS",
        "POSCAR",
        "POTCAR",
    ]


def test_a_path_too_long_for_vasp_ends_the_transaction_as_broken(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120) / ("e" * 120)
    deep.mkdir(parents=True)
    done = helpers(deep, "HT_TASK_ATOMIC_SECTION_START; VASP_CHECK_PATH_LENGTH; echo unreachable")
    assert done.returncode == 4 and "longer than 240 characters" in done.stdout
    assert (deep / "ht.nextstep").read_text() == "ht_broken\n"
    assert helpers(tmp_path, "VASP_CHECK_PATH_LENGTH && echo fine").stdout == "fine\n"
