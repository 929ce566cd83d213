"""Writing a file of the workdir whole: through a temporary name and a rename.

The workdir is application data (VASP itself synchronizes nothing), so nothing here is synchronized; a
reader -- VASP, or the next attempt -- sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    # What the package's file functions take, as the SDK's do: strings on the runner's own paths, any
    # path-like object from a caller.
    from httk.workflow.sdk._files import StrPath


def write_atomically(path: StrPath, text: str | bytes) -> None:
    """Replace ``path`` through a temporary name in the same directory."""
    folder, name = os.path.split(os.fspath(path))
    temporary = os.path.join(folder, f".{name}.tmp.{os.getpid()}")
    data = text.encode("ascii", errors="replace") if isinstance(text, str) else text
    with open(temporary, "wb") as stream:
        stream.write(data)
    os.replace(temporary, path)


def read_text(path: StrPath) -> str:
    """A small text file of the workdir, whole, decoded as ``Path.read_text()`` decodes it."""
    with open(path) as stream:
        return stream.read()
