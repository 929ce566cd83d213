"""Building a transaction -- a replayable contribution to the job's ``data/`` -- and staging it in a draft.

A step of a transactional job (``"data": {"mode": "transactional"}``) never writes committed ``data/``.
It describes what should change with a :class:`Transaction`, and the outcome publisher stages it inside
the outcome draft with :func:`stage_transaction` before the draft is renamed to ``outcome.ready``::

    outcome.tmp.<nonce>/transaction/manifest.json
    outcome.tmp.<nonce>/transaction/payload/<path>     one staged copy per put, mirroring its data/ path
    outcome.tmp.<nonce>/transaction/trash/             empty; the manager's replay fills it

The manager applies the operations in the order they were added, all or none as seen by the next
attempt.

What the builder guarantees: every argument is checked when the operation is added, with the manager's
own rules (normalized relative paths without protocol control names, unique operation ids, no two
operations on one path, an operation below another's path only below an earlier ``make_dir``, 64-digit
lowercase digests), so a mistake is an exception in the step, not a failed job later. Operation ids come
from the caller or from the position (``op1`` for the first operation, ``op2`` ..., skipping an id the
caller took), so the same calls always build the same manifest apart from its transaction UUID.

Decisions: sources are *copied* when the outcome is published, never linked -- a hard link into the
workdir would let later writes there reach committed data. Bytes given to :meth:`Transaction.put_file`
are held in memory until then; pass a path for large contents. A put creates the missing parent
directories of its destination when the manager replays it (DECISIONS D15); ``make_dir`` is for a
directory wanted on its own. The
transaction of an attempt (:meth:`Attempt.transaction <._attempt.Attempt.transaction>`) refuses every
operation once the attempt's outcome is published: the bundle was staged (or discarded) then, so a later
operation would be lost without a word.

Cost: importing this module loads nothing the SDK does not already load, so an accessor on ``Attempt``
may import it eagerly; the staging machinery (:mod:`._transaction_stage`, ``hashlib``) is imported only
when an outcome carries a transaction. Staging reads each source once (a file is digested while it is
copied) and reads a staged tree once more for its canonical tree digest (DECISIONS D11), computed by the
protocol package, imported only when a tree is staged. With ``durable`` every staged file and directory
is synchronized.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable

from ._errors import OutcomeError
from ._files import compact_json, write_new

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._files import StrPath

FORMAT = "httk-workflow-transaction"
FORMAT_VERSION = 1
BUNDLE_DIR = "transaction"
MANIFEST_FILE = "manifest.json"
PAYLOAD_DIR = "payload"
TRASH_DIR = "trash"

# Compiled by re on first use and cached there: most transactions name no operation id and no digest.
_OPERATION_ID = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\Z"
_SHA256 = r"[0-9a-f]{64}\Z"
_CONTROL_NAMES = frozenset({".httk-workflow", ".httk-job"})
_ATTEMPT_PREFIX = ".httk-attempt."
_MAX_COMPONENT_BYTES = 255


class TransactionError(OutcomeError):
    """A transaction operation was refused when it was added, or the transaction could not be staged.

    Parameters
    ----------
    message
        What is wrong.
    operation
        The operation id concerned, when there is one.
    argument
        The argument at fault (``"path"``, ``"expected_sha256"``), when there is one.
    path
        The file concerned, when there is one.

    Examples
    --------
    >>> str(TransactionError("must be relative", operation="op1", argument="path"))
    "operation 'op1': argument path must be relative"
    """

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        argument: str | None = None,
        path: StrPath | None = None,
    ) -> None:
        prefix = "" if operation is None else f"operation {operation!r}: "
        body = message if argument is None else f"argument {argument} {message}"
        super().__init__(prefix + body, path=path)
        self.operation = operation
        self.argument = argument


class _Pending:
    """One operation as added; ``content`` is the bytes, or the absolute source path, of a put.

    A plain class rather than a dataclass: importing the SDK must not load ``dataclasses``.
    """

    __slots__ = ("content", "expected_sha256", "id", "missing_ok", "op", "parents", "path", "require_absent")

    def __init__(
        self,
        op_id: str,
        op: str,
        path: str,
        *,
        content: bytes | str | None,
        parents: bool,
        missing_ok: bool,
        require_absent: bool,
        expected_sha256: str | None,
    ) -> None:
        self.id = op_id
        self.op = op
        self.path = path
        self.content = content
        self.parents = parents
        self.missing_ok = missing_ok
        self.require_absent = require_absent
        self.expected_sha256 = expected_sha256


class Transaction:
    """The operations of one transaction, in the order the manager applies them.

    An attempt's transaction (``a.transaction()``) refuses every operation once the attempt has
    published its outcome, with :class:`~httk.workflow.sdk.OutcomeAlreadyPublishedError`.

    Parameters
    ----------
    transaction_id
        The transaction's UUID; a fresh random one is drawn at staging when omitted.

    Examples
    --------
    >>> tx = Transaction()
    >>> tx.make_dir("results")
    'op1'
    >>> tx.put_file("results/energy.json", b'{"energy": -10.8}\\n', op_id="energy")
    'energy'
    >>> tx.remove("scratch/obsolete.dat", missing_ok=True)
    'op3'
    >>> tx
    <Transaction operations=['op1', 'energy', 'op3']>
    """

    def __init__(self, transaction_id: str | None = None) -> None:
        self.transaction_id = transaction_id
        self._operations: list[_Pending] = []
        self._by_path: dict[str, _Pending] = {}
        self._ids: set[str] = set()
        # Called with the operation's name before each operation; the attempt that owns this transaction
        # installs one that raises once its outcome is published.
        self._guard: Callable[[str], None] | None = None

    def __repr__(self) -> str:
        return f"<Transaction operations={[op.id for op in self._operations]!r}>"

    def __len__(self) -> int:
        return len(self._operations)

    @property
    def operation_ids(self) -> tuple[str, ...]:
        """The operation ids, in the order the manager applies them.

        Examples
        --------
        >>> tx = Transaction()
        >>> _ = tx.make_dir("a"), tx.make_dir("b", op_id="second")
        >>> tx.operation_ids
        ('op1', 'second')
        """
        return tuple(op.id for op in self._operations)

    # -- the five operations -----------------------------------------------------------------------
    def make_dir(self, path: str, parents: bool = False, *, op_id: str | None = None) -> str:
        """Create the directory ``path`` of ``data/`` (and, with ``parents``, its missing parents).

        Returns the operation id. An existing directory is left as it is.

        Examples
        --------
        >>> Transaction().make_dir("results/relax", parents=True)
        'op1'
        """
        self._check_open("make_dir")
        return self._add("make-dir", path, op_id, parents=_boolean(parents, "parents"))

    def put_file(
        self,
        path: str,
        source: bytes | bytearray | memoryview | str | os.PathLike[str],
        *,
        op_id: str | None = None,
        require_absent: bool = False,
        expected_sha256: str | None = None,
    ) -> str:
        """Install or replace the regular file ``path`` with ``source`` (bytes, or a file to copy).

        A path is read when the outcome is published, so it must stay unchanged until then.

        Examples
        --------
        >>> Transaction().put_file("energy.json", b"-10.8\\n", op_id="energy")
        'energy'
        """
        self._check_open("put_file")
        if isinstance(source, bytes | bytearray | memoryview):
            content: bytes | str = bytes(source)
        else:
            content = _existing(source, "file", "source")
        return self._add(
            "put-file",
            path,
            op_id,
            content=content,
            require_absent=_boolean(require_absent, "require_absent"),
            expected_sha256=expected_sha256,
        )

    def put_tree(
        self,
        path: str,
        source_dir: str | os.PathLike[str],
        *,
        op_id: str | None = None,
        require_absent: bool = False,
    ) -> str:
        """Install the directory tree ``source_dir`` at ``path``, which must be absent or empty.

        Examples
        --------
        >>> import tempfile
        >>> Transaction().put_tree("relax", tempfile.mkdtemp())
        'op1'
        """
        self._check_open("put_tree")
        content = _existing(source_dir, "dir", "source_dir")
        return self._add(
            "put-tree",
            path,
            op_id,
            content=content,
            require_absent=_boolean(require_absent, "require_absent"),
        )

    def replace_tree(
        self,
        path: str,
        source_dir: str | os.PathLike[str],
        expected_sha256: str | None = None,
        *,
        op_id: str | None = None,
    ) -> str:
        """Replace the tree at ``path`` with ``source_dir``; the old tree goes to transaction trash.

        ``expected_sha256`` is the old tree's canonical digest, checked before it is moved. With no old
        tree the new one is simply installed (unless ``expected_sha256`` demands one).

        Examples
        --------
        >>> import tempfile
        >>> Transaction().replace_tree("current", tempfile.mkdtemp())
        'op1'
        """
        self._check_open("replace_tree")
        content = _existing(source_dir, "dir", "source_dir")
        return self._add("replace-tree", path, op_id, content=content, expected_sha256=expected_sha256)

    def remove(
        self,
        path: str,
        missing_ok: bool = False,
        expected_sha256: str | None = None,
        *,
        op_id: str | None = None,
    ) -> str:
        """Move ``path`` (file or tree) out of ``data/`` into transaction trash.

        Examples
        --------
        >>> Transaction().remove("scratch", missing_ok=True)
        'op1'
        """
        self._check_open("remove")
        return self._add(
            "remove",
            path,
            op_id,
            missing_ok=_boolean(missing_ok, "missing_ok"),
            expected_sha256=expected_sha256,
        )

    # -- checks ------------------------------------------------------------------------------------
    def _check_open(self, operation: str) -> None:
        if self._guard is not None:
            self._guard(operation)

    def _add(
        self,
        op: str,
        path: str,
        op_id: str | None,
        *,
        content: bytes | str | None = None,
        parents: bool = False,
        missing_ok: bool = False,
        require_absent: bool = False,
        expected_sha256: str | None = None,
    ) -> str:
        chosen = self._operation_id(op_id)
        problem = _path_problem(path)
        if problem is not None:
            raise TransactionError(problem, operation=chosen, argument="path")
        if expected_sha256 is not None and (
            not isinstance(expected_sha256, str) or not re.match(_SHA256, expected_sha256)
        ):
            raise TransactionError(
                f"must be 64 lowercase hexadecimal digits, not {expected_sha256!r}",
                operation=chosen,
                argument="expected_sha256",
            )
        if require_absent and expected_sha256 is not None:
            raise TransactionError(
                "cannot be combined with expected_sha256", operation=chosen, argument="require_absent"
            )
        self._check_overlap(chosen, op, path)
        pending = _Pending(
            chosen,
            op,
            path,
            content=content,
            parents=parents,
            missing_ok=missing_ok,
            require_absent=require_absent,
            expected_sha256=expected_sha256,
        )
        # Invariant: operations, ids and paths change together and only here, after every check passed,
        # so a refused call leaves the transaction exactly as it was.
        self._operations.append(pending)
        self._by_path[path] = pending
        self._ids.add(chosen)
        return chosen

    def _operation_id(self, op_id: str | None) -> str:
        if op_id is None:
            number = len(self._operations) + 1  # op<position>, unless the caller already took that id
            while f"op{number}" in self._ids:
                number += 1
            return f"op{number}"
        if not isinstance(op_id, str) or not re.match(_OPERATION_ID, op_id):
            raise TransactionError(
                f"must match [A-Za-z0-9_][A-Za-z0-9._-]{{0,63}}, not {op_id!r}", argument="op_id"
            )
        if op_id in self._ids:
            raise TransactionError("is already used by another operation", operation=op_id, argument="op_id")
        return op_id

    def _check_overlap(self, chosen: str, op: str, path: str) -> None:
        other = self._by_path.get(path)
        if other is not None:
            raise TransactionError(
                f"is also the path of operation {other.id!r}", operation=chosen, argument="path"
            )
        parts = path.split("/")
        for depth in range(1, len(parts)):
            ancestor = self._by_path.get("/".join(parts[:depth]))
            if ancestor is not None and ancestor.op != "make-dir":
                raise TransactionError(
                    f"lies below {ancestor.path!r} of operation {ancestor.id!r}",
                    operation=chosen,
                    argument="path",
                )
        prefix = path + "/"
        for existing in self._operations:
            if existing.path.startswith(prefix):
                rule = (
                    f"holds {existing.path!r} of the earlier operation {existing.id!r}; add make_dir before "
                    "the operations below it"
                    if op == "make-dir"
                    else f"holds {existing.path!r} of operation {existing.id!r}"
                )
                raise TransactionError(rule, operation=chosen, argument="path")


def _boolean(value: object, argument: str) -> bool:
    if not isinstance(value, bool):
        raise TransactionError(f"must be True or False, not {value!r}", argument=argument)
    return value


def _existing(source: str | os.PathLike[str], want: str, argument: str) -> str:
    """``source`` made absolute (not resolved), once it is known to be a ``want`` (file or dir).

    Named as pathlib names it (``src/`` is ``src``, the empty path ``.``), as the Bash API's errors do;
    pathlib is imported here, by the first copy from a file, not by every attempt.
    """
    from pathlib import Path

    try:
        path = Path(os.fspath(source))
        mode = os.stat(path).st_mode
    except (TypeError, OSError) as exc:
        raise TransactionError(f"cannot be used as a source: {exc}", argument=argument) from exc
    if (want == "file" and not stat.S_ISREG(mode)) or (want == "dir" and not stat.S_ISDIR(mode)):
        kind = "a regular file" if want == "file" else "a directory"
        raise TransactionError(f"must be {kind}", argument=argument, path=path)
    return str(path.absolute())


def _path_problem(path: object) -> str | None:
    """Why ``path`` is not a normalized relative POSIX path below data/, or ``None``."""
    if not isinstance(path, str) or not path:
        return f"must be a nonempty string, not {path!r}"
    if "\0" in path:
        return "must not contain NUL bytes"
    if path.startswith("/"):
        return f"must be relative, not absolute ({path!r})"
    for component in path.split("/"):
        if component in ("", ".", ".."):
            return f"must be normalized: no empty, '.' or '..' components ({path!r})"
        if component in _CONTROL_NAMES or component.startswith(_ATTEMPT_PREFIX):
            return f"must not name protocol control data ({component!r})"
        try:
            # Strict: the manifest is UTF-8 JSON, so undecodable filename bytes (surrogateescape) are
            # refused here rather than when the outcome is published.
            size = len(component.encode("utf-8"))
        except UnicodeEncodeError:
            return f"must be valid UTF-8 ({path!r})"
        if size > _MAX_COMPONENT_BYTES:
            return f"has a component longer than {_MAX_COMPONENT_BYTES} bytes"
    return None


# -- staging ---------------------------------------------------------------------------------------
def stage_transaction(
    draft_dir: StrPath, transaction: Transaction, *, expected_data_generation: int, durable: bool
) -> dict[str, Any]:
    """Write ``transaction/`` (manifest, payload copies, empty trash) into the outcome draft.

    Called by the outcome publisher between creating the draft and renaming it to ``outcome.ready``;
    the outcome itself must then carry the same ``expected_data_generation``. With ``durable`` every
    file and directory written here, and ``draft_dir`` itself, is synchronized before this returns. On
    failure the partial ``transaction/`` is removed and :class:`TransactionError` names the cause.

    Returns the manifest document as written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> draft = pathlib.Path(tempfile.mkdtemp())
    >>> tx = Transaction()
    >>> _ = tx.put_file("energy.json", b"-10.8\\n", op_id="energy")
    >>> manifest = stage_transaction(draft, tx, expected_data_generation=0, durable=False)
    >>> manifest["operations"][0]["source"], (draft / "transaction/payload/energy.json").read_bytes()
    ('payload/energy.json', b'-10.8\\n')
    """
    if isinstance(expected_data_generation, bool) or not isinstance(expected_data_generation, int):
        raise TransactionError("must be an integer", argument="expected_data_generation")
    if not 0 <= expected_data_generation < 1 << 64:
        raise TransactionError("must be an unsigned 64-bit integer", argument="expected_data_generation")
    from ._transaction_stage import Stager, uuid4  # only when an outcome carries a transaction

    root = os.path.join(draft_dir, BUNDLE_DIR)
    stager = Stager(root, durable)
    try:
        stager.make_dir(root)
        stager.make_dir(os.path.join(root, PAYLOAD_DIR))
        stager.make_dir(os.path.join(root, TRASH_DIR))
        operations = [stager.stage(op) for op in transaction._operations]
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "id": transaction.transaction_id or uuid4(),
            "expected_data_generation": expected_data_generation,
            "operations": operations,
        }
        manifest_path = os.path.join(root, MANIFEST_FILE)
        write_new(manifest_path, compact_json(manifest), sync=durable)
        if durable:
            stager.synchronize(draft_dir)
    except OSError as exc:
        stager.discard()
        raise TransactionError(f"cannot be staged: {exc.strerror or exc}", path=exc.filename) from exc
    except BaseException:
        stager.discard()
        raise
    return manifest
