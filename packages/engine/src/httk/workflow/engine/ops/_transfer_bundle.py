"""The detached bundle of detached-transfer-v1: where its parts live, how they are written and checked.

A bundle is a job's payload holding ``.httk-transfer/``: ``manifest.json``
(``schemas/transfer-manifest``), ``history.json`` (``schemas/transfer-history``), ``runner.<name>``
and, while it is detached, the job's one marker. :func:`read_bundle` is the whole validation import
relies on: nothing in a bundle is trusted before it passes. The workspace side is
``.httk-workflow/transfers/``: ``outgoing/<transfer-id>/`` (a source's sealed bundle awaiting
acknowledgement), ``imported/`` and ``acks/`` (``schemas/transfer-ack``) and ``retired/``
(``schemas/transfer-ledger`` beside each retired bundle). DESIGN.md, "Detached transfers".

The layout is flat because every directory a detach makes costs a create: no ``runners/`` directory
and no directory per transfer around the source's bundle. Bundles and source trees made before it
(``.httk-transfer/runners/<name>``, ``outgoing/<transfer-id>/<job-key>/``) are read as well
(:func:`carried_runner`, :func:`bundle_in`), so an upgrade strands no transfer in flight.

Cost: validating a bundle reads every byte of its payload once (the tree digest) and each carried runner.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._sealed import SEALED_DIR, SEALED_HISTORY, sealed_markers
from httk.workflow.engine.core._states import TRANSFERABLE_KINDS
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.engine.publish._runners import runner_digest
from httk.workflow.protocol import InvalidDocumentError, JobKey, MarkerName, TransferError, validate_uuid
from httk.workflow.protocol._digest import job_digest, sha256_bytes, tree_digest
from httk.workflow.protocol._jsonio import dump_compact, parse_json_object, read_document_bytes

from ._history import history_chain

MANIFEST = "manifest.json"
RUNNER_PREFIX = "runner."
"""A carried runner is ``.httk-transfer/runner.<name>`` (a file, or a tree for a directory runner)."""
LEGACY_RUNNERS = "runners"
"""Where bundles made before the flat layout carry their runners: ``.httk-transfer/runners/<name>``."""
IMPORT_REASON = "transfer_import"
DETACH_REASON = "transfer_detach"
ABORT_REASON = "transfer_abort"
EXTENSION = "detached-transfer-v1"
_MAX_DOCUMENT = 64 << 20  # a history of a very long-lived job is large, never unbounded


def transfers_dir(workspace: Workspace) -> Path:
    return workspace.control / "transfers"


def outgoing_dir(workspace: Workspace, transfer_id: str) -> Path:
    """The source's sealed bundle of ``transfer_id`` (the payload itself; see :func:`bundle_in`)."""
    return transfers_dir(workspace) / "outgoing" / transfer_id


def bundle_in(directory: Path) -> Path | None:
    """The bundle a source keeps at ``directory`` (``outgoing/<id>`` or ``retired/<id>``): the directory
    itself, or in the layout before the flat one its one ``<job-key>/`` child; ``None`` when neither."""
    if _is_payload(directory):
        return directory
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return next((directory / name for name in names if _is_payload(directory / name)), None)


def _is_payload(directory: Path) -> bool:
    return os.path.isdir(directory / SEALED_DIR) or os.path.lexists(directory / "job.json")


def carried_runner(bundle: Path, name: str) -> Path:
    """The carried runner ``name`` in ``bundle`` (where a bundle made before the flat layout has it,
    when only that exists)."""
    sealed = bundle / SEALED_DIR
    path = sealed / (RUNNER_PREFIX + name)
    if not os.path.lexists(path) and os.path.lexists(sealed / LEGACY_RUNNERS / name):
        return sealed / LEGACY_RUNNERS / name
    return path


def receipt_path(workspace: Workspace, where: str, transfer_id: str) -> Path:
    """``imported``, ``acks`` or ``retired``: the receipt of ``transfer_id`` there."""
    return transfers_dir(workspace) / where / f"{transfer_id}.json"


def retired_dir(workspace: Workspace, transfer_id: str) -> Path:
    return transfers_dir(workspace) / "retired" / transfer_id


def left_behind_dir(workspace: Workspace, transfer_id: str) -> Path:
    """Where a retired transfer's left-behind files are kept (gc never collects them)."""
    return transfers_dir(workspace) / "left-behind" / transfer_id


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A source workspace's sealed bundle awaiting acknowledgement (or abort)."""

    transfer_id: str
    path: Path

    @property
    def job_key(self) -> str:
        """The job's key: its sealed marker's (or, in the moment between the payload's rename and the
        marker's, its manifest's); in the layout before the flat one, the directory's name."""
        if self.path.name != self.transfer_id:
            return self.path.name
        markers = sealed_markers(self.path)
        if markers:
            return str(markers[0].key)
        try:
            return str(read_manifest(self.path)["job"]["job_key"])
        except TransferError:
            return self.path.name


def outgoing_bundles(workspace: Workspace) -> Iterator[Outgoing]:
    """Every sealed bundle below ``transfers/outgoing/``, in transfer-id order."""
    root = transfers_dir(workspace) / "outgoing"
    try:
        transfers = sorted(os.listdir(root))
    except FileNotFoundError:
        return
    for transfer_id in transfers:
        bundle = bundle_in(root / transfer_id)
        if bundle is not None:
            yield Outgoing(transfer_id, bundle)


def write_document(path: Path, document: Mapping[str, Any], *, durable: bool, parents: bool = True) -> bytes:
    """Write ``document`` atomically as compact JSON with a final newline; the bytes written. Its
    directory is made first unless ``parents`` is false (the caller made it)."""
    data = dump_compact(dict(document)) + b"\n"
    if parents:
        _fsops.make_dirs(path.parent, durable=durable)
    _fsops.write_file_atomic(path, data, durable=durable)
    return data


def read_document(path: Path, what: str, format_name: str | None = None) -> dict[str, Any]:
    """A JSON object document of ``format_name`` (when named); :class:`TransferError` if it is not one."""
    try:
        data = read_document_bytes(path, what, max_bytes=_MAX_DOCUMENT)
        document = parse_json_object(data, document=what, path=path)
    except InvalidDocumentError as exc:
        raise TransferError(f"{path}: {exc}") from None
    if format_name is not None and (document.get("format"), document.get("format_version")) != (
        format_name,
        1,
    ):
        raise TransferError(f"{path}: not an {format_name} document of format_version 1")
    return document


# The manifest's rules, checked by hand: a schema validator costs tens of milliseconds per document, and
# import reads one per bundle (tests/engine/ops/test_transfers.py holds what detach writes to the schema).
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MANIFEST_FORMAT = "httk-workflow-transfer-manifest"


def check_manifest(manifest: Mapping[str, Any], path: Path) -> None:
    """Refuse a manifest that breaks a rule of ``schemas/transfer-manifest`` import relies on."""

    def need(ok: bool, member: str, rule: str) -> None:
        if not ok:
            raise TransferError(f"{path}: invalid transfer manifest: member {member!r} {rule}")

    def part(name: str) -> Mapping[str, Any]:
        value = manifest.get(name)
        if not isinstance(value, Mapping):
            need(False, name, "must be an object")
        return value  # type: ignore[return-value]

    def uuid_at(value: object, member: str) -> None:
        try:
            validate_uuid(value if isinstance(value, str) else "")
        except ValueError:
            need(False, member, "must be a lowercase canonical UUID")

    def sha_at(value: object, member: str) -> None:
        need(
            isinstance(value, str) and _SHA256.fullmatch(value) is not None,
            member,
            "must be a SHA-256 digest",
        )

    uuid_at(manifest.get("transfer_id"), "transfer_id")
    source, job, marker, history = part("source"), part("job"), part("marker"), part("history")
    uuid_at(source.get("workspace_id"), "source.workspace_id")
    need(isinstance(source.get("placement"), str), "source.placement", "must be a placement")
    uuid_at(job.get("job_id"), "job.job_id")
    need(isinstance(job.get("job_key"), str), "job.job_key", "must be a job key")
    sha_at(job.get("job_digest"), "job.job_digest")
    sha_at(job.get("payload_digest"), "job.payload_digest")
    need(isinstance(marker.get("name"), str), "marker.name", "must be a marker name")
    need(
        marker.get("prior_kind") in _TRANSFERABLE,
        "marker.prior_kind",
        "must be a kind a job can be detached in",
    )
    generation = marker.get("state_generation")
    need(
        isinstance(generation, int) and not isinstance(generation, bool) and generation > 0,
        "marker.state_generation",
        "must be a positive integer",
    )
    need(isinstance(marker.get("record_ref"), str), "marker.record_ref", "must be a record reference")
    runners = manifest.get("runners")
    if not isinstance(runners, list):
        need(False, "runners", "must be an array")
    for index, runner in enumerate(runners or ()):
        need(isinstance(runner, Mapping), f"runners[{index}]", "must be an object")
        name = runner.get("name")
        need(
            isinstance(name, str) and os.path.basename(name) == name and name not in ("", ".", ".."),
            f"runners[{index}].name",
            "must be one path component",
        )
        sha_at(runner.get("digest"), f"runners[{index}].digest")
    sha_at(history.get("digest"), "history.digest")
    left = manifest.get("left_behind")
    if left is not None:
        need(isinstance(left, Mapping), "left_behind", "must be an object")
        paths = left.get("paths")
        need(isinstance(paths, list), "left_behind.paths", "must be an array")
        for index, relative in enumerate(paths):
            need(
                isinstance(relative, str)
                and relative != ""
                and not relative.startswith("/")
                and not {".", "..", ""} & set(relative.split("/"))
                and relative.split("/", 1)[0] not in _KEPT,
                f"left_behind.paths[{index}]",
                "must be a relative path below the payload other than the parts a job needs",
            )


_TRANSFERABLE = frozenset(kind.value for kind in TRANSFERABLE_KINDS)


def store_runners(job: Mapping[str, Any]) -> list[str]:
    """The runner-store names job.json references (its runner, when it is a workspace runner)."""
    runner = job.get("runner")
    if isinstance(runner, Mapping) and runner.get("source") == "workspace":
        return [str(runner["path"])]
    return []


def payload_digest(payload: Path, left_behind: Sequence[str] = ()) -> str:
    """The payload's tree digest: everything but ``.httk-job``, attempt directories, ``.httk-transfer``
    and the paths ``left_behind``."""
    return tree_digest(payload, exclude_payload_private=True, skip=left_behind)


# -- what --exclude leaves behind ---------------------------------------------------------------------
# job.json and the marker (sealed in .httk-transfer/) are the job; .httk-job/ is its runner's state and
# data/ its committed transactional data: a job imported without them would be another job.
_KEPT = ("job.json", SEALED_DIR, ".httk-job", "data")


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """The ``--exclude`` patterns, refused when one is not a glob relative to the payload."""
    for pattern in patterns:
        parts = pattern.split("/")
        if not pattern or pattern.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise TransferError(
                f"--exclude {pattern!r}: a pattern is a glob relative to the payload, such as WAVECAR, "
                "run/WAVECAR or **/WAVECAR (no leading /, no '.' or '..' component)"
            )
    return list(patterns)


def left_behind_paths(payload: Path, patterns: Sequence[str]) -> list[str]:
    """The payload-relative paths ``patterns`` match (a matched directory stands for its whole tree),
    outermost only, sorted; :class:`TransferError` when one would leave the job without a part it needs."""
    matched: set[str] = set()
    for pattern in patterns:
        for path in payload.glob(pattern):
            relative = path.relative_to(payload).as_posix()
            top = relative.split("/", 1)[0]
            if top in _KEPT or relative in ("", "."):
                raise TransferError(
                    f"--exclude {pattern!r} matches {relative} in {payload}: job.json, "
                    f"{SEALED_DIR}/ (the marker), .httk-job/ (the runner's job state) and data/ "
                    "(committed transactional data) always travel with the job"
                )
            matched.add(relative)
    return sorted(path for path in matched if not any(path.startswith(other + "/") for other in matched))


def tree_bytes(payload: Path, paths: Iterable[str]) -> int:
    """The size of the files at and below ``paths`` in ``payload``."""
    total = 0
    for relative in paths:
        path = payload / relative
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
            continue
        for directory, _dirs, files in os.walk(path):
            total += sum(os.lstat(os.path.join(directory, name)).st_size for name in files)
    return total


def manifest_left_behind(manifest: Mapping[str, Any]) -> list[str]:
    """The paths the manifest says were left behind (none when it has no ``left_behind``)."""
    member = manifest.get("left_behind")
    return [str(path) for path in member["paths"]] if isinstance(member, Mapping) else []


def require_extension(workspace: Workspace) -> None:
    workspace.require_writable()
    if EXTENSION not in workspace.extensions:
        raise TransferError(
            f"{workspace.root}: the workspace does not enable {EXTENSION}; enable it first "
            f"(httk workflow workspace extension enable {workspace.root} {EXTENSION})"
        )


# -- the carried history ------------------------------------------------------------------------------
def chain_entries(workspace: Workspace, marker: MarkerLocation) -> Iterator[dict[str, Any]]:
    """The job's history newest first, as ``job log`` reads it (across earlier transfers too):
    ``{"record_ref", "frame"}`` entries, or a problem entry, which ends it."""
    for entry in history_chain(workspace, marker, 0):
        yield _as_carried(entry)


def _as_carried(entry: Mapping[str, Any]) -> dict[str, Any]:
    if "frame" in entry:
        return {"record_ref": entry["ref"], "frame": dict(entry["frame"])}
    return {"record_ref": entry["ref"], "generation": entry["generation"], "problem": entry["problem"]}


# -- reading a bundle ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Bundle:
    """A bundle that passed :func:`read_bundle`: its manifest, job.json, and the sealed marker."""

    path: Path
    manifest: dict[str, Any]
    job: dict[str, Any]
    marker: MarkerName
    history: bytes = b""
    """The carried history's bytes, as validated (import reads the last frame from them)."""

    @property
    def transfer_id(self) -> str:
        return str(self.manifest["transfer_id"])

    @property
    def job_id(self) -> str:
        return str(self.manifest["job"]["job_id"])

    @property
    def job_key(self) -> str:
        return str(self.manifest["job"]["job_key"])

    @property
    def prior_kind(self) -> str:
        return str(self.manifest["marker"]["prior_kind"])

    @property
    def sealed_path(self) -> Path:
        return self.path / SEALED_DIR / str(self.marker)


def read_manifest(bundle: Path) -> dict[str, Any]:
    """The bundle's manifest, schema-checked."""
    path = bundle / SEALED_DIR / MANIFEST
    if not os.path.isfile(path):
        raise TransferError(f"{bundle}: not a transfer bundle (no {SEALED_DIR}/{MANIFEST})")
    manifest = read_document(path, "transfer manifest", _MANIFEST_FORMAT)
    check_manifest(manifest, path)
    return manifest


class RunnerDigests:
    """The digests of the carried runner files one command checked, by file identity: a detach links
    every bundle's runner to the store's one inode, so the runner of 1,000 bundles is read once.

    The identity includes the size and the change time, which every write moves; a directory runner is
    digested every time (a change deep in its tree moves nothing at its top)."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, ...], str] = {}

    def of(self, path: Path) -> str:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            return runner_digest(path)
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        found = self._known.get(identity)
        if found is None:
            found = self._known[identity] = runner_digest(path)
        return found


def read_bundle(
    bundle: Path,
    *,
    check_payload: bool = True,
    manifest: dict[str, Any] | None = None,
    digests: RunnerDigests | None = None,
) -> Bundle:
    """Validate the complete bundle at ``bundle``; :class:`TransferError` naming the first defect.

    With ``check_payload`` false the payload and runner digests are not recomputed (a bundle this process
    has already verified and only renamed since); ``manifest`` is its :func:`read_manifest`, when the
    caller has just read it; ``digests`` the runner digests the command already took.
    """
    if os.path.islink(bundle) or not os.path.isdir(bundle):
        raise TransferError(f"{bundle}: a transfer bundle is a directory (not a symbolic link)")
    if manifest is None:
        manifest = read_manifest(bundle)
    job_part, sealed = manifest["job"], manifest["marker"]
    key = str(job_part["job_key"])
    if bundle.name != key:
        raise TransferError(f"{bundle}: the bundle directory must be named by its job key {key}")
    try:
        parsed = JobKey.parse(key)
    except ValueError as exc:
        raise TransferError(f"{bundle}: {exc}") from None
    if parsed.job_id != job_part["job_id"]:
        raise TransferError(f"{bundle}: the job key {key} does not name job {job_part['job_id']}")
    data = _read_bytes(bundle / "job.json", "job.json")
    if job_digest(data) != job_part["job_digest"]:
        raise TransferError(f"{bundle}/job.json: its digest is not the manifest's job_digest")
    job = parse_json_object(data, document="job.json", path=bundle / "job.json")
    if job.get("id") != job_part["job_id"]:
        raise TransferError(f"{bundle}/job.json: its id is not the manifest's job_id")
    if sealed["prior_kind"] not in {kind.value for kind in TRANSFERABLE_KINDS}:
        raise TransferError(
            f"{bundle}: the manifest's prior_kind {sealed['prior_kind']!r} cannot be imported"
        )
    marker = _sealed_marker(bundle, sealed, key)
    history = _read_bytes(bundle / SEALED_DIR / SEALED_HISTORY, "transfer history")
    if sha256_bytes(history) != manifest["history"]["digest"]:
        raise TransferError(f"{bundle}/{SEALED_DIR}/{SEALED_HISTORY}: its digest is not the manifest's")
    if check_payload:
        _check_digests(bundle, manifest, job, RunnerDigests() if digests is None else digests)
    return Bundle(bundle, manifest, job, marker, history)


def _sealed_marker(bundle: Path, sealed: Mapping[str, Any], key: str) -> MarkerName:
    found = sealed_markers(bundle)
    if len(found) != 1 or str(found[0]) != sealed["name"]:
        names = ", ".join(str(name) for name in found) or "none"
        raise TransferError(
            f"{bundle}: the bundle must seal exactly its manifest's marker {sealed['name']} (it holds "
            f"{names}); a bundle whose marker is gone was imported or aborted already"
        )
    name = found[0]
    if (
        str(name.key) != key
        or name.generation != sealed["state_generation"]
        or name.ref_text != sealed["record_ref"]
    ):
        raise TransferError(f"{bundle}: the sealed marker {name} disagrees with the manifest")
    return name


def _check_digests(
    bundle: Path, manifest: Mapping[str, Any], job: Mapping[str, Any], digests: RunnerDigests
) -> None:
    left_behind = manifest_left_behind(manifest)
    for relative in left_behind:
        if os.path.lexists(bundle / relative):
            raise TransferError(
                f"{bundle}: it holds {relative}, which its manifest says was left behind at the source "
                "(the digest does not cover it); remove it from the bundle or detach again without it"
            )
    try:
        actual = payload_digest(bundle, left_behind)
    except InvalidDocumentError as exc:
        raise TransferError(f"{bundle}: {exc}") from None
    if actual != manifest["job"]["payload_digest"]:
        raise TransferError(f"{bundle}: the payload's digest {actual} is not the manifest's payload_digest")
    carried = {str(runner["name"]): runner for runner in manifest["runners"]}
    for name in store_runners(job):
        if name not in carried:
            raise TransferError(
                f"{bundle}: job.json names store runner {name!r}, which the bundle does not carry"
            )
    for name, runner in carried.items():
        path = carried_runner(bundle, name)
        if os.path.basename(name) != name or not os.path.lexists(path):
            raise TransferError(f"{bundle}: the carried runner {name!r} is missing")
        if digests.of(path) != runner["digest"]:
            raise TransferError(f"{bundle}: the carried runner {name!r} does not have the manifest's digest")
        pinned = (job.get("runner") or {}).get("sha256")
        if name in store_runners(job) and pinned != runner["digest"]:
            raise TransferError(f"{bundle}: the carried runner {name!r} is not the one job.json pins")


def _read_bytes(path: Path, what: str) -> bytes:
    try:
        return read_document_bytes(path, what, max_bytes=_MAX_DOCUMENT)
    except InvalidDocumentError as exc:
        raise TransferError(f"{path}: {exc}") from None
