"""Lowercase base 36 without leading zeroes, the number encoding of marker names and record references."""

from __future__ import annotations

import re

from ._errors import InvalidNameError

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_CANONICAL = re.compile(r"[0-9a-z]+\Z")


def encode(value: int) -> str:
    """Encode a non-negative integer.

    Examples
    --------
    >>> encode(0), encode(35), encode(36)
    ('0', 'z', '10')
    """
    if value < 0:
        raise InvalidNameError("base-36 number", value, "must not be negative")
    if value == 0:
        return "0"
    out: list[str] = []
    while value:
        value, rem = divmod(value, 36)
        out.append(_DIGITS[rem])
    return "".join(reversed(out))


def decode(text: str, *, bits: int = 64, what: str = "base-36 number") -> int:
    """Decode canonical lowercase base 36, refusing leading zeroes and values beyond ``bits`` bits.

    Examples
    --------
    >>> decode("10")
    36
    """
    if not text:
        raise InvalidNameError(what, text, "is empty")
    if len(text) > 1 and text[0] == "0":
        raise InvalidNameError(what, text, "has a leading zero")
    if not _CANONICAL.match(text):
        raise InvalidNameError(what, text, "uses a character outside 0-9 and a-z")
    value = int(text, 36)  # safe once the alphabet is checked: int() alone would accept A-Z and "_"
    if value >= 1 << bits:
        raise InvalidNameError(what, text, f"exceeds an unsigned {bits}-bit integer")
    return value
