"""The mock's vasprun.xml, element by element as VASP writes it.

The document has VASP's shape: ``generator``, ``incar``, ``kpoints``, ``atominfo``, the ``initialpos``
structure, one ``calculation`` per ionic step (its electronic ``scstep`` energies, the structure, the
``forces`` and ``stress`` arrays, the ``energy``), then the ``finalpos`` structure and ``</modeling>``. Each
ionic step is flushed when it is complete, so a run that dies leaves a document cut off after its last
step (or inside one) -- an XML parser sees it end early, which is how a reader knows the run did not
finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import IO
from xml.sax.saxutils import escape

from httk.workflow.vasp._structure import Matrix, Structure, Vector

from ._model import IonicStep
from ._text import MOCK_VERSION


def _v(values: Sequence[float], fmt: str = "16.8f") -> str:
    return "<v>" + "".join(f" {x:{fmt}}" for x in values) + " </v>"


def _crystal(lattice: Matrix, volume: float, indent: str) -> list[str]:
    lines = [f"{indent}<crystal>", f'{indent} <varray name="basis" >']
    lines += [f"{indent}  {_v(row)}" for row in lattice]
    return [
        *lines,
        f"{indent} </varray>",
        f'{indent} <i name="volume">{volume:16.8f} </i>',
        f"{indent}</crystal>",
    ]


def _structure(
    name: str | None, lattice: Matrix, volume: float, positions: Sequence[Vector], indent: str
) -> list[str]:
    opening = f'{indent}<structure name="{name}" >' if name else f"{indent}<structure>"
    lines = [opening, *_crystal(lattice, volume, indent + " "), f'{indent} <varray name="positions" >']
    lines += [f"{indent}  {_v(p)}" for p in positions]
    return [*lines, f"{indent} </varray>", f"{indent}</structure>"]


def _typed_item(tag: str, value: object) -> str:
    if isinstance(value, bool):
        return f'  <i type="logical" name="{tag}"> {"T" if value else "F"}  </i>'
    if isinstance(value, int):
        return f'  <i type="int" name="{tag}">{value:8d}</i>'
    if isinstance(value, float):
        return f'  <i name="{tag}">{value:16.8f}</i>'
    return f'  <i type="string" name="{tag}">{escape(str(value))}</i>'


class VasprunWriter:
    """Writes one vasprun.xml as the run goes."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def _write(self, lines: list[str]) -> None:
        self._stream.write("\n".join(lines) + "\n")
        self._stream.flush()

    def start(
        self,
        structure: Structure,
        incar: Mapping[str, object],
        kpoints: Mapping[str, object],
        titels: Sequence[str],
        zvals: Sequence[float],
    ) -> None:
        """Everything before the first ionic step."""
        lines = ['<?xml version="1.0" encoding="ISO-8859-1"?>', "<modeling>", " <generator>"]
        lines += [
            '  <i name="program" type="string">vasp </i>',
            '  <i name="version" type="string">6.4.2 mock </i>',
            f'  <i name="subversion" type="string">httk-mock-vasp {MOCK_VERSION} </i>',
            '  <i name="platform" type="string">mock </i>',
            " </generator>",
            " <incar>",
        ]
        lines += [_typed_item(tag, value) for tag, value in incar.items()]
        lines += [" </incar>", " <kpoints>"]
        if kpoints.get("style") in ("Gamma", "Monkhorst-Pack"):
            mesh = kpoints["mesh"]
            assert isinstance(mesh, list | tuple)
            lines += [
                f'  <generation param="{kpoints["style"]}">',
                '   <v type="int" name="divisions">' + "".join(f" {n:8d}" for n in mesh) + " </v>",
                "  </generation>",
            ]
        lines += [" </kpoints>", " <atominfo>", f"  <atoms>{structure.natoms:8d} </atoms>"]
        lines += [f"  <types>{len(structure.species):8d} </types>", '  <array name="atoms" >']
        lines += ['   <dimension dim="1">ion</dimension>', '   <field type="string">element</field>']
        lines += ['   <field type="int">atomtype</field>', "   <set>"]
        index = 0
        for type_index, (species, count) in enumerate(
            zip(structure.species, structure.counts, strict=True), 1
        ):
            for _ in range(count):
                index += 1
                lines.append(f"    <rc><c>{escape(species):2s}</c><c>{type_index:4d}</c></rc>")
        lines += [
            "   </set>",
            "  </array>",
            '  <array name="atomtypes" >',
            '   <dimension dim="1">type</dimension>',
        ]
        lines += ['   <field type="int">atomspertype</field>', '   <field type="string">element</field>']
        lines += [
            "   <field>mass</field>",
            "   <field>valence</field>",
            '   <field type="string">pseudopotential</field>',
        ]
        lines.append("   <set>")
        for species, count, titel, zval in zip(
            structure.species, structure.counts, titels, zvals, strict=True
        ):
            lines.append(
                f"    <rc><c>{count:4d}</c><c>{escape(species):2s}</c><c>{1.0:16.8f}</c>"
                f"<c>{zval:16.8f}</c><c>  {escape(titel)}</c></rc>"
            )
        lines += ["   </set>", "  </array>", " </atominfo>"]
        lines += _structure("initialpos", structure.lattice, structure.volume, structure.positions, " ")
        self._write(lines)

    def calculation(self, step: IonicStep) -> None:
        """One ionic step, complete."""
        lines = [" <calculation>"]
        for energy in step.scf:
            lines += ["  <scstep>", "   <energy>", f'    <i name="e_fr_energy">{energy:16.8f} </i>']
            lines += [
                f'    <i name="e_wo_entrp">{energy:16.8f} </i>',
                f'    <i name="e_0_energy">{energy:16.8f} </i>',
            ]
            lines += ["   </energy>", "  </scstep>"]
        lines += _structure(None, step.lattice, step.volume, step.positions, "  ")
        lines.append('  <varray name="forces" >')
        lines += [f"   {_v(force)}" for force in step.forces]
        lines += ["  </varray>", '  <varray name="stress" >']
        for row in range(3):
            lines.append("   " + _v([step.pressure if column == row else 0.0 for column in range(3)]))
        lines += ["  </varray>", "  <energy>", f'   <i name="e_fr_energy">{step.free_energy:16.8f} </i>']
        lines += [f'   <i name="e_wo_entrp">{step.energy_wo_entropy:16.8f} </i>']
        lines += [f'   <i name="e_0_energy">{step.energy:16.8f} </i>', "  </energy>", " </calculation>"]
        self._write(lines)

    def finish(self, step: IonicStep) -> None:
        """The final structure and the end of the document."""
        self._write([*_structure("finalpos", step.lattice, step.volume, step.positions, " "), "</modeling>"])
