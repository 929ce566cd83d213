"""The two ends of ``transfer send``: an outbox at the source, an inbox at the destination.

``transfer send`` (``_transfer_route``) moves jobs between machines with detached-transfer-v1's own
copy-and-acknowledge protocol, each end acting on its own files:

- the **outbox** (:func:`fill_outbox`), at the source: ``transfer detach`` into
  ``$HTTK_DATA_HOME/transfers/outbox/<source-id>/<destination-id>/``, a directory of that user on that
  machine, so that a rerun finds every bundle an earlier send left there (detached, not yet
  acknowledged) and sends it again together with what the selectors name now;
- the **stream**, one tar archive of the outbox's bundles (:func:`write_stream`, or ``tar`` on a remote);
- the **inbox** (:func:`receive_and_import`), at the destination: the archive is extracted below
  ``$HTTK_DATA_HOME/transfers/inbox/<source-id>/.incoming.<nonce>/`` and only a complete archive's
  bundles are renamed into the inbox (a stream cut short leaves nothing but that directory, removed
  then, or by the next receive once the process that held it locked is gone);
  every bundle in the inbox is then imported by ``transfer import`` (whole-bundle validation, duplicate
  suppression, resumable), at ``--placement`` or, by default, at the placement it left;
- the **acknowledgements** (:func:`acknowledge_records`), back at the source: the destination's import
  records retire the source's sealed originals, and the outbox copies go. Nothing is retired before
  the destination recorded its import;
- the **deliveries** (:func:`mark_delivered`), back at the destination: each import record the source
  took gets ``delivered_at``, so gc may collect it (until then it is the acknowledgement still owed).
  Every receive returns, besides its own, each import record of this source still without
  ``delivered_at``, so a send cut between the acknowledgement and the delivery is completed by the
  next send from that source.

A rerun after any interruption converges: a job still in the source's state tree is detached, a sealed
one is sent again, a bundle the destination already imported is recognised by its import record (and
its copy dropped), and an acknowledgement is delivered once.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import tarfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._sealed import is_sealed
from httk.workflow.engine.core._user_dirs import data_home
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.maintenance._gc import DELIVERED_MEMBER
from httk.workflow.protocol import TransferError

from ._select import SelectorError, select_jobs
from ._transfer_bundle import (
    outgoing_bundles,
    read_document,
    read_manifest,
    receipt_path,
    require_extension,
    transfers_dir,
)
from ._transfer_detach import detach_jobs
from ._transfer_import import import_bundles, record_delivered
from ._transfers import retire

INCOMING = ".incoming."
STAGING = ".rsync"
"""The inbox's directory rsync copies bundles into: kept across an interrupted send, so the next one
resumes where it stopped; its complete bundles are taken in by the ``--staged`` receive."""


def outbox_dir(source_id: str, destination_id: str) -> Path:
    return data_home() / "transfers" / "outbox" / source_id / destination_id


def inbox_dir(source_id: str) -> Path:
    return data_home() / "transfers" / "inbox" / source_id


def _transfer_of(path: Path) -> str | None:
    try:
        return str(read_manifest(path)["transfer_id"])
    except TransferError:
        return None


# -- the source ---------------------------------------------------------------------------------------
def fill_outbox(
    workspace: Workspace, selectors: Sequence[str], destination_id: str, exclude: Sequence[str] = ()
) -> dict[str, Any]:
    """Detach what ``selectors`` name into the outbox for ``destination_id`` (leaving what ``exclude``
    matches behind); every bundle it holds.

    A selector that names nothing now is skipped when the outbox holds bundles of an earlier send (its
    jobs were detached then); otherwise it is refused as ``transfer detach`` refuses it.
    """
    require_extension(workspace)
    stage = outbox_dir(workspace.workspace_id, destination_id)
    _fsops.make_dirs(stage, durable=workspace.durable)
    pending = _pending(workspace, stage)
    wanted = [selector for selector in selectors if not pending or _names_a_job(workspace, selector, pending)]
    if wanted:
        detach_jobs(workspace, wanted, stage, exclude)
    return {
        "workspace_id": workspace.workspace_id,
        "root": str(workspace.root),
        "stage": str(stage),
        "bundles": _pending(workspace, stage),
        "rsync": has_rsync(),
    }


def has_rsync() -> bool:
    """Whether this machine can be one end of an rsync copy."""
    return shutil.which("rsync") is not None


def _names_a_job(workspace: Workspace, selector: str, pending: Sequence[Mapping[str, str]]) -> bool:
    if any(selector.lower() in (row["job_key"], row["job_key"].rsplit("--", 1)[-1]) for row in pending):
        return True  # detach resumes it by its key
    try:
        select_jobs(workspace, selector)
    except SelectorError:
        return False
    return True


def _pending(workspace: Workspace, stage: Path) -> list[dict[str, str]]:
    """The outbox copies whose sealed original still awaits acknowledgement, by job key."""
    rows = []
    for outgoing in outgoing_bundles(workspace):
        key = outgoing.job_key
        copy = stage / key
        if is_sealed(outgoing.path) and _transfer_of(copy) == outgoing.transfer_id:
            manifest = read_manifest(copy)
            rows.append(
                {
                    "transfer_id": outgoing.transfer_id,
                    "job_key": key,
                    "placement": str(manifest["source"]["placement"]),
                }
            )
    return sorted(rows, key=lambda row: row["job_key"])


def write_stream(stage: Path, keys: Iterable[str], stream: IO[bytes]) -> None:
    """One tar archive of the outbox bundles ``keys`` onto ``stream`` (which stays open)."""
    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for key in keys:
            archive.add(stage / key, arcname=key, recursive=True)


def acknowledge_records(
    workspace: Workspace, records: Sequence[Mapping[str, Any]], destination_id: str
) -> dict[str, Any]:
    """Retire the sealed original of each import record, then its outbox copy: the transfer ids
    ``acknowledged``, and those ``refused`` with why (a transfer aborted here: the job exists twice)."""
    require_extension(workspace)
    stage = outbox_dir(workspace.workspace_id, destination_id)
    for record in records:
        if record.get("format") != "httk-workflow-transfer-ack" or record.get("source_workspace_id") != (
            workspace.workspace_id
        ):
            raise TransferError(f"not an import record of a transfer from {workspace.root}: {dict(record)}")
    done: list[str] = []
    refused: dict[str, str] = {}
    for record in records:
        transfer_id = str(record["transfer_id"])
        try:
            retire(workspace, record)
        except TransferError as exc:
            refused[transfer_id] = str(exc)
            continue
        copy = stage / str(record["job_key"])
        if _transfer_of(copy) == transfer_id:
            _fsops.remove_tree(copy)
        done.append(transfer_id)
    return {"acknowledged": done, "refused": refused}


# -- the destination ----------------------------------------------------------------------------------
def inbox_staging(workspace: Workspace, source_id: str) -> dict[str, Any]:
    """The inbox's rsync staging directory for bundles from ``source_id`` (made here), and whether this
    machine has rsync: what a sender needs to copy bundles here with rsync."""
    require_extension(workspace)
    inbox = inbox_dir(source_id)
    _fsops.make_dirs(inbox, durable=workspace.durable)  # rsync makes the staging directory itself
    return {"staging": str(inbox / STAGING), "rsync": has_rsync()}


def receive_and_import(
    workspace: Workspace,
    stream: IO[bytes] | None,
    source_id: str,
    placement: str | None,
    transfer_ids: Sequence[str] = (),
    *,
    staged: bool = False,
) -> dict[str, Any]:
    """Receive one archive from ``stream`` (when given) into the inbox of ``source_id``, or with
    ``staged`` take in the bundles of ``transfer_ids`` rsync copied into its staging directory; import
    every bundle the inbox holds, and return the import records of those and of ``transfer_ids``."""
    require_extension(workspace)
    inbox = inbox_dir(source_id)
    _fsops.make_dirs(inbox, durable=workspace.durable)
    _remove_stale(inbox)
    if stream is not None:
        receive(stream, inbox, durable=workspace.durable)
    if staged:
        take_in_staged(workspace, inbox, transfer_ids)
    waiting = sorted(name for name in os.listdir(inbox) if not name.startswith("."))
    groups: dict[str, list[Path]] = {}
    wanted = list(transfer_ids)
    for name in waiting:
        manifest = read_manifest(inbox / name)
        groups.setdefault(placement or str(manifest["source"]["placement"]), []).append(inbox / name)
        wanted.append(str(manifest["transfer_id"]))
    imported = []
    for where, bundles in groups.items():
        results = import_bundles(workspace, bundles, where, acknowledge_source=False)
        imported += [result.as_dict() for result in results]
    records = []
    for transfer_id in dict.fromkeys(wanted):
        path = receipt_path(workspace, "imported", transfer_id)
        if os.path.isfile(path):
            records.append(read_document(path, "import record", "httk-workflow-transfer-ack"))
    listed = {str(record["transfer_id"]) for record in records}
    records += [
        record for record in _undelivered(workspace, source_id) if record["transfer_id"] not in listed
    ]
    return {"workspace_id": workspace.workspace_id, "imported": imported, "records": records}


def _undelivered(workspace: Workspace, source_id: str) -> list[dict[str, Any]]:
    """The import records of transfers from ``source_id`` whose delivery was never recorded."""
    directory = transfers_dir(workspace) / "imported"
    found = []
    for name in sorted(_listing(directory)):
        if name.startswith(".") or not name.endswith(".json"):
            continue
        try:
            record = read_document(directory / name, "import record", "httk-workflow-transfer-ack")
        except TransferError:
            continue  # not one this send can deliver; gc and fsck leave it be
        if record.get("source_workspace_id") == source_id and DELIVERED_MEMBER not in record:
            found.append(record)
    return found


def mark_delivered(workspace: Workspace, transfer_ids: Sequence[str]) -> list[str]:
    """Record that the source took the acknowledgement of each of ``transfer_ids`` imported here; the
    ids whose import record was changed now."""
    require_extension(workspace)
    marked = []
    for transfer_id in transfer_ids:
        path = receipt_path(workspace, "imported", transfer_id)
        if not os.path.isfile(path):
            continue  # collected already, or never imported here: nothing is owed
        record = read_document(path, "import record", "httk-workflow-transfer-ack")
        if record_delivered(workspace, record):
            marked.append(transfer_id)
    return marked


def receive(stream: IO[bytes], inbox: Path, *, durable: bool) -> list[str]:
    """Extract one tar archive into the inbox; only a complete one's bundles are renamed into it.

    The extraction directory is locked (``flock`` on it) while this process lives, so a later receive
    removes it once this one was killed part way, and never while it is still extracting.
    """
    incoming = inbox / f"{INCOMING}{uuid.uuid4().hex}"
    _fsops.make_dir(incoming, durable=False)
    lock = os.open(incoming, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _extract(stream, inbox, incoming, durable=durable)
    finally:
        os.close(lock)


def _extract(stream: IO[bytes], inbox: Path, incoming: Path, *, durable: bool) -> list[str]:
    try:
        _unpack(stream, incoming, durable=durable)
    except (tarfile.FilterError, TransferError) as exc:
        _fsops.remove_tree(incoming)
        raise TransferError(f"the stream of bundles is refused: {exc}; nothing was received") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        _fsops.remove_tree(incoming)
        raise TransferError(
            f"the stream of bundles ended before it was complete ({exc}); nothing was received"
        ) from None
    names = sorted(os.listdir(incoming))
    try:
        _move_in(incoming, inbox, names, durable=durable)
    finally:
        _fsops.remove_tree(incoming)
    return names


def _unpack(stream: IO[bytes], incoming: Path, *, durable: bool) -> None:
    """Write the members of one tar stream below ``incoming`` through the seam, durably when asked.

    A bundle holds directories and regular files only (a file may be another name of one received
    before it), each named inside ``incoming``; tarfile's ``data`` filter refuses absolute names, ``..``,
    links leading out and unsafe modes (``FilterError``), and any other member (a symbolic link, a
    device) is refused here (:class:`TransferError`). Each file's contents are synchronized as they are
    written and every directory after the last one, before a rename takes a bundle in.
    """
    top = str(incoming)
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if member.name.startswith("/"):  # the filter would strip it; no sender writes one
                raise TransferError(f"{member.name!r} is an absolute name")
            safe = tarfile.data_filter(member, top)
            target = incoming / safe.name
            if safe.isdir():
                _fsops.make_dirs(target, durable=False)
            elif safe.isreg() and (source := archive.extractfile(member)) is not None:
                _fsops.make_dirs(target.parent, durable=False)
                chunks = iter(functools.partial(source.read, _CHUNK), b"")
                _fsops.create_streamed(target, chunks, durable=durable, mode=safe.mode, mtime=safe.mtime)
            elif safe.islnk():  # a runner several bundles carry, hard-linked as the source keeps it
                _fsops.make_dirs(target.parent, durable=False)
                _fsops.link_file(incoming / safe.linkname, target)
            else:
                raise TransferError(f"{member.name!r} is neither a directory nor a file")
    if durable:
        _fsops.sync_tree(incoming)


_CHUNK = 1 << 20


def _move_in(received: Path, inbox: Path, names: Iterable[str], *, durable: bool) -> None:
    """Rename the bundles ``names`` from ``received`` into the inbox (one already there is kept)."""
    for name in names:
        target = inbox / name
        if os.path.lexists(target) and _transfer_of(target) == _transfer_of(received / name):
            _fsops.remove_tree(received / name)  # an earlier send delivered this very bundle
            continue
        if os.path.lexists(target):
            raise TransferError(
                f"{target} holds another transfer of the job than the one received; import or remove it"
            )
        _fsops.rename(received / name, target, durable=durable)


def take_in_staged(workspace: Workspace, inbox: Path, transfer_ids: Sequence[str]) -> None:
    """Move the staged bundles of ``transfer_ids`` into the inbox; drop staged copies of transfers this
    workspace has imported; remove the staging directory once it is empty.

    rsync exited 0 before this runs, so each named bundle is whole (import still validates it)."""
    directory = inbox / STAGING
    wanted = set(transfer_ids)
    names = sorted(name for name in _listing(directory) if not name.startswith("."))
    by_transfer = {name: _transfer_of(directory / name) for name in names}
    missing = wanted - set(by_transfer.values())
    if missing:
        raise TransferError(
            f"{directory}: rsync finished, but the bundles of transfers {', '.join(sorted(missing))} "
            "are not there"
        )
    arrived = [name for name in names if by_transfer[name] in wanted]
    if workspace.durable:  # rsync leaves what it wrote to the page cache
        for name in arrived:
            _fsops.sync_tree(directory / name)
    _move_in(directory, inbox, arrived, durable=workspace.durable)
    for name in names:
        transfer_id = by_transfer[name]
        if os.path.lexists(directory / name) and (
            transfer_id is not None and os.path.lexists(receipt_path(workspace, "imported", transfer_id))
        ):
            _fsops.remove_tree(directory / name)
    _fsops.remove_dir(directory, durable=False)  # kept while a bundle of another send is arriving


def _listing(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def _remove_stale(inbox: Path) -> None:
    """What a receive killed part way left: an extraction directory no live receive holds locked."""
    for name in os.listdir(inbox):
        if not name.startswith(INCOMING):
            continue
        try:
            handle = os.open(inbox / name, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # its receive finished meanwhile
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # another receive is extracting into it
        else:
            _fsops.remove_tree(inbox / name)
        finally:
            os.close(handle)
