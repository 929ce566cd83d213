"""Replaying a published transaction into ``data/``, idempotently, by several managers at once if need be.

What :func:`replay` guarantees: when it returns, every operation of the manifest has been applied to
``data/`` exactly once, whoever applied it -- this call, a crashed predecessor, or a concurrent replayer
-- and in the durable profile every destination and every directory a step touched (destination and
source parents, each transaction trash directory a removal or replacement moved into, each directory a
make-dir created) has been synchronized. Otherwise it raises; it never guesses. The manager calls it
while the marker is ``committing`` (processing order step 4) and moves the marker out only afterwards,
which is the visibility guarantee: no attempt ever starts against half a transaction.

Why it is safe to run again, and concurrently: every operation is one or two atomic renames between
deterministic paths -- the staged ``transaction/<source>``, ``data/<path>``, and
``transaction/trash/<operation-id>/removed`` or ``.../old`` -- so the filesystem state *is* the progress
record. For each operation replay probes that state and acts by the specification's table:

=========================================================  =============================================
found                                                      action
=========================================================  =============================================
make-dir: destination a directory                          done
make-dir: destination absent                               create it (and declared parents)
put: source present, destination not yet new               check the source digest, create the missing
                                                           parents, rename it over
put: source absent, destination holds the declared digest  done
remove: target present, trash entry absent                 rename the target into the trash entry
remove: target absent, trash entry present                 done (``missing_ok``: both absent is done too)
replace-tree: source, old tree, no trash entry             old tree -> ``trash/<id>/old`` ...
replace-tree: source, no destination, trash entry          ... then source -> destination
anything else                                              re-probe with backoff, then
                                                           :class:`TransactionCorruptionError`
=========================================================  =============================================

Probes read the trash entry first, the destination next and the source last. A source only ever
disappears (never reappears) and a destination is installed only from its source, so "source present"
proves every earlier observation predates the install: a slow replayer can never mistake a new tree for
the old one and move it to trash. Renames refuse to replace (``renameat2(RENAME_NOREPLACE)``) except a
put over an existing regular file or an empty directory, where the source is unique and can move once.
A rename that fails because another replayer won is not an error: replay re-probes and finds the
operation done. As in the verified-transition algorithm, an unexplained state is re-probed with bounded
backoff (``backoff_schedule(deadline_seconds)``, sleeping on the injected clock) before corruption is
declared, so a slow network filesystem is not mistaken for damage.

Decisions the specification leaves open, made here:

- A put (``put-file``, ``put-tree``) creates the missing parent directories of its destination inside
  ``data/`` (DECISIONS D15), as the specification's own example does with ``results/energy.json`` in a
  fresh ``data/``: each with ``mkdir`` tolerating one that exists, right before the rename, so a replay
  resumed after any of them, or two replayers at once, create each exactly once. Nothing else records
  them: they are deterministic from the manifest. A parent that exists as anything but a directory is
  refused (``check_preconditions``) and at replay is an unexplained state. ``replace-tree`` replaces a
  tree in place and needs its parent; ``make-dir`` creates parents only with ``parents: true``.
- put-tree installs at an absent path or over an empty directory; replace-tree moves whatever directory
  is there into trash and installs the new tree, and with no old tree simply installs it.
- ``changed`` is decided from the manifest and the trash, never from what this replayer happened to do,
  so a resumed replay reports what the first one would have: every make-dir and put counts, a remove
  counts exactly when its trash entry exists (``missing_ok`` on an absent target changes nothing).
- Each operation's source is digested before it is renamed (the staged bytes are read once at outcome
  validation and once here). A destination is recognized as installed by the identity (device, inode)
  of the source this replayer checked, and otherwise by digesting it, which only resumed or concurrent
  replays pay for.

Cost: per operation a few ``lstat`` calls (plus one per ancestor component), one or two renames (and
one ``mkdir`` per missing parent of a put), one digest of its source; in the durable profile one
``fsync`` per rename directory during the steps (the order of replace-tree's two renames must survive a
power cut) and a final pass of at most about six more, each directory once.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import Clock, backoff_schedule
from httk.workflow.protocol import InvalidDocumentError

from ._transaction_manifest import (
    MAKE_DIR,
    PUT_FILE,
    REMOVE,
    REPLACE_TREE,
    TRASH_DIR,
    Manifest,
    Operation,
    TransactionCorruptionError,
    TransactionError,
    check_preconditions,
    check_staged_payload,
    digest_of,
    load_manifest,
    path_kind,
    validate_manifest,
)

__all__ = [
    "Manifest",
    "Operation",
    "ReplayResult",
    "TransactionCorruptionError",
    "TransactionError",
    "check_preconditions",
    "check_staged_payload",
    "load_manifest",
    "replay",
    "trash_path",
    "validate_manifest",
]

REMOVED_NAME = "removed"
OLD_NAME = "old"
_RACE_ERRNOS = frozenset({errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR})
"""What a rename or mkdir reports when another replayer got there first; replay re-probes."""
_MAX_STEPS = 4
"""Successful steps per operation after which it counts as unexplained (replace-tree needs two; a
failed step is bounded by the re-probe schedule instead)."""


@dataclass(frozen=True)
class ReplayResult:
    """What a completed replay reports.

    ``changed`` says whether the transaction changed ``data/`` (so the data generation advances);
    ``touched`` lists the ``data/`` destinations in manifest order; ``performed`` counts the steps this
    call carried out itself (0 when a predecessor had done everything).
    """

    changed: bool
    touched: list[Path]
    performed: int = 0


def trash_path(bundle_dir: Path, op: Operation) -> Path:
    """The deterministic trash entry of a remove (``.../removed``) or replace-tree (``.../old``)."""
    name = REMOVED_NAME if op.op == REMOVE else OLD_NAME
    return bundle_dir / TRASH_DIR / op.id / name


def replay(
    data_dir: Path,
    bundle_dir: Path,
    manifest: Manifest,
    *,
    durable: bool,
    deadline_seconds: float,
    clock: Clock,
) -> ReplayResult:
    """Apply (or verify already applied) every operation of ``manifest`` to ``data_dir``, in order.

    Parameters
    ----------
    data_dir
        The job's committed ``data/``; created when absent.
    bundle_dir
        The published ``outcome.ready/transaction/`` directory holding ``payload/`` and ``trash/``.
    manifest
        The validated manifest (``validate_manifest(..., check_payload=False)`` on a resumed replay).
    durable
        Synchronize as the durability table requires before returning.
    deadline_seconds
        The workspace's visibility deadline, bounding the re-probes of each operation.
    clock
        Where the re-probes sleep.

    Raises
    ------
    TransactionCorruptionError
        An operation's state stayed unexplained past the deadline; names the operation and what was found.
    OSError
        Storage failed in a way no re-probe explains (permissions, I/O); nothing was guessed either.
    """
    run = _Replay(data_dir, bundle_dir, durable, deadline_seconds, clock)
    if manifest.operations:
        run.ensure_data_dir()
    for op in manifest.operations:
        run.apply(op)
    if durable:
        run.synchronize(manifest.operations)
    changed = any(
        op.op != REMOVE or path_kind(trash_path(bundle_dir, op)) != "absent" for op in manifest.operations
    )
    return ReplayResult(changed, [data_dir / op.path for op in manifest.operations], run.performed)


@dataclass
class _Step:
    what: str
    run: Callable[[], None]


@dataclass
class _Replay:
    data_dir: Path
    bundle_dir: Path
    durable: bool
    deadline: float
    clock: Clock
    performed: int = 0
    # Invariant: an entry maps an operation id to the (device, inode) of a source this replayer digested
    # and found to hold the declared digest; a destination with that identity is that source, installed.
    checked: dict[str, tuple[int, int]] = field(default_factory=dict)

    def ensure_data_dir(self) -> None:
        with suppress(FileExistsError):  # a non-directory: refused just below
            _fsops.make_dir(self.data_dir, durable=self.durable, exist_ok=True)
        if path_kind(self.data_dir) != "dir":
            raise TransactionCorruptionError("data/ is not a directory", path=self.data_dir)

    # -- the verified loop -------------------------------------------------------------------------
    def apply(self, op: Operation) -> None:
        sleeps = iter(backoff_schedule(self.deadline))
        raced = False
        steps = 0
        while True:
            verdict = self.classify(op)
            if verdict is None:
                return
            if isinstance(verdict, _Step) and steps >= _MAX_STEPS:
                verdict = f"the operation did not settle after {steps} steps; something else is changing it"
            if isinstance(verdict, _Step):
                try:
                    verdict.run()
                except OSError as exc:
                    if exc.errno not in _RACE_ERRNOS:
                        raise
                    problem = f"{verdict.what} failed: {exc.strerror}"
                    if not raced:  # most likely another replayer won: look again before waiting
                        raced = True
                        continue
                else:
                    self.performed += 1
                    steps += 1
                    raced = False
                    continue
            else:
                problem = verdict
            delay = next(sleeps, None)
            if delay is None:
                raise TransactionCorruptionError(
                    f"{problem} (unchanged after {self.deadline:g}s of re-probes)",
                    operation=op.id,
                    member=f"operations[{op.index}]",
                    path=self.data_dir / op.path,
                )
            self.clock.sleep(delay)

    def classify(self, op: Operation) -> _Step | str | None:
        """Done (``None``), the next step, or a description of an unexplained state."""
        if op.op == MAKE_DIR:
            return self._make_dir(op)
        if op.op == REMOVE:
            return self._remove(op)
        if op.op == REPLACE_TREE:
            return self._replace_tree(op)
        return self._put(op)

    # -- per operation type ------------------------------------------------------------------------
    def _make_dir(self, op: Operation) -> _Step | str | None:
        target = self.data_dir / op.path
        found = path_kind(target)
        if found == "dir":
            return None
        if found != "absent":
            return f"the directory to make is {_describe(found)}"
        missing, problem = self._ancestors(op)
        if problem is not None:
            return problem
        if missing and not op.parents:
            return f"its parent {missing[0]} is missing and parents are not declared"
        directories = [*missing, target]

        def make() -> None:
            for directory in directories:
                _fsops.make_dir(directory, durable=self.durable, exist_ok=True)

        return _Step(f"creating {target}", make)

    def _remove(self, op: Operation) -> _Step | str | None:
        trash = trash_path(self.bundle_dir, op)
        in_trash = path_kind(trash)  # trash first, target second: see the module docstring
        target = self.data_dir / op.path
        found = path_kind(target)
        if found == "absent":
            if in_trash != "absent" or op.missing_ok:
                return None
            return f"the target is absent and its trash entry {trash} is absent too"
        if in_trash != "absent":
            return f"the target is {_describe(found)} but its trash entry {trash} exists too"
        _, problem = self._ancestors(op)
        if problem is not None:
            return problem
        if op.expected_sha256 is not None and not self._matches(target, found, op.expected_sha256):
            return "the target does not have expected_sha256"
        return _Step(f"moving {target} to {trash}", lambda: self._to_trash(target, trash))

    def _put(self, op: Operation) -> _Step | str | None:
        assert op.source is not None
        want = "file" if op.op == PUT_FILE else "dir"
        target = self.data_dir / op.path
        found = path_kind(target)
        source = self.bundle_dir / op.source
        staged = path_kind(source)  # the source last
        if staged == "absent":
            if found == want and self._installed(op, target, found):
                return None
            return _not_installed(op, found)
        problem = self._source_problem(op, source, staged, want)
        missing: list[Path] = []
        if problem is None:
            missing, problem = self._ancestors(op)
        if problem is not None:
            return problem
        if op.require_absent and found != "absent":
            return f"the destination is {_describe(found)} but require_absent is declared"
        if found not in ("absent", want) or (want == "dir" and found == "dir" and not _empty(target)):
            what = "a regular file" if want == "file" else "absent or an empty directory"
            return f"the destination is {_describe(found)}, not {what}"
        if op.expected_sha256 is not None and not self._matches(target, found, op.expected_sha256):
            return "the destination does not have expected_sha256"
        replace = found != "absent"

        def install() -> None:
            self._make_parents(missing)
            _fsops.rename(source, target, durable=self.durable, noreplace=not replace)

        return _Step(f"renaming {source} to {target}", install)

    def _replace_tree(self, op: Operation) -> _Step | str | None:
        assert op.source is not None
        trash = trash_path(self.bundle_dir, op)
        in_trash = path_kind(trash)  # trash, destination, source: see the module docstring
        target = self.data_dir / op.path
        found = path_kind(target)
        source = self.bundle_dir / op.source
        staged = path_kind(source)
        if staged == "absent":
            if found == "dir" and self._installed(op, target, found):
                return None
            return _not_installed(op, found)
        problem = self._source_problem(op, source, staged, "dir")
        if problem is None:
            _, problem = self._ancestors(op)
        if problem is not None:
            return problem
        install = _Step(
            f"renaming {source} to {target}",
            lambda: _fsops.rename(source, target, durable=self.durable, noreplace=True),
        )
        if in_trash != "absent":  # the midpoint: the old tree is in trash
            if found == "absent":
                return install
            return f"the old tree is in {trash} but the destination is {_describe(found)} again"
        if found == "absent":
            if op.expected_sha256 is not None:
                return "the destination is absent but expected_sha256 names an old tree"
            return install
        if found != "dir":
            return f"the destination is {_describe(found)}, not a tree"
        if op.require_absent:
            return "the destination exists but require_absent is declared"
        if op.expected_sha256 is not None and not self._matches(target, found, op.expected_sha256):
            return "the old tree does not have expected_sha256"
        return _Step(f"moving {target} to {trash}", lambda: self._to_trash(target, trash))

    # -- helpers -----------------------------------------------------------------------------------
    def _ancestors(self, op: Operation) -> tuple[list[Path], str | None]:
        """Missing ancestors of the destination inside data/ (outermost first), or what is wrong."""
        missing: list[Path] = []
        current = self.data_dir
        for part in op.path.split("/")[:-1]:
            current = current / part
            found = "absent" if missing else path_kind(current)
            if found == "absent":
                missing.append(current)
            elif found != "dir":
                return missing, f"its ancestor {current} is {_describe(found)}"
        if missing and op.op == REPLACE_TREE:
            return missing, f"its parent {missing[-1]} is missing (replace-tree never creates parents)"
        return missing, None

    def _make_parents(self, missing: list[Path]) -> None:
        """Create a put's missing parents (D15), outermost first; one another replayer made is kept."""
        for directory in missing:
            _fsops.make_dir(directory, durable=self.durable, exist_ok=True)
            if path_kind(directory) != "dir":  # exist_ok follows a symlink; replay follows none
                raise NotADirectoryError(errno.ENOTDIR, "is not a directory", str(directory))

    def _source_problem(self, op: Operation, source: Path, staged: str, want: str) -> str | None:
        if staged != want:
            return f"the source {op.source} is {_describe(staged)}"
        identity = _identity(source)
        if identity is not None and self.checked.get(op.id) == identity:
            return None
        try:
            digest = digest_of(source, staged)
        except (OSError, InvalidDocumentError) as exc:
            return f"the source {op.source} cannot be digested: {exc}"
        if digest != op.sha256:
            return f"the source {op.source} digests to {digest}, not the declared sha256"
        if identity is None or _identity(source) != identity:
            return f"the source {op.source} changed while it was digested"
        self.checked[op.id] = identity
        return None

    def _installed(self, op: Operation, target: Path, found: str) -> bool:
        identity = _identity(target)
        if identity is not None and self.checked.get(op.id) == identity:
            return True
        assert op.sha256 is not None
        return self._matches(target, found, op.sha256)

    @staticmethod
    def _matches(path: Path, found: str, digest: str) -> bool:
        try:
            return digest_of(path, found) == digest
        except (OSError, InvalidDocumentError):
            return False

    def _to_trash(self, target: Path, trash: Path) -> None:
        # Trash directories are created idempotently; their names depend on the operation id alone.
        for directory in (trash.parent.parent, trash.parent):
            _fsops.make_dir(directory, durable=self.durable, exist_ok=True)
            if path_kind(directory) != "dir":  # exist_ok follows a symlink; replay follows none
                raise NotADirectoryError(errno.ENOTDIR, "is not a directory", str(directory))
        _fsops.rename(target, trash, durable=self.durable, noreplace=True)

    # -- durability --------------------------------------------------------------------------------
    def synchronize(self, operations: Iterable[Operation]) -> None:
        """Flush every destination and every directory replay touched, whoever performed the step.

        A predecessor that crashed between a rename and its fsync left that rename unsynchronized, so
        this pass does not depend on what this call did itself.
        """
        paths: dict[Path, None] = {self.data_dir.parent: None, self.data_dir: None}
        for op in operations:
            target = self.data_dir / op.path
            current = self.data_dir
            for part in op.path.split("/")[:-1]:  # every ancestor: make-dir parents were created there
                current = current / part
                paths[current] = None
            if op.op != REMOVE:
                paths[target] = None
            if op.source is not None:
                paths[(self.bundle_dir / op.source).parent] = None
            if op.op in (REMOVE, REPLACE_TREE):
                trash = trash_path(self.bundle_dir, op)
                paths[trash.parent.parent] = None
                paths[trash.parent] = None
        for path in paths:
            found = path_kind(path)
            if found == "dir":
                _fsops.fsync_dir(path)
            elif found == "file":
                _fsops.fsync_file(path)


def _not_installed(op: Operation, found: str) -> str:
    return f"the source {op.source} is absent and the destination is {_describe(found)} not holding sha256"


def _describe(kind: str) -> str:
    return {
        "absent": "absent",
        "file": "a regular file",
        "dir": "a directory",
        "symlink": "a symbolic link",
    }.get(kind, "a special file")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _empty(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False
