"""The manager's signature check of a claimed, well-formed request (DECISIONS D20, :mod:`._signatures`).

The trust list is read from format.json for every request decided, not taken from the attach, so
``workspace trust`` takes effect on live managers: one small read, and only when there is a request.
A trust list that cannot be read or parsed holds the request (it is retried) rather than deciding it
under a policy the workspace may not have.
"""

from __future__ import annotations

from httk.workflow.engine.core._workspace import Workspace, read_format_document
from httk.workflow.protocol import WorkspaceError

from ._documents import HOLD, QUARANTINE, Request, Verdict
from ._signatures import TRUST_MEMBER, SignatureFormatError, parse_trust, signature_refusal


def check_signature(workspace: Workspace, request: Request) -> Request | Verdict:
    """``request`` with its signature verified (or unsigned and admitted), or the verdict that stops it."""
    try:
        trust = parse_trust(read_format_document(workspace.root).get(TRUST_MEMBER))
    except WorkspaceError as exc:
        return Verdict(HOLD, f"the workspace's trust list cannot be read now: {exc}")
    except SignatureFormatError as exc:
        return Verdict(HOLD, f"format.json: {exc}; correct it there")
    stop = signature_refusal(request.document, request.operator_key, request.signature, trust)
    if stop is not None:
        return Verdict(QUARANTINE, stop)
    return request if request.operator_key is None else request.verified()
