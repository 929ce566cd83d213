"""Writing a file of the workdir whole: through a temporary name and a rename.

The workdir is application data (VASP itself synchronizes nothing), so nothing here is synchronized; a
reader -- VASP, or the next attempt -- sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str | bytes) -> None:
    """Replace ``path`` through a temporary name in the same directory."""
    temporary = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    data = text.encode("ascii", errors="replace") if isinstance(text, str) else text
    temporary.write_bytes(data)
    os.replace(temporary, path)
