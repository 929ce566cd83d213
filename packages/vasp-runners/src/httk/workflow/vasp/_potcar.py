"""POTCAR files: reading their datasets, and assembling one from a pseudopotential library.

A POTCAR is one dataset per species, in POSCAR order, each beginning with its title line and ending with
``End of Dataset``; the ``TITEL`` and ``ZVAL`` lines of each are what a calculation's provenance records.

The library (``vasp.pseudo_library``) is a directory of ``<choice>/POTCAR`` files, ``<choice>`` being an
element (``Fe``) or one of its variants (``Fe_pv``, ``Fe_sv``); ``POTCAR.gz`` and ``POTCAR.bz2`` are read as
well. Which variant an element uses comes from the per-element choices (the ``pseudopotentials`` input or
the ``vasp.pseudopotentials`` setting); an element without a choice uses the directory named exactly as
the element and, when there is none, the error lists the variants that exist, so nothing is picked
silently. Every dataset used is recorded: element, choice, file (relative to the library), SHA-256 of the
dataset as used (its lines from the title to ``End of Dataset``), TITEL and ZVAL.

The digests may be left out (``digest=False``) and taken later from the POTCAR written (:func:`digests`):
``hashlib`` loads OpenSSL, which a runner would otherwise pay for before VASP starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ._errors import PseudoLibraryError, VaspInputError
from ._record import NamedTuple
from ._structure import element_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

_END = "End of Dataset"
_NUMBER = frozenset("+-0123456789.Ee")
_CANDIDATES = ("POTCAR", "POTCAR.gz", "POTCAR.bz2")


class PotcarDataset(NamedTuple):
    """One species' dataset of a POTCAR and where it came from.

    Parameters
    ----------
    titel
        The ``TITEL`` of the dataset (``PAW_PBE Fe_pv 02Aug2007``).
    zval
        Its valence electron count.
    element
        The chemical element it is for.
    choice
        The library directory it came from (``Fe_pv``), or ``None`` for a POTCAR given as an input.
    file
        Its file relative to the library, or ``None``.
    sha256
        The SHA-256 of the dataset's text as used, or ``None`` when it was not computed.

    Examples
    --------
    >>> from httk.workflow.vasp import parse_potcar
    >>> text = "  PAW_PBE Si mock\\n 4.0\\n   TITEL  = PAW_PBE Si mock\\n   POMASS = 28.085; ZVAL = 4.000\\n"
    >>> text += " End of Dataset\\n"
    >>> [(d.element, d.zval) for d in parse_potcar(text)]
    [('Si', 4.0)]
    """

    titel: str
    zval: float
    element: str
    sha256: str | None
    choice: str | None = None
    file: str | None = None
    enmax: float | None = None

    def describe(self) -> dict[str, object]:
        """What results.json records of the dataset."""
        return {
            "element": self.element,
            "titel": self.titel,
            "zval": self.zval,
            "choice": self.choice,
            "file": self.file,
            "sha256": self.sha256,
        }


def parse_potcar(text: str, *, path: str = "POTCAR", digest: bool = True) -> list[PotcarDataset]:
    """The datasets of a POTCAR, in order; :class:`VaspInputError` when one lacks its TITEL or ZVAL.

    Blank lines between datasets belong to none, so a dataset's digest is the same in its library file
    and in the POTCAR assembled from it.
    """
    datasets: list[PotcarDataset] = []
    current: list[str] = []
    start = 1
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if not current:
            if not line.strip():
                continue
            start = number
        current.append(line)
        if line.strip() == _END:
            datasets.append(_dataset("".join(current), path, start, digest=digest))
            current = []
    if any(line.strip() for line in current):
        raise VaspInputError(f"has a dataset without its closing {_END!r} line", path=path, line=start)
    if not datasets:
        raise VaspInputError("holds no POTCAR dataset", path=path)
    return datasets


def digests(text: str) -> list[str]:
    """The SHA-256 of each dataset of a POTCAR, in order."""
    return [dataset.sha256 or "" for dataset in parse_potcar(text)]


def _dataset(text: str, path: str, line: int, *, digest: bool) -> PotcarDataset:
    titel = zval = enmax = None
    for row in text.splitlines():
        if titel is None:
            titel = _titel(row)
        if zval is None:
            zval = _number_after(row, "ZVAL")
        if enmax is None:
            enmax = _number_after(row, "ENMAX")
    if titel is None or zval is None:
        missing = "TITEL" if titel is None else "ZVAL"
        raise VaspInputError(f"has a dataset without its {missing} line", path=path, line=line)
    element = element_of(titel.split()[1] if len(titel.split()) > 1 else titel.split()[0])
    sha256 = None
    if digest:
        from httk.workflow.sdk._sha256 import sha256_hex

        sha256 = sha256_hex(text.encode())
    return PotcarDataset(titel, zval, element, sha256, enmax=enmax)


# The dataset's lines are read with string methods: compiling a regular expression for each would cost
# a runner more, before VASP starts, than reading every POTCAR it assembles.
def _titel(row: str) -> str | None:
    """The value of a ``TITEL = ...`` line, or ``None`` when ``row`` is not one."""
    text = row.lstrip()
    if not text.startswith("TITEL"):
        return None
    rest = text[len("TITEL") :].lstrip()
    value = rest[1:].strip() if rest.startswith("=") else ""
    return value or None


def _number_after(row: str, key: str) -> float | None:
    """The number of the first ``KEY = number`` in ``row`` (``ZVAL   =    4.000``), or ``None``."""
    start = row.find(key)
    while start >= 0:
        rest = row[start + len(key) :].lstrip()
        if rest.startswith("="):
            rest = rest[1:].lstrip()
            end = 0
            while end < len(rest) and rest[end] in _NUMBER:
                end += 1
            try:
                return float(rest[:end])
            except ValueError:  # no number, or not one ("4.0.0"): as if the key were not there
                pass
        start = row.find(key, start + 1)
    return None


def check_potcar_species(datasets: Sequence[PotcarDataset], species: Sequence[str], *, path: str) -> None:
    """Refuse a POTCAR whose datasets are not the POSCAR's species in POSCAR order."""
    wanted = [element_of(name) for name in species]
    found = [dataset.element for dataset in datasets]
    if wanted != found:
        raise VaspInputError(
            f"holds datasets for {' '.join(found)}, but the structure's species are {' '.join(wanted)} "
            "(one dataset per species, in the same order)",
            path=path,
        )


def parse_choices(text: str) -> dict[str, str]:
    """Per-element choices from ``Fe=Fe_pv O=O_s`` (spaces or commas between them).

    Examples
    --------
    >>> from httk.workflow.vasp._potcar import parse_choices
    >>> parse_choices("Fe=Fe_pv, O=O_s")
    {'Fe': 'Fe_pv', 'O': 'O_s'}
    """
    choices: dict[str, str] = {}
    for item in text.replace(",", " ").split():
        element, equals, choice = item.partition("=")
        if not equals or not element or not choice or "/" in choice or choice.startswith("."):
            raise ValueError(f"{item!r} is not ELEMENT=CHOICE (such as Fe=Fe_pv)")
        choices[element] = choice
    return choices


def assemble_potcar(
    library: StrPath, species: Sequence[str], choices: Mapping[str, str] | None = None, *, digest: bool = True
) -> tuple[str, list[PotcarDataset]]:
    """The POTCAR text for ``species`` from ``library``, and the provenance of every dataset.

    Parameters
    ----------
    library
        The pseudopotential library: a directory of ``<choice>/POTCAR`` files.
    species
        The structure's species, in POSCAR order.
    choices
        Element (or species) to library directory, such as ``{"Fe": "Fe_pv"}``.
    digest
        Whether to compute each dataset's SHA-256 (else :func:`digests` of the POTCAR written).

    Raises
    ------
    PseudoLibraryError
        When the library is not a directory, or holds no usable POTCAR for a species (the error lists the
        variants of that element it does hold).

    Examples
    --------
    >>> text, used = assemble_potcar("/opt/potpaw_PBE", ["Fe", "O"], {"Fe": "Fe_pv"})  # doctest: +SKIP
    >>> [d.choice for d in used]  # doctest: +SKIP
    ['Fe_pv', 'O']
    """
    library = os.fspath(library)
    if not os.path.isdir(library):
        raise PseudoLibraryError(
            "is not a directory (set vasp.pseudo_library to a POTCAR library)", path=library
        )
    choices = dict(choices or {})
    parts: list[str] = []
    used: list[PotcarDataset] = []
    for name in species:
        element = element_of(name)
        choice = choices.get(name) or choices.get(element) or name
        relative, text = _read_choice(library, element, choice)
        path = os.path.join(library, relative)
        datasets = parse_potcar(text, path=path, digest=digest)
        if len(datasets) != 1 or datasets[0].element != element:
            raise PseudoLibraryError(
                f"must hold exactly one dataset for {element}, not {', '.join(d.element for d in datasets)}",
                path=path,
            )
        dataset = datasets[0]
        used.append(
            PotcarDataset(
                dataset.titel,
                dataset.zval,
                element,
                dataset.sha256,
                choice=choice,
                file=relative,
                enmax=dataset.enmax,
            )
        )
        parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts), used


def _read_choice(library: str, element: str, choice: str) -> tuple[str, str]:
    """The library-relative path of the POTCAR of ``choice``, and its text."""
    for candidate in _CANDIDATES:
        relative = os.path.join(choice, candidate)
        if os.path.isfile(os.path.join(library, relative)):
            return relative, _decoded(os.path.join(library, relative))
    with os.scandir(library) as entries:
        variants = sorted(
            entry.name
            for entry in entries
            if entry.is_dir() and (entry.name == element or entry.name.startswith(f"{element}_"))
        )
    hint = f"; it has {', '.join(variants)}" if variants else f"; it has nothing for {element}"
    raise PseudoLibraryError(
        f"has no {choice}/POTCAR{hint} (choose one with the pseudopotentials input, e.g. "
        f"{element}={variants[0] if variants else element})",
        path=library,
    )


def _decoded(path: str) -> str:
    try:
        with open(path, "rb") as stream:
            data = stream.read()
        if path.endswith(".gz"):
            import gzip  # a compressed library is the exception: not paid for at import

            data = gzip.decompress(data)
        elif path.endswith(".bz2"):
            import bz2

            data = bz2.decompress(data)
        return data.decode("ascii", errors="replace")
    except (OSError, EOFError, ValueError) as exc:
        raise PseudoLibraryError(f"cannot be read: {exc}", path=path) from exc
