"""``Record``: the base of the package's mutable result records (a run report, a parsed OUTCAR).

Equality and ``repr`` come from the record's ``__slots__``, as a dataclass would give them. The records
are written out rather than made with :mod:`dataclasses`, which a runner would otherwise import (with
:mod:`inspect`) and run at every start; immutable values are named tuples.
"""

from __future__ import annotations


class Record:
    """Equality and ``repr`` by ``__slots__``; a subclass names its slots and sets them in ``__init__``."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        slots: tuple[str, ...] = self.__slots__
        return all(getattr(self, name) == getattr(other, name) for name in slots)

    __hash__ = None  # type: ignore[assignment]  # mutable: equal records may stop being equal

    def __repr__(self) -> str:
        slots: tuple[str, ...] = self.__slots__
        members = ", ".join(f"{name}={getattr(self, name)!r}" for name in slots)
        return f"{type(self).__name__}({members})"
