"""``workspace trust``: the keys a workspace trusts to sign requests, and whether it requires signatures.

Both live in format.json's top-level ``request_signatures`` (DECISIONS D20), changed by the same
validated, atomic read-modify-write as every format.json change (:meth:`Workspace.update_document`,
synchronized unless the workspace is not durable). A manager reads the member again for every request
it decides, so a change takes effect on live managers without a restart.

Two changes are refused because they would make every request unusable: requiring signatures while no
key is trusted, and removing the last trusted key while they are required (each would quarantine every
request, including the one an operator would send to repair it).

Cost: one format.json read and, for a change, one atomic write.
"""

from __future__ import annotations

from httk.workflow.engine.core._workspace import Workspace, read_format_document
from httk.workflow.engine.requests._signatures import (
    TRUST_MEMBER,
    SignatureFormatError,
    TrustList,
    decode_operator_key,
    parse_trust,
)
from httk.workflow.protocol import PolicyError


def trust_list(workspace: Workspace) -> TrustList:
    """The workspace's current ``request_signatures`` (read from disk, not from the attach)."""
    try:
        return parse_trust(read_format_document(workspace.root).get(TRUST_MEMBER))
    except SignatureFormatError as exc:
        raise PolicyError(f"format.json: {exc}", workspace.format_path) from None


def check_key(operator_key: str) -> str:
    """``operator_key`` when it is spelled as D20 requires; a :class:`PolicyError` naming it otherwise."""
    try:
        decode_operator_key(operator_key)
    except SignatureFormatError as exc:
        raise PolicyError(f"invalid operator key {operator_key!r}: {exc}") from None
    return operator_key


def trust_key(workspace: Workspace, operator_key: str) -> bool:
    """Add ``operator_key`` to the trusted keys; whether it changed anything."""
    check_key(operator_key)
    workspace.require_writable()
    trust = trust_list(workspace)
    if operator_key in trust.trusted_keys:
        return False
    _write(workspace, TrustList(trust.required, (*trust.trusted_keys, operator_key)))
    return True


def distrust_key(workspace: Workspace, operator_key: str) -> bool:
    """Remove ``operator_key`` from the trusted keys; whether it was there."""
    check_key(operator_key)
    workspace.require_writable()
    trust = trust_list(workspace)
    if operator_key not in trust.trusted_keys:
        return False
    kept = tuple(key for key in trust.trusted_keys if key != operator_key)
    if trust.required and not kept:
        raise PolicyError(
            f"{operator_key} is the last trusted key and signatures are required: every request would "
            "be quarantined; trust another key first, or stop requiring them (workspace trust require --off)",
            workspace.format_path,
        )
    _write(workspace, TrustList(trust.required, kept))
    return True


def require_signatures(workspace: Workspace, required: bool) -> bool:
    """Require (or stop requiring) signed, trusted requests; whether it changed anything."""
    workspace.require_writable()
    trust = trust_list(workspace)
    if trust.required == required:
        return False
    if required and not trust.trusted_keys:
        raise PolicyError(
            "no key is trusted: requiring signatures now would quarantine every request; trust a key "
            "first (workspace trust add ed25519:...)",
            workspace.format_path,
        )
    _write(workspace, TrustList(required, trust.trusted_keys))
    return True


def _write(workspace: Workspace, trust: TrustList) -> None:
    workspace.update_document({TRUST_MEMBER: trust.as_member()})
