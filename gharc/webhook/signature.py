"""GitHub webhook signatures (``X-Hub-Signature-256``, falling back to ``X-Hub-Signature``).

GitHub signs the raw body with HMAC and the shared secret; a request whose signature is
missing or wrong must never change anything, because anyone who can reach the server can
POST to it. The digest is compared in constant time (``hmac.compare_digest``) so the
answer's timing does not leak how many leading characters were right.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

_ALGORITHMS = {"sha256": hashlib.sha256, "sha1": hashlib.sha1, "sha512": hashlib.sha512}


class SignatureError(Exception):
    """The request is not signed with our secret. ``status``: 401 missing, 403 wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def sign(secret: str | bytes, body: bytes, algorithm: str = "sha256") -> str:
    """The header value GitHub would send for ``body`` (``sha256=<hex>``)."""
    key = secret.encode() if isinstance(secret, str) else secret
    return f"{algorithm}={hmac.new(key, body, _ALGORITHMS[algorithm]).hexdigest()}"


def verify(secret: str | bytes, body: bytes, headers: Mapping[str, str]) -> None:
    """Raise :class:`SignatureError` unless ``body`` carries a valid signature."""
    header = headers.get("X-Hub-Signature-256") or headers.get("X-Hub-Signature")
    if not header:
        raise SignatureError(401, "missing signature: X-Hub-Signature-256 header required")
    algorithm, sep, digest = header.partition("=")
    hash_fn = _ALGORITHMS.get(algorithm.strip().lower())
    if not sep or hash_fn is None:
        raise SignatureError(403, f"unsupported signature format {algorithm!r}")
    key = secret.encode() if isinstance(secret, str) else secret
    expected = hmac.new(key, body, hash_fn).hexdigest()
    if not hmac.compare_digest(expected.encode(), digest.strip().lower().encode()):
        raise SignatureError(403, "payload signature does not match the webhook secret")
