"""Runner confinement: a Landlock ruleset that the gated runner is started in.

What it guarantees (spec/01 "Security and hostile input": a runner must not write job.json, the state
tree or the journal, nor committed ``data/`` of a transactional job). Where the kernel has Landlock, the
gate process — and so the runner it becomes and everything that runner starts — may create, write,
truncate, rename into, link into and remove entries only below the *writable set*, which
``docs/confinement.md`` lists for users: the attempt's own directories (workdir, attempt control,
``.httk-job/`` and ``logs/``, created before launch so a rule can name them, and ``data/`` of a job that
is not transactional), the *broad paths* (temporary space, the common devices, the home directory), and
what ``runner.writable_paths`` (job input and workspace setting) and a packaged runner declare. Never the
workspace's ``.httk-workflow/``, job.json, committed ``data/`` of a transactional job, nor anything in the
workspace outside this job's payload: a writable path holding the workspace is granted *around* it (each
entry beside the way down, never the directories on the way), and a declared path inside the forbidden
part, or one that does not exist, is refused, logged once and recorded. A forbidden write is ``EACCES``.

**A packaged runner declares paths** through the entry point group :data:`DECLARATIONS_GROUP`: the entry
named after the runner's module (the ``<module>`` of ``pkg:<module>/<resource>``) is a callable
``(job, payload) -> Iterable[str | PathLike]`` called in the manager once per confined attempt.

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

Cost per confined attempt: one ruleset descriptor, one ``landlock_add_rule`` per granted path, one
``realpath``, ``open`` and ``fstat`` for each of its own paths (about six), and one thread. The broad
paths, and around a workspace inside one of them every entry beside the way down, are listed and opened
``O_PATH`` once per :data:`BROAD_REFRESH_SECONDS` and their rules kept (one descriptor each, closed with
the manager). Measured by ``benchmarks/throughput.py`` against the same run unconfined.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import stat
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._workspace import CONTROL_DIR, Workspace

from ._landlock import Confinement, Landlock, OpenedRules, Ruleset, landlock

log = logging.getLogger("httk.workflow.manager")

DECLARATIONS_GROUP = "httk.workflow.writable_paths"
CONFINE_SETTING = "runner.confine"
WRITABLE_SETTING = "runner.writable_paths"


@dataclass
class _KeptBroad:
    """The broad part of the writable set with its rules opened, kept for :data:`BROAD_REFRESH_SECONDS`."""

    plan: _Plan
    listed_at: float
    inside: list[tuple[str, Path]]  # broad paths inside the workspace: granted per attempt, as its own
    rules: OpenedRules

    def close(self) -> None:
        self.rules.close()


@dataclass(frozen=True, slots=True)
class Attempt:
    """Where one attempt lives: what its writable set is made of."""

    workspace: Workspace
    job: Mapping[str, Any]
    payload: Path
    control_dir: Path
    workdir: Path
    settings: Mapping[str, Any]


@dataclass
class _Plan:
    """Writable paths (real, in the order granted), the rules each needs, and the refused declarations."""

    rules: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)  # path -> [(rule path, tree)]
    refused: list[dict[str, str]] = field(default_factory=list)

    @property
    def writable(self) -> list[str]:
        return list(self.rules)

    @property
    def grants(self) -> list[tuple[str, bool]]:
        return [grant for rules in self.rules.values() for grant in rules]

    def merge(self, other: _Plan) -> None:
        """Add ``other``'s paths, except one this plan grants already (HOME and the passwd home, say)."""
        for path, rules in other.rules.items():
            self.rules.setdefault(path, rules)
        self.refused.extend(other.refused)


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

    def confine(self, attempt: Attempt) -> Confinement:
        """Create ``.httk-job/`` and ``logs/``, and build the attempt's ruleset (or say why there is none)."""
        if not self.enabled:
            return Confinement({"enforced": False, "reason": "manager", "detail": "--no-confine"})
        if _turned_off(attempt):
            return Confinement({"enforced": False, "reason": "job", "detail": f"{CONFINE_SETTING}: false"})
        if self.kernel.abi is None:
            return Confinement(
                {"enforced": False, "reason": "unavailable", "detail": str(self.kernel.reason)}
            )
        plan, kept = self._plan(attempt)
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
        if plan.refused:
            record["refused"] = plan.refused
            self._report(plan.refused)
        return Confinement(record, ruleset)

    def _report(self, refused: list[dict[str, str]]) -> None:
        for entry in refused:
            key = (entry["path"], entry["origin"])
            if key not in self._reported:
                self._reported.add(key)
                log.warning(
                    "not writable for runners: %s (%s) %s", entry["path"], entry["origin"], entry["reason"]
                )

    # -- the writable set --------------------------------------------------------------------------
    def _plan(self, attempt: Attempt) -> tuple[_Plan, _KeptBroad]:
        """The attempt's writable set, and the kept rules of its broad part (which the set includes)."""
        durable = attempt.workspace.durable
        for name in (".httk-job", "logs"):
            _fsops.make_dir(attempt.payload / name, durable=durable, exist_ok=True)
        own: list[tuple[str, Path]] = [
            ("workdir", attempt.workdir),
            ("attempt control", attempt.control_dir),
            (".httk-job", attempt.payload / ".httk-job"),
            ("logs", attempt.payload / "logs"),
        ]
        transactional = (attempt.job.get("data") or {}).get("mode") == "transactional"
        if not transactional and os.path.isdir(attempt.payload / "data"):
            own.append(("data", attempt.payload / "data"))
        boundary = _Boundary(attempt, transactional)
        plan = _Plan()
        kept = self._broad_part(boundary)
        for origin, path in [*own, *kept.inside]:
            boundary.grant(plan, origin, path, declared=False)
        plan.merge(kept.plan)
        for origin, entry in [*_declared(attempt, self._declarer_for(attempt)), *_listed(attempt)]:
            boundary.declared(plan, origin, entry)
        return plan, kept

    def _broad_part(self, boundary: _Boundary) -> _KeptBroad:
        """The rules of the broad paths, listed and opened again at most every
        :data:`BROAD_REFRESH_SECONDS`. They depend only on the workspace (a broad path holding it is
        granted around it), not on the job: a broad path inside the workspace is left to the attempt
        (:meth:`_plan` grants it, judged against the job's payload, like its own paths)."""
        broad = _broad_paths()
        key = (boundary.root, tuple((origin, str(path)) for origin, path in broad))
        now = self._monotonic()
        if self._broad is not None:
            kept_key, kept = self._broad
            if kept_key == key and now - kept.listed_at < BROAD_REFRESH_SECONDS:
                return kept
            kept.close()
            self._broad = None
        part, inside = _Plan(), []
        for origin, path in broad:
            if _within(_real(path) or "", boundary.root):
                inside.append((origin, path))
            else:
                boundary.grant(part, origin, path, declared=False)
        kept = _KeptBroad(part, now, inside, OpenedRules(self.kernel, part.grants))
        self._broad = (key, kept)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, kept.close)
        return kept

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
        module = path[len("pkg:") :].split("/", 1)[0]
        if module not in self._declarers:
            self._declarers[module] = _load_declarer(module)
        return module, self._declarers[module]


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


def _real(path: Path) -> str | None:
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return None


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


def _load_declarer(module: str) -> Callable[..., Iterable[Any]] | None:
    for entry in metadata.entry_points(group=DECLARATIONS_GROUP):
        if entry.name == module:
            loaded = entry.load()
            return loaded if callable(loaded) else None
    return None


def _declared(
    attempt: Attempt, declarer: tuple[str, Callable[..., Iterable[Any]] | None]
) -> list[tuple[str, object]]:
    module, function = declarer
    if function is None:
        return []
    origin = f"runner {module}"
    try:
        return [(origin, path) for path in function(attempt.job, attempt.payload)]
    except Exception as exc:  # a plug-in's failure confines more, never less
        return [(origin, f"<the declaration failed: {type(exc).__name__}: {exc}>")]


def _listed(attempt: Attempt) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for origin, source in (
        ("job input", attempt.job.get("inputs") or {}),
        ("workspace setting", attempt.settings),
    ):
        value = source.get(WRITABLE_SETTING)
        if value is None:
            continue
        entries = value if isinstance(value, list) else [value]
        found.extend((f"{WRITABLE_SETTING} ({origin})", entry) for entry in entries)
    return found


@dataclass
class _Boundary:
    """The workspace's line: what is never writable, and what is writable only inside this payload.

    Paths are compared as the real (resolved) path strings they are, which is what the kernel's rules
    bind to and much cheaper than comparing ``Path`` parents for every entry around a workspace.
    """

    attempt: Attempt
    transactional: bool

    def __post_init__(self) -> None:
        self.root = os.path.realpath(self.attempt.workspace.root)
        self.payload = os.path.realpath(self.attempt.payload)
        never = [
            (os.path.join(self.root, CONTROL_DIR), "the workspace's control directory"),
            (os.path.join(self.payload, "job.json"), "job.json"),
        ]
        if self.transactional:
            never.append((os.path.join(self.payload, "data"), "committed data/ of a transactional job"))
        self.never = never

    def declared(self, plan: _Plan, origin: str, entry: object) -> None:
        named = self._path_of(entry)
        if named is None:
            plan.refused.append({"path": str(entry), "origin": origin, "reason": "is not a path"})
        else:
            self.grant(plan, origin, named, declared=True)

    def _path_of(self, entry: object) -> Path | None:
        if not isinstance(entry, str | os.PathLike) or not str(entry) or "\0" in str(entry):
            return None
        text = os.fspath(entry)
        if not isinstance(text, str):
            return None
        if text.startswith("~/") or text == "~":
            return Path(os.path.expanduser(text))
        return Path(text) if os.path.isabs(text) else self.attempt.payload / text

    def grant(self, plan: _Plan, origin: str, path: Path, *, declared: bool) -> None:
        """Add ``path`` to ``plan`` (around the workspace when it holds it), or record why not."""

        def refuse(reason: str) -> None:
            plan.refused.append({"path": str(path), "origin": origin, "reason": reason})

        try:
            real = os.path.realpath(path, strict=True)
            mode = os.stat(real).st_mode
        except OSError:
            if declared:
                refuse("does not exist")
            return
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            refuse("is neither a directory, a regular file nor a device")
            return
        for protected, what in self.never:
            if _within(real, protected):
                refuse(f"lies in {what}, which no runner may write")
                return
        if _within(real, self.root) and not _within(real, self.payload):
            refuse("lies in the workspace outside this job's payload")
            return
        if real in plan.rules:
            return  # named twice (HOME and the account's home, say)
        avoid = [p for p, _ in self.never if _within(p, real) and p != real]
        if not _within(real, self.payload) and _within(self.root, real):
            avoid = [self.root]  # a broad path holding the workspace: only around it
        plan.rules[real] = _around(real, avoid) if avoid else [(real, stat.S_ISDIR(mode))]


def _within(path: str, ancestor: str) -> bool:
    """Whether the real path ``path`` is ``ancestor`` or lies below it."""
    return path == ancestor or path.startswith(ancestor if ancestor.endswith("/") else ancestor + "/")


def _around(directory: str, avoid: list[str]) -> list[tuple[str, bool]]:
    """Every entry below ``directory`` except the way to each path of ``avoid``: those entries whole,
    and the directories on the way entry by entry. Symbolic links are left out (they may lead back)."""
    grants: list[tuple[str, bool]] = []
    try:
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return grants
    for entry in entries:
        child = entry.path
        below = [a for a in avoid if _within(a, child)]
        if entry.is_symlink():
            continue
        if not below:
            if entry.is_dir(follow_symlinks=False):
                grants.append((child, True))
            elif entry.is_file(follow_symlinks=False):
                grants.append((child, False))
        elif child not in below and entry.is_dir(follow_symlinks=False):
            grants.extend(_around(child, below))
    return grants
