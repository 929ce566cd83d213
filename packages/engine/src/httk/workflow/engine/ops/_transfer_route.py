"""``transfer send SOURCE JOB... --to DESTINATION``: detach, stream, import, acknowledge, across machines.

Either end is a workspace here (:class:`End` without a remote) or ``REMOTE:WORKSPACE`` (the remote's own
``httk`` acts on its own files: ``transfer outbox``, ``transfer inbox``, ``transfer acknowledge``, the
plumbing of :mod:`._transfer_send`). The order is copy-and-acknowledge (spec/01, "Moving across
filesystems"):

1. the destination's workspace id (the outbox is kept per destination);
2. the source fills its outbox: it detaches what the selectors name, and lists every bundle there
   that awaits acknowledgement (an earlier, interrupted send's included);
3. the bundles go to the destination's inbox — with rsync when one end is here, the other on a remote
   and both have it (into the inbox's staging directory, which an interrupted copy leaves for the next
   to resume; :func:`~._transfer_send.take_in_staged` takes them in once rsync exited 0), otherwise as
   one tar stream (``tar`` on a remote source, :func:`~._transfer_send.write_stream` here); every ssh
   command, rsync's included, shares the connection ``connect`` opened to each remote — and the
   destination imports everything its inbox holds;
4. the destination's import records go back to the source, which retires each sealed original only
   now, and drops its outbox copy;
5. the destination records each acknowledgement the source took as delivered (``delivered_at`` in its
   import record, which lets gc collect it); the destination also hands back every older record of
   this source still undelivered, so a send cut between 4 and 5 is completed by the next one.

An interruption anywhere (a killed ssh connection, a full disk, a crash) leaves each end in a state
that end's own protocol recovers, and running the same command again finishes the transfer: no job is
lost (the source keeps its sealed original until acknowledged) and none is duplicated (the destination
imports a transfer once). The same command brings jobs back the other way.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from httk.workflow.engine.core._workspace import Workspace, attach
from httk.workflow.protocol import RemoteError, TransferError, WorkflowError

from ._remotes import Remote
from ._ssh import connect, httk_line, run_httk, ssh_argv, ssh_options, unreachable
from ._transfer_environment import advise_or_refuse, environment_advisories, transfer_requirements
from ._transfer_send import (
    acknowledge_records,
    fill_outbox,
    has_rsync,
    inbox_staging,
    mark_delivered,
    receive_and_import,
    write_stream,
)

T = TypeVar("T")


@dataclass(frozen=True)
class End:
    """One end of a send: a workspace here (``remote`` None) or a workspace word on a remote."""

    workspace: str
    remote: Remote | None = None

    def __str__(self) -> str:
        return self.workspace if self.remote is None else f"{self.remote.name}:{self.workspace}"


def send_jobs(
    source: End,
    selectors: Sequence[str],
    destination: End,
    placement: str | None,
    *,
    exclude: Sequence[str] = (),
    via: str = "auto",
    strict_environment: bool = False,
    advise: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Move the jobs ``selectors`` name (and what an interrupted send left) from ``source`` to
    ``destination``, leaving what ``exclude`` matches at the source; what was imported and acknowledged.

    ``via`` is ``tar``, ``rsync`` (refused when an end lacks it, or both ends are remotes) or ``auto``
    (rsync when it can be used between a remote and here, tar otherwise). Before anything moves, the
    destination is checked for what the jobs need (:func:`_environment`): each shortfall goes to
    ``advise`` as it is found and into the report, and with ``strict_environment`` refuses the send."""
    if via not in VIA:
        raise TransferError(f"--via {via!r}: choose one of {', '.join(VIA)}")
    for end in (source, destination):
        if end.remote is not None:
            connect(end.remote)
    destination_id = _workspace_id(destination)
    advisories = _environment(source, selectors, destination)
    advise_or_refuse(
        advisories,
        advise,
        strict=strict_environment,
        refusal=f"nothing was moved (--strict-environment): {destination} lacks what the jobs need",
    )
    outbox = _fill(source, selectors, destination_id, exclude)
    if outbox["workspace_id"] == destination_id:
        raise TransferError(f"{source} and {destination} are the same workspace")
    inbox, method = _stream(source, outbox, destination, placement, via)
    acknowledged = _acknowledge(source, inbox["records"], destination_id)
    delivered = _deliver(destination, acknowledged["acknowledged"])
    return {
        "source": outbox["workspace_id"],
        "destination": destination_id,
        "via": method,
        "advisories": advisories,
        "sent": [row["job_key"] for row in outbox["bundles"]],
        "imported": inbox["imported"],
        "acknowledged": acknowledged["acknowledged"],
        "refused": acknowledged["refused"],
        "delivered": delivered,
    }


def _workspace_id(end: End) -> str:
    if end.remote is None:
        return attach(end.workspace, writable=False).workspace_id
    status = _remote_json(end.remote, ["workflow", "workspace", "status", "--json", end.workspace])
    return str(status["workspace_id"])


def _environment(source: End, selectors: Sequence[str], destination: End) -> list[str]:
    """What ``destination`` lacks of what the jobs ``selectors`` name need, each end reading its own
    files (spec/03: the destination's settings, never this process's environment); one advisory when
    the destination cannot be asked."""
    if source.remote is None:
        needs = _here(source, lambda workspace: transfer_requirements(workspace, selectors))
    else:
        words = ["workflow", "transfer", "requirements", source.workspace, *selectors]
        needs = _remote_json(source.remote, words)
    try:
        if destination.remote is None:
            found: list[str] = _here(destination, lambda workspace: environment_advisories(workspace, needs))
        else:
            words = ["workflow", "transfer", "environment", destination.workspace]
            found = _remote_json(destination.remote, words, stdin=json.dumps(needs).encode())
    except WorkflowError as exc:
        return [f"the destination's environment could not be checked: {exc}"]
    return found


def _here(end: End, action: Callable[[Workspace], T]) -> T:
    """``action`` on the workspace ``end`` names here, attached for it alone."""
    workspace = attach(end.workspace)
    try:
        return action(workspace)
    finally:
        workspace.close()


def _fill(
    source: End, selectors: Sequence[str], destination_id: str, exclude: Sequence[str]
) -> dict[str, Any]:
    if source.remote is None:
        return _here(source, lambda workspace: fill_outbox(workspace, selectors, destination_id, exclude))
    words = ["workflow", "transfer", "outbox", source.workspace, *selectors, "--for", destination_id]
    words += [word for pattern in exclude for word in ("--exclude", pattern)]
    filled: dict[str, Any] = _remote_json(source.remote, words)
    return filled


@dataclass(frozen=True)
class _Shipment:
    """What one send streams: the source's outbox, the bundles in it, and where they are imported."""

    source_id: str
    stage: Path
    keys: list[str]
    transfer_ids: list[str]
    placement: str | None


def _stream(
    source: End, outbox: dict[str, Any], destination: End, placement: str | None, via: str
) -> tuple[dict[str, Any], str]:
    shipment = _Shipment(
        str(outbox["workspace_id"]),
        Path(outbox["stage"]),
        [row["job_key"] for row in outbox["bundles"]],
        [row["transfer_id"] for row in outbox["bundles"]],
        placement,
    )
    target = _rsync_target(source, outbox, destination, shipment, via)
    if target is not None:
        _rsync(source, destination, shipment, target)
        return _take_in(destination, shipment), "rsync"
    return _tar(source, destination, shipment), "tar"


VIA = ("auto", "tar", "rsync")


def _rsync_target(
    source: End, outbox: dict[str, Any], destination: End, shipment: _Shipment, via: str
) -> str | None:
    """The destination's staging directory when the bundles go with rsync, ``None`` for tar."""
    if via == "tar" or not shipment.keys:
        return None
    if source.remote is not None and destination.remote is not None:
        if via == "rsync":
            raise TransferError(
                "--via rsync: rsync copies between this machine and one remote, and both ends are "
                "remotes; use --via tar (or auto), which streams tar from one to the other"
            )
        return None
    if via == "auto" and source.remote is None and destination.remote is None:
        return None  # both ends here: no connection to spare, the archive goes through a pipe
    if destination.remote is None:
        where = _here(destination, lambda workspace: inbox_staging(workspace, shipment.source_id))
    else:
        words = ["workflow", "transfer", "inbox", destination.workspace, "--from", shipment.source_id]
        where = _remote_json(destination.remote, [*words, "--staging"])
    lacking = [
        str(end)
        for end, has in (
            (source, bool(outbox.get("rsync"))),
            (destination, bool(where["rsync"])),
            ("this machine", has_rsync()),
        )
        if not has
    ]
    if not lacking:
        return str(where["staging"])
    if via == "rsync":
        raise TransferError(f"--via rsync: rsync is not installed at {', '.join(lacking)}; use --via tar")
    return None


# rsync's exit statuses for a failed connection or a peer gone (rsync(1), "EXIT VALUES"), and ssh's 255
_RSYNC_LOST = frozenset({5, 10, 12, 20, 30, 35, 255})


def _rsync(source: End, destination: End, shipment: _Shipment, target: str) -> None:
    """Copy the shipment's bundles with rsync into ``target``, over the shared ssh connection."""
    remote = source.remote or destination.remote
    # --delete: a receiver killed part way leaves its temporary files inside a bundle, which would break
    # the bundle's digest; --partial-dir keeps what it had of a file for the next copy to continue from.
    argv = ["rsync", "--archive", "--protect-args", "--delete", "--partial-dir=.rsync-partial"]
    here_from, here_to = "", ""
    if remote is not None:
        ssh = shlex.join(["ssh", *ssh_options(remote), "-o", "ControlMaster=no"])
        argv += ["--rsh", ssh]
        host = f"{remote.require_host()}:"
        here_from, here_to = (host, "") if source.remote is not None else ("", host)
    argv += [f"{here_from}{shipment.stage / key}" for key in shipment.keys]
    argv.append(f"{here_to}{target}/")
    result = subprocess.run(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    if result.returncode == 0:
        return
    said = result.stderr.decode(errors="replace").strip().splitlines()
    last = said[-1] if said else "no message"
    if remote is not None and (result.returncode in _RSYNC_LOST or result.returncode < 0):
        raise unreachable(
            remote, f"the connection was lost while the bundles were sent (rsync exited {result.returncode})"
        )
    raise TransferError(f"rsync exited {result.returncode} while it sent the bundles: {last}")


def _take_in(destination: End, shipment: _Shipment) -> dict[str, Any]:
    """The destination's import of what rsync staged."""
    if destination.remote is None:

        def take(workspace: Workspace) -> dict[str, Any]:
            return receive_and_import(
                workspace, None, shipment.source_id, shipment.placement, shipment.transfer_ids, staged=True
            )

        return _here(destination, take)
    words = _inbox_words(destination, shipment)
    received: dict[str, Any] = _remote_json(destination.remote, [*words, "--staged"])
    return received


def _inbox_words(destination: End, shipment: _Shipment) -> list[str]:
    words = ["workflow", "transfer", "inbox", destination.workspace, "--from", shipment.source_id]
    if shipment.placement:
        words += ["--placement", shipment.placement]
    return words + [word for transfer_id in shipment.transfer_ids for word in ("--transfer", transfer_id)]


def _tar(source: End, destination: End, shipment: _Shipment) -> dict[str, Any]:
    producer: subprocess.Popen[bytes] | None = None
    if shipment.keys and source.remote is not None:
        names = " ".join(shlex.quote(key) for key in shipment.keys)
        command = f"exec tar -C {shlex.quote(str(shipment.stage))} -cf - -- {names}"
        producer = subprocess.Popen(
            ssh_argv(source.remote, command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
        )
    try:
        if destination.remote is None:
            received = _import_here(destination, shipment, producer)
        else:
            received = _import_there(destination, shipment, producer)
    except BaseException:
        if producer is not None:  # nobody reads its archive any more
            producer.kill()
            producer.wait()
        raise
    if producer is not None:
        _finish(source, producer)
    return received


def _import_here(
    destination: End, shipment: _Shipment, producer: subprocess.Popen[bytes] | None
) -> dict[str, Any]:
    workspace = attach(destination.workspace)
    try:
        if producer is not None:
            stream = producer.stdout
        elif shipment.keys:  # both ends here: one archive through a pipe, as it would cross a connection
            read_end, write_end = os.pipe()
            with os.fdopen(read_end, "rb") as reader:
                writer = _writer(shipment, os.fdopen(write_end, "wb"))
                try:
                    return _receive(workspace, shipment, reader)
                finally:
                    writer.join()
        else:
            stream = None
        return _receive(workspace, shipment, stream)
    finally:
        workspace.close()


def _receive(workspace: Workspace, shipment: _Shipment, stream: IO[bytes] | None) -> dict[str, Any]:
    return receive_and_import(
        workspace, stream, shipment.source_id, shipment.placement, shipment.transfer_ids
    )


def _writer(shipment: _Shipment, stream: IO[bytes]) -> threading.Thread:
    """A started thread writing the shipment's archive onto ``stream`` and closing it."""

    def write() -> None:
        try:
            write_stream(shipment.stage, shipment.keys, stream)
        except (BrokenPipeError, ValueError):
            pass  # the reader stopped early, and says why
        finally:
            with contextlib.suppress(BrokenPipeError):
                stream.close()

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def _import_there(
    destination: End, shipment: _Shipment, producer: subprocess.Popen[bytes] | None
) -> dict[str, Any]:
    remote = destination.remote
    assert remote is not None
    words = _inbox_words(destination, shipment)
    if shipment.keys:
        words.append("--stream")
    stdin: Any = subprocess.DEVNULL
    if shipment.keys:
        stdin = producer.stdout if producer is not None else subprocess.PIPE
    argv = ssh_argv(remote, httk_line(remote, words))
    consumer = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if producer is not None and producer.stdout is not None:
        producer.stdout.close()  # the consumer holds it now
    if stdin is subprocess.PIPE:
        assert consumer.stdin is not None
        writer = _writer(shipment, consumer.stdin)
        out, err = _collect(consumer)
        writer.join()
    else:
        out, err = consumer.communicate()
    received: dict[str, Any] = _parse(remote, consumer.returncode, out, err, words)
    return received


def _collect(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Standard output and error of ``process`` whose standard input another thread writes."""
    assert process.stdout is not None and process.stderr is not None
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()))  # type: ignore[union-attr]
    reader.start()
    out = process.stdout.read()
    reader.join()
    process.wait()
    return out, b"".join(errors)


def _finish(source: End, producer: subprocess.Popen[bytes]) -> None:
    status = producer.wait()
    if status == 255:
        assert source.remote is not None
        raise unreachable(source.remote, "the connection was lost while the bundles were sent")
    if status != 0:
        raise TransferError(f"{source}: tar exited with status {status} while it sent the bundles")


def _acknowledge(source: End, records: list[dict[str, Any]], destination_id: str) -> dict[str, Any]:
    if not records:
        return {"acknowledged": [], "refused": {}}
    if source.remote is None:
        return _here(source, lambda workspace: acknowledge_records(workspace, records, destination_id))
    words = ["workflow", "transfer", "acknowledge", source.workspace, "--for", destination_id]
    result: dict[str, Any] = _remote_json(source.remote, words, stdin=json.dumps(records).encode())
    return result


def _deliver(destination: End, transfer_ids: list[str]) -> list[str]:
    """Tell the destination which acknowledgements the source took; the records marked now."""
    if not transfer_ids:
        return []
    if destination.remote is None:
        return _here(destination, lambda workspace: mark_delivered(workspace, transfer_ids))
    words = ["workflow", "transfer", "delivered", destination.workspace]
    result: list[str] = _remote_json(destination.remote, words, stdin=json.dumps(transfer_ids).encode())
    return result


def _remote_json(remote: Remote, words: list[str], *, stdin: bytes | None = None) -> Any:
    result = run_httk(remote, words, stdin=stdin)
    return _parse(remote, result.returncode, result.stdout, result.stderr, words)


def _parse(remote: Remote, status: int, out: bytes, err: bytes, words: list[str]) -> Any:
    if status == 255:
        raise unreachable(remote, err.decode(errors="replace"))
    said = err.decode(errors="replace").strip()
    if status != 0:
        raise RemoteError(
            f"on {remote.name}: httk {' '.join(words[:3])} exited {status}: {said or 'no message'}"
        )
    try:
        return json.loads(out)
    except ValueError:
        raise RemoteError(
            f"on {remote.name}: httk {' '.join(words[:3])} did not print JSON: {out[:200]!r}"
        ) from None
