"""The VASP package's library, loaded when a helper first needs it, and v1's words for its problems.

The v1 VASP helpers stand on the public library of ``httk.workflow.vasp`` (distribution
httk-workflow-vasp): its error catalog, remedies, supervised run and POTCAR assembly. That package is
optional for this one, so it is imported when a helper runs, never when this package is, and its names
are reached through the module object (typed ``Any``: this package does not depend on it to build or
type-check). A helper run without it fails with :class:`VaspPackageError`, which names the package.

v1 wrote what its checkers saw into ``ht.controlled.msgs`` as upper-case tokens (``ZPOTRF``,
``LAST BADCONV ELEC``, ``FINISHED``), and templates grep that file. The helpers keep writing v1's
token for every catalog problem v1 knew, under v1's spelling, and the problem's name in upper case for
the problems v1 did not know; :func:`problems_in` reads the file back into catalog names, the tokens
a real v1 run wrote included.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from httk.workflow.v1._errors import V1Error

PACKAGE = "httk.workflow.vasp"
DISTRIBUTION = "httk-workflow-vasp"
MSGS = "ht.controlled.msgs"
FINISHED = "FINISHED"
TIMEOUT = "TIMEOUT"

V1_TOKENS = {
    "tet": "TETKPTS",
    "inv_rot_mat": "INVROTMATRIX",
    "edddav": "EDDAV_ZHEGV",
    "pricel": "PRICELL",
    "too_few_bands": "NBANDS",
    "incorrect_shift": "SHIFTS",
    "amin": "TOOLONGLATTVEC",
    "triple_product": "TRIPLEPRODUCT",
    "rot_matrix": "ROTMATRIX",
    "nelm": "LAST BADCONV ELEC (N>=NELM)",
    "ionic": "LAST BADCONV ION (ISTEP>=NSW)",
}
"""The catalog problems v1's checkers reported, under the token v1 wrote for each."""

_V1_ALIASES = {
    "LAST BADCONV ELEC": "nelm",
    "LAST BADCONV ION": "ionic",
    "ZBRENT_BRACKETING": "zbrent",
    TIMEOUT: "walltime",
}
"""Tokens (or their leading words) of a real v1 run's ht.controlled.msgs that name a catalog problem."""


class VaspPackageError(V1Error):
    """The VASP package the helpers are written on is missing, or a setting for it is invalid."""


def vasp() -> Any:
    """The ``httk.workflow.vasp`` module; :class:`VaspPackageError` when it is not installed."""
    try:
        module = importlib.import_module(PACKAGE)
    except ImportError:
        module = None
    if module is None or not hasattr(module, "CATALOG"):
        raise VaspPackageError(
            f"the v1 VASP helpers need the VASP package ({DISTRIBUTION}, module {PACKAGE}) and its error "
            "catalog; install it beside httk-workflow-v1 where the manager runs"
        )
    return module


def token(problem: str) -> str:
    """The ht.controlled.msgs token of a catalog problem: v1's own, else the name in upper case."""
    return V1_TOKENS.get(problem, problem.upper())


def problems_in(lines: Iterable[str], catalog: Iterable[Any]) -> list[str]:
    """The catalog problems that lines of ht.controlled.msgs name, in catalog order."""
    order = [row.name for row in catalog]
    by_token = {token(name): name for name in order}
    found: set[str] = set()
    for raw in lines:
        line = raw.strip()
        if line in by_token:
            found.add(by_token[line])
            continue
        for prefix, name in _V1_ALIASES.items():
            if line == prefix or line.startswith(prefix + " "):
                found.add(name)
    return [name for name in order if name in found]


def read_messages(directory: Path) -> list[str]:
    """The lines of DIRECTORY/ht.controlled.msgs (none when the file is missing)."""
    try:
        return (directory / MSGS).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []


def number_setting(name: str, default: float) -> float:
    """The numeric setting NAME (``vasp.kill_grace``) from ``HTTK_<NAME>``, as the manager exports it."""
    variable = "HTTK_" + name.replace(".", "_").upper()
    text = os.environ.get(variable, "").strip().strip('"')
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise VaspPackageError(f"{variable} ({name}) must be a number, not {text!r}") from None
    if value < 0:
        raise VaspPackageError(f"{variable} ({name}) must not be negative, not {text!r}")
    return value


def write_text(path: Path, text: str) -> None:
    """Write PATH whole or not at all (a temporary sibling renamed over it)."""
    temporary = path.with_name(f".{path.name}.httk-v1.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
