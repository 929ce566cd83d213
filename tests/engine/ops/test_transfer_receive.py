"""Receiving a tar stream of bundles into an inbox: written through the seam, hostile members refused.

``transfer send --via tar`` pipes an archive of sealed bundles into ``transfer inbox`` at the far end,
which writes each member itself (:func:`~httk.workflow.engine.ops._transfer_send.receive`): contents
synchronized when the workspace is durable, before a rename takes a bundle in, and nothing of a stream
that is cut or holds something a bundle never does.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest
from httk.workflow.engine.core import _fsops
from httk.workflow.engine.ops._transfer_send import receive
from httk.workflow.protocol import TransferError


def _archive(add: list[tuple[tarfile.TarInfo, bytes | None]]) -> io.BytesIO:
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w|") as archive:
        for info, data in add:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    stream.seek(0)
    return stream


def _dir(name: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info, None


def _file(
    name: str, data: bytes, mode: int = 0o644, mtime: int = 1_700_000_000
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, mtime
    return info, data


def _link(name: str, target: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _inbox(tmp_path: Path) -> Path:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    return inbox


def test_bundles_arrive_whole_with_modes_times_and_shared_runners(tmp_path: Path) -> None:
    inbox = _inbox(tmp_path)
    stream = _archive([
        _dir("a"), _file("a/job.json", b"{}"), _file("a/runner.x", b"#!/bin/sh\n", mode=0o755),
        _dir("b"), _file("b/job.json", b"[]"), _link("b/runner.x", "a/runner.x", tarfile.LNKTYPE),
    ])  # fmt: skip
    trace = tmp_path / "trace"
    with _fsops.trace_to(trace):
        names = receive(stream, inbox, durable=True)
    assert names == ["a", "b"]
    assert (inbox / "a" / "job.json").read_bytes() == b"{}" and (
        inbox / "b" / "job.json"
    ).read_bytes() == b"[]"
    runner = (inbox / "a" / "runner.x").stat()
    assert stat.S_IMODE(runner.st_mode) == 0o755 and runner.st_mtime == 1_700_000_000
    assert (inbox / "b" / "runner.x").stat().st_ino == runner.st_ino
    written = [line.split("\t")[1] for line in trace.read_text().splitlines()]
    assert written.count("create") == 4 and "rename" in written  # every file through the seam
    assert sorted(os.listdir(inbox)) == ["a", "b"]  # the extraction directory is gone


@pytest.mark.parametrize(
    ("member", "says"),
    [
        (_link("a/escape", "/etc/passwd", tarfile.SYMTYPE), "'a/escape' is a link to an absolute path"),
        (_link("a/near", "job.json", tarfile.SYMTYPE), "'a/near' is neither a directory nor a file"),
        (_file("/abs/job.json", b"{}"), "'/abs/job.json' is an absolute name"),
        (_file("../outside", b"x"), "'../outside' would be extracted to"),
        (_link("a/out", "../../outside", tarfile.LNKTYPE), "'a/out' would link to"),
    ],
    ids=["symlink-out", "symlink", "absolute", "dotdot", "hardlink-out"],
)
def test_a_member_no_bundle_holds_refuses_the_whole_stream(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None], says: str
) -> None:
    inbox = _inbox(tmp_path)
    (tmp_path / "outside").write_text("keep")
    stream = _archive([_dir("a"), _file("a/job.json", b"{}"), member])
    with pytest.raises(
        TransferError, match=f"^the stream of bundles is refused: {says}.*; nothing was received"
    ):
        receive(stream, inbox, durable=False)
    assert os.listdir(inbox) == []
    assert (tmp_path / "outside").read_text() == "keep"


def test_a_cut_stream_leaves_nothing(tmp_path: Path) -> None:
    inbox = _inbox(tmp_path)
    whole = _archive([_dir("a"), _file("a/WAVECAR", b"w" * 100_000)]).getvalue()
    with pytest.raises(TransferError, match="ended before it was complete"):
        receive(io.BytesIO(whole[:30_000]), inbox, durable=False)
    assert os.listdir(inbox) == []
