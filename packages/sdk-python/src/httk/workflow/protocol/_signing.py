"""The spelling of signed requests' keys and signatures, and format.json's trust list (DECISIONS D20).

Pure: what a reader of format.json or of a request needs to refuse a malformed key, signature or
``request_signatures`` member. Signing and verifying are the engine's
(``httk.workflow.engine.requests._signatures``), which imports ``cryptography`` only to do them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEY_PREFIX = "ed25519:"
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
TRUST_MEMBER = "request_signatures"
KEY_RULE = f"must be {KEY_PREFIX!r} followed by the base64 of a {PUBLIC_KEY_BYTES}-byte Ed25519 public key"
SIGNATURE_RULE = f"must be the base64 of a {SIGNATURE_BYTES}-byte Ed25519 signature"


class SignatureFormatError(ValueError):
    """A key, a signature or a trust list that is not spelled as D20 requires; the message is the rule."""


def _decode(text: object, size: int, rule: str) -> bytes:
    if not isinstance(text, str) or not text.isascii():
        raise SignatureFormatError(rule)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureFormatError(f"{rule}; it is not valid base64") from None
    if len(raw) != size:
        raise SignatureFormatError(f"{rule}; it decodes to {len(raw)} bytes")
    if base64.b64encode(raw).decode("ascii") != text:
        raise SignatureFormatError(f"{rule}; it is not the canonical base64 of its bytes")
    return raw


def decode_operator_key(text: object) -> bytes:
    """The raw 32-byte public key of ``ed25519:<base64>``; :class:`SignatureFormatError` otherwise."""
    if not isinstance(text, str) or not text.startswith(KEY_PREFIX):
        shown = text if isinstance(text, str) and len(text) <= 80 else None
        got = "" if shown is None else f"; {shown!r} does not start with {KEY_PREFIX!r}"
        raise SignatureFormatError(KEY_RULE + got)
    return _decode(text[len(KEY_PREFIX) :], PUBLIC_KEY_BYTES, KEY_RULE)


def encode_operator_key(raw: bytes) -> str:
    return KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def decode_signature(text: object) -> bytes:
    return _decode(text, SIGNATURE_BYTES, SIGNATURE_RULE)


def fingerprint(operator_key: str) -> str:
    """``SHA256:<unpadded base64>`` of the raw public key: a short name to compare keys by eye."""
    digest = hashlib.sha256(decode_operator_key(operator_key)).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


@dataclass(frozen=True, slots=True)
class TrustList:
    """format.json's ``request_signatures``: whether signatures are required, and the trusted keys."""

    required: bool = False
    trusted_keys: tuple[str, ...] = ()

    def as_member(self) -> dict[str, Any]:
        return {"required": self.required, "trusted_keys": list(self.trusted_keys)}


def parse_trust(value: object) -> TrustList:
    """Read ``request_signatures`` strictly (absent is :class:`TrustList`'s default)."""
    if value is None:
        return TrustList()
    if not isinstance(value, dict):
        raise SignatureFormatError(f"{TRUST_MEMBER} must be a JSON object")
    unknown = sorted(set(value) - {"required", "trusted_keys"})
    if unknown:
        raise SignatureFormatError(f"{TRUST_MEMBER} has the unknown member {unknown[0]!r}")
    required = value.get("required", False)
    if not isinstance(required, bool):
        raise SignatureFormatError(f"{TRUST_MEMBER}.required must be true or false")
    keys = value.get("trusted_keys", [])
    if not isinstance(keys, list):
        raise SignatureFormatError(f"{TRUST_MEMBER}.trusted_keys must be an array of operator keys")
    for index, key in enumerate(keys):
        try:
            decode_operator_key(key)
        except SignatureFormatError as exc:
            raise SignatureFormatError(f"{TRUST_MEMBER}.trusted_keys[{index}] {exc}") from None
    if len(set(keys)) != len(keys):
        raise SignatureFormatError(f"{TRUST_MEMBER}.trusted_keys names a key twice")
    return TrustList(required, tuple(keys))


def trust_member_problem(document: Mapping[str, Any]) -> str | None:
    """Why format.json's ``request_signatures`` (when present, and never null) is malformed, or None."""
    if TRUST_MEMBER not in document:
        return None
    if document[TRUST_MEMBER] is None:
        return "must be a JSON object"
    try:
        parse_trust(document[TRUST_MEMBER])
    except SignatureFormatError as exc:
        return str(exc)
    return None
