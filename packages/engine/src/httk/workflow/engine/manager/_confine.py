"""Runner confinement: a Landlock ruleset that the gated runner is started in.

What it guarantees (spec/01 "Security and hostile input": a runner must not write job.json, the state
tree or the journal, nor committed ``data/`` of a transactional job). Where the kernel has Landlock, the
gate process — and so the runner it becomes and everything that runner starts — may create, write,
truncate, rename into, link into and remove entries only below the *writable set*, which
``docs/confinement.md`` lists for users: the attempt's own directories (workdir, attempt control,
``.httk-job/`` and ``logs/``, created before launch so a rule can name them, and ``data/`` of a job that
is not transactional), the *broad paths* (temporary space, the common devices, the home directory), and
what ``runner.writable_paths`` (job input and workspace setting) and a packaged runner declare, each
judged by :class:`._writable.Boundary`. A forbidden write is ``EACCES``. When the temporary directory
the runner would use holds the workspace (it is then granted only around it), the attempt gets a
private ``TMPDIR`` in its control directory.

**Off** with ``ManagerConfig.confine`` (``--no-confine``) for a manager, ``runner.confine: false`` as a
job input or workspace setting (the input wins; only JSON ``false``) for jobs. **Where Landlock is
missing** runners run unconfined and the manager says so once when it starts. Every running frame records
what applied (``confinement``).

Why Landlock and this way: it needs no privilege, binds root as well, cannot be lifted by the confined
process, and is inherited across fork and exec. The ruleset is built in the manager and entered —
``prctl(PR_SET_NO_NEW_PRIVS)`` and ``landlock_restrict_self``, both attributes of a thread — by a
short-lived thread that then starts the gate (:meth:`Confinement.within`), so the gate process is
confined from its first instruction and the manager's own thread never is. ABI 1 cannot permit a rename
across directories at all, and before ABI 3 ``truncate(2)`` is not covered.

Cost per confined attempt: one ruleset descriptor, one ``landlock_add_rule`` per granted path, for each
of its own paths (about six) its real path from the kernel (``_writable.resolved``: an ``O_PATH`` open,
``fstat`` and the descriptor's name) and the rule's ``open`` and ``fstat``, and one thread. The broad
paths, and around a workspace inside one of them every entry beside the way down, are listed and opened
``O_PATH`` once per :data:`BROAD_REFRESH_SECONDS` and their rules kept (one descriptor each, closed with
the manager), with what depends only on the workspace and the environment: its real path, and whether
the temporary directory holds it. Measured by ``benchmarks/throughput.py`` against the same run
unconfined (jobs/s and the manager's CPU per job).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops

from ._landlock import Confinement, Landlock, OpenedRules, Ruleset, landlock
from ._writable import (
    Attempt,
    Boundary,
    WritableSet,
    declared_by_runner,
    listed,
    load_declarer,
    real_path,
    refuse_bad_declaration,
    within,
)

log = logging.getLogger("httk.workflow.manager")

CONFINE_SETTING = "runner.confine"


@dataclass
class _KeptBroad:
    """The broad part of the writable set with its rules opened, kept for :data:`BROAD_REFRESH_SECONDS`."""

    plan: WritableSet
    listed_at: float
    inside: list[tuple[str, Path]]  # broad paths inside the workspace: granted per attempt, as its own
    rules: OpenedRules
    root: str  # the workspace's real path
    private_tmp: bool  # whether the usual temporary directory holds the workspace (:func:`_private_tmpdir`)

    def close(self) -> None:
        self.rules.close()


class Confiner:
    """A manager's confinement: whether it confines at all, and the runners' declared paths."""

    def __init__(
        self,
        enabled: bool,
        kernel: Callable[[], Landlock] = landlock,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self.kernel = kernel() if enabled else Landlock(None, "turned off for this manager (--no-confine)")
        self._monotonic = monotonic
        self._declarers: dict[str, Callable[..., Iterable[Any]] | None] = {}
        self._reported: set[tuple[str, str]] = set()  # refusals logged already: (path, origin)
        # The broad part of the writable set, for one workspace root and set of broad paths (its key).
        self._broad: tuple[object, _KeptBroad] | None = None
        self._broad_paths: tuple[object, list[tuple[str, Path]]] | None = None  # by the variables they read
        self._finalizer: weakref.finalize[[], Confiner] | None = None  # closes the kept rules' descriptors

    def notice(self) -> str | None:
        """The one message a manager gives at start when it cannot confine although asked to."""
        if self.enabled and self.kernel.abi is None:
            return f"runner confinement is unavailable ({self.kernel.reason}): runners run unconfined"
        return None

    def describe(self) -> str:
        if self.kernel.abi is not None:
            return f"landlock ABI {self.kernel.abi}"
        return "off" if not self.enabled else "unavailable"

    def confine(self, attempt: Attempt, owed: _fsops.OwedSyncs | None = None) -> Confinement:
        """Create ``.httk-job/`` and ``logs/``, and build the attempt's ruleset (or say why there is none).

        Durable, the payload's synchronization after those two is left to ``owed`` when given."""
        if not self.enabled:
            return Confinement({"enforced": False, "reason": "manager", "detail": "--no-confine"})
        if _turned_off(attempt):
            return Confinement({"enforced": False, "reason": "job", "detail": f"{CONFINE_SETTING}: false"})
        if self.kernel.abi is None:
            return Confinement(
                {"enforced": False, "reason": "unavailable", "detail": str(self.kernel.reason)}
            )
        plan, kept = self._plan(attempt, owed)  # raises RunnerFailure for a packaged runner's bad declaration
        ruleset = Ruleset(self.kernel)
        try:
            ruleset.add_all(kept.rules.rules)
            for path, rules in plan.rules.items():
                if path not in kept.plan.rules:
                    for granted, tree in rules:
                        ruleset.allow(granted, tree)
        except BaseException:
            ruleset.close()
            raise
        record: dict[str, Any] = {
            "enforced": True,
            "mechanism": "landlock",
            "abi": self.kernel.abi,
            "writable": plan.writable,
        }
        if plan.tmpdir is not None:
            record["tmpdir"] = plan.tmpdir
        if plan.refused:
            record["refused"] = plan.refused
            self._report(plan.refused)
        environment = {} if plan.tmpdir is None else {"TMPDIR": plan.tmpdir}
        return Confinement(record, ruleset, environment)

    def _report(self, refused: list[dict[str, str]]) -> None:
        for entry in refused:
            key = (entry["path"], entry["origin"])
            if key not in self._reported:
                self._reported.add(key)
                log.warning(
                    "not writable for runners: %s (%s) %s", entry["path"], entry["origin"], entry["reason"]
                )

    # -- the writable set --------------------------------------------------------------------------
    def _plan(self, attempt: Attempt, owed: _fsops.OwedSyncs | None) -> tuple[WritableSet, _KeptBroad]:
        """The attempt's writable set, and the kept rules of its broad part (which the set includes)."""
        durable = attempt.workspace.durable
        for name in (".httk-job", "logs"):
            _fsops.make_dir(attempt.payload / name, durable=durable, exist_ok=True, owed=owed)
        own: list[tuple[str, Path]] = [
            ("workdir", attempt.workdir),
            ("attempt control", attempt.control_dir),
            (".httk-job", attempt.payload / ".httk-job"),
            ("logs", attempt.payload / "logs"),
        ]
        transactional = (attempt.job.get("data") or {}).get("mode") == "transactional"
        if not transactional and os.path.isdir(attempt.payload / "data"):
            own.append(("data", attempt.payload / "data"))
        kept = self._broad_part(attempt.workspace.root)
        boundary = Boundary(attempt, transactional, kept.root)
        plan = WritableSet()
        for origin, path in [*own, *kept.inside]:
            boundary.grant(plan, origin, path, declared=False)
        plan.merge(kept.plan)
        plan.tmpdir = _private_tmpdir(attempt) if kept.private_tmp else None
        module, declarer = self._declarer_for(attempt)
        packaged = declared_by_runner(module, declarer, attempt)
        for origin, entry in [*packaged, *listed(attempt)]:
            boundary.declared(plan, origin, entry)
        refuse_bad_declaration(module, plan)
        return plan, kept

    def _broad_part(self, workspace_root: Path) -> _KeptBroad:
        """The rules of the broad paths, listed and opened again at most every
        :data:`BROAD_REFRESH_SECONDS`. They depend only on the workspace (a broad path holding it is
        granted around it), not on the job: a broad path inside the workspace is left to the attempt
        (:meth:`_plan` grants it, judged against the job's payload, like its own paths). So do the
        workspace's real path and whether the usual temporary directory holds it: resolved with them."""
        broad_key, broad = self._broad_list()
        key = (os.fspath(workspace_root), broad_key)
        now = self._monotonic()
        if self._broad is not None:
            kept_key, kept = self._broad
            if kept_key == key and now - kept.listed_at < BROAD_REFRESH_SECONDS:
                return kept
            kept.close()
            self._broad = None
        root = os.path.realpath(workspace_root)
        boundary = Boundary.of_workspace(root)
        part, inside = WritableSet(), []
        for origin, path in broad:
            if within(real_path(path) or "", root):
                inside.append((origin, path))
            else:
                boundary.grant(part, origin, path, declared=False)
        usual = real_path(Path(os.environ.get("TMPDIR") or "/tmp"))
        private_tmp = usual is not None and within(root, usual)
        kept = _KeptBroad(part, now, inside, OpenedRules(self.kernel, part.grants), root, private_tmp)
        self._broad = (key, kept)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, kept.close)
        return kept

    def _broad_list(self) -> tuple[object, list[tuple[str, Path]]]:
        """The broad paths (:func:`_broad_paths`), made again only when a variable they name changed:
        the account database is not read for every attempt."""
        key = (os.environ.get("TMPDIR"), os.environ.get("HOME"), os.getuid())
        if self._broad_paths is None or self._broad_paths[0] != key:
            self._broad_paths = (key, _broad_paths())
        return self._broad_paths

    def close(self) -> None:
        """Close the descriptors the kept rules hold (a manager's end; garbage collection does it too)."""
        if self._finalizer is not None:
            self._finalizer()
        self._broad = None

    def _declarer_for(self, attempt: Attempt) -> tuple[str, Callable[..., Iterable[Any]] | None]:
        runner = attempt.job.get("runner") or {}
        path = str(runner.get("path", ""))
        if runner.get("source") != "installed" or not path.startswith("pkg:"):
            return "", None
        name = path[len("pkg:") :]
        if name not in self._declarers:
            self._declarers[name] = load_declarer(name)
        return name, self._declarers[name]


_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")
BROAD_REFRESH_SECONDS = 30.0
"""How long a manager reuses the grants of the broad paths. Around a workspace inside one of them (below
``/tmp`` or the home directory) they name every entry of each directory on the way down, and listing and
resolving those for every attempt was most of a confined launch's cost; an entry made since the last
listing is not writable until the next."""


def _broad_paths() -> list[tuple[str, Path]]:
    broad = [(name, Path(name)) for name in ("/tmp", "/dev/shm", *_DEVICES)]
    if os.environ.get("TMPDIR"):
        broad.append(("TMPDIR", Path(os.environ["TMPDIR"])))
    broad.extend(("home", home) for home in _homes())
    return broad


def _turned_off(attempt: Attempt) -> bool:
    inputs = attempt.job.get("inputs") or {}
    value = inputs[CONFINE_SETTING] if CONFINE_SETTING in inputs else attempt.settings.get(CONFINE_SETTING)
    return value is False


def _homes() -> list[Path]:
    homes = []
    with contextlib.suppress(KeyError):  # an account without a passwd entry still has $HOME
        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    if os.environ.get("HOME"):
        homes.append(Path(os.environ["HOME"]))
    return homes


def _private_tmpdir(attempt: Attempt) -> str:
    """``<attempt control>/tmp``, made now; for when the temporary directory the runner would use
    (``$TMPDIR``, else ``/tmp``) holds the workspace: that one is granted only around the workspace, so
    nothing new could be made directly in it (``mktemp`` would fail). The control directory is writable
    already and retired with the attempt; and it is on the filesystem the usual one is."""
    private = attempt.control_dir / "tmp"
    _fsops.make_dir(private, durable=False, exist_ok=True)  # scratch: never synchronized
    return str(private)
