"""What a run left in the workdir: its outputs parsed, its restart files judged, its debris archived.

After every run -- finished, stopped, crashed, or found half-written by the next attempt after its
runner was killed -- the runner does the same three things, so that a later run never mistakes an
earlier run's outputs for its own:

* **parse** OSZICAR, OUTCAR and vasprun.xml (:func:`read_outputs`), tolerating files cut short;
* **judge** the restart files (:func:`judge_restart_files`): CONTCAR is usable when it is non-empty,
  parses, and holds the POSCAR's atoms; WAVECAR when its size is what its own header says a complete
  file has; CHGCAR when it holds every grid value its header announces. Incomplete ones are deleted, so
  VASP never starts from half a wavefunction;
* **archive** (:func:`archive_outputs`) the run's outputs and the inputs it ran with into
  ``runs/<NN>-<stage>/`` (OUTCAR and vasprun.xml compressed), leaving only the inputs and the complete
  restart files in the workdir. An OUTCAR without VASP's closing banner is archived like any other,
  and marked truncated.
"""

from __future__ import annotations

import os
import struct
import zlib

from ._errors import VaspInputError, VaspOutputError
from ._oszicar import OszicarStep, read_oszicar
from ._outcar import Outcar, read_outcar
from ._record import NamedTuple
from ._scan import chunks
from ._structure import Structure, parse_poscar
from ._vasprun import Vasprun, read_vasprun

TYPE_CHECKING = False
if TYPE_CHECKING:
    from httk.workflow.sdk._files import StrPath

RUNS_DIR = "runs"
OUTPUTS = (
    "OUTCAR",
    "OSZICAR",
    "vasprun.xml",
    "CONTCAR",
    "vasp.out",
    "vasp.err",
    "XDATCAR",
    "EIGENVAL",
    "DOSCAR",
    "IBZKPT",
    "PCDAT",
    "REPORT",
    "PROCAR",
    "STOPCAR",
    "CHG",
)
COMPRESSED = ("OUTCAR", "vasprun.xml")
INPUTS = ("INCAR", "KPOINTS", "POSCAR")
_WAVECAR_TAGS = (45200.0, 45210.0, 53300.0, 53310.0)
_HEADER_LIMIT = 1_000_000


class Outputs(NamedTuple):
    """A run's parsed outputs (each ``None`` when its file is absent or unreadable)."""

    oszicar: list[OszicarStep]
    outcar: Outcar | None
    vasprun: Vasprun | None

    @property
    def finished(self) -> bool:
        """Whether VASP wrote its closing banner."""
        return self.outcar is not None and self.outcar.finished


def read_outputs(workdir: StrPath) -> Outputs:
    """Parse the outputs present in ``workdir``."""
    oszicar: list[OszicarStep] = []
    outcar = vasprun = None
    if os.path.isfile(path := os.path.join(workdir, "OSZICAR")):
        oszicar = read_oszicar(path)
    if os.path.isfile(path := os.path.join(workdir, "OUTCAR")):
        outcar = read_outcar(path)
    if os.path.isfile(path := os.path.join(workdir, "vasprun.xml")):
        try:
            vasprun = read_vasprun(path)
        except VaspOutputError:
            vasprun = None  # cut short inside its head: nothing there the OUTCAR does not also say
    return Outputs(oszicar, outcar, vasprun)


def usable_contcar(workdir: StrPath, poscar: Structure) -> Structure | None:
    """The CONTCAR when it is non-empty, parses and holds the POSCAR's atoms; else ``None``."""
    path = os.path.join(workdir, "CONTCAR")
    try:
        with open(path, encoding="ascii", errors="replace") as stream:
            text = stream.read()
        contcar = parse_poscar(text, path=path, species=poscar.species)
    except (OSError, VaspInputError):
        return None
    return contcar if contcar.same_atoms(poscar) else None


def wavecar_complete(path: StrPath) -> bool:
    """Whether a WAVECAR is as long as its header says (records x (2 + spins x k-points x (bands + 1)))."""
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as stream:
            first = stream.read(24)
            if len(first) < 24:
                return False
            record, spins, tag = struct.unpack("<3d", first)
            stream.seek(int(record))
            second = stream.read(16)
    except (OSError, OverflowError, ValueError):
        return False
    if len(second) < 16 or tag not in _WAVECAR_TAGS or record < 24 or spins not in (1.0, 2.0):
        return False
    kpoints, bands = struct.unpack("<2d", second)
    return size == int(record) * (2 + int(spins) * int(kpoints) * (int(bands) + 1))


def chgcar_complete(path: StrPath) -> bool:
    """Whether a CHGCAR holds every value of its first grid (read in chunks, not whole)."""
    try:
        expected: int | None = None
        seen = 0
        header: list[str] = []
        for _, buffer, end in chunks(path):
            lines = buffer[:end].decode("ascii", errors="replace").splitlines()
            for line in lines:
                if expected is None:
                    header.append(line)
                    expected = _grid_size(header)
                    if expected is None and len(header) > _HEADER_LIMIT:
                        return False
                    continue
                seen += len(line.split())
                if seen >= expected:
                    return True
        return False
    except OSError:
        return False


def _grid_size(header: list[str]) -> int | None:
    """The grid's value count once the header (POSCAR, a blank line, NGX NGY NGZ) is complete."""
    if len(header) < 8 or header[-2].strip():
        return None
    try:
        counts = [int(token) for token in header[6].split()]
        grid = [int(token) for token in header[-1].split()]
    except ValueError:
        return None
    if len(grid) != 3 or len(header) < 10 + sum(counts):
        return None
    return grid[0] * grid[1] * grid[2]


def judge_restart_files(workdir: StrPath) -> dict[str, str]:
    """Delete an incomplete WAVECAR or CHGCAR; say what became of each (``kept``, ``removed``, absent)."""
    verdicts: dict[str, str] = {}
    for name, complete in (("WAVECAR", wavecar_complete), ("CHGCAR", chgcar_complete)):
        path = os.path.join(workdir, name)
        if not os.path.exists(path):
            continue
        if complete(path):
            verdicts[name] = "kept"
        else:
            os.unlink(path)
            verdicts[name] = "removed (incomplete)"
    return verdicts


def archive_outputs(workdir: StrPath, index: int, stage: str) -> str:
    """Move the run's outputs (and copy its inputs) into ``runs/<NN>-<stage>/``; return that path."""
    relative = f"{RUNS_DIR}/{index:02d}-{stage}"
    target = os.path.join(workdir, relative)
    if os.path.exists(target):
        import shutil  # the exception: a previous archiving of this run was interrupted

        shutil.rmtree(target)  # do it again whole
    os.makedirs(target)
    for name in INPUTS:
        if os.path.isfile(source := os.path.join(workdir, name)):
            _copy_small(source, os.path.join(target, name))
    for name in OUTPUTS:
        source = os.path.join(workdir, name)
        if not os.path.isfile(source):
            continue
        if name in COMPRESSED:
            _gzip(source, os.path.join(target, f"{name}.gz"))
            os.unlink(source)
        else:
            os.replace(source, os.path.join(target, name))
    return relative


def _copy_small(source: str, target: str) -> None:
    """Copy an input file whole (they are small) into the archive."""
    with open(source, "rb") as reader, open(target, "wb") as writer:
        writer.write(reader.read())


def _gzip(source: StrPath, target: StrPath) -> None:
    """``target``: ``source`` gzip-compressed, a megabyte at a time.

    zlib writes the gzip format itself (``wbits`` 31); the :mod:`gzip` module would cost a runner its
    import for the same bytes.
    """
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(source, "rb") as reader, open(target, "wb") as writer:
        while data := reader.read(1 << 20):
            writer.write(compressor.compress(data))
        writer.write(compressor.flush())
