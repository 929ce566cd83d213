"""spec/04's nine stage statuses, and how each is read off the protocol's state kinds.

======================  ====================================================================
status                  when
======================  ====================================================================
``pending``             no job yet, and a dependency has not completed
``ready``               no job yet, every dependency completed (or was skipped)
``preparing``           its job is ``submitted`` or ``ready``: registered, not yet started
``running``             its job is claimed, running, committing, waiting, paused or cancelling
``post_processing``     a checked stage's job at its ``check`` step (claimed through committing)
``completed``           its job ``succeeded``
``failed``              its job ``failed`` or was ``cancelled``
``invalidated``         it completed, and an amendment upstream made the result stale
``skipped``             an amendment said it is not needed
======================  ====================================================================

Standard library only: the coordinator and ``plan status`` share it.
"""

from __future__ import annotations

STATUSES = (
    "pending",
    "ready",
    "preparing",
    "running",
    "post_processing",
    "completed",
    "failed",
    "invalidated",
    "skipped",
)
CHECK_STEP = "check"
_PREPARING = frozenset({"submitted", "ready"})
_CHECKING = frozenset({"ready", "claimed", "running", "committing"})
_COMPLETED = frozenset({"succeeded"})
_FAILED = frozenset({"failed", "cancelled"})
TERMINAL = _COMPLETED | _FAILED


def status_of(kind: str, step: str | None = None, *, checked: bool = False) -> str:
    """The status of a stage whose current job is ``kind`` at ``step``.

    Examples
    --------
    >>> status_of("submitted"), status_of("waiting"), status_of("succeeded"), status_of("cancelled")
    ('preparing', 'running', 'completed', 'failed')
    >>> status_of("running", "check", checked=True)
    'post_processing'
    """
    if kind in _COMPLETED:
        return "completed"
    if kind in _FAILED:
        return "failed"
    if checked and step == CHECK_STEP and kind in _CHECKING:
        return "post_processing"
    if kind in _PREPARING:
        return "preparing"
    return "running"
