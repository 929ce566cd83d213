"""Signed requests (DECISIONS D20): the encodings, the canonical form, verification and the trust list.

A signed request carries two more members::

    "operator_key": "ed25519:<base64 of the 32-byte public key>",
    "signature":    "<base64 of the 64-byte Ed25519 signature>"

The signature is over the RFC 8785 (JSON Canonicalization Scheme) serialization of the request object
without its ``signature`` member, so ``operator_key`` is itself signed. Both members are present or
neither is; base64 is the standard alphabet with padding, and only its one canonical spelling of the bytes
is accepted, so a signature has exactly one textual form.

Which keys a workspace trusts, and whether it requires signatures, is the top-level format.json member
``request_signatures: {"required": bool, "trusted_keys": [operator_key, ...]}`` (absent: not required,
nothing trusted). Without ``required`` a verified signature is attribution: the manager records the
key whether or not it is trusted. With it, an unsigned request or one signed by a key not in
``trusted_keys`` is quarantined. A signature that does not verify is quarantined either way.

``workspace trust`` changes the member (:func:`trust_key`, :func:`distrust_key`,
:func:`require_signatures`) by the same validated, atomic read-modify-write as every format.json change
(:meth:`Workspace.update_document`, synchronized unless the workspace is not durable). Two changes are
refused because each would quarantine every request, the one an operator would send to repair it
included: requiring signatures while no key is trusted, and removing the last trusted key while they are
required.

``cryptography`` and ``rfc8785`` are imported only to sign or to verify: a manager that meets no signed
request never loads them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Protocol

from httk.workflow.engine.core._workspace import Workspace, read_format_document
from httk.workflow.protocol import PolicyError
from httk.workflow.protocol._signing import (
    TRUST_MEMBER,
    SignatureFormatError,
    TrustList,
    decode_operator_key,
    decode_signature,
    fingerprint,
    parse_trust,
)


def canonical_bytes(document: Mapping[str, Any]) -> bytes:
    """RFC 8785 of ``document`` without its ``signature`` member: what is signed.

    Raises :class:`SignatureFormatError` for a document JCS cannot serialize exactly (an integer outside
    I-JSON's ±(2**53 - 1), a non-finite number).
    """
    import rfc8785

    unsigned = {name: value for name, value in document.items() if name != "signature"}
    try:
        return rfc8785.dumps(unsigned)
    except (rfc8785.CanonicalizationError, ValueError) as exc:
        raise SignatureFormatError(f"the request cannot be canonicalized (RFC 8785): {exc}") from None


class Signer(Protocol):
    """Who signs: the public key that verifies, and the private operation."""

    @property
    def operator_key(self) -> str: ...

    def sign(self, data: bytes) -> bytes: ...


def signed(document: Mapping[str, Any], signer: Signer) -> dict[str, Any]:
    """``document`` with ``signer``'s ``operator_key`` and the detached ``signature`` over both."""
    with_key = {name: value for name, value in document.items() if name != "signature"}
    with_key["operator_key"] = signer.operator_key
    signature = signer.sign(canonical_bytes(with_key))
    return {**with_key, "signature": base64.b64encode(signature).decode("ascii")}


def verifies(document: Mapping[str, Any], operator_key: str, signature: str) -> bool:
    """Whether ``signature`` is ``operator_key``'s Ed25519 signature of ``document``'s canonical form."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        public = Ed25519PublicKey.from_public_bytes(decode_operator_key(operator_key))
        public.verify(decode_signature(signature), canonical_bytes(document))
    except (InvalidSignature, ValueError):  # SignatureFormatError is a ValueError
        return False
    return True


def publication_refusal(trust_member: object, operator_key: str | None) -> str | None:
    """Why a client should not publish a request signed by ``operator_key`` (None: unsigned) into a
    workspace whose format.json has ``trust_member``: what a manager would quarantine, said up front."""
    try:
        trust = parse_trust(trust_member)
    except SignatureFormatError as exc:
        return f"format.json: {exc}"
    if not trust.required:
        return None
    if operator_key is None:
        return (
            "this workspace requires requests signed by a trusted key, and you have no operator identity "
            "(httk workflow config init)"
        )
    if operator_key not in trust.trusted_keys:
        return (
            f"this workspace requires requests signed by a trusted key, and it does not trust yours, "
            f"{operator_key}: ask its owner to run httk workflow workspace trust add WORKSPACE {operator_key}"
        )
    return None


def signature_refusal(
    document: Mapping[str, Any], operator_key: str | None, signature: str | None, trust: TrustList
) -> str | None:
    """Why a well-formed request must be quarantined under ``trust``, or None when it may be decided.

    ``operator_key`` and ``signature`` are the request's (both or neither, already well spelled).
    """
    if operator_key is None or signature is None:
        if trust.required:
            return (
                f"the workspace requires signed requests ({TRUST_MEMBER}.required) and this one is "
                "unsigned: its operator has no identity (httk workflow config init)"
            )
        return None
    if trust.required and operator_key not in trust.trusted_keys:
        return (
            f"its operator_key {operator_key} ({fingerprint(operator_key)}) is not trusted by this "
            f"workspace, which requires trusted signatures (httk workflow workspace trust add)"
        )
    if not verifies(document, operator_key, signature):
        return f"its signature does not verify against its operator_key {operator_key}"
    return None


# -- workspace trust ------------------------------------------------------------------------------------
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
