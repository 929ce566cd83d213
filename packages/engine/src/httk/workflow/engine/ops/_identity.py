"""The operator identity: who signs this user's requests (DECISIONS D20), beside the workspace registry.

It lives in the user's httk configuration directory (:func:`~httk.workflow.engine.core._user_dirs.
config_home`)::

    identity.json                 name, email, and every key this user has had (the current one last)
    keys/                         mode 0700
    keys/<key id>.key             one Ed25519 private key (PKCS#8 PEM), mode 0600, created exclusively

``httk workflow config init`` creates a key and the document; ``config rotate`` creates a new key and
retires the old one, whose file is kept (an old request's signature stays checkable against its public
key, which the document keeps too). A key file is never overwritten: it is created with ``O_EXCL`` and
mode 0600, and a key file whose mode lets the group or others read it is refused when signing, as
OpenSSH refuses one. The identity document is only ever replaced whole (a complete temporary file
renamed onto it); of two racing ``config init`` exactly one wins (its rename refuses to replace), and of
two racing rotations the last one stays current (the other's key file is left unused).

This is attribution, not filesystem security: a key proves which identity signed a request, and a
workspace may allow-list keys (``workspace trust``), but anyone who can write the workspace can still
rename its markers.

Cost: ``cryptography`` is imported only to make a key or to sign; :meth:`IdentityStore.load` reads one
small file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from httk.workflow.engine.core import _fsops
from httk.workflow.engine.core._user_dirs import config_home
from httk.workflow.protocol import IdentityError
from httk.workflow.protocol._signing import (
    SignatureFormatError,
    decode_operator_key,
    encode_operator_key,
    fingerprint,
)

IDENTITY_FORMAT = "httk-operator-identity"
IDENTITY_FILE = "identity.json"
KEYS_DIR = "keys"
MAX_FILE_BYTES = 64 * 1024
_EMAIL = re.compile(r"[^\s@<>]+@[^\s@<>]+")
_KEY_FILE = re.compile(r"[0-9a-f]{32}\.key")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an operator's name, or None."""
    if not name.strip() or len(name) > 200 or not name.isprintable() or "<" in name or ">" in name:
        return f"invalid name {name!r}: 1-200 printable characters, not only spaces, without '<' or '>'"
    return None


def email_problem(email: str) -> str | None:
    """Why ``email`` cannot be an operator's email address, or None."""
    if len(email) > 254 or not _EMAIL.fullmatch(email):
        return f"invalid email address {email!r}: one '@' between two parts without spaces or '<>'"
    return None


@dataclass(frozen=True, slots=True)
class OperatorKey:
    """One key of the identity: its public key, its private key's file name, when it was made/retired."""

    operator_key: str
    key_file: str
    created_at: str
    retired_at: str | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.operator_key)

    def as_dict(self) -> dict[str, Any]:
        data = {"operator_key": self.operator_key, "key_file": self.key_file, "created_at": self.created_at}
        return data if self.retired_at is None else {**data, "retired_at": self.retired_at}


@dataclass(frozen=True, slots=True)
class Identity:
    """The operator: name, email, and keys in the order they were made (the last is current)."""

    name: str
    email: str
    keys: tuple[OperatorKey, ...]

    @property
    def current(self) -> OperatorKey:
        return self.keys[-1]

    @property
    def operator(self) -> str:
        """How a request names this operator: ``Name <email>``."""
        return f"{self.name} <{self.email}>"

    def document(self) -> dict[str, Any]:
        return {
            "format": IDENTITY_FORMAT,
            "format_version": 1,
            "name": self.name,
            "email": self.email,
            "keys": [key.as_dict() for key in self.keys],
        }


@dataclass(frozen=True, slots=True)
class KeySigner:
    """A loaded private key: signs request documents (:func:`~httk.workflow.engine.requests.
    _signatures.signed`)."""

    operator_key: str
    private_key: Any  # cryptography's Ed25519PrivateKey, typed loosely so this module stays import-cheap

    def sign(self, data: bytes) -> bytes:
        signature: bytes = self.private_key.sign(data)
        return signature


class IdentityStore:
    """The identity of one user, rooted at their httk configuration directory."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / IDENTITY_FILE
        self.keys_dir = home / KEYS_DIR

    @classmethod
    def for_user(cls, environ: Mapping[str, str] | None = None) -> IdentityStore:
        return cls(config_home(environ))

    name_problem = staticmethod(name_problem)
    email_problem = staticmethod(email_problem)

    def load(self) -> Identity | None:
        """The identity, None when this user has none; a corrupt document is an :class:`IdentityError`."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise IdentityError(f"cannot read the operator identity: {exc.strerror}", self.path) from None
        return _identity(data, self.path)

    def create(self, name: str, email: str) -> Identity:
        """Make the first key and the identity; refused when one exists (``rotate`` makes a new key)."""
        for problem in (name_problem(name), email_problem(email)):
            if problem is not None:
                raise IdentityError(problem)
        if self.load() is not None:
            raise IdentityError(
                "an operator identity exists already; it is never overwritten (httk workflow config "
                "rotate makes a new key)",
                self.path,
            )
        key = self._new_key()
        identity = Identity(name, email, (key,))
        # A complete file renamed without replacing: a racing reader never sees a partial identity, and
        # of two racing inits exactly one wins (the loser removes its key).
        temporary = self.path.with_name(f".{IDENTITY_FILE}.tmp.{os.getpid()}.{os.urandom(4).hex()}")
        _fsops.create_file(temporary, _dump(identity.document()), durable=True)
        try:
            _fsops.rename(temporary, self.path, durable=True, noreplace=True)
        except FileExistsError:
            _fsops.unlink(temporary, durable=False, missing_ok=True)
            _fsops.unlink(self.keys_dir / key.key_file, durable=True, missing_ok=True)
            raise IdentityError("another process created an operator identity first", self.path) from None
        return identity

    def rotate(self) -> tuple[Identity, OperatorKey]:
        """Make a new current key and retire the old one (its file is kept); the new identity and the
        retired key."""
        identity = self.require()
        old = replace(identity.current, retired_at=_now())
        key = self._new_key()
        rotated = Identity(identity.name, identity.email, (*identity.keys[:-1], old, key))
        _fsops.write_file_atomic(self.path, _dump(rotated.document()), durable=True)
        return rotated, old

    def require(self) -> Identity:
        identity = self.load()
        if identity is None:
            raise IdentityError(
                "no operator identity: create one with httk workflow config init --name NAME --email EMAIL",
                self.path,
            )
        return identity

    def signer(self) -> KeySigner | None:
        """The current key, loaded to sign; None when this user has no identity."""
        identity = self.load()
        if identity is None:
            return None
        key = identity.current
        path = self.keys_dir / key.key_file
        pem = _read_private(path)
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        try:
            private = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            raise IdentityError(f"the private key cannot be read: {exc}", path) from None
        if not isinstance(private, Ed25519PrivateKey):
            raise IdentityError("the private key is not an Ed25519 key", path)
        public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        if encode_operator_key(public) != key.operator_key:
            raise IdentityError(f"the private key does not match {key.operator_key} in {self.path}", path)
        return KeySigner(key.operator_key, private)

    def _new_key(self) -> OperatorKey:
        """Generate a key pair and write its private key exclusively, mode 0600."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        operator_key = encode_operator_key(public)
        key_file = hashlib.sha256(public).hexdigest()[:32] + ".key"
        _fsops.make_dirs(self.home, durable=True)
        _fsops.make_dir(self.keys_dir, durable=True, exist_ok=True, mode=0o700)
        path = self.keys_dir / key_file
        try:
            _fsops.create_file(path, pem, durable=True, mode=0o600)
        except FileExistsError:
            raise IdentityError(
                "a key file of that name exists already; it is not overwritten", path
            ) from None
        _fsops.fsync_dir(self.keys_dir)
        return OperatorKey(operator_key, key_file, _now())


def _read_private(path: Path) -> bytes:
    """A private key file's bytes, refused when others may read it or it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise IdentityError("the current private key file is missing", path) from None
    except OSError as exc:
        raise IdentityError(f"cannot open the private key: {exc.strerror}", path) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise IdentityError("the private key is not a regular file", path)
        if info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise IdentityError(
                f"the private key's permissions {mode:04o} let others read it; it must be 0600 "
                f"(chmod 600 {path})",
                path,
            )
        return handle.read(MAX_FILE_BYTES)


def _identity(data: bytes, path: Path) -> Identity:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise IdentityError("corrupt operator identity: not JSON", path) from None
    if not isinstance(document, dict) or document.get("format") != IDENTITY_FORMAT:
        raise IdentityError(f"corrupt operator identity: not a {IDENTITY_FORMAT} document", path)
    if document.get("format_version") != 1:
        raise IdentityError("corrupt operator identity: format_version must be 1", path)
    name, email, keys = document.get("name"), document.get("email"), document.get("keys")
    problem = (
        (name_problem(name) if isinstance(name, str) else "'name' is not a string")
        or (email_problem(email) if isinstance(email, str) else "'email' is not a string")
        or (None if isinstance(keys, list) and keys else "'keys' is not a nonempty array")
    )
    if problem is not None:
        raise IdentityError(f"corrupt operator identity: {problem}", path)
    assert isinstance(name, str) and isinstance(email, str) and isinstance(keys, list)
    return Identity(name, email, tuple(_key(entry, index, path) for index, entry in enumerate(keys)))


def _key(entry: object, index: int, path: Path) -> OperatorKey:
    def bad(rule: str) -> IdentityError:
        return IdentityError(f"corrupt operator identity: keys[{index}] {rule}", path)

    if not isinstance(entry, dict):
        raise bad("is not an object")
    operator_key, key_file, created = (
        entry.get("operator_key"),
        entry.get("key_file"),
        entry.get("created_at"),
    )
    try:
        decode_operator_key(operator_key)
    except SignatureFormatError as exc:
        raise bad(f"operator_key {exc}") from None
    if not isinstance(key_file, str) or not _KEY_FILE.fullmatch(key_file):
        raise bad("key_file is not a key file name")
    if not isinstance(created, str):
        raise bad("created_at is not a string")
    retired = entry.get("retired_at")
    if retired is not None and not isinstance(retired, str):
        raise bad("retired_at is not a string")
    assert isinstance(operator_key, str)
    return OperatorKey(operator_key, key_file, created, retired)


def _dump(document: Mapping[str, object]) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
