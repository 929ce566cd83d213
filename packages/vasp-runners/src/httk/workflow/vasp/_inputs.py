"""Preparing a calculation's inputs in the workdir: INCAR, POSCAR, KPOINTS and POTCAR, with provenance.

What a job gives (job.json ``inputs``, file inputs as paths inside the payload):

==================  ===========================================================================
``structure``       the POSCAR (VASP 5, with its species line, unless ``species`` is given)
``species``         the species of each type (``"Fe O"``), replacing or standing in for that line
``incar``           an INCAR whose tags win over every default (:mod:`._defaults`)
``kpoints``         a KPOINTS used as it is; without it a mesh comes from ``kpoint_density``
``kpoint_density``  k-points per reciprocal atom (default 1000), ``kpoint_style`` Gamma or
                    Monkhorst-Pack (default Gamma)
``potcar``          a POTCAR used as it is (checked against the species); without it one is
                    assembled from the ``vasp.pseudo_library`` setting with the per-element
                    choices of ``vasp.pseudopotentials`` (``"Fe=Fe_pv O=O"`` or an object)
==================  ===========================================================================

Every file is written through a temporary name and a rename, so a crash never leaves VASP a torn input.
The provenance returned -- which INCAR tags came from the user and which from defaults, the k-point
mesh and how it was chosen, each POTCAR dataset's file, SHA-256 and TITEL -- goes into job state and
from there into results.json.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import _defaults
from ._errors import PseudoLibraryError, VaspInputError
from ._files import write_atomically
from ._incar import Incar
from ._kpoints import GAMMA, STYLES, Kpoints, mesh_for_density, parse_kpoints
from ._potcar import PotcarDataset, assemble_potcar, check_potcar_species, parse_choices, parse_potcar
from ._structure import Structure, element_of, format_poscar, parse_poscar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from httk.workflow.sdk._files import StrPath

    from ._knobs import Setting

DEFAULT_DENSITY = 1000.0


def species_of(value: object) -> list[str] | None:
    """The ``species`` input as a list: ``"Fe O"`` or ``["Fe", "O"]``; ``None`` when not given."""
    if value is None:
        return None
    names = value.split() if isinstance(value, str) else list(value) if isinstance(value, list) else None
    if not names or not all(isinstance(name, str) and name for name in names):
        raise VaspInputError(f"the species input must name the species, such as 'Fe O', not {value!r}")
    return names


def read_input(job_dir: StrPath, inputs: Mapping[str, Any], name: str) -> tuple[str, str] | None:
    """The text of the file input ``name`` and its path, or ``None`` when the job did not give it."""
    relative = inputs.get(name)
    if relative is None:
        return None
    path = os.path.join(job_dir, str(relative))
    try:
        with open(path, encoding="ascii", errors="replace") as stream:
            return stream.read(), path
    except OSError as exc:
        raise VaspInputError(f"the {name} input cannot be read: {exc.strerror or exc}", path=path) from exc


def job_structure(job_dir: StrPath, inputs: Mapping[str, Any]) -> Structure:
    """The job's structure input, with the ``species`` input applied."""
    found = read_input(job_dir, inputs, "structure")
    if found is None:
        raise VaspInputError("the job has no structure input (a POSCAR)")
    text, path = found
    return parse_poscar(text, path=path, species=species_of(inputs.get("species")))


def user_incar(job_dir: StrPath, inputs: Mapping[str, Any]) -> Incar:
    """The job's INCAR input (empty when none was given)."""
    found = read_input(job_dir, inputs, "incar")
    return Incar() if found is None else Incar.parse(found[0], path=found[1])


def prepare(
    kind: str,
    workdir: StrPath,
    job_dir: StrPath,
    inputs: Mapping[str, Any],
    setting: Setting,
    *,
    structure: Structure | None = None,
    digest: bool = True,
) -> dict[str, Any]:
    """Write the inputs of a ``relax`` or ``static`` calculation into ``workdir``; return the provenance.

    Parameters
    ----------
    kind
        ``relax`` or ``static``.
    workdir
        The calculation directory.
    job_dir
        The payload (file inputs are paths inside it).
    inputs
        job.json's ``inputs``.
    setting
        Resolves a setting in layers: ``setting(name, default)`` (``Attempt.setting``).
    structure
        The structure to compute, instead of the job's (a static stage after a relaxation).
    digest
        Whether the POTCAR datasets' SHA-256 are computed now; without, their ``sha256`` is ``None``
        until taken from the POTCAR written (:func:`._potcar.digests`).

    Raises
    ------
    VaspInputError, PseudoLibraryError
        For an input that cannot be used, naming it.
    """
    structure = structure or job_structure(job_dir, inputs)
    potcar_text, datasets, potcar_source = _potcar(structure, job_dir, inputs, setting, digest=digest)
    incar, user_tags, added = _incar(kind, structure, datasets, user_incar(job_dir, inputs))
    kpoints, kpoints_source = _kpoints(structure, job_dir, inputs)
    write_atomically(os.path.join(workdir, "POSCAR"), format_poscar(structure))
    write_atomically(os.path.join(workdir, "INCAR"), incar.format())
    write_atomically(os.path.join(workdir, "KPOINTS"), kpoints.format())
    write_atomically(os.path.join(workdir, "POTCAR"), potcar_text)
    return {
        "kind": kind,
        "natoms": structure.natoms,
        "species": list(structure.species),
        "incar": {"user_tags": user_tags, "defaults": added},
        "kpoints": {**kpoints.describe(), "source": kpoints_source},
        "potcar": {"source": potcar_source, "datasets": [d.describe() for d in datasets]},
    }


def _incar(
    kind: str, structure: Structure, datasets: list[PotcarDataset], user: Incar
) -> tuple[Incar, list[str], list[str]]:
    """The calculation's INCAR: the user's tags (less relaxation-only ones for a static), then defaults."""
    tags = user.copy()
    if kind == "static":
        for tag in _defaults.RELAXATION_ONLY:
            if tag in tags:
                del tags[tag]
    user_tags = list(tags)
    elements = [element_of(name) for name in structure.species]
    added = []
    for tag, value in _defaults.defaults(
        kind, elements, structure.counts, [d.enmax for d in datasets]
    ).items():
        if tag not in tags:
            tags[tag] = value
            added.append(tag)
    return tags, user_tags, added


def _kpoints(structure: Structure, job_dir: StrPath, inputs: Mapping[str, Any]) -> tuple[Kpoints, str]:
    found = read_input(job_dir, inputs, "kpoints")
    if found is not None:
        return parse_kpoints(found[0], path=found[1]), "input"
    density = inputs.get("kpoint_density", DEFAULT_DENSITY)
    style = inputs.get("kpoint_style", GAMMA)
    if style not in STYLES:
        raise VaspInputError(f"the kpoint_style input must be one of {', '.join(STYLES)}, not {style!r}")
    if isinstance(density, bool) or not isinstance(density, int | float) or density <= 0:
        raise VaspInputError(f"the kpoint_density input must be a positive number, not {density!r}")
    return mesh_for_density(structure, float(density), style), f"density {float(density):g}"


def _potcar(
    structure: Structure, job_dir: StrPath, inputs: Mapping[str, Any], setting: Setting, *, digest: bool
) -> tuple[str, list[PotcarDataset], str]:
    found = read_input(job_dir, inputs, "potcar")
    if found is not None:
        datasets = parse_potcar(found[0], path=found[1], digest=digest)
        check_potcar_species(datasets, structure.species, path=found[1])
        return found[0], datasets, "input"
    library = setting("vasp.pseudo_library", None)
    if not library:
        raise PseudoLibraryError(
            "no POTCAR was given and vasp.pseudo_library is not set: give the potcar input, or set the "
            "library with: httk workflow workspace settings set WORKSPACE vasp.pseudo_library /path/to/potpaw"
        )
    choices = setting("vasp.pseudopotentials", None) or {}
    if isinstance(choices, str):
        try:
            choices = parse_choices(choices)
        except ValueError as exc:
            raise PseudoLibraryError(f"vasp.pseudopotentials: {exc}") from None
    if not isinstance(choices, Mapping):
        raise PseudoLibraryError(f"vasp.pseudopotentials must map elements to choices, not {choices!r}")
    text, datasets = assemble_potcar(
        str(library), structure.species, {str(k): str(v) for k, v in choices.items()}, digest=digest
    )
    return text, datasets, f"library {library}"
