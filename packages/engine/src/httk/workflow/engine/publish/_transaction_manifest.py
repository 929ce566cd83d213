"""Transaction manifests: the rules a published transaction must meet before a manager commits to it.

What :func:`validate_manifest` guarantees about a :class:`Manifest` it returns:

- ``format``, ``format_version``, a canonical UUID ``id``, and ``expected_data_generation`` equal to the
  generation the attempt was given;
- every operation has a unique operation id (one normalized protocol component), one of the five ``op``
  types with its required members, and a ``path`` that is a normalized relative POSIX path below
  ``data/`` containing no protocol control name (``.httk-workflow``, ``.httk-job``, ``.httk-attempt.*``)
  in any component;
- no two operations overlap: no path equals another, and a path lies below another only when that other
  is a ``make-dir`` earlier in the manifest (the one way an operation can depend on another). Sources are
  distinct and none lies below another;
- every source lies below ``payload/`` of the bundle, and (``check_payload``) is present now with the
  declared digest: a file's SHA-256, or the canonical tree digest (DECISIONS D11) of a tree. Nothing
  anywhere below ``payload/`` is a symbolic link, device, socket or FIFO, no staged file has a second hard
  link (a link shared with the workdir would let later writes there reach committed data), and the
  bundle's ``trash/`` is absent or empty.

:func:`check_preconditions` then simulates the manifest over the current ``data/`` without touching it:
each destination's ancestors inside ``data/`` are directories or absent — a ``make-dir`` needs its parent
(or ``parents: true``), a ``replace-tree`` an existing parent, while a put creates the missing parents of
its destination (DECISIONS D15) — ``expected_sha256`` and ``require_absent`` hold, a ``remove`` target
exists unless ``missing_ok``, and no ancestor inside ``data/`` is a symbolic link. A manager runs both at
outcome validation, before the committing rename, so every refusal is an unusable outcome
(``protocol_error``) and nothing in ``data/`` has changed. A manager resuming an abandoned committing
marker calls :func:`validate_manifest` with ``check_payload=False``: some sources are legitimately gone
by then, and replay checks each one it moves.

Why here and not in the schema: uniqueness, overlap and path rules are protocol rules outside
transaction.schema.json. Unknown members are ignored, as everywhere in the protocol.

Cost: O(operations x path depth) for the structural rules. ``check_payload`` reads every staged byte
once and lists the payload tree once; :func:`check_preconditions` reads every old file or tree an
``expected_sha256`` names and ``lstat``s each destination and its ancestors.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from httk.workflow.protocol import (
    InvalidDocumentError,
    InvalidNameError,
    WorkflowError,
    validate_operation_id,
    validate_uuid,
)
from httk.workflow.protocol._digest import sha256_file, tree_digest
from httk.workflow.protocol._job_rules import normalize_relative_path
from httk.workflow.protocol._jsonio import read_json_object

FORMAT = "httk-workflow-transaction"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
PAYLOAD_DIR = "payload"
TRASH_DIR = "trash"
MAX_MANIFEST_BYTES = 16 << 20
"""Largest accepted manifest.json (a tree of many small files may be staged as many put-file ops)."""

MAKE_DIR = "make-dir"
PUT_FILE = "put-file"
PUT_TREE = "put-tree"
REPLACE_TREE = "replace-tree"
REMOVE = "remove"
OPERATION_TYPES = (MAKE_DIR, PUT_FILE, PUT_TREE, REPLACE_TREE, REMOVE)
_WITH_SOURCE = frozenset({PUT_FILE, PUT_TREE, REPLACE_TREE})
_CONTROL_NAMES = frozenset({".httk-workflow", ".httk-job"})
_ATTEMPT_PREFIX = ".httk-attempt."
_SHA256_RE = re.compile(r"[0-9a-f]{64}\Z")
_MAX_GENERATION = (1 << 64) - 1


class TransactionError(WorkflowError):
    """A transaction manifest, its staged payload or its preconditions break a rule.

    The manager records it as ``protocol_error`` (:attr:`code`): the outcome is unusable and ``data/`` is
    untouched. ``operation`` is the offending operation's id when it has a valid one, ``member`` the
    dotted JSON path (``operations[2].sha256``), ``rule`` what is wrong, ``path`` the file concerned.

    ::

        WorkflowError
        └── TransactionError              the manifest, payload or a precondition is refused
            └── TransactionCorruptionError  replay met a combination no correct replay produces
    """

    code = "protocol_error"

    def __init__(
        self, rule: str, *, operation: str | None = None, member: str = "", path: Path | str | None = None
    ) -> None:
        self.rule = rule
        self.operation = operation
        self.member = member
        self.path = None if path is None else str(path)
        parts = [self._prefix()]
        if operation is not None:
            parts.append(f"operation {operation!r}")
        if member:
            parts.append(f"member {member!r}")
        where = f" ({self.path})" if self.path else ""
        head = " ".join(parts) if len(parts) > 1 else parts[0].rstrip(":")  # never "invalid transaction::"
        super().__init__(f"{head}: {rule}{where}")

    def _prefix(self) -> str:
        return "invalid transaction:"


class TransactionCorruptionError(TransactionError):
    """Replay found a source/destination/trash combination it cannot explain; ``transaction_corruption``.

    Raised only after the bounded visibility re-probes, so a slow network filesystem is not mistaken for
    damage. The marker stays ``committing``; nothing was guessed.
    """

    code = "transaction_corruption"

    def _prefix(self) -> str:
        return "transaction corruption:"


@dataclass(frozen=True, slots=True)
class Operation:
    """One validated operation. ``source`` and ``sha256`` are set exactly for the three put types."""

    index: int
    id: str
    op: str
    path: str
    source: str | None = None
    sha256: str | None = None
    expected_sha256: str | None = None
    parents: bool = False
    missing_ok: bool = False
    require_absent: bool = False

    def __repr__(self) -> str:
        return f"<Operation {self.id!r} {self.op} {self.path!r}>"


@dataclass(frozen=True, slots=True)
class Manifest:
    """A validated transaction manifest; operations in the order they are applied."""

    id: str
    expected_data_generation: int
    operations: tuple[Operation, ...]

    def __repr__(self) -> str:
        return (
            f"<Manifest {self.id} generation={self.expected_data_generation} "
            f"operations={len(self.operations)}>"
        )


def load_manifest(
    bundle_dir: Path,
    *,
    expected_data_generation: int,
    check_payload: bool = True,
    data_dir: Path | None = None,
) -> Manifest:
    """Read ``bundle_dir/manifest.json`` as untrusted input and :func:`validate_manifest` it."""
    try:
        document = read_json_object(
            bundle_dir / MANIFEST_FILE, document="transaction manifest", max_bytes=MAX_MANIFEST_BYTES
        )
    except InvalidDocumentError as exc:
        raise TransactionError(exc.rule, member=exc.member, path=bundle_dir / MANIFEST_FILE) from exc
    return validate_manifest(
        document,
        bundle_dir,
        expected_data_generation=expected_data_generation,
        check_payload=check_payload,
        data_dir=data_dir,
    )


def validate_manifest(
    manifest: dict[str, Any],
    bundle_dir: Path,
    *,
    expected_data_generation: int,
    check_payload: bool = True,
    data_dir: Path | None = None,
) -> Manifest:
    """Apply every manifest rule; with ``data_dir`` also :func:`check_preconditions`.

    Raises
    ------
    TransactionError
        The first rule broken, naming the operation, the member and the rule.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> bundle = pathlib.Path(tempfile.mkdtemp())
    >>> doc = {"format": "httk-workflow-transaction", "format_version": 1,
    ...        "id": "6fc3852b-f1df-4edf-a92c-7f81c3e02465", "expected_data_generation": 0,
    ...        "operations": [{"id": "d", "op": "make-dir", "path": "results"}]}
    >>> validate_manifest(doc, bundle, expected_data_generation=0).operations[0]
    <Operation 'd' make-dir 'results'>
    """
    if not isinstance(manifest, dict):
        raise TransactionError("must be a JSON object")
    if manifest.get("format") != FORMAT:
        raise TransactionError(f"must be {FORMAT!r}", member="format")
    if not _is_int(manifest.get("format_version")) or manifest["format_version"] != FORMAT_VERSION:
        raise TransactionError(f"must be {FORMAT_VERSION}", member="format_version")
    try:
        transaction_id = validate_uuid(manifest.get("id"), "transaction id")  # type: ignore[arg-type]
    except InvalidNameError as exc:
        raise TransactionError(exc.rule, member="id") from None
    generation: Any = manifest.get("expected_data_generation")
    if not _is_int(generation) or not 0 <= generation <= _MAX_GENERATION:
        raise TransactionError("must be an unsigned 64-bit integer", member="expected_data_generation")
    if generation != expected_data_generation:
        raise TransactionError(
            f"is {generation} but the attempt started from data generation {expected_data_generation}",
            member="expected_data_generation",
        )
    raw = manifest.get("operations")
    if not isinstance(raw, list):
        raise TransactionError("must be an array", member="operations")
    operations = tuple(_operation(index, item) for index, item in enumerate(raw))
    _check_overlap(operations)
    result = Manifest(transaction_id, generation, operations)
    if check_payload:
        check_staged_payload(bundle_dir, result)
    if data_dir is not None:
        check_preconditions(data_dir, result)
    return result


def _is_int(value: object) -> bool:
    return isinstance(value, int) and value.__class__ is not bool


# -- one operation ---------------------------------------------------------------------------------
def _operation(index: int, item: object) -> Operation:
    where = f"operations[{index}]"
    if not isinstance(item, dict):
        raise TransactionError("must be an object", member=where)
    try:
        op_id = validate_operation_id(item.get("id"))  # type: ignore[arg-type]
    except InvalidNameError as exc:
        raise TransactionError(exc.rule, member=f"{where}.id") from None

    def fail(member: str, rule: str) -> NoReturn:
        raise TransactionError(rule, operation=op_id, member=f"{where}.{member}")

    kind = item.get("op")
    if kind not in OPERATION_TYPES:
        fail("op", f"must be one of {', '.join(OPERATION_TYPES)}")
    path = _data_path(item.get("path", None), op_id, f"{where}.path")
    flags = {name: _flag(item, name, fail) for name in ("parents", "missing_ok", "require_absent")}
    expected = _digest_member(item, "expected_sha256", fail, required=False)
    source = sha = None
    if kind in _WITH_SOURCE:
        source = _source_path(item.get("source", None), op_id, f"{where}.source")
        sha = _digest_member(item, "sha256", fail, required=True)
    if kind == MAKE_DIR and expected is not None:
        fail("expected_sha256", "make-dir has no old content to check; it is idempotent by itself")
    if flags["require_absent"] and expected is not None:
        fail("require_absent", "contradicts expected_sha256: a destination cannot be absent and match")
    return Operation(
        index=index,
        id=op_id,
        op=kind,
        path=path,
        source=source,
        sha256=sha,
        expected_sha256=expected,
        parents=flags["parents"] if kind == MAKE_DIR else False,
        missing_ok=flags["missing_ok"] if kind == REMOVE else False,
        require_absent=flags["require_absent"] if kind in _WITH_SOURCE else False,
    )


def _flag(item: dict[str, Any], name: str, fail: Any) -> bool:
    value = item.get(name, False)
    if not isinstance(value, bool):
        fail(name, "must be true or false")
    return bool(value)


def _digest_member(item: dict[str, Any], name: str, fail: Any, *, required: bool) -> str | None:
    if name not in item:
        if required:
            fail(name, "is required")
        return None
    value = item[name]
    if not isinstance(value, str) or not _SHA256_RE.match(value):
        fail(name, "must be 64 lowercase hexadecimal digits")
    return str(value)


def _relative(text: object, op_id: str, member: str, what: str) -> str:
    try:
        return normalize_relative_path(text, what=what, member=member, document="transaction")
    except InvalidDocumentError as exc:
        raise TransactionError(exc.rule, operation=op_id, member=member) from None


def _data_path(text: object, op_id: str, member: str) -> str:
    path = _relative(text, op_id, member, "a path below data/")
    for component in path.split("/"):
        if component in _CONTROL_NAMES or component.startswith(_ATTEMPT_PREFIX):
            raise TransactionError(
                f"must not name protocol control data ({component!r})", operation=op_id, member=member
            )
    return path


def _source_path(text: object, op_id: str, member: str) -> str:
    source = _relative(text, op_id, member, "a source below transaction/")
    head, _, rest = source.partition("/")
    if head != PAYLOAD_DIR or not rest:
        raise TransactionError("must lie below payload/ of the bundle", operation=op_id, member=member)
    return source


# -- overlap ---------------------------------------------------------------------------------------
def _ancestors(path: str) -> list[str]:
    """Proper ancestors of a relative path, nearest last: ``a/b/c`` -> ``["a", "a/b"]``."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _check_overlap(operations: tuple[Operation, ...]) -> None:
    # Invariant: after this check, the operations touching any one path of data/ are exactly one, plus
    # the earlier make-dirs of its ancestors; and no source is shared or nested. Replay relies on this:
    # an operation's source, destination and trash are never moved by another operation.
    ids: set[str] = set()
    paths: dict[str, Operation] = {}
    sources: set[str] = set()
    for op in operations:
        where = f"operations[{op.index}]"
        if op.id in ids:
            raise TransactionError("is not unique in the manifest", operation=op.id, member=f"{where}.id")
        ids.add(op.id)
        other = paths.get(op.path)
        if other is not None:
            raise TransactionError(
                f"is also the path of operation {other.id!r}; operations must not overlap",
                operation=op.id,
                member=f"{where}.path",
            )
        paths[op.path] = op
        if op.source is not None:
            if op.source in sources:
                raise TransactionError(
                    "is also the source of another operation",
                    operation=op.id,
                    member=f"{where}.source",
                )
            sources.add(op.source)
    for op in operations:
        where = f"operations[{op.index}]"
        if op.source is not None and any(a in sources for a in _ancestors(op.source)):
            raise TransactionError(
                "lies below the source of another operation", operation=op.id, member=f"{where}.source"
            )
        for ancestor in _ancestors(op.path):
            other = paths.get(ancestor)
            if other is not None and (other.op != MAKE_DIR or other.index > op.index):
                rule = (
                    f"lies below {ancestor!r} of operation {other.id!r}; only an earlier make-dir may "
                    "hold another operation's path"
                )
                raise TransactionError(rule, operation=op.id, member=f"{where}.path")


# -- the staged payload ----------------------------------------------------------------------------
def check_staged_payload(bundle_dir: Path, manifest: Manifest) -> None:
    """Refuse forbidden file types and extra links in ``payload/``, a nonempty ``trash/``, bad digests."""
    payload = bundle_dir / PAYLOAD_DIR
    if path_kind(payload) not in ("absent", "dir"):
        raise TransactionError("must be a directory", member=PAYLOAD_DIR, path=payload)
    if path_kind(payload) == "dir":
        _scan_payload(payload)
    trash = bundle_dir / TRASH_DIR
    trash_kind = path_kind(trash)
    if trash_kind == "dir":
        with os.scandir(trash) as entries:
            if next(entries, None) is not None:
                raise TransactionError("must be empty when the transaction is published", path=trash)
    elif trash_kind != "absent":
        raise TransactionError("must be absent or an empty directory", member=TRASH_DIR, path=trash)
    for op in manifest.operations:
        if op.source is not None:
            _check_source(bundle_dir, op)


def _scan_payload(payload: Path) -> None:
    # An explicit stack, not recursion: a staged tree may be deeper than Python's recursion limit.
    stack = [(payload, PAYLOAD_DIR)]
    while stack:
        directory, relative = stack.pop()
        with os.scandir(directory) as entries:
            children = list(entries)
        for entry in children:
            rel = f"{relative}/{entry.name}"
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                stack.append((Path(entry.path), rel))
            elif not stat.S_ISREG(st.st_mode):
                what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a device, socket or FIFO"
                raise TransactionError(
                    f"is {what}; a staged payload holds only files and directories", path=rel
                )
            elif st.st_nlink > 1:
                raise TransactionError(
                    f"has {st.st_nlink} hard links; a staged file must be a private copy, or writes "
                    "through its other name would reach committed data",
                    path=rel,
                )


def _check_source(bundle_dir: Path, op: Operation) -> None:
    assert op.source is not None
    source = bundle_dir / op.source
    member = f"operations[{op.index}].source"
    want = "file" if op.op == PUT_FILE else "dir"
    found = path_kind(source)
    if found != want:
        rule = "is absent" if found == "absent" else f"must be a {'regular file' if want == 'file' else want}"
        raise TransactionError(rule, operation=op.id, member=member, path=source)
    digest = sha256_file(source) if want == "file" else tree_digest(source)
    if digest != op.sha256:
        raise TransactionError(
            f"the staged {'file' if want == 'file' else 'tree'} digests to {digest}, not the declared sha256",
            operation=op.id,
            member=f"operations[{op.index}].sha256",
            path=source,
        )


def path_kind(path: Path) -> str:
    """``absent``, ``file``, ``dir``, ``symlink`` or ``other`` without following a final symlink."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "absent"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "symlink" if stat.S_ISLNK(mode) else "other"


# -- preconditions against the current data/ -------------------------------------------------------
def check_preconditions(data_dir: Path, manifest: Manifest) -> None:
    """Simulate the manifest over ``data/`` as it is now; raise :class:`TransactionError` at a refusal.

    ``data/`` that does not exist yet counts as empty (replay creates it). Nothing is modified.
    """
    root = path_kind(data_dir)
    if root not in ("absent", "dir"):
        raise TransactionError("data/ must be a directory", path=data_dir)
    created: set[str] = set()  # directories earlier make-dirs of this manifest create

    def kind(relative: str) -> str:
        if relative in created:
            return "dir"
        return "absent" if root == "absent" else path_kind(data_dir / relative)

    for op in manifest.operations:
        member = f"operations[{op.index}].path"

        def fail(rule: str, *, op: Operation = op, member: str = member) -> NoReturn:
            raise TransactionError(rule, operation=op.id, member=member, path=data_dir / op.path)

        parents = _ancestors(op.path)
        for ancestor in parents:
            if kind(ancestor) not in ("absent", "dir"):
                fail(f"its ancestor {ancestor!r} in data/ is not a directory")
        missing = [a for a in parents if kind(a) == "absent"]
        found = kind(op.path)
        if op.op == MAKE_DIR:
            if found not in ("absent", "dir"):
                fail("exists and is not a directory")
            if missing and not op.parents:
                fail(f"its parent {missing[-1]!r} does not exist; declare parents: true")
            created.update([*missing, op.path] if found == "absent" else [])
            continue
        if op.op == REMOVE:
            if found == "absent" and not op.missing_ok:
                fail("does not exist; declare missing_ok: true to allow that")
            if found != "absent" and op.expected_sha256 is not None:
                _check_expected(data_dir / op.path, found, op, fail)
            continue
        if missing and op.op == REPLACE_TREE:
            fail(
                f"its parent {missing[-1]!r} does not exist and replace-tree replaces a tree in place; "
                "use put-tree, which creates missing parents, or add a make-dir operation before this one"
            )
        created.update(missing)  # D15: replay creates them, and later operations find directories there
        _check_put(data_dir / op.path, found, op, fail)


def _check_put(path: Path, found: str, op: Operation, fail: Any) -> None:
    if op.require_absent and found != "absent":
        fail("exists but require_absent is declared")
    if found == "absent":
        if op.expected_sha256 is not None:
            fail("is absent but expected_sha256 names its old content")
        return
    if op.op == PUT_FILE and found != "file":
        fail("exists and is not a regular file; put-file replaces only a regular file")
    if op.op == PUT_TREE and not (found == "dir" and _is_empty_dir(path)):
        fail("exists and is not an empty directory; use replace-tree to replace a tree")
    if op.op == REPLACE_TREE and found != "dir":
        fail("exists and is not a directory; replace-tree replaces only a tree")
    if op.expected_sha256 is not None:
        _check_expected(path, found, op, fail)


def _check_expected(path: Path, found: str, op: Operation, fail: Any) -> None:
    try:
        digest = digest_of(path, found)
    except InvalidDocumentError as exc:
        fail(f"cannot be digested for expected_sha256: {exc.rule}")
    if digest != op.expected_sha256:
        fail(f"digests to {digest}, not expected_sha256")


def digest_of(path: Path, kind: str) -> str:
    """A regular file's SHA-256 or a directory's canonical tree digest; refuses every other kind."""
    if kind == "file":
        return sha256_file(path)
    if kind == "dir":
        return tree_digest(path)
    raise InvalidDocumentError("transaction", "", f"is {'a symbolic link' if kind == 'symlink' else kind}")


def _is_empty_dir(path: Path) -> bool:
    with os.scandir(path) as entries:
        return next(entries, None) is None
