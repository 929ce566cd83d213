"""The package's records: ``Record`` for mutable results, ``NamedTuple`` for immutable values.

``Record`` is the base of the mutable result records (a run report, a parsed OUTCAR): equality and
``repr`` come from the record's ``__slots__``, as a dataclass would give them. The records are written
out rather than made with :mod:`dataclasses`, which a runner would otherwise import (with
:mod:`inspect`) and run at every start.

``NamedTuple`` is :class:`typing.NamedTuple` to a type checker and, at run time, the same class syntax
made into a :func:`collections.namedtuple` without :mod:`typing`: typing costs a runner its import and,
for every field, the compile of its annotation (a string, under ``from __future__ import annotations``),
the first of which sets up the interpreter's AST types -- together more than half a bare interpreter
start on every attempt.
"""

from __future__ import annotations

from collections import namedtuple

__all__ = ["NamedTuple", "Record"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    # What class syntax may not define, as for typing.NamedTuple; and what is not copied onto the class.
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_make"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _NamedTupleType(type):
        """``class Point(NamedTuple): x: float`` made ``namedtuple("Point", ["x"])`` with its members."""

        def __new__(mcls, name, bases, namespace):
            if not bases:  # NamedTuple itself
                return super().__new__(mcls, name, bases, namespace)
            annotations = namespace.get("__annotations__", {})
            defaults = []
            for field in annotations:
                if field in namespace:
                    defaults.append(namespace[field])
                elif defaults:
                    raise TypeError(f"{name}: field {field} without a default follows one with a default")
            made = namedtuple(name, list(annotations), defaults=defaults, module=namespace["__module__"])
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"{name}: cannot overwrite the named tuple's {key}")
                if key not in annotations and key not in _SPECIAL:
                    setattr(made, key, value)
            made.__annotations__ = dict(annotations)
            return made

    class NamedTuple(metaclass=_NamedTupleType):
        """The base of class-syntax named tuples (see the module docstring)."""


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
