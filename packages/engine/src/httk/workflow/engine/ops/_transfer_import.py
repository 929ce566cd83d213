"""``transfer import``: republishing detached bundles in a workspace, and acknowledging them to their source.

Every bundle named is validated whole (:func:`~._transfer_bundle.read_bundle`) and checked against the
target — no marker of its job id anywhere in the state tree (one walk per command), no import record
of its transfer, nothing at ``<placement>/<job-key>``, no stored runner of the same name with other
content, no job twice in one command — before anything changes; any refusal refuses the command. What
the bundles need that the target lacks is then advised (``._transfer_environment``), and with
``--strict-environment`` refuses the command too. Then, per bundle:

1. the bundle is renamed to ``<placement>/<job-key>`` (still sealed, so still not schedulable), or on
   another filesystem copied through ``.httk-workflow/tmp/``, verified again and renamed there;
2. the carried runners the store lacks are published into it;
3. the import frame is appended and the sealed marker renamed into ``state/<prior kind>/<placement>/``:
   the commit point, after which the job is this workspace's;
4. when the manifest's source workspace is reachable here with the same id, its acknowledgement, which
   retires the source's sealed bundle (:func:`~._transfers.acknowledge`); a ``transfer send`` defers
   this to its own acknowledgement at the source, across machines, and then records the delivery here
   (:func:`record_delivered`);
5. the import record ``transfers/imported/<transfer-id>.json``, written once, with ``delivered_at`` when
   step 4 delivered (without it gc keeps the record: it is the acknowledgement still to deliver);
6. a bundle that was copied rather than renamed is removed.

A rerun finds the bundle placed (renamed away from where it was named, or copied) and sealed, resumes
at step 2; placed and unsealed with the job's marker on an import frame of the transfer, at step 4 (a
source acknowledged twice retires once); with an import record, delivers what step 4 could not.

Cost per bundle: the validation's one read of every payload byte, a rename (or a copy and a second
read), a journal append, a rename and two small documents.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._frames import kept
from httk.workflow.engine.core._jobs import read_frame
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._sealed import is_sealed, unseal_marker
from httk.workflow.engine.core._states import CORE_KINDS, Kind, Trigger
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, probe_marker
from httk.workflow.engine.maintenance._gc import DELIVERED_MEMBER
from httk.workflow.engine.publish._runners import publish_runner, stored_digest
from httk.workflow.engine.publish._submit import copy_checked_tree
from httk.workflow.protocol import TransferError, validate_placement

from ._history import carried_history
from ._transfer_bundle import (
    IMPORT_REASON,
    Bundle,
    RunnerDigests,
    carried_runner,
    manifest_left_behind,
    read_bundle,
    read_document,
    read_manifest,
    receipt_path,
    require_extension,
    write_document,
)
from ._transfer_environment import advise_or_refuse, bundle_requirements, environment_advisories
from ._transfers import DELIVERED, Sources, acknowledge


class ImportStatus(StrEnum):
    IMPORTED = "imported"
    RESUMED = "resumed"  # a previous import of this bundle was interrupted; it is finished now
    ALREADY_IMPORTED = "already_imported"


@dataclass(frozen=True, slots=True)
class Imported:
    transfer_id: str
    job_id: str
    job_key: str
    placement: str
    kind: str
    status: ImportStatus
    acknowledgement: str
    """``delivered``, ``unreachable`` or ``refused: <why>`` (:func:`~._transfers.acknowledge`), or
    ``deferred`` (to the ``transfer send`` that delivers it)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Stage(StrEnum):
    FRESH = "fresh"
    PLACED = "placed"  # at <placement>/<job-key>, sealed
    PUBLISHED = "published"  # the marker is out; the import record is missing
    RECORDED = "recorded"


@dataclass(frozen=True, slots=True)
class _Plan:
    named: Path
    bundle: Bundle | None
    transfer_id: str
    job_key: str
    stage: _Stage


DEFERRED = "deferred"


def import_bundles(
    workspace: Workspace,
    bundles: Sequence[Path | str],
    placement: str,
    *,
    acknowledge_source: bool = True,
    strict_environment: bool = False,
    advise: Callable[[str], None] | None = None,
) -> list[Imported]:
    """Import every bundle at ``placement``; all of them, or none when one is refused.

    Without ``acknowledge_source`` no source is acknowledged here (``transfer send`` does it). What the
    bundles not yet imported need that this workspace lacks (spec/03) goes to ``advise``, one sentence
    each, once every bundle passed validation; with ``strict_environment`` any of it refuses the import
    before anything changes."""
    require_extension(workspace)
    validate_placement(placement)
    digests = RunnerDigests()
    plans = [_plan(workspace, Path(bundle), placement, digests) for bundle in bundles]
    store = _Store(workspace)
    _refuse_duplicates(workspace, plans, store)
    if advise is not None or strict_environment:
        _check_environment(workspace, plans, strict_environment, advise)
    sources = Sources()
    try:
        return [
            _import(workspace, plan, placement, sources if acknowledge_source else None, store)
            for plan in plans
        ]
    finally:
        sources.close()


def _plan(workspace: Workspace, named: Path, placement: str, digests: RunnerDigests) -> _Plan:
    placed = workspace.payload_path(placement, named.name)
    source = named if os.path.lexists(named) else placed
    if not os.path.lexists(source):
        raise TransferError(f"{named}: no such bundle (nor one placed at {placed} by an earlier import)")
    manifest = read_manifest(source)
    transfer_id, key = str(manifest["transfer_id"]), str(manifest["job"]["job_key"])
    if os.path.lexists(receipt_path(workspace, "imported", transfer_id)):
        return _Plan(named, None, transfer_id, key, _Stage.RECORDED)
    placed = workspace.payload_path(placement, key)
    if os.path.lexists(placed):
        if _transfer_of(placed) != transfer_id:
            raise TransferError(f"{placed} already exists; choose another --placement")
        if is_sealed(placed):
            return _Plan(named, read_bundle(placed, digests=digests), transfer_id, key, _Stage.PLACED)
        if _imported_marker(workspace, placement, key, transfer_id) is None:
            raise TransferError(f"{placed} holds this transfer's payload, but no marker of its import")
        return _Plan(named, None, transfer_id, key, _Stage.PUBLISHED)
    bundle = read_bundle(source, manifest=manifest, digests=digests)
    return _Plan(named, bundle, transfer_id, key, _Stage.FRESH)


def _transfer_of(payload: Path) -> str | None:
    try:
        return str(read_manifest(payload)["transfer_id"])
    except TransferError:
        return None


def _imported_marker(
    workspace: Workspace, placement: str, key: str, transfer_id: str
) -> MarkerLocation | None:
    marker = probe_marker(workspace, placement, key)
    frame = None if marker is None else read_frame(workspace, marker)
    transfer = None if frame is None else frame.get("transfer")
    if isinstance(transfer, Mapping) and transfer.get("transfer_id") == transfer_id:
        return marker
    return None


def _refuse_duplicates(workspace: Workspace, plans: Sequence[_Plan], store: _Store) -> None:
    fresh = [plan for plan in plans if plan.stage is _Stage.FRESH and plan.bundle is not None]
    refusals: list[str] = []
    seen: set[str] = set()
    for plan in plans:
        if plan.transfer_id in seen:
            refusals.append(f"{plan.named}: transfer {plan.transfer_id} is named twice")
        seen.add(plan.transfer_id)
    if fresh:
        present = _job_ids(workspace)
        for plan in fresh:
            assert plan.bundle is not None
            if plan.bundle.job_id in present:
                refusals.append(
                    f"{plan.named}: job {plan.bundle.job_id} already has a marker in this workspace"
                )
            refusals += _runner_conflicts(store, plan.bundle)
    if refusals:
        raise TransferError(f"nothing was imported: {'; '.join(refusals)}")


def _check_environment(
    workspace: Workspace, plans: Sequence[_Plan], strict: bool, advise: Callable[[str], None] | None
) -> None:
    fresh = [plan.bundle for plan in plans if plan.stage is _Stage.FRESH and plan.bundle is not None]
    advise_or_refuse(
        environment_advisories(workspace, bundle_requirements(fresh)),
        advise,
        strict=strict,
        refusal=f"nothing was imported (--strict-environment): {workspace.root} lacks what the bundles need",
    )


def _job_ids(workspace: Workspace) -> set[str]:
    return {
        marker.job_id
        for kind in CORE_KINDS
        for marker in walk_markers(workspace, kind)
        if isinstance(marker, MarkerLocation)
    }


def _runner_conflicts(store: _Store, bundle: Bundle) -> list[str]:
    conflicts = []
    for runner in bundle.manifest["runners"]:
        stored = store.digest(str(runner["name"]))
        if stored is not None and stored != runner["digest"]:
            conflicts.append(
                f"{bundle.path}: the store's runner {runner['name']!r} has other content ({stored}) than the "
                f"bundle's ({runner['digest']}); jobs here pin the stored one"
            )
    return conflicts


def _import(
    workspace: Workspace, plan: _Plan, placement: str, sources: Sources | None, store: _Store
) -> Imported:
    placed = workspace.payload_path(placement, plan.job_key)
    status = ImportStatus.IMPORTED if plan.stage is _Stage.FRESH else ImportStatus.RESUMED
    manifest: Mapping[str, Any] | None = None
    if plan.stage in (_Stage.FRESH, _Stage.PLACED):
        assert plan.bundle is not None
        bundle = _place(workspace, plan.bundle, placed) if plan.stage is _Stage.FRESH else plan.bundle
        _install_runners(workspace, bundle, store)
        marker = _publish(workspace, bundle, placement)
        manifest = bundle.manifest
    elif plan.stage is _Stage.PUBLISHED:
        manifest = read_manifest(placed)
        found = _imported_marker(workspace, placement, plan.job_key, plan.transfer_id)
        if found is None:
            raise TransferError(f"{placed}: the marker of this import is not current any more")
        marker = found
    if plan.stage is _Stage.RECORDED:
        status = ImportStatus.ALREADY_IMPORTED
        ack = read_document(
            receipt_path(workspace, "imported", plan.transfer_id),
            "import record",
            "httk-workflow-transfer-ack",
        )
        if manifest is None and os.path.isdir(placed):
            manifest = read_manifest(placed)
        acknowledgement = DEFERRED if sources is None else acknowledge(ack, manifest, sources)
        if acknowledgement == DELIVERED:
            record_delivered(workspace, ack)
    else:
        assert manifest is not None
        ack = _record(manifest, marker, workspace, placement)
        # Acknowledged first, then recorded once: a crash between the two finds the marker published
        # and no record, acknowledges again (the source retires once) and writes the record then.
        acknowledgement = DEFERRED if sources is None else acknowledge(ack, manifest, sources)
        if acknowledgement == DELIVERED:
            ack[DELIVERED_MEMBER] = utc_timestamp(workspace.clock.now())
        write_document(receipt_path(workspace, "imported", plan.transfer_id), ack, durable=workspace.durable)
    if plan.named != placed and os.path.lexists(plan.named) and _transfer_of(plan.named) == plan.transfer_id:
        _fsops.remove_tree(plan.named)  # the copy this import consumed
    destination = ack["destination"]
    return Imported(
        plan.transfer_id,
        str(ack["job_id"]),
        plan.job_key,
        str(destination["placement"]),
        str(destination["kind"]),
        status,
        acknowledgement,
    )


def record_delivered(workspace: Workspace, record: Mapping[str, Any]) -> bool:
    """Write ``delivered_at`` into the import ``record`` (its source retired the bundle), so gc may
    collect it after ``trash_days``; whether it was written now."""
    if DELIVERED_MEMBER in record:
        return False
    delivered = {**record, DELIVERED_MEMBER: utc_timestamp(workspace.clock.now())}
    write_document(
        receipt_path(workspace, "imported", str(record["transfer_id"])), delivered, durable=workspace.durable
    )
    return True


def _place(workspace: Workspace, bundle: Bundle, placed: Path) -> Bundle:
    """Step 1: rename the bundle into place, or copy it there through tmp when it is elsewhere."""
    durable = workspace.durable
    _fsops.make_dirs(placed.parent, durable=durable)
    try:
        _fsops.rename(bundle.path, placed, durable=durable)
        return Bundle(placed, bundle.manifest, bundle.job, bundle.marker, bundle.history)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    staged = workspace.tmp_dir / f"import.{uuid.uuid4().hex}" / placed.name
    _fsops.make_dirs(staged, durable=False)
    copy_checked_tree(bundle.path, staged, durable=durable)
    copied = read_bundle(staged)  # what was copied is what is published
    _fsops.rename(staged, placed, durable=durable)
    _fsops.remove_dir(staged.parent, durable=False)
    return Bundle(placed, copied.manifest, copied.job, copied.marker, copied.history)


class _Store:
    """The target's runner store as one command sees it: each name's digest read once."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._digests: dict[str, str | None] = {}

    def digest(self, name: str) -> str | None:
        if name not in self._digests:
            self._digests[name] = stored_digest(self._workspace, name)
        return self._digests[name]

    def published(self, name: str, digest: str) -> None:
        self._digests[name] = digest


def _install_runners(workspace: Workspace, bundle: Bundle, store: _Store) -> None:
    """Step 2: the carried runners the store lacks (a conflicting one was refused before step 1)."""
    for runner in bundle.manifest["runners"]:
        name, digest = str(runner["name"]), str(runner["digest"])
        if store.digest(name) is None:
            source = carried_runner(bundle.path, name)
            publish_runner(workspace, name, source, expected_sha256=digest)
            store.published(name, digest)


def _publish(workspace: Workspace, bundle: Bundle, placement: str) -> MarkerLocation:
    """Step 3: the import frame and the marker's rename into the state tree (the commit point); the
    marker now current."""
    history = carried_history(bundle.path, bundle.history or None)
    last = history[-1].get("frame") if history else None
    manifest = bundle.manifest
    transfer = {
        "transfer_id": bundle.transfer_id,
        "prior_kind": bundle.prior_kind,
        "source_workspace_id": manifest["source"]["workspace_id"],
        "source_placement": manifest["source"]["placement"],
    }
    if "left_behind" in manifest:
        transfer["left_behind"] = manifest_left_behind(manifest)
    frame = kept(Kind(bundle.prior_kind), last, reason=IMPORT_REASON, transfer=transfer)
    result = unseal_marker(workspace, bundle.sealed_path, placement, frame, Trigger.TRANSFER_IMPORT)
    if not result.won or result.current is None:
        raise TransferError(f"{bundle.path}: another marker of job {bundle.job_key} appeared at {placement}")
    return result.current


def _record(
    manifest: Mapping[str, Any], marker: MarkerLocation, workspace: Workspace, placement: str
) -> dict[str, Any]:
    """Step 4: the import record (the acknowledgement document) of the marker now current."""
    key, transfer_id = str(manifest["job"]["job_key"]), str(manifest["transfer_id"])
    ack: dict[str, Any] = {
        "format": "httk-workflow-transfer-ack",
        "format_version": 1,
        "transfer_id": transfer_id,
        "job_id": marker.job_id,
        "job_key": key,
        "source_workspace_id": manifest["source"]["workspace_id"],
        "destination": {
            "workspace_id": workspace.workspace_id,
            "placement": placement,
            "kind": marker.kind.value,
            "state_generation": marker.name.generation,
            "record_ref": marker.name.ref_text,
        },
        "imported_at": utc_timestamp(workspace.clock.now()),
    }
    if "left_behind" in manifest:
        ack["left_behind"] = manifest["left_behind"]
    return ack
