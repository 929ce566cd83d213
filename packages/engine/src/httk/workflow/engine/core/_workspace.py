"""Workspaces: creating one, attaching one, and the paths of everything inside it.

A workspace is a directory whose ``.httk-workflow/format.json`` names it. Initialization builds the
whole control directory under a temporary name beside it and renames it into place, so a workspace
either exists completely or not at all. Attaching validates format.json and decides whether this
process may mutate the workspace: an unknown core profile or extension allows read-only inspection,
the withdrawn priority-bands-v1 allows nothing at all.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from httk.workflow.protocol import InvalidDocumentError, WorkspaceError, WorkspaceFormatError
from httk.workflow.protocol._jsonio import dump_pretty, read_json_object
from httk.workflow.protocol._markers import MAX_MARKER_BYTES
from httk.workflow.protocol._policy import Policy, parse_policy, parse_settings

from . import _fsops
from ._clock import SYSTEM_CLOCK, Clock, utc_timestamp
from ._journal import JournalWriter
from ._journal_reader import JournalReader
from ._states import Kind

if TYPE_CHECKING:
    from ._index import MarkerIndex
    from ._markers_fs import MarkerLocation

CONTROL_DIR = ".httk-workflow"
FORMAT_NAME = "httk-workflow-filesystem"
CORE_PROFILE = "core-v2"
READABLE_PROFILES = frozenset({"core-v1", "core-v2"})
SUPPORTED_EXTENSIONS = frozenset({"transactional-data-v1", "detached-transfer-v1"})
RESERVED_EXTENSIONS = frozenset({"relocation-v1", "multiworkspace-v1"})
WITHDRAWN_EXTENSION = "priority-bands-v1"
RECORD_REF_ENCODING = "hwref-v1"
_CONTROL_SUBDIRS = (
    "tmp",
    "state",
    "journal",
    "managers",
    "quarantine",
    "runners",
    "requests",
    "requests/tmp",
    "requests/ready",
    "requests/claimed",
    "requests/retired",
)


@dataclass
class Workspace:
    """An attached workspace.

    ``writable`` is false when this process may only inspect it (an unsupported profile or extension, or
    a read-only attach). ``durable`` is the effective durability mode: the workspace's own (D14) unless
    the attaching command overrode it.
    """

    root: Path
    document: dict[str, Any]
    policy: Policy
    durable: bool
    writable: bool
    clock: Clock = field(default=SYSTEM_CLOCK, repr=False)
    _writer: JournalWriter | None = field(default=None, init=False, repr=False)
    _index: MarkerIndex | None = field(default=None, init=False, repr=False)
    # Every transition names two marker directories; joining four path parts each time was a tenth of a
    # manager's Python time. Bounded by the placements this process touched, like the marker index.
    _marker_dirs: dict[tuple[str, str], Path] = field(default_factory=dict, init=False, repr=False)

    # -- identity and layout -------------------------------------------------------------------
    @property
    def workspace_id(self) -> str:
        return str(self.document["workspace_id"])

    @property
    def name(self) -> str | None:
        value = self.document.get("name")
        return value if isinstance(value, str) else None

    @property
    def extensions(self) -> tuple[str, ...]:
        return tuple(self.document.get("extensions") or ())

    @property
    def control(self) -> Path:
        return self.root / CONTROL_DIR

    @property
    def format_path(self) -> Path:
        return self.control / "format.json"

    @property
    def tmp_dir(self) -> Path:
        return self.control / "tmp"

    @property
    def journal_dir(self) -> Path:
        return self.control / "journal"

    @property
    def runners_dir(self) -> Path:
        return self.control / "runners"

    @property
    def managers_dir(self) -> Path:
        return self.control / "managers"

    @property
    def requests_dir(self) -> Path:
        return self.control / "requests"

    @property
    def quarantine_dir(self) -> Path:
        return self.control / "quarantine"

    def state_dir(self, kind: Kind | str) -> Path:
        return self.control / "state" / str(kind)

    def marker_dir(self, kind: Kind | str, placement: str) -> Path:
        key = (str(kind), placement)
        directory = self._marker_dirs.get(key)
        if directory is None:
            directory = self._marker_dirs[key] = self.control / "state" / key[0] / placement
        return directory

    def payload_path(self, placement: str, job_key: str) -> Path:
        return self.root / placement / job_key

    @property
    def settings(self) -> dict[str, Any]:
        return parse_settings(self.document.get("settings"))

    # -- journal -------------------------------------------------------------------------------
    def journal(self) -> JournalWriter:
        """This process's journal writer for the workspace, created on first use (never for reads)."""
        self.require_writable()
        if self._writer is None:
            self._writer = JournalWriter(
                self.journal_dir, segment_bytes=self.policy.journal_segment_bytes, durable=self.durable
            )
        return self._writer

    @property
    def index(self) -> MarkerIndex:
        """This process's job-id → marker index for the workspace (see ``_index``), made on first use."""
        if self._index is None:
            from ._index import MarkerIndex

            self._index = MarkerIndex(self)
        return self._index

    def note_marker(self, location: MarkerLocation) -> None:
        """Keep an existing index current with a marker this process moved (it is never built for this)."""
        if self._index is not None:
            self._index.note(location)

    @cached_property
    def reader(self) -> JournalReader:
        return JournalReader(
            self.journal_dir, visibility_deadline=self.policy.visibility_deadline_seconds, clock=self.clock
        )

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def require_writable(self) -> None:
        if not self.writable:
            raise WorkspaceError(
                f"attached read-only: {self.read_only_reason or 'opened for inspection'}", self.root
            )

    @property
    def read_only_reason(self) -> str | None:
        return _unsupported_reason(self.document)

    # -- format.json ---------------------------------------------------------------------------
    def update_document(self, changes: Mapping[str, Any]) -> None:
        """Read-modify-write format.json (last writer wins, never torn); unknown members are preserved."""
        self.require_writable()
        current = read_format_document(self.root)
        current.update(changes)
        validate_format_document(current, self.format_path)
        _fsops.write_file_atomic(self.format_path, dump_pretty(current), durable=self.durable)
        self.document = current
        self.policy = parse_policy(current.get("policy"))


def find_root(path: Path | str) -> Path:
    """The workspace directory at ``path`` (given as the workspace itself, not a child of it)."""
    root = Path(os.path.abspath(path))  # runners are given absolute paths; so is everything else
    if not (root / CONTROL_DIR / "format.json").is_file():
        raise WorkspaceFormatError(f"not a workspace: no {CONTROL_DIR}/format.json", root)
    return root


def read_format_document(root: Path) -> dict[str, Any]:
    path = root / CONTROL_DIR / "format.json"
    try:
        return read_json_object(path, document="format.json")
    except FileNotFoundError:
        raise WorkspaceFormatError(f"not a workspace: no {CONTROL_DIR}/format.json", root) from None
    except InvalidDocumentError as exc:
        raise WorkspaceFormatError(str(exc), root) from None


def _unsupported_reason(document: Mapping[str, Any]) -> str | None:
    profile = document.get("core_profile")
    if profile != CORE_PROFILE:
        return f"core profile {profile!r} is readable but only {CORE_PROFILE!r} is mutated by this version"
    unknown = sorted(set(document.get("extensions") or ()) - SUPPORTED_EXTENSIONS)
    if unknown:
        reserved = [e for e in unknown if e in RESERVED_EXTENSIONS]
        what = "reserved and not implemented" if reserved else "unknown to this version"
        return f"extension {unknown[0]!r} is {what}"
    return None


def validate_format_document(document: Mapping[str, Any], path: Path) -> None:
    """Refuse a format.json this implementation cannot interpret at all, even read-only."""

    def bad(member: str, rule: str) -> WorkspaceFormatError:
        return WorkspaceFormatError(f"format.json member {member!r}: {rule}", path)

    if document.get("format") != FORMAT_NAME:
        raise bad("format", f"must be {FORMAT_NAME!r}")
    if document.get("format_version") != 1:
        raise bad("format_version", "must be 1; this version reads format version 1 only")
    if document.get("record_ref_encoding", RECORD_REF_ENCODING) != RECORD_REF_ENCODING:
        raise bad("record_ref_encoding", f"must be {RECORD_REF_ENCODING!r}")
    workspace_id = document.get("workspace_id")
    try:
        if not isinstance(workspace_id, str) or str(uuid.UUID(workspace_id)) != workspace_id:
            raise ValueError
    except ValueError:
        raise bad("workspace_id", "must be a lowercase canonical UUID") from None
    if document.get("core_profile") not in READABLE_PROFILES:
        raise bad("core_profile", f"must be one of {', '.join(sorted(READABLE_PROFILES))}")
    extensions = document.get("extensions", [])
    if not isinstance(extensions, list) or not all(isinstance(e, str) for e in extensions):
        raise bad("extensions", "must be an array of extension names")
    if WITHDRAWN_EXTENSION in extensions:
        raise WorkspaceFormatError(
            f"this workspace enables the withdrawn extension {WITHDRAWN_EXTENSION!r}, whose ready markers "
            "cannot be interpreted; it cannot be attached, not even read-only, and must be re-initialized "
            "(create a new workspace and resubmit its jobs) rather than migrated",
            path,
        )
    if "durable" in document and not isinstance(document["durable"], bool):
        raise bad("durable", "must be true or false")
    if "name" in document and not isinstance(document["name"], str):
        raise bad("name", "must be a string")
    try:
        parse_policy(document.get("policy"))
        parse_settings(document.get("settings"))
    except WorkspaceError as exc:
        raise WorkspaceFormatError(str(exc), path) from None


def attach(
    path: Path | str,
    *,
    writable: bool = True,
    durable: bool | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Workspace:
    """Attach the workspace at ``path``.

    With ``writable`` the workspace must be one this version may mutate; otherwise an unsupported profile
    or extension still attaches for inspection. ``durable`` overrides the workspace's own mode (D14).
    """
    root = find_root(path)
    document = read_format_document(root)
    validate_format_document(document, root / CONTROL_DIR / "format.json")
    reason = _unsupported_reason(document)
    if writable and reason is not None:
        raise WorkspaceFormatError(f"cannot mutate this workspace: {reason}", root)
    effective = bool(document.get("durable", True)) if durable is None else durable
    return Workspace(
        root=root,
        document=document,
        policy=parse_policy(document.get("policy")),
        durable=effective,
        writable=writable and reason is None,
        clock=clock,
    )


def _check_filename_limit(directory: Path) -> None:
    """The protocol needs 213-byte filename components; refuse a filesystem that cannot hold them."""
    probe = directory / ("x" * MAX_MARKER_BYTES)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise WorkspaceError(
                f"this filesystem refuses {MAX_MARKER_BYTES}-byte file names, which state markers need",
                directory,
            ) from None
        raise
    os.close(fd)
    os.unlink(probe)


def init(
    path: Path | str,
    *,
    name: str | None = None,
    durable: bool = True,
    extensions: tuple[str, ...] = (),
    clock: Clock = SYSTEM_CLOCK,
) -> Workspace:
    """Create a workspace at ``path`` (created if absent; an existing directory is adopted).

    The control directory is assembled under a temporary name and renamed into place, so a crash leaves
    either no workspace or a complete one.
    """
    root = Path(path)
    if (root / CONTROL_DIR).exists():
        raise WorkspaceError(f"already a workspace ({CONTROL_DIR}/ exists)", root)
    unknown = sorted(set(extensions) - SUPPORTED_EXTENSIONS)
    if unknown:
        raise WorkspaceError(f"cannot enable extension {unknown[0]!r}: not supported by this version")
    _fsops.make_dirs(root, durable=durable)
    staging = root / f"{CONTROL_DIR}.init.{uuid.uuid4().hex}"
    _fsops.make_dir(staging, durable=False)
    for sub in _CONTROL_SUBDIRS:
        _fsops.make_dir(staging / sub, durable=False)
    _check_filename_limit(staging / "tmp")
    document: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": 1,
        "core_profile": CORE_PROFILE,
        "extensions": sorted(extensions),
        "record_ref_encoding": RECORD_REF_ENCODING,
        "workspace_id": str(uuid.uuid4()),
        "created_at": utc_timestamp(clock.now()),
        "policy": {
            "visibility_deadline_seconds": 5.0,
            "lease_seconds": 900.0,
            "journal_segment_bytes": 67108864,
            "retention": {},
        },
        "durable": durable,
    }
    if name is not None:
        document["name"] = name
    validate_format_document(document, staging / "format.json")
    _fsops.create_file(staging / "format.json", dump_pretty(document), durable=durable)
    if durable:
        for sub in (*_CONTROL_SUBDIRS[::-1], ""):
            _fsops.fsync_dir(staging / sub)
    _fsops.rename(staging, root / CONTROL_DIR, durable=durable)
    return attach(root, durable=durable, clock=clock)
