"""``transfer detach``: sealing quiescent jobs as standalone bundles (detached-transfer-v1).

Per job, five steps, each a commit point a rerun recognises (DESIGN.md, "Detached transfers"):

1. the verified move of the marker to ``state/transferring/`` (reason ``transfer_detach``);
2. ``.httk-transfer/``: the carried runners (``runner.<name>``), ``history.json``, then ``manifest.json``;
3. the payload renamed to ``.httk-workflow/transfers/outgoing/<transfer-id>/``;
4. the marker renamed into that bundle's ``.httk-transfer/`` (sealed: no state tree names the job);
5. the bundle copied to ``DIR/.<job-key>.<transfer-id>.partial`` and renamed to ``DIR/<job-key>``.

Every refusal is decided before the first step of any job: all the named jobs leave, or none does.
A rerun of the same command finds a job part way by its ``transferring`` marker (whose frame names the
transfer) or by its sealed bundle in ``transfers/outgoing/`` and finishes it.

Cost per job: one journal append, four renames, two small documents, two directories (``.httk-transfer/``
and the copy's), and one copy of the payload whose immutable files (job.json, the transfer documents,
the runners, the empty marker) are hard links when ``DIR`` is on the same filesystem.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._frames import kept
from httk.workflow.engine.core._jobs import LoadedJob, load_job, read_frame
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._sealed import SEALED_DIR, SEALED_HISTORY, is_sealed, seal_marker
from httk.workflow.engine.core._states import OWNED_KINDS, TRANSFERABLE_KINDS, Kind, Trigger
from httk.workflow.engine.core._transition import move_markers
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.publish._runners import stored_digest
from httk.workflow.engine.publish._submit import copy_checked_tree
from httk.workflow.protocol import TransferError
from httk.workflow.protocol._digest import sha256_bytes

from ._select import select_jobs
from ._transfer_bundle import (
    DETACH_REASON,
    LEGACY_RUNNERS,
    MANIFEST,
    RUNNER_PREFIX,
    bundle_in,
    chain_entries,
    check_patterns,
    left_behind_paths,
    manifest_left_behind,
    outgoing_bundles,
    outgoing_dir,
    payload_digest,
    read_document,
    read_manifest,
    require_extension,
    store_runners,
    tree_bytes,
    write_document,
)
from ._transfer_environment import source_environment


@dataclass(frozen=True, slots=True)
class Detached:
    """One job detached: its transfer, the bundle copy in ``DIR`` and the source's sealed original."""

    transfer_id: str
    job_id: str
    job_key: str
    placement: str
    prior_kind: str
    bundle: Path
    source_bundle: Path
    resumed: bool
    left_behind: list[str]
    """The payload-relative paths the bundle travels without (they stay at the source)."""

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bundle": str(self.bundle), "source_bundle": str(self.source_bundle)}


class _Reads:
    """What one command reads once and uses for every job: each job.json the refusals loaded, each
    store runner's digest, whether ``transfers/outgoing/`` exists."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.jobs: dict[str, LoadedJob] = {}
        self._digests: dict[str, str | None] = {}
        self._parent_made = False
        self.root = str(workspace.root.resolve())  # every manifest names it
        self._environment: dict[str, Any] | None = None

    def environment(self) -> dict[str, Any]:
        """The manifest's ``environment`` (what an importing workspace checks itself against)."""
        if self._environment is None:
            self._environment = source_environment(self.workspace)
        return self._environment

    def outgoing_parent(self, parent: Path) -> None:
        """Make ``transfers/outgoing/`` (once per command: only a detach creates it, gc never removes it)."""
        if not self._parent_made:
            _fsops.make_dirs(parent, durable=self.workspace.durable)
            self._parent_made = True

    def job(self, marker: MarkerLocation) -> LoadedJob:
        found = self.jobs.get(marker.job_id)
        if found is None:
            found = self.jobs[marker.job_id] = load_job(self.workspace, marker.placement, marker.job_key)
        return found

    def runner_digest(self, name: str) -> str | None:
        if name not in self._digests:
            self._digests[name] = stored_digest(self.workspace, name)
        return self._digests[name]


@dataclass(frozen=True, slots=True)
class _Plan:
    """A job to detach from the start (``marker`` quiescent) or to resume (``marker`` transferring, or
    ``sealed`` its bundle in ``transfers/outgoing/``)."""

    marker: MarkerLocation | None
    sealed: Path | None = None
    sealed_key: str = ""


def detach_jobs(
    workspace: Workspace, selectors: Sequence[str], to: Path | str, exclude: Sequence[str] = ()
) -> list[Detached]:
    """Detach every job ``selectors`` name into bundles below ``to``; all of them, or none when refused.

    ``exclude`` (glob patterns relative to each payload) names what stays behind at the source; a job
    resumed part way keeps the patterns its own detach began with.
    """
    require_extension(workspace)
    patterns = check_patterns(exclude)
    destination = _destination(workspace, Path(to))
    plans = _plans(workspace, selectors)
    reads = _Reads(workspace)
    refusals = [
        refusal
        for plan in plans
        if plan.marker is not None and plan.marker.kind is not Kind.TRANSFERRING
        for refusal in [_refusal(reads, plan.marker, destination, patterns)]
        if refusal is not None
    ]
    named = _joined_jobs(workspace)
    refusals += [
        f"{plan.marker.job_key}: a waiting job's join names it, and it would leave that join unresolved"
        for plan in plans
        if plan.marker is not None
        and plan.marker.kind is not Kind.TRANSFERRING
        and plan.marker.job_id in named
    ]
    if refusals:
        raise TransferError(f"nothing was detached: {'; '.join(refusals)}")
    moved, lost = _to_transferring(workspace, plans, destination, patterns)
    with workspace.segments_kept_open():  # each job's history is read from the same few segments
        done = [_detach(reads, plan, moved, destination) for plan in plans if _plan_id(plan) not in lost]
    if lost:
        raise TransferError(
            f"detached {len(done)}; not detached: {'; '.join(lost.values())} (the rest was detached)"
        )
    return done


def _destination(workspace: Workspace, to: Path) -> Path:
    if not to.is_dir():
        raise TransferError(f"{to}: the --to directory does not exist (create it first)")
    resolved = to.resolve()
    if resolved == workspace.root.resolve() or resolved.is_relative_to(workspace.control.resolve()):
        raise TransferError(f"{to}: bundles go outside the workspace's control directory and root")
    return resolved


def _plans(workspace: Workspace, selectors: Sequence[str]) -> list[_Plan]:
    in_flight = _in_flight(workspace)
    plans: dict[str, _Plan] = {}
    for selector in selectors:
        found = in_flight.get(selector.lower())
        if found is not None:
            plans.setdefault(_plan_id(found), found)
            continue
        for marker in select_jobs(workspace, selector).markers:
            plans.setdefault(marker.job_id, _Plan(marker))
    return list(plans.values())


def _plan_id(plan: _Plan) -> str:
    if plan.marker is not None:
        return plan.marker.job_id
    return plan.sealed_key.rsplit("--", 1)[-1]


def _in_flight(workspace: Workspace) -> dict[str, _Plan]:
    """The jobs a detach left part way, by job id and by job key: transferring markers, outgoing bundles."""
    found: dict[str, _Plan] = {}
    for marker in walk_markers(workspace, Kind.TRANSFERRING):
        if isinstance(marker, MarkerLocation):
            plan = _Plan(marker)
            found[marker.job_id] = found[marker.job_key] = plan
    for outgoing in outgoing_bundles(workspace):
        if is_sealed(outgoing.path):  # unsealed, it is the payload of a transferring marker found above
            key = outgoing.job_key
            plan = _Plan(None, outgoing.path, key)
            found[key.rsplit("--", 1)[-1]] = found[key] = plan
    return found


def _refusal(reads: _Reads, marker: MarkerLocation, destination: Path, patterns: Sequence[str]) -> str | None:
    """Why ``marker``'s job may not be detached now, or ``None``."""
    workspace = reads.workspace
    kind = marker.kind
    if kind is Kind.WAITING:
        return (
            f"{marker.job_key} is waiting: its join resolves its children by their placement in this "
            "workspace, so it cannot leave it; detach it once the join is decided"
        )
    if kind in OWNED_KINDS:
        return f"{marker.job_key} is {kind.value}: an attempt holds it; wait for it to finish or cancel it"
    if kind not in TRANSFERABLE_KINDS:
        return f"{marker.job_key} is {kind.value}: a manager has not registered it yet"
    if os.path.lexists(destination / marker.job_key):
        return f"{destination / marker.job_key} already exists"
    try:
        job = reads.job(marker)
    except (OSError, ValueError) as exc:
        return f"{marker.job_key}: its payload cannot be read ({exc})"
    for name in store_runners(job.document):
        pinned = job.document["runner"].get("sha256")
        if reads.runner_digest(name) != pinned:
            return f"{marker.job_key}: its runner {name!r} is not in the store with the digest job.json pins"
    try:
        left_behind_paths(workspace.payload_path(marker.placement, marker.job_key), patterns)
    except TransferError as exc:
        return str(exc)
    return None


def _joined_jobs(workspace: Workspace) -> set[str]:
    """The job ids every waiting job's join names: each is in an unresolved join (spec/01)."""
    named: set[str] = set()
    for marker in walk_markers(workspace, Kind.WAITING):
        if not isinstance(marker, MarkerLocation):
            continue
        frame = read_frame(workspace, marker)
        join = None if frame is None else frame.get("join")
        if isinstance(join, Mapping):
            named.update(
                str(child.get("job_id")) for child in join.get("children") or () if isinstance(child, Mapping)
            )
    return named


# -- the steps ----------------------------------------------------------------------------------------
def _detach(
    reads: _Reads,
    plan: _Plan,
    moved: Mapping[str, tuple[MarkerLocation, dict[str, Any]]],
    destination: Path,
) -> Detached:
    workspace = reads.workspace
    resumed = plan.marker is None or plan.marker.kind is Kind.TRANSFERRING
    manifest = None
    if plan.sealed is not None:
        bundle = plan.sealed
    else:
        assert plan.marker is not None
        marker, frame = moved.get(plan.marker.job_id, (plan.marker, None))
        bundle, manifest = _seal(reads, marker, frame)
    if manifest is None:
        manifest = read_manifest(bundle)
    copy = _copy_out(workspace, bundle, manifest, destination, _files_immutable(reads, bundle, manifest))
    return Detached(
        manifest["transfer_id"],
        manifest["job"]["job_id"],
        manifest["job"]["job_key"],
        manifest["source"]["placement"],
        manifest["marker"]["prior_kind"],
        copy,
        bundle,
        resumed,
        manifest_left_behind(manifest),
    )


def _to_transferring(
    workspace: Workspace, plans: Sequence[_Plan], destination: Path, patterns: Sequence[str]
) -> tuple[dict[str, tuple[MarkerLocation, dict[str, Any]]], dict[str, str]]:
    """Step 1 for every job starting now, as one batch of verified moves into ``transferring`` (one
    journal append, one synchronization when durable): the moved markers with their frames, and why
    each job that lost a race (moved meanwhile: it changed nothing) was not moved.

    Each frame keeps the ``--exclude`` patterns, so a rerun seals what this detach began to."""
    fresh = [
        plan.marker for plan in plans if plan.marker is not None and plan.marker.kind is not Kind.TRANSFERRING
    ]
    moves = []
    for marker in fresh:
        transfer: dict[str, Any] = {
            "transfer_id": str(uuid.uuid4()),
            "prior_kind": marker.kind.value,
            "source_workspace_id": workspace.workspace_id,
            "source_placement": marker.placement,
            "destination": str(destination),
        }
        if patterns:
            transfer["exclude"] = list(patterns)
        previous = read_frame(workspace, marker)
        frame = kept(Kind.TRANSFERRING, previous, reason=DETACH_REASON, transfer=transfer)
        moves.append((marker, frame, Trigger.TRANSFER_DETACH))
    moved: dict[str, tuple[MarkerLocation, dict[str, Any]]] = {}
    lost: dict[str, str] = {}
    for (marker, frame, _trigger), result in zip(moves, move_markers(workspace, moves), strict=True):
        if not result.won or result.current is None:
            now = "is gone" if result.current is None else f"moved to {result.current.kind.value} meanwhile"
            lost[marker.job_id] = f"{marker.job_key} {now}"
        else:
            moved[marker.job_id] = (result.current, {"transfer": frame["transfer"]})
    return moved, lost


def _seal(
    reads: _Reads, marker: MarkerLocation, frame: Mapping[str, Any] | None
) -> tuple[Path, dict[str, Any] | None]:
    """Steps 2 to 4 for a ``transferring`` marker (``frame`` its frame, when known), from wherever a
    previous run stopped; the sealed bundle, and its manifest when it was written now."""
    workspace = reads.workspace
    if frame is None:
        frame = read_frame(workspace, marker)
    if frame is None or not isinstance(frame.get("transfer"), Mapping):
        raise TransferError(f"{marker.job_key}: its transferring frame names no transfer")
    transfer_id = str(frame["transfer"]["transfer_id"])
    payload = workspace.payload_path(marker.placement, marker.job_key)
    bundle = outgoing_dir(workspace, transfer_id)
    manifest = None
    found = bundle_in(bundle)  # a detach before the flat layout nested it as <transfer-id>/<job-key>/
    if found is not None:
        bundle = found
    else:
        if not os.path.isdir(payload):
            raise TransferError(f"{marker.job_key}: its payload is neither at {payload} nor at {bundle}")
        if not _same_transfer(payload, transfer_id):  # prepared by an interrupted detach
            manifest = _prepare(reads, marker, frame, payload)
        reads.outgoing_parent(bundle.parent)
        _fsops.rename(payload, bundle, durable=workspace.durable)
    seal_marker(workspace, marker, bundle)
    return bundle, manifest


def _prepare(
    reads: _Reads, marker: MarkerLocation, frame: Mapping[str, Any], payload: Path
) -> dict[str, Any]:
    """Step 2: the carried runners and history, then the manifest that says they are complete."""
    workspace = reads.workspace
    durable = workspace.durable
    transfer = frame["transfer"]
    sealed = payload / SEALED_DIR
    job = reads.job(marker)
    _fsops.make_dir(sealed, durable=durable, exist_ok=True)  # exists after an interrupted run
    runners = [_carry_runner(reads, name, sealed) for name in store_runners(job.document)]
    patterns = [str(pattern) for pattern in transfer.get("exclude") or ()]
    left_behind = left_behind_paths(payload, patterns)
    entries = list(chain_entries(workspace, marker))
    entries.reverse()
    history = write_document(
        sealed / SEALED_HISTORY,
        {
            "format": "httk-workflow-transfer-history",
            "format_version": 1,
            "transfer_id": transfer["transfer_id"],
            "job_id": marker.job_id,
            "entries": entries,
        },
        durable=durable,
        parents=False,
    )
    manifest: dict[str, Any] = {
        "format": "httk-workflow-transfer-manifest",
        "format_version": 1,
        "transfer_id": transfer["transfer_id"],
        "created_at": utc_timestamp(workspace.clock.now()),
        "source": {
            "workspace_id": workspace.workspace_id,
            "root": reads.root,
            "placement": marker.placement,
        },
        "job": {
            "job_id": marker.job_id,
            "job_key": marker.job_key,
            "job_digest": job.digest,
            "payload_digest": payload_digest(payload, left_behind),
        },
        "marker": {
            "name": str(marker.name),
            "prior_kind": transfer["prior_kind"],
            "state_generation": marker.name.generation,
            "record_ref": marker.name.ref_text,
        },
        "runners": runners,
        "history": {"frames": len(entries), "digest": sha256_bytes(history)},
        "environment": reads.environment(),
    }
    if patterns:
        manifest["left_behind"] = {
            "patterns": patterns,
            "paths": left_behind,
            "bytes": tree_bytes(payload, left_behind),
        }
    write_document(sealed / MANIFEST, manifest, durable=durable, parents=False)
    return manifest


def _carry_runner(reads: _Reads, name: str, sealed: Path) -> dict[str, Any]:
    """A store runner carried in the bundle's ``sealed`` directory: hard-linked when it can be (a stored
    runner never changes in place, and the refusals verified its digest), copied otherwise."""
    workspace = reads.workspace
    source = workspace.runners_dir / name
    target = sealed / (RUNNER_PREFIX + name)
    if os.path.lexists(target):
        _remove(target)
    if source.is_dir():
        _fsops.make_dir(target, durable=False)
        copy_checked_tree(source, target, durable=workspace.durable)
    else:
        try:
            _fsops.link_file(source, target)
        except OSError:
            mode = stat.S_IMODE(os.lstat(source).st_mode)
            _fsops.create_file(target, source.read_bytes(), durable=workspace.durable, mode=mode)
    return {"name": name, "digest": reads.runner_digest(name), "directory": source.is_dir()}


def _copy_out(
    workspace: Workspace, bundle: Path, manifest: Mapping[str, Any], destination: Path, link_files: bool
) -> Path:
    """Step 5: the bundle's copy in ``destination``, through a partial directory renamed when whole;
    with ``link_files`` the payload's ``files/`` is hard-linked too."""
    key, transfer_id = str(manifest["job"]["job_key"]), str(manifest["transfer_id"])
    target = destination / key
    if os.path.lexists(target):
        if _same_transfer(target, transfer_id):
            return target
        raise TransferError(f"{target} already exists and is not this job's bundle (transfer {transfer_id})")
    partial = destination / f".{key}.{transfer_id}.partial"
    if os.path.lexists(partial):
        _remove(partial)
    _fsops.make_dir(partial, durable=False)
    skip = frozenset(manifest_left_behind(manifest))
    immutable = {*_IMMUTABLE, f"{SEALED_DIR}/{manifest['marker']['name']}"}
    copy_checked_tree(
        bundle,
        partial,
        durable=workspace.durable,
        skip=skip,
        link=lambda path: _immutable(path, immutable) or (link_files and path.startswith(_FILES)),
    )
    _fsops.rename(partial, target, durable=workspace.durable)
    return target


_FILES = "files/"
_IMMUTABLE = ("job.json", f"{SEALED_DIR}/{MANIFEST}", f"{SEALED_DIR}/{SEALED_HISTORY}")
_CARRIED = (f"{SEALED_DIR}/{RUNNER_PREFIX}", f"{SEALED_DIR}/{LEGACY_RUNNERS}/")


def _immutable(relative: str, immutable: Collection[str]) -> bool:
    """Whether the bundle's file at ``relative`` never changes in place, so its copy may be a hard link:
    job.json, the transfer documents and runners (replaced by rename when rewritten) and the sealed
    marker (an empty file, only ever renamed). The job's other files are copied, ``files/`` apart when
    :func:`_files_immutable`: a runner may append to a workdir file wherever the job lands.
    """
    return relative in immutable or relative.startswith(_CARRIED)


def _files_immutable(reads: _Reads, bundle: Path, manifest: Mapping[str, Any]) -> bool:
    """Whether the payload's ``files/`` never changes in place, so its copy may be hard links: spec/01
    makes it the submitted, immutable inputs, unless the job's persistent workdir lies in it (a runner
    writes there). A job.json this command did not load is read from the bundle; unreadable, it copies.
    """
    loaded = reads.jobs.get(str(manifest["job"]["job_id"]))
    if loaded is not None:
        job: Mapping[str, Any] = loaded.document
    else:
        try:
            job = read_document(bundle / "job.json", "job.json")
        except TransferError:
            return False
    workdir = job.get("workdir")
    if not isinstance(workdir, Mapping):
        return False
    if workdir.get("mode") != "persistent":
        return True  # an isolated attempt works in run.<attempt-id>/
    first = os.path.normpath(str(workdir.get("path", ""))).split("/", 1)[0]
    return first not in ("files", ".", "..")


def _same_transfer(path: Path, transfer_id: str) -> bool:
    """Whether ``path`` holds the manifest of transfer ``transfer_id``."""
    try:
        return bool(read_manifest(path)["transfer_id"] == transfer_id)
    except TransferError:
        return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        _fsops.remove_tree(path)
    else:
        _fsops.unlink(path, durable=False, missing_ok=True)


def detach_summary(results: Iterable[Detached]) -> list[dict[str, Any]]:
    return [result.as_dict() for result in results]
