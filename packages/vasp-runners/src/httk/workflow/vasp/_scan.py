"""Reading large output files in bounded memory: whole lines in chunks, and the tail of a file.

``chunks`` yields a file as buffers of complete lines (each ends at a newline, except the file's last
bytes), reading :data:`CHUNK_BYTES` at a time, so a 200 MB OUTCAR costs one chunk of memory. A reader
finds what it wants in a buffer with ``bytes.find`` -- memchr-fast, unlike a Python loop over lines --
and only then decodes the few lines around a hit. ``tail`` reads the last bytes of a file for what is
only ever wanted from its end.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

CHUNK_BYTES = 1 << 22


def chunks(path: Path, *, start: int = 0, size: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(offset, buffer)`` for consecutive pieces of whole lines of ``path`` from byte ``start``."""
    with open(path, "rb") as stream:
        stream.seek(start)
        offset, carry = start, b""
        while True:
            data = stream.read(size)
            if not data:
                if carry:
                    yield offset, carry
                return
            data = carry + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data  # a line longer than a chunk: keep reading until it ends
                continue
            yield offset, data[:cut]
            offset += cut
            carry = data[cut:]


def tail(path: Path, size: int) -> tuple[int, bytes]:
    """The offset and bytes of the last ``size`` bytes of ``path`` (all of it when smaller)."""
    with open(path, "rb") as stream:
        end = stream.seek(0, os.SEEK_END)
        start = max(0, end - size)
        stream.seek(start)
        return start, stream.read()


def lines_after(buffer: bytes, position: int, count: int) -> list[str] | None:
    """The ``count`` lines starting at the line holding ``position``; ``None`` when the buffer ends first."""
    start = buffer.rfind(b"\n", 0, position) + 1
    end = start
    for _ in range(count):
        end = buffer.find(b"\n", end)
        if end < 0:
            return None
        end += 1
    return buffer[start:end].decode("ascii", errors="replace").splitlines()


def number(text: str) -> float | None:
    """A number as VASP prints it (``-.1E+02``, ``1D-5``), or ``None`` for ``*****`` and other overflow."""
    try:
        value = float(text.replace("D", "E").replace("d", "e"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None
