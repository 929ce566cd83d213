"""The one exception hierarchy of the VASP package.

Every error names the file (and line, where there is one) or the input it is about, so the message a
runner publishes in its ``fail`` outcome, or the line ``build_payload`` refuses an input with, says what to
fix. ``OSError`` and ``ValueError`` met while reading VASP files are translated here, with the original
reachable as ``__cause__``.

::

    VaspError                      base of every error this package raises on purpose
    ├── VaspInputError             an input file (POSCAR, INCAR, KPOINTS, POTCAR) is missing or malformed
    ├── PseudoLibraryError         a POTCAR cannot be assembled from vasp.pseudo_library
    ├── VaspCommandError           vasp.command is unset, malformed, or names no executable
    └── VaspOutputError            an output file (OUTCAR, OSZICAR, vasprun.xml) cannot be read

Examples
--------
>>> from httk.workflow.vasp import VaspError, VaspInputError
>>> str(VaspInputError("has 2 species but 3 counts", path="run/POSCAR", line=7))
'run/POSCAR, line 7: has 2 species but 3 counts'
>>> issubclass(VaspInputError, VaspError)
True
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath


class VaspError(Exception):
    """Base of every error the VASP package raises on purpose.

    Parameters
    ----------
    message
        What is wrong.
    path
        The file concerned, when there is one.
    line
        The 1-based line of that file, when one is at fault.

    Examples
    --------
    >>> from httk.workflow.vasp import VaspError
    >>> VaspError("is empty", path="run/CONTCAR").path
    'run/CONTCAR'
    """

    def __init__(self, message: str, *, path: StrPath | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        where = self.path or ""
        if line is not None:
            where = f"{where}, line {line}" if where else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)


class VaspInputError(VaspError):
    """An input file (POSCAR, INCAR, KPOINTS, POTCAR) is missing, unreadable or malformed.

    Examples
    --------
    >>> from httk.workflow.vasp import VaspInputError
    >>> str(VaspInputError("has no species line; give the species input", path="POSCAR", line=6))
    'POSCAR, line 6: has no species line; give the species input'
    """


class PseudoLibraryError(VaspError):
    """A POTCAR cannot be assembled: no ``vasp.pseudo_library``, or an element's POTCAR is not in it.

    Examples
    --------
    >>> from httk.workflow.vasp import PseudoLibraryError
    >>> str(PseudoLibraryError("has no POTCAR for Fe_pv", path="/opt/potpaw_PBE"))
    '/opt/potpaw_PBE: has no POTCAR for Fe_pv'
    """


class VaspCommandError(VaspError):
    """``vasp.command`` is not set, cannot be split into an argument vector, or names no executable.

    Parameters
    ----------
    message
        What is wrong.
    code
        The failure code a runner publishes: ``vasp.command_missing`` or ``vasp.command_unavailable``.

    Examples
    --------
    >>> from httk.workflow.vasp import VaspCommandError
    >>> VaspCommandError("no vasp.command is set", code="vasp.command_missing").code
    'vasp.command_missing'
    """

    def __init__(self, message: str, *, code: str) -> None:
        self.code = code
        super().__init__(message)


class VaspOutputError(VaspError):
    """An output file cannot be read or holds nothing the parser recognizes.

    Examples
    --------
    >>> from httk.workflow.vasp import VaspOutputError
    >>> str(VaspOutputError("holds no ionic step", path="run/OSZICAR"))
    'run/OSZICAR: holds no ionic step'
    """
