"""INCAR files: ``TAG = value`` statements, read into an ordered mapping and written back.

Reading follows what VASP accepts: one or more statements per line separated by ``;``, comments from
``!`` or ``#`` to the end of the line, a trailing ``\\`` continuing a statement on the next line, tags in
any case (stored upper case), a value in quotes kept whole. Values are kept as the text VASP would read
(``.TRUE.``, ``1E-5``, ``4*0.6``); the typed accessors interpret them the way VASP does (``T``, ``.TRUE.``
and ``TRUE`` are true; ``1E-05`` is a float).

Writing produces one canonical form, one ``TAG = value`` line per tag in the mapping's order, so that two
runners that make the same changes write the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, MutableMapping

from ._errors import VaspInputError

_TRUE = frozenset({"T", ".T.", "TRUE", ".TRUE."})
_FALSE = frozenset({"F", ".F.", "FALSE", ".FALSE."})


class Incar(MutableMapping[str, str]):
    """The tags of an INCAR in file order, each with its value text; tags are upper case.

    Parameters
    ----------
    tags
        Initial tags (any case) and values; a value that is not a string is spelled as VASP reads it.

    Examples
    --------
    >>> from httk.workflow.vasp import Incar
    >>> incar = Incar.parse("ISMEAR = 0 ; SIGMA = 0.05  ! smearing\\nlreal = .FALSE.\\n")
    >>> incar["LREAL"], incar.get_float("SIGMA"), incar.get_bool("LREAL")
    ('.FALSE.', 0.05, False)
    >>> incar["NSW"] = 99
    >>> print(incar.format(), end="")
    ISMEAR = 0
    SIGMA = 0.05
    LREAL = .FALSE.
    NSW = 99
    """

    def __init__(self, tags: Mapping[str, object] | None = None) -> None:
        self._tags: dict[str, str] = {}
        for tag, value in (tags or {}).items():
            self[tag] = value

    @classmethod
    def parse(cls, text: str, *, path: str = "INCAR") -> Incar:
        """Read INCAR text; :class:`VaspInputError` names the line of a statement not ``TAG = value``."""
        incar = cls()
        pending, start = "", 0
        for number, raw in enumerate(text.splitlines(), start=1):
            line = _strip_comment(raw)
            if pending:
                line = pending.rstrip() + " " + line.lstrip()
            else:
                start = number
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1]
                continue
            pending = ""
            for statement in _statements(line):
                tag, equals, value = statement.partition("=")
                tag, value = tag.strip().upper(), value.strip()
                if not equals or not tag or not tag.replace("_", "").isalnum():
                    raise VaspInputError(f"{statement.strip()!r} is not TAG = value", path=path, line=start)
                incar._tags[tag] = _unquote(value)
        return incar

    def __getitem__(self, tag: str) -> str:
        return self._tags[tag.upper()]

    def __setitem__(self, tag: str, value: object) -> None:
        self._tags[tag.upper()] = spell(value)

    def __delitem__(self, tag: str) -> None:
        del self._tags[tag.upper()]

    def __contains__(self, tag: object) -> bool:
        return isinstance(tag, str) and tag.upper() in self._tags

    def __iter__(self) -> Iterator[str]:
        return iter(self._tags)

    def __len__(self) -> int:
        return len(self._tags)

    def __repr__(self) -> str:
        return f"Incar({self._tags!r})"

    def copy(self) -> Incar:
        """An independent copy."""
        return Incar(self._tags)

    def get_str(self, tag: str, default: str | None = None) -> str | None:
        """The value text of ``tag``, or ``default``."""
        return self._tags.get(tag.upper(), default)

    def get_int(self, tag: str, default: int | None = None) -> int | None:
        """``tag`` as an integer (``1E2`` reads as 100), or ``default`` when absent."""
        text = self._tags.get(tag.upper())
        if text is None:
            return default
        value = _float(text.split()[0], tag)
        if not value.is_integer():
            raise VaspInputError(f"{tag.upper()} = {text} is not an integer", path="INCAR")
        return int(value)

    def get_float(self, tag: str, default: float | None = None) -> float | None:
        """``tag`` as a number (Fortran ``1D-5`` included), or ``default`` when absent."""
        text = self._tags.get(tag.upper())
        return default if text is None else _float(text.split()[0], tag)

    def get_bool(self, tag: str, default: bool | None = None) -> bool | None:
        """``tag`` as a logical (``T``, ``.TRUE.``, ``F``, ...), or ``default`` when absent."""
        text = self._tags.get(tag.upper())
        if text is None:
            return default
        word = text.split()[0].upper() if text.split() else ""
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise VaspInputError(f"{tag.upper()} = {text} is not a logical", path="INCAR")

    def typed(self) -> dict[str, object]:
        """Every tag with its value read as JSON can hold it: logical, integer, number or text.

        Examples
        --------
        >>> Incar.parse("LWAVE = .F.\\nNSW = 40\\nEDIFF = 1E-5\\nALGO = Fast\\n").typed()
        {'LWAVE': False, 'NSW': 40, 'EDIFF': 1e-05, 'ALGO': 'Fast'}
        """
        return {tag: _typed(value) for tag, value in self._tags.items()}

    def format(self) -> str:
        """The INCAR text: one ``TAG = value`` line per tag, in order."""
        return "".join(f"{tag} = {value}\n" for tag, value in self._tags.items())


def spell(value: object) -> str:
    """How VASP reads ``value``: ``.TRUE.``/``.FALSE.``, the shortest exact number, text as it is.

    Examples
    --------
    >>> from httk.workflow.vasp._incar import spell
    >>> spell(True), spell(1e-05), spell(520), spell([1.0, 1.0])
    ('.TRUE.', '1e-05', '520', '1.0 1.0')
    """
    if isinstance(value, bool):
        return ".TRUE." if value else ".FALSE."
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"an INCAR value must be finite, not {value!r}")
        return repr(value)
    if isinstance(value, list | tuple):
        return " ".join(spell(item) for item in value)
    if isinstance(value, str):
        return value.strip()
    raise TypeError(f"an INCAR value must be text, a number, a logical or a list, not {type(value).__name__}")


def _strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "!#":
            return line[:index]
    return line


def _statements(line: str) -> Iterator[str]:
    quote, start = "", 0
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == ";":
            if line[start:index].strip():
                yield line[start:index]
            start = index + 1
    if line[start:].strip():
        yield line[start:]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _float(text: str, tag: str) -> float:
    try:
        value = float(text.replace("d", "e").replace("D", "e"))
    except ValueError:
        raise VaspInputError(f"{tag.upper()} = {text} is not a number", path="INCAR") from None
    if not math.isfinite(value):
        raise VaspInputError(f"{tag.upper()} = {text} is not a finite number", path="INCAR")
    return value


def _typed(value: str) -> object:
    word = value.upper()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    try:
        return int(value)
    except ValueError:
        pass
    try:
        number = float(value.replace("d", "e").replace("D", "e"))
    except ValueError:
        return value
    return number if math.isfinite(number) else value
