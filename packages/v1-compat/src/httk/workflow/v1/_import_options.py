"""How a v1 tree is imported: the options of ``httk workflow v1 import``, shared by the importer and the
decisions it makes (:mod:`._import_plan`)."""

from __future__ import annotations

from dataclasses import dataclass

from ._jobdoc import DEFAULT_ATTEMPTS
from ._reader import STALE_SECONDS


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """How to import (the ``httk workflow v1 import`` options)."""

    placement: str = "v1"
    """The placement prefix: a task at ROOT/a/b/ht.task.* goes to <placement>/a/b (v1's category
    directories, ``ht.waitstart/<p>``, ``ht.running``, ``ht.finished``, ..., left out)."""
    move: bool = False
    """Rename task directories into the workspace instead of copying them (one filesystem only)."""
    include_finished: bool = False
    """Import finished, broken, timeout and stopped tasks too: their first activation ends them so."""
    force: bool = False
    """Import tasks a live v1 task manager may own (treated as stale, their restart counted)."""
    dry_run: bool = False
    attempts: int = DEFAULT_ATTEMPTS
    stale_after: float = STALE_SECONDS
    durable: bool | None = None
    """Override the workspace's durability for this import (None: the workspace's own mode)."""
