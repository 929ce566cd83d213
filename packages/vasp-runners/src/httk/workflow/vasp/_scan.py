"""Reading large output files in bounded memory: whole lines in chunks, and the tail of a file.

``chunks`` yields a file as buffers read :data:`CHUNK_BYTES` at a time, each with the end of its last
whole line: ``buffer[:end]`` is complete lines, and the bytes after ``end`` (a line cut by the chunk) are
read again at the start of the next chunk. Nothing is copied or joined -- a copy of each chunk would cost
more than reading it -- so a 200 MB OUTCAR costs one chunk of memory and one ``read`` per chunk. A reader
finds what it wants in a buffer with ``bytes.find`` bounded by ``end`` (memchr-fast, unlike a Python loop
over lines) and only then decodes the few lines around a hit; a needle without a newline never lies
across two chunks. ``tail`` reads the last bytes of a file for what is only ever wanted from its end.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from io import FileIO

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

CHUNK_BYTES = 1 << 22


def read_lines(stream: FileIO, offset: int, size: int = CHUNK_BYTES) -> tuple[bytes, int]:
    """About ``size`` bytes of ``stream`` from ``offset``, and the end of their last whole line.

    A line longer than ``size`` is read on until it ends; the end of the file ends its last line, newline
    or not. ``(b"", 0)`` at the end of the file.
    """
    stream.seek(offset)
    data = stream.read(size) or b""
    end = data.rfind(b"\n") + 1
    while end == 0 and data:
        more = stream.read(size)
        if not more:
            return data, len(data)
        data += more
        end = data.rfind(b"\n") + 1
    return data, end


def chunks(path: StrPath, *, start: int = 0, size: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes, int]]:
    """``(offset, buffer, end)`` for consecutive pieces of ``path`` from byte ``start``: ``buffer[:end]``
    holds whole lines (the last piece of a file without a final newline excepted) beginning at ``offset``.
    """
    with open(path, "rb", buffering=0) as stream:
        offset = start
        while True:
            buffer, end = read_lines(stream, offset, size)
            if not end:
                return
            yield offset, buffer, end
            offset += end


def tail(path: StrPath, size: int) -> tuple[int, bytes]:
    """The offset and bytes of the last ``size`` bytes of ``path`` (all of it when smaller)."""
    with open(path, "rb") as stream:
        end = stream.seek(0, os.SEEK_END)
        start = max(0, end - size)
        stream.seek(start)
        return start, stream.read()


def number(text: str | bytes) -> float | None:
    """A number as VASP prints it (``-.1E+02``, ``1D-5``), or ``None`` for ``*****`` and other overflow."""
    try:
        value = float(text)
    except ValueError:
        if isinstance(text, bytes):
            text = text.decode("ascii", errors="replace")
        try:
            value = float(text.replace("D", "E").replace("d", "e"))
        except ValueError:
            return None
    return value if math.isfinite(value) else None
