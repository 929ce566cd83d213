"""Signed requests (D20): RFC 8785 against the RFC's published examples, the encodings, the trust list,
and what the strict reading of a request refuses about its signature."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from httk.workflow.engine.requests._documents import MalformedRequestError, parse_request
from httk.workflow.engine.requests._signatures import canonical_bytes, signature_refusal, signed, verifies
from httk.workflow.models import validator
from httk.workflow.protocol._signing import (
    SignatureFormatError,
    TrustList,
    decode_operator_key,
    decode_signature,
    encode_operator_key,
    fingerprint,
    parse_trust,
)

from tests.engine.requests.test_documents import document as request_fields


class Signer:
    def __init__(self, seed: int = 0) -> None:
        self.private = Ed25519PrivateKey.from_private_bytes(bytes([seed] * 32))
        raw = self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.operator_key = encode_operator_key(raw)

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data)


def document() -> dict[str, Any]:
    return request_fields("continue")


# -- RFC 8785, its published examples -------------------------------------------------------------------
def test_the_rfc_s_sample_canonicalization() -> None:
    """RFC 8785 section 3.2.2: whitespace, number forms, string escapes and key order."""
    text = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_bytes(json.loads(text)) == expected.encode("utf-8")


def test_keys_are_ordered_by_utf16_code_units() -> None:
    """RFC 8785 section 3.2.3: the emoji (a surrogate pair, 0xD83D...) sorts before U+FB33."""
    members = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    assert list(json.loads(canonical_bytes(members)).values()) == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]
    assert canonical_bytes(members).startswith(b'{"\\r":"Carriage Return","1":"One","\xc2\x80":"Control"')


# RFC 8785 appendix B: IEEE 754 bit patterns and their serialization.
NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "text"), NUMBERS, ids=[bits for bits, _ in NUMBERS])
def test_numbers_serialize_as_the_rfc_s_appendix_b(bits: str, text: str) -> None:
    (number,) = struct.unpack(">d", bytes.fromhex(bits))
    assert canonical_bytes({"n": number}) == b'{"n":' + text.encode() + b"}"


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000"], ids=["nan", "infinity"])
def test_non_finite_numbers_cannot_be_canonicalized(bits: str) -> None:
    (number,) = struct.unpack(">d", bytes.fromhex(bits))
    with pytest.raises(SignatureFormatError, match="RFC 8785"):
        canonical_bytes({"n": number})


def test_the_signature_member_is_left_out_and_nothing_else() -> None:
    assert canonical_bytes({"b": 1, "signature": "x", "a": [2]}) == b'{"a":[2],"b":1}'


# -- encodings ------------------------------------------------------------------------------------------
def test_a_signed_document_verifies_and_any_change_breaks_it() -> None:
    signer = Signer()
    request = signed(document(), signer)
    assert request["operator_key"] == signer.operator_key
    assert verifies(request, request["operator_key"], request["signature"])
    assert validator("request").is_valid(request)
    for member, value in (
        ("reason", "something else"),
        ("expected_generation", 4),
        ("operator_key", Signer(1).operator_key),
    ):
        assert not verifies({**request, member: value}, request["operator_key"], request["signature"])
    assert not verifies(request, Signer(1).operator_key, request["signature"])


def test_key_order_and_whitespace_of_the_file_do_not_matter() -> None:
    request = signed(document(), Signer())
    shuffled = json.loads(json.dumps(dict(reversed(list(request.items()))), indent=4))
    assert verifies(shuffled, request["operator_key"], request["signature"])


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("rsa:" + "A" * 43 + "=", "does not start with 'ed25519:'"),
        ("ed25519:" + "A" * 42 + "==", "decodes to 31 bytes"),
        ("ed25519:" + "A" * 44, "decodes to 33 bytes"),
        ("ed25519:" + "!" * 43 + "=", "not valid base64"),
        ("ed25519:" + "A" * 42 + "B=", "not the canonical base64"),
        ("ed25519:" + "A" * 42 + "\u00e9=", "must be 'ed25519:'"),
        (None, "must be 'ed25519:'"),
    ],
)
def test_a_malformed_operator_key_is_refused_naming_why(text: object, rule: str) -> None:
    with pytest.raises(SignatureFormatError, match=rule):
        decode_operator_key(text)


def test_a_signature_must_be_64_bytes() -> None:
    with pytest.raises(SignatureFormatError, match="decodes to 48 bytes"):
        decode_signature("A" * 64)
    assert len(decode_signature("A" * 86 + "==")) == 64


def test_the_fingerprint_is_the_sha256_of_the_raw_key() -> None:
    key = Signer().operator_key
    assert fingerprint(key).startswith("SHA256:") and len(fingerprint(key)) == 7 + 43
    assert fingerprint(key) != fingerprint(Signer(1).operator_key)


# -- the trust list -------------------------------------------------------------------------------------
def test_an_absent_trust_list_requires_nothing() -> None:
    assert parse_trust(None) == TrustList(False, ())


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ([], "must be a JSON object"),
        ({"required": "yes"}, "required must be true or false"),
        ({"trusted_keys": "ed25519:x"}, "must be an array"),
        ({"trusted_keys": ["ed25519:x"]}, r"trusted_keys\[0\] must be"),
        ({"keys": []}, "unknown member 'keys'"),
        ({"trusted_keys": [Signer().operator_key] * 2}, "names a key twice"),
    ],
)
def test_a_bad_trust_list_is_refused(value: object, rule: str) -> None:
    with pytest.raises(SignatureFormatError, match=rule):
        parse_trust(value)


def test_what_is_quarantined_under_each_trust_list() -> None:
    signer, other = Signer(), Signer(1)
    request = signed(document(), signer)
    key, signature = request["operator_key"], request["signature"]
    open_list, required = TrustList(), TrustList(True, (signer.operator_key,))
    tampered = {**request, "reason": "changed"}
    assert signature_refusal(document(), None, None, open_list) is None
    assert signature_refusal(request, key, signature, open_list) is None  # attribution only
    assert signature_refusal(request, key, signature, required) is None
    assert "does not verify" in str(signature_refusal(tampered, key, signature, open_list))
    assert "requires signed requests" in str(signature_refusal(document(), None, None, required))
    untrusted = signed(document(), other)
    refused = signature_refusal(untrusted, untrusted["operator_key"], untrusted["signature"], required)
    assert refused is not None and "is not trusted" in refused and fingerprint(other.operator_key) in refused


# -- the strict reading of a request ----------------------------------------------------------------------
def parse(request: dict[str, Any]) -> Any:
    return parse_request(json.dumps(request).encode(), f"{request['request_id']}.json")


def test_a_signed_request_parses_with_its_key_unverified() -> None:
    request = signed(document(), Signer())
    parsed = parse(request)
    assert parsed.operator_key == request["operator_key"] and parsed.signature == request["signature"]
    assert "operator_key" not in parsed.frame_members()
    assert parsed.verified().frame_members()["operator_key"] == request["operator_key"]


@pytest.mark.parametrize(
    ("change", "member", "rule"),
    [
        ({"signature": None}, "signature", "is required in a signed request"),
        ({"operator_key": None}, "operator_key", "is required in a signed request"),
        ({"signature": "not base64!"}, "signature", "not valid base64"),
        ({"signature": "A" * 64}, "signature", "decodes to 48 bytes"),
        ({"operator_key": "ssh-ed25519:" + "A" * 43 + "="}, "operator_key", "does not start with"),
        ({"operator_key": "ed25519:AAAA"}, "operator_key", "decodes to 3 bytes"),
        ({"signature": 7}, "signature", "must be the base64"),
    ],
)
def test_a_malformed_signature_is_malformed_input(change: dict[str, Any], member: str, rule: str) -> None:
    request = signed(document(), Signer())
    for name, value in change.items():
        if value is None:
            del request[name]
        else:
            request[name] = value
    with pytest.raises(MalformedRequestError, match=rule) as caught:
        parse(request)
    assert caught.value.member == member
