"""SHA-256 of small content without loading OpenSSL: what a runner's digests need at start-up cost.

:mod:`hashlib` loads OpenSSL's libcrypto when it is imported: for a runner that digests a few small
files (a transaction's ``results.json``, a POTCAR's datasets), about a quarter of a bare interpreter
start (valgrind: 11 M instructions, ``python -c pass`` 40 M) before the first digest. CPython ships its
own SHA-256 (the ``_sha256`` extension up to 3.11, ``_sha2`` from 3.12), which loads for next to
nothing; it digests content up to :data:`SMALL` bytes. Larger content, where OpenSSL's faster code
repays its loading, and an interpreter built without CPython's own digests, use :mod:`hashlib`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

SMALL = 1 << 20
"""Content up to this many bytes is digested by CPython's own SHA-256."""


def _builtin() -> Callable[[bytes], Any] | None:
    for module in ("_sha2", "_sha256"):  # 3.12+, then 3.11
        try:
            constructor: Callable[[bytes], Any] = __import__(module).sha256
        except (ImportError, AttributeError):
            continue
        return constructor
    return None


_SHA256 = _builtin()


def sha256_hex(content: bytes) -> str:
    """The SHA-256 of ``content``, in lowercase hexadecimal.

    Examples
    --------
    >>> sha256_hex(b"")
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    """
    if _SHA256 is not None and len(content) <= SMALL:
        return str(_SHA256(content).hexdigest())
    import hashlib

    return hashlib.sha256(content).hexdigest()
