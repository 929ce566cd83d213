"""A workspace's transfers: listing and showing them, acknowledging an import, aborting a detach.

The source side of detached-transfer-v1 (DESIGN.md, "Detached transfers"). A detached job's sealed
original waits in ``transfers/outgoing/<transfer-id>/`` until either

- an **acknowledgement** arrives (:func:`acknowledge`, which ``transfer import`` calls when the source
  is reachable): the ledger entry ``retired/<transfer-id>.json`` (outcome ``imported``, the
  acknowledgement inside it), then the bundle renamed to ``retired/<transfer-id>/`` and its stale marker
  removed (so no copy of it can be imported again); or
- the operator **aborts** it (:func:`abort_transfer`): the ledger entry first (outcome ``aborted``, the
  decision a later acknowledgement is refused by), the copy in the detach's ``--to`` directory removed
  when it is still there, the payload back to its placement, the abort frame and the marker back into
  ``state/<prior kind>/``, and the ledger entry again with that frame's reference.

Each is resumable by running it again. A job still ``transferring`` (a detach cut short before it
sealed the marker) is aborted by the verified move back to its prior kind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._clock import utc_timestamp
from httk.workflow.engine.core._frames import kept
from httk.workflow.engine.core._jobs import read_frame
from httk.workflow.engine.core._scan import walk_markers
from httk.workflow.engine.core._sealed import SEALED_DIR, is_sealed, sealed_markers, unseal_marker
from httk.workflow.engine.core._states import Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach
from httk.workflow.protocol import TransferError, WorkflowError

from ._history import carried_history
from ._transfer_bundle import (
    ABORT_REASON,
    bundle_in,
    left_behind_dir,
    manifest_left_behind,
    outgoing_bundles,
    outgoing_dir,
    read_document,
    read_manifest,
    receipt_path,
    require_extension,
    retired_dir,
    transfers_dir,
    write_document,
)

# -- acknowledgement ----------------------------------------------------------------------------------
DELIVERED, UNREACHABLE = "delivered", "unreachable"


class Sources:
    """The source workspaces one command acknowledges to, each attached once (and closed at the end)."""

    def __init__(self) -> None:
        self._attached: dict[str, Workspace | None] = {}

    def get(self, root: str) -> Workspace | None:
        if root not in self._attached:
            try:
                self._attached[root] = attach(root)
            except WorkflowError:
                self._attached[root] = None
        return self._attached[root]

    def close(self) -> None:
        for workspace in self._attached.values():
            if workspace is not None:
                workspace.close()


def acknowledge(ack: Mapping[str, Any], manifest: Mapping[str, Any] | None, sources: Sources) -> str:
    """Deliver ``ack`` to the source the ``manifest`` names and retire its bundle: what became of it.

    :data:`DELIVERED`; :data:`UNREACHABLE` when the source cannot be reached here (no such directory,
    another workspace there now, or one this version may not change), and the import record is the
    acknowledgement to deliver later; or why the source refused it (it aborted the transfer, so the job
    now exists twice). The import stands in every case.
    """
    root = None if manifest is None else manifest.get("source", {}).get("root")
    if not isinstance(root, str) or not os.path.isdir(root):
        return UNREACHABLE
    source = sources.get(root)
    if source is None or source.workspace_id != ack["source_workspace_id"]:
        return UNREACHABLE
    placement = str(manifest["source"]["placement"]) if manifest is not None else None
    try:
        retire(source, ack, placement)
    except TransferError as exc:
        return f"refused: {exc}"
    return DELIVERED


def retire(source: Workspace, ack: Mapping[str, Any], placement: str | None = None) -> None:
    """Record ``ack`` in ``source`` and retire its sealed bundle (each step skipped once done);
    ``placement`` is the job's there, when the caller knows it.

    The ledger entry, which carries the acknowledgement, is the decision and comes first: a rerun that
    finds it (outcome ``imported``) finishes the rename and the marker's removal, and an abort finding it
    refuses. Workspaces retired before wrote ``acks/<transfer-id>.json`` first; an abort honours it.
    """
    transfer_id = str(ack["transfer_id"])
    ledger = receipt_path(source, "retired", transfer_id)
    durable = source.durable
    key = str(ack["job_key"])
    outgoing, retired = outgoing_dir(source, transfer_id), retired_dir(source, transfer_id)
    if os.path.lexists(ledger):
        entry = read_document(ledger, "transfer ledger", "httk-workflow-transfer-ledger")
        if entry["outcome"] == "aborted":
            raise TransferError(
                f"transfer {transfer_id} was aborted in {source.root}, which holds the job again; the "
                f"import into workspace {ack['destination']['workspace_id']} duplicates it"
            )
    else:
        bundle = bundle_in(outgoing) or bundle_in(retired)
        if placement is None:
            placement = _placement_of(bundle) if bundle is not None else str(ack["destination"]["placement"])
        kept = _left_behind(source, transfer_id, bundle, key) if "left_behind" in ack else {}
        write_document(
            ledger,
            _ledger(source, transfer_id, key, placement, "imported", acknowledgement=dict(ack), **kept),
            durable=durable,
        )
    if os.path.isdir(outgoing):
        _fsops.make_dirs(retired.parent, durable=durable)
        _fsops.rename(outgoing, retired, durable=durable)
    bundle = bundle_in(retired)
    if bundle is None:
        return
    for marker in sealed_markers(bundle):  # the job lives where it was imported: not importable again
        _fsops.unlink(bundle / SEALED_DIR / str(marker), durable=durable, missing_ok=True)
    if "left_behind" in ack:  # the import record repeats the manifest's
        _keep_left_behind(source, transfer_id, bundle, key)


def _left_behind(source: Workspace, transfer_id: str, bundle: Path | None, key: str) -> dict[str, Any]:
    """The ledger's ``left_behind`` member: the paths the bundle's manifest left behind and where
    retirement keeps them, ``transfers/left-behind/<transfer-id>/<job-key>/`` (none without a manifest)."""
    paths = _left_paths(bundle)
    if not paths:
        return {}
    return {"left_behind": {"paths": paths, "kept_in": str(left_behind_dir(source, transfer_id) / key)}}


def _left_paths(bundle: Path | None) -> list[str]:
    if bundle is None:
        return []
    try:
        return manifest_left_behind(read_manifest(bundle))
    except TransferError:
        return []


def _keep_left_behind(source: Workspace, transfer_id: str, bundle: Path, key: str) -> None:
    """Move what the transfer left behind out of the retired bundle gc will collect, to where the
    ledger says (:func:`_left_behind`)."""
    kept = left_behind_dir(source, transfer_id) / key
    for relative in _left_paths(bundle):  # each rename is skipped once done, so a rerun finishes the move
        if os.path.lexists(bundle / relative):
            _fsops.make_dirs((kept / relative).parent, durable=source.durable)
            _fsops.rename(bundle / relative, kept / relative, durable=source.durable)


def _ledger(
    ws: Workspace, transfer_id: str, job_key: str, placement: str, outcome: str, **extra: Any
) -> dict[str, Any]:
    return {
        "format": "httk-workflow-transfer-ledger",
        "format_version": 1,
        "transfer_id": transfer_id,
        "job_id": job_key.rsplit("--", 1)[-1],
        "job_key": job_key,
        "placement": placement,
        "outcome": outcome,
        **extra,
        "retired_at": utc_timestamp(ws.clock.now()),
    }


def _placement_of(bundle: Path) -> str:
    return str(read_manifest(bundle)["source"]["placement"])


def _entries(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


# -- abort --------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Aborted:
    transfer_id: str
    job_key: str
    placement: str
    kind: str
    removed_copy: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def abort_transfer(workspace: Workspace, transfer: str) -> Aborted:
    """Put the job of ``transfer`` (a transfer id, job id or job key) back into this workspace."""
    require_extension(workspace)
    wanted = transfer.lower()
    for marker in walk_markers(workspace, Kind.TRANSFERRING):
        if isinstance(marker, MarkerLocation):
            frame = read_frame(workspace, marker)
            info = {} if frame is None else dict(frame.get("transfer") or {})
            if wanted in (marker.job_id, marker.job_key, info.get("transfer_id")):
                return _abort_transferring(workspace, marker, info)
    for transfer_id, key, placement in _abortable(workspace):
        if wanted in (transfer_id, key, key.rsplit("--", 1)[-1]):
            return _abort_sealed(workspace, transfer_id, key, placement)
    raise TransferError(
        f"{workspace.root}: no transfer {transfer} awaiting acknowledgement or to resume an abort of"
    )


def _abortable(workspace: Workspace) -> Iterator[tuple[str, str, str]]:
    """Every (transfer id, job key, placement) an abort may take up: outgoing bundles, aborts begun."""
    for outgoing in outgoing_bundles(workspace):
        yield outgoing.transfer_id, outgoing.job_key, _placement_of(outgoing.path)
    for name in _entries(transfers_dir(workspace) / "retired"):
        if name.endswith(".json"):
            entry = read_document(
                transfers_dir(workspace) / "retired" / name,
                "transfer ledger",
                "httk-workflow-transfer-ledger",
            )
            if entry["outcome"] == "aborted" and "record_ref" not in entry:
                yield str(entry["transfer_id"]), str(entry["job_key"]), str(entry["placement"])


def _abort_transferring(workspace: Workspace, marker: MarkerLocation, info: Mapping[str, Any]) -> Aborted:
    transfer_id = str(info.get("transfer_id"))
    outgoing = bundle_in(outgoing_dir(workspace, transfer_id))
    payload = workspace.payload_path(marker.placement, marker.job_key)
    if outgoing is not None and not os.path.lexists(payload):
        _fsops.rename(outgoing, payload, durable=workspace.durable)
    prior = Kind(str(info["prior_kind"]))
    frame = read_frame(workspace, marker)
    back = kept(prior, frame, reason=ABORT_REASON, transfer={**info})
    result = move_marker(workspace, marker, back, Trigger.TRANSFER_ABORT)
    if not result.won:
        raise TransferError(f"{marker.job_key}: its transferring marker moved while it was being aborted")
    _remove_legacy_parent(workspace, transfer_id)
    return Aborted(transfer_id, marker.job_key, marker.placement, prior.value, None)


def _abort_sealed(workspace: Workspace, transfer_id: str, key: str, placement: str) -> Aborted:
    durable = workspace.durable
    ledger = receipt_path(workspace, "retired", transfer_id)
    if os.path.lexists(receipt_path(workspace, "acks", transfer_id)) or _acknowledged(ledger):
        raise TransferError(
            f"transfer {transfer_id} was acknowledged: the job lives in the workspace it went to"
        )
    bundle = bundle_in(outgoing_dir(workspace, transfer_id))
    payload = workspace.payload_path(placement, key)
    if not os.path.lexists(ledger):
        if os.path.lexists(payload):
            raise TransferError(f"{payload} exists; the job cannot be put back at its placement")
        write_document(
            ledger,
            _ledger(workspace, transfer_id, key, placement, "aborted"),
            durable=durable,
        )
    home = bundle if bundle is not None else payload
    history = carried_history(home)
    last = history[-1].get("frame") if history else None
    info = dict((last or {}).get("transfer") or {})
    removed = _remove_copy(info.get("destination"), key, transfer_id)  # before the job is schedulable
    if bundle is not None:
        _fsops.make_dirs(payload.parent, durable=durable)
        _fsops.rename(bundle, payload, durable=durable)
    _remove_legacy_parent(workspace, transfer_id)
    prior = Kind(str(read_manifest(payload)["marker"]["prior_kind"]))
    if is_sealed(payload):
        sealed = payload / SEALED_DIR / str(sealed_markers(payload)[0])
        frame = kept(prior, last, reason=ABORT_REASON, transfer=info)
        result = unseal_marker(workspace, sealed, placement, frame, Trigger.TRANSFER_ABORT)
        if not result.won or result.current is None:
            raise TransferError(f"{key}: another marker of the job appeared at {placement}")
        entry = read_document(ledger, "transfer ledger", "httk-workflow-transfer-ledger")
        write_document(ledger, {**entry, "record_ref": result.current.name.ref_text}, durable=durable)
    return Aborted(transfer_id, key, placement, prior.value, removed)


def _acknowledged(ledger: Path) -> bool:
    """Whether the ledger entry at ``ledger`` records an acknowledgement (its outcome ``imported``)."""
    if not os.path.lexists(ledger):
        return False
    entry = read_document(ledger, "transfer ledger", "httk-workflow-transfer-ledger")
    return bool(entry["outcome"] != "aborted")


def _remove_legacy_parent(workspace: Workspace, transfer_id: str) -> None:
    """Remove ``outgoing/<transfer-id>/`` when the layout before the flat one left it empty."""
    parent = outgoing_dir(workspace, transfer_id)
    if os.path.isdir(parent) and not os.listdir(parent):
        _fsops.remove_dir(parent, durable=False)


def _remove_copy(destination: object, key: str, transfer_id: str) -> str | None:
    """Remove the detach's copy of the bundle when it is still where detach put it."""
    if not isinstance(destination, str):
        return None
    copy = Path(destination) / key
    try:
        if read_manifest(copy)["transfer_id"] != transfer_id or not is_sealed(copy):
            return None
    except TransferError:
        return None
    _fsops.remove_tree(copy)
    return str(copy)


# -- reading ------------------------------------------------------------------------------------------
def list_transfers(workspace: Workspace) -> list[dict[str, Any]]:
    """One row per transfer this workspace knows: detaching, detached (awaiting acknowledgement),
    retired (imported elsewhere), aborted, imported (into this workspace)."""
    rows: list[dict[str, Any]] = []
    for marker in walk_markers(workspace, Kind.TRANSFERRING):
        if isinstance(marker, MarkerLocation):
            frame = read_frame(workspace, marker)
            info = {} if frame is None else dict(frame.get("transfer") or {})
            rows.append(_row(info.get("transfer_id"), "detaching", marker.job_key, marker.placement))
    for outgoing in outgoing_bundles(workspace):
        state = "detached" if is_sealed(outgoing.path) else "aborting"
        rows.append(_row(outgoing.transfer_id, state, outgoing.job_key, _placement_of(outgoing.path)))
    for where, named in (("retired", None), ("imported", "imported")):
        for name in _entries(transfers_dir(workspace) / where):
            if name.endswith(".json"):
                doc = read_document(transfers_dir(workspace) / where / name, "transfer receipt")
                placement = doc.get("placement") or (doc.get("destination") or {}).get("placement")
                rows.append(
                    _row(
                        doc.get("transfer_id"),
                        named or _retired_state(doc),
                        str(doc.get("job_key")),
                        str(placement),
                    )
                )
    return rows


def _retired_state(ledger: Mapping[str, Any]) -> str:
    return "aborted" if ledger.get("outcome") == "aborted" else "retired"


def _row(transfer_id: object, state: str, job_key: str, placement: str) -> dict[str, Any]:
    return {"transfer_id": transfer_id, "state": state, "job_key": job_key, "placement": placement}


def show_transfer(workspace: Workspace, transfer: str) -> dict[str, Any]:
    """Everything this workspace records about ``transfer`` (a transfer id): manifest, receipts, ledger."""
    found: dict[str, Any] = {"transfer_id": transfer}
    for outgoing in outgoing_bundles(workspace):
        if outgoing.transfer_id == transfer:
            found["bundle"] = str(outgoing.path)
            found["manifest"] = read_manifest(outgoing.path)
    for where in ("acks", "imported", "retired"):
        path = receipt_path(workspace, where, transfer)
        if os.path.isfile(path):
            found[where] = read_document(path, "transfer receipt")
    retired = bundle_in(retired_dir(workspace, transfer))
    if retired is not None:
        found["retired_bundle"] = str(retired)
    if len(found) == 1:
        raise TransferError(f"{workspace.root}: no transfer {transfer}")
    return found
