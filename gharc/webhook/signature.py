"""GitHub webhook signatures: ``X-Hub-Signature-256`` only.

GitHub signs the raw body with HMAC-SHA256 and the shared secret; a request whose signature
is missing or wrong must never change anything, because anyone who can reach the server can
POST to it. The SHA-1 ``X-Hub-Signature`` GitHub still sends alongside is not accepted on
its own: a forger who can make SHA-1 collide must not get in by omitting the SHA-256 header.

The header is checked before the body is read (an unsigned request costs no body read),
and the digest is computed while the body streams in (:class:`Verifier`). Digests are
compared in constant time (``hmac.compare_digest``) so the answer's timing does not leak how
many leading characters were right.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

HEADER = "X-Hub-Signature-256"
_PREFIX = "sha256="
_HEX = frozenset("0123456789abcdef")


class SignatureError(Exception):
    """The request is not signed with our secret. ``status``: 401 missing, 403 wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def sign(secret: str | bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub would send for ``body``."""
    key = secret.encode() if isinstance(secret, str) else secret
    return _PREFIX + hmac.new(key, body, hashlib.sha256).hexdigest()


class Verifier:
    """Checks one request: build it from the headers, :meth:`update` with each body chunk,
    then :meth:`verify`."""

    def __init__(self, secret: str | bytes, headers: Mapping[str, str]) -> None:
        header = (headers.get(HEADER) or "").strip()
        if not header:
            if headers.get("X-Hub-Signature"):
                raise SignatureError(403, f"SHA-1 signatures are not accepted: {HEADER} required")
            raise SignatureError(401, f"missing signature: {HEADER} header required")
        if not header.lower().startswith(_PREFIX):
            raise SignatureError(403, f"unsupported signature format: {HEADER} must be sha256=")
        digest = header[len(_PREFIX) :].strip().lower()
        if len(digest) != 64 or not set(digest) <= _HEX:
            raise SignatureError(403, "malformed sha256 signature")
        self._digest = digest.encode()
        key = secret.encode() if isinstance(secret, str) else secret
        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    def update(self, chunk: bytes) -> None:
        self._mac.update(chunk)

    def verify(self) -> None:
        if not hmac.compare_digest(self._mac.hexdigest().encode(), self._digest):
            raise SignatureError(403, "payload signature does not match the webhook secret")


def verify(secret: str | bytes, body: bytes, headers: Mapping[str, str]) -> None:
    """Raise :class:`SignatureError` unless ``body`` carries a valid SHA-256 signature."""
    v = Verifier(secret, headers)
    v.update(body)
    v.verify()
