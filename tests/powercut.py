"""A deterministic power cut of the journal: what storage keeps is what was synchronized.

:class:`SyncLog` records, for every ``fsync`` this process makes while it is installed, the size of the
file synchronized (found through ``/proc/self/fd``). :func:`cut_power` then does to the journal what a
power cut does to a filesystem that drops unsynchronized writes: every segment is truncated to its size at
its last ``fsync``, and a segment that was never synchronized is lost whole. Markers are left as they
are, which is the worst case for the journal: each still names the frame it was renamed onto.

A durable workspace synchronizes every frame before the rename that publishes it, so a cut changes
nothing any marker names; a ``--no-durable`` one synchronizes nothing and loses every segment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


class SyncLog:
    """The size of each file at its last ``fsync`` (by real path)."""

    def __init__(self) -> None:
        self.synced: dict[str, int] = {}

    def record(self, fd: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return
        self.synced[path] = os.fstat(fd).st_size


@contextmanager
def recording_syncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[SyncLog]:
    """Install a :class:`SyncLog` behind ``os.fsync`` for the duration (this process only)."""
    log = SyncLog()
    real: Callable[[int], None] = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        log.record(fd)

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fsync)
        yield log


def cut_power(root: Path, log: SyncLog) -> dict[str, int]:
    """Keep of every journal segment what was synchronized; return how many were truncated and lost."""
    counts = {"kept": 0, "truncated": 0, "lost": 0}
    for segment in sorted((root / ".httk-workflow" / "journal").glob("*/*.hwj")):
        synced = log.synced.get(os.path.realpath(segment))
        if synced is None:
            segment.unlink()
            counts["lost"] += 1
        elif synced < segment.stat().st_size:
            os.truncate(segment, synced)
            counts["truncated"] += 1
        else:
            counts["kept"] += 1
    return counts
