"""The streaming parsers on files in VASP 5's and 6's layout, files cut short, files bigger than a chunk."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from httk.workflow.vasp import VaspOutputError, parse_poscar, read_oszicar, read_outcar, read_vasprun

from tests.vasp.vaspkit import calculation, run_mock

OUTCAR5 = """ vasp.5.4.4.18Apr17-6-g9f103f2a35 (build Apr 17 2017 09:37:18) complex
 POTCAR:    PAW_PBE Si 05Jan2001
   TITEL  = PAW_PBE Si 05Jan2001
   number of dos      NEDOS =    301   number of ions     NIONS =      2
   k-points           NKPTS =     10   k-points in BZ     NKDIM =     10   number of bands    NBANDS=      8
   NELM   =     60;   NELMIN=  2; NELMDL= -5     # of ELM steps
   NSW    =     40    number of steps for IOM
   IBRION =      2    ionic relax: 0-MD 1-quasi-New 2-CG
   ISIF   =      3    stress and relaxation
   EDIFF  = 0.1E-05   stopping-criterion for ELM
   EDIFFG = -.1E-02   stopping-criterion for IOM
   NELECT =       8.0000    total number of electrons
--------------------------------------- Iteration      1(   1)  ---------------------------------------
  free energy    TOTEN  =         5.12345678 eV
  in kB      -5.00000    -5.00000    -5.00000     0.00000     0.00000     0.00000
 POSITION                                       TOTAL-FORCE (eV/Angst)
 -----------------------------------------------------------------------------------
      0.00000      0.00000      0.00000         0.100000      0.000000      0.000000
      1.35000      1.35000      1.35000        -0.100000      0.000000      0.000000
 -----------------------------------------------------------------------------------
  FREE ENERGIE OF THE ION-ELECTRON SYSTEM (eV)
  ---------------------------------------------------
  free  energy   TOTEN  =       -10.80000000 eV

  energy  without entropy=      -10.81000000  energy(sigma->0) =      -10.80500000
--------------------------------------- Iteration      2(   1)  ---------------------------------------
  in kB      -1.00000    -2.00000    -3.00000     0.10000     0.20000     0.30000
      direct lattice vectors                 reciprocal lattice vectors
     0.000000000  2.700000000  2.700000000     -0.185185185  0.185185185  0.185185185
     2.700000000  0.000000000  2.700000000      0.185185185 -0.185185185  0.185185185
     2.700000000  2.700000000  0.000000000      0.185185185  0.185185185 -0.185185185
 POSITION                                       TOTAL-FORCE (eV/Angst)
 -----------------------------------------------------------------------------------
      0.00000      0.00000      0.00000         0.010000      0.000000      0.000000
      1.35000      1.35000      1.35000        -0.010000      0.000000      0.000000
 -----------------------------------------------------------------------------------
  FREE ENERGIE OF THE ION-ELECTRON SYSTEM (eV)
  ---------------------------------------------------
  free  energy   TOTEN  =       -10.84000000 eV

  energy  without entropy=      -10.85000000  energy(sigma->0) =      -10.84500000
 reached required accuracy - stopping structural energy minimisation
 General timing and accounting informations for this job:
"""


def test_a_vasp5_outcar(tmp_path: Path) -> None:
    path = tmp_path / "OUTCAR"
    path.write_text(OUTCAR5)
    outcar = read_outcar(path)
    assert outcar.version == "5.4.4.18Apr17-6-g9f103f2a35" and outcar.titels == ["PAW_PBE Si 05Jan2001"]
    assert (outcar.parameter("nions"), outcar.parameter("nbands"), outcar.parameter("nelm")) == (2, 8, 60)
    assert [outcar.parameter(name) for name in ("nsw", "ibrion", "isif")] == [40, 2, 3]
    assert [outcar.parameters[name] for name in ("ediff", "ediffg", "nelect")] == [1e-6, -0.001, 8]
    assert [(s.free_energy, s.energy) for s in outcar.steps] == [(-10.8, -10.805), (-10.84, -10.845)]
    assert outcar.forces == [(0.01, 0.0, 0.0), (-0.01, 0.0, 0.0)]
    assert outcar.stress == [-1.0, -2.0, -3.0, 0.1, 0.2, 0.3]
    assert outcar.lattice is not None and outcar.lattice[0] == (0.0, 2.7, 2.7)
    assert outcar.finished and outcar.reached_accuracy


def test_an_outcar_cut_short_counts_only_whole_steps(tmp_path: Path) -> None:
    path = tmp_path / "OUTCAR"
    path.write_text(OUTCAR5[: OUTCAR5.index("  energy  without entropy=      -10.85")])
    outcar = read_outcar(path)
    assert not outcar.finished and [s.free_energy for s in outcar.steps] == [-10.8, -10.84]
    assert outcar.steps[-1].energy is None


def test_oszicar_lines_of_relaxations_and_molecular_dynamics(tmp_path: Path) -> None:
    path = tmp_path / "OSZICAR"
    path.write_text(
        "       N       E                     dE             d eps       ncg     rms          rms(c)\n"
        "DAV:   1     0.425437171080E+02    0.42544E+02   -0.26173E+03   720   0.510E+02\n"
        "RMM:   2    -0.108430240000E+02   -0.53E+02   -0.1E+01   720   0.5E+00    0.1E+00\n"
        "   1 F= -.10843024E+02 E0= -.10842875E+02  d E =-.108430E+02  mag=     2.0003\n"
        "CG :   1    -0.10E+02   0.1E-03   0.1E-03   1   0.1E-03\n"
        "   2 T=   300. E= -.10E+02 F= -.10900000E+02 E0= -.10890000E+02  EK= 0.1E+00 SP= 0.0 SK= 0.0\n"
        "DAV:   1    -0.1E+02\n"
    )
    steps = read_oszicar(path)
    assert [(s.index, s.free_energy, s.energy, s.electronic_steps, s.magnetization) for s in steps] == [
        (1, -10.843024, -10.842875, 2, 2.0003),
        (2, -10.9, -10.89, 1, None),
    ]


VASPRUN = (
    """<?xml version="1.0" encoding="ISO-8859-1"?>
<modeling>
 <generator>
  <i name="program" type="string">vasp </i>
  <i name="version" type="string">5.4.4.18Apr17-6-g9f103f2a35  </i>
 </generator>
 <incar>
  <i type="int" name="NSW">     40</i>
  <i type="logical" name="LWAVE"> F  </i>
  <i name="EDIFF">      0.00001000</i>
  <i type="string" name="ALGO">Fast</i>
 </incar>
 <kpoints>
  <generation param="Monkhorst-Pack">
   <v type="int" name="divisions">       4        4        4 </v>
  </generation>
 </kpoints>
 <atominfo>
  <array name="atoms" ><set><rc><c>Si</c><c>   1</c></rc><rc><c>Si</c><c>   1</c></rc></set></array>
  <array name="atomtypes" ><set><rc><c>   2</c><c>Si</c><c> 28.085</c><c> 4.0</c>
   <c>  PAW_PBE Si 05Jan2001 </c></rc></set></array>
 </atominfo>
 <calculation>
  <scstep><energy><i name="e_fr_energy">  1.0 </i></energy></scstep>
  <scstep><energy><i name="e_fr_energy"> -10.79 </i></energy></scstep>
  <structure><crystal><varray name="basis" ><v> 0 2.7 2.7 </v><v> 2.7 0 2.7 </v><v> 2.7 2.7 0 </v>
   </varray></crystal>
   <varray name="positions" ><v> 0 0 0 </v><v> .25 .25 .25 </v></varray></structure>
  <varray name="forces" ><v> 0.1 0 0 </v><v> -0.1 0 0 </v></varray>
  <varray name="stress" ><v> -5 0 0 </v><v> 0 -5 0 </v><v> 0 0 -5 </v></varray>
  <energy><i name="e_fr_energy">  -10.80 </i><i name="e_wo_entrp"> -10.81 </i>
   <i name="e_0_energy"> -10.805 </i></energy>
 </calculation>
 <calculation>
  <scstep><energy><i name="e_fr_energy"> -10.83 </i></energy></scstep>
  <structure><crystal><varray name="basis" ><v> 0 2.6 2.6 </v><v> 2.6 0 2.6 </v><v> 2.6 2.6 0 </v>
   </varray></crystal>
   <varray name="positions" ><v> 0 0 0 </v><v> .25 .25 .25 </v></varray></structure>
  <varray name="forces" ><v> 0.01 0 0 </v><v> -0.01 0 0 </v></varray>
  <varray name="stress" ><v> -1 0 0 </v><v> 0 -1 0 </v><v> 0 0 -1 </v></varray>
  <energy><i name="e_fr_energy">  -10.84 </i><i name="e_wo_entrp"> -10.85 </i>
   <i name="e_0_energy"> -10.845 </i></energy>
  <eigenvalues><array><set>"""
    + "<r> 1.0 1.0 </r>" * 2000
    + """</set></array></eigenvalues>
 </calculation>
 <structure name="finalpos" ><crystal><varray name="basis" ><v> 0 2.6 2.6 </v><v> 2.6 0 2.6 </v>
   <v> 2.6 2.6 0 </v></varray></crystal>
  <varray name="positions" ><v> 0 0 0 </v><v> .25 .25 .25 </v></varray></structure>
</modeling>
"""
)


@pytest.mark.parametrize("chunk", [64, 4096, 1 << 22])
@pytest.mark.parametrize("calculations", [1, 50])
def test_a_vasprun_read_in_any_chunk_size(tmp_path: Path, chunk: int, calculations: int) -> None:
    path = tmp_path / "vasprun.xml"
    first = VASPRUN.index(" <calculation>")
    second = VASPRUN.index(" <calculation>", first + 1)
    path.write_text(VASPRUN[:first] + VASPRUN[first:second] * calculations + VASPRUN[second:])
    run = read_vasprun(path, chunk_bytes=chunk)
    assert run.complete and run.version == "5.4.4.18Apr17-6-g9f103f2a35"
    assert run.incar == {"NSW": 40, "LWAVE": False, "EDIFF": 1e-5, "ALGO": "Fast"}
    assert run.kpoints == {"style": "Monkhorst-Pack", "mesh": [4, 4, 4]}
    assert run.elements == ["Si", "Si"] and run.pseudopotentials == ["PAW_PBE Si 05Jan2001"]
    assert [(s.free_energy, s.energy_wo_entropy, s.energy) for s in run.steps] == [
        (-10.8, -10.81, -10.805)
    ] * calculations + [(-10.84, -10.85, -10.845)]
    assert (
        run.forces == [[0.01, 0.0, 0.0], [-0.01, 0.0, 0.0]]
        and run.stress is not None
        and run.stress[0][0] == -1
    )
    assert run.lattice == [[0.0, 2.6, 2.6], [2.6, 0.0, 2.6], [2.6, 2.6, 0.0]]


def test_a_vasprun_cut_short_keeps_its_complete_calculations(tmp_path: Path) -> None:
    path = tmp_path / "vasprun.xml"
    for cut in (
        '<calculation>\n  <scstep><energy><i name="e_fr_energy"> -10.83',
        "<eigenvalues>",
        "</modeling>",
    ):
        path.write_text(VASPRUN[: VASPRUN.rindex(cut)])
        run = read_vasprun(path)
        assert not run.complete
        assert len(run.steps) == (1 if cut.startswith("<calc") else 2)
    path.write_text(VASPRUN[:40])
    with pytest.raises(VaspOutputError, match=r"is not a vasprun\.xml"):
        read_vasprun(path)


def test_the_mocks_outputs_agree_across_the_three_parsers(tmp_path: Path) -> None:
    run = calculation(tmp_path / "run")
    assert run_mock(run).returncode == 0
    oszicar, outcar, vasprun = (
        read_oszicar(run / "OSZICAR"),
        read_outcar(run / "OUTCAR"),
        read_vasprun(run / "vasprun.xml"),
    )
    assert [round(s.energy, 6) for s in oszicar] == [round(s.energy or 0, 6) for s in vasprun.steps]
    assert [round(s.free_energy, 6) for s in outcar.steps] == [
        round(s.free_energy or 0, 6) for s in vasprun.steps
    ]
    assert outcar.forces is not None and vasprun.forces is not None
    assert [[round(x, 6) for x in f] for f in outcar.forces] == [
        [round(x, 6) for x in f] for f in vasprun.forces
    ]
    contcar = parse_poscar((run / "CONTCAR").read_text())
    assert vasprun.complete and vasprun.lattice is not None and vasprun.positions is not None
    assert [[round(x, 6) for x in row] for row in vasprun.lattice] == [
        [round(x, 6) for x in row] for row in contcar.lattice
    ]
    assert len(vasprun.positions) == contcar.natoms and vasprun.elements == ["Si"] * contcar.natoms


def test_a_vasprun_cut_at_any_byte_reads_what_is_whole_or_says_it_is_not_a_vasprun(tmp_path: Path) -> None:
    """Every prefix of a document: whole calculations only, never a wrong number, never another error."""
    first = VASPRUN.index(" <calculation>")
    second = VASPRUN.index(" <calculation>", first + 1)
    document = (
        VASPRUN[:second] + VASPRUN[second:].split("  <eigenvalues>", maxsplit=1)[0] + " </calculation>\n"
    ).encode()
    document += b'<structure name="finalpos" ></structure>\n</modeling>\n'
    path = tmp_path / "vasprun.xml"
    whole = [(-10.8, -10.805), (-10.84, -10.845)]
    seen = 0
    for cut in range(len(document) + 1):
        path.write_bytes(document[:cut])
        try:
            run = read_vasprun(path, chunk_bytes=256)
        except VaspOutputError as exc:
            assert cut < document.index(b"<modeling>") + len(b"<modeling>"), (cut, exc)
            continue
        steps = [(s.free_energy, s.energy) for s in run.steps]
        assert steps == whole[: len(steps)], cut
        assert len(steps) >= seen, cut  # a longer prefix never reads less
        seen = len(steps)
        assert run.complete == (cut >= document.index(b"</modeling>") + len(b"</modeling>")), cut
    assert seen == 2


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda text: "\x00\x17garbage" + text, "has no <modeling> element"),
        (lambda text: text.replace("<modeling>", "<notvasp>"), "has no <modeling> element"),
        (
            lambda text: text.replace("<v> 0.01 0 0 </v>", "<v> ***** 0 0 </v>"),
            "the last calculation's forces has a row that is not numbers",
        ),
        (
            lambda text: text.replace("4        4        4", "4 four 4"),
            "the k-point divisions are not integers",
        ),
    ],
)
def test_a_damaged_vasprun_is_refused_naming_what_is_wrong(
    tmp_path: Path, damage: Callable[[str], str], message: str
) -> None:
    path = tmp_path / "vasprun.xml"
    path.write_text(damage(VASPRUN))
    with pytest.raises(VaspOutputError, match=re.escape(message)):
        read_vasprun(path)


def test_garbage_after_the_last_whole_calculation_is_a_document_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "vasprun.xml"
    cut = VASPRUN.index(" <calculation>", VASPRUN.index(" <calculation>") + 1)
    path.write_bytes(VASPRUN[:cut].encode() + bytes(range(256)) * 64)
    run = read_vasprun(path, chunk_bytes=1024)
    assert (run.complete, [s.energy for s in run.steps]) == (False, [-10.805])
    assert run.forces == [[0.1, 0.0, 0.0], [-0.1, 0.0, 0.0]]
