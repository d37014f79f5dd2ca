"""GitHub credentials: a personal access token or a GitHub App installation.

Secrets are held in private attributes and never appear in ``repr``/``str``; what identifies a
credential for pooling and cache keys is :attr:`identity`, a digest that cannot be reversed.
The App flow (RS256 JWT -> installation token) lives in :class:`AppTokenSource` so the
REST client only asks "give me an Authorization header".
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from gharc.github.datamodel import parse_datetime

# GitHub rejects App JWTs whose lifetime exceeds 10 minutes; iat is back-dated for skew.
APP_JWT_BACKDATE = 60.0
APP_JWT_LIFETIME = 540.0
# Refresh an installation token this long before GitHub's expires_at.
INSTALLATION_TOKEN_MARGIN = 300.0


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


class CredentialsError(ValueError):
    """The secret data does not hold exactly one usable kind of GitHub credential."""


class PersonalAccessToken:
    """A PAT (classic or fine-grained), sent as ``Authorization: Bearer``."""

    __slots__ = ("_token",)

    def __init__(self, token: str) -> None:
        token = token.strip()
        if not token:
            raise CredentialsError("github_token is empty")
        self._token = token

    @property
    def token(self) -> str:
        return self._token

    @property
    def identity(self) -> str:
        return f"pat:{_digest(self._token)}"

    def __repr__(self) -> str:
        return f"PersonalAccessToken(identity={self.identity!r})"

    __str__ = __repr__


class GitHubApp:
    """A GitHub App installation; the private key is PEM text."""

    __slots__ = ("_private_key", "app_id", "installation_id")

    def __init__(self, app_id: str | int, installation_id: str | int, private_key_pem: str) -> None:
        app_id = str(app_id).strip()
        installation_id = str(installation_id).strip()
        if not app_id:
            raise CredentialsError("github_app_id is empty")
        if not installation_id.isdigit():
            raise CredentialsError("github_app_installation_id must be a number")
        if "PRIVATE KEY" not in private_key_pem:
            raise CredentialsError("github_app_private_key is not a PEM private key")
        self.app_id = app_id
        self.installation_id = int(installation_id)
        self._private_key = private_key_pem

    @property
    def identity(self) -> str:
        return f"app:{self.app_id}:{self.installation_id}:{_digest(self._private_key)}"

    def make_jwt(self, now: float) -> str:
        """An RS256 App JWT: iat back-dated 60 s, exp under GitHub's 10 minute maximum."""
        claims = {
            "iat": int(now - APP_JWT_BACKDATE),
            "exp": int(now - APP_JWT_BACKDATE + APP_JWT_LIFETIME),
            "iss": self.app_id,
        }
        # NB: imported here, not at the top: PyJWT brings cryptography (about 9 MiB of RSS),
        # and only a GitHub App credential signs anything; a listener with a PAT never does.
        import jwt

        try:
            return jwt.encode(claims, self._private_key, algorithm="RS256")
        except Exception as exc:  # never echo the key material
            raise CredentialsError(
                f"github_app_private_key cannot sign a JWT ({type(exc).__name__})"
            ) from None

    def __repr__(self) -> str:
        return f"GitHubApp(app_id={self.app_id!r}, installation_id={self.installation_id!r})"

    __str__ = __repr__


Credentials = PersonalAccessToken | GitHubApp


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def credentials_from_secret_data(data: Mapping[str, str | bytes]) -> Credentials:
    """Build credentials from a Secret's data (values already base64-decoded).

    Exactly one kind must be present: ``github_token``, or all three of ``github_app_id``,
    ``github_app_installation_id`` and ``github_app_private_key``.
    """
    app_keys = ("github_app_id", "github_app_installation_id", "github_app_private_key")
    has_token = bool(_text(data.get("github_token", b"")).strip())
    present = [k for k in app_keys if _text(data.get(k, b"")).strip()]
    if has_token and present:
        raise CredentialsError(
            "secret has both github_token and github_app_* keys; set exactly one kind"
        )
    if has_token:
        return PersonalAccessToken(_text(data["github_token"]))
    if len(present) == len(app_keys):
        return GitHubApp(
            _text(data["github_app_id"]),
            _text(data["github_app_installation_id"]),
            _text(data["github_app_private_key"]),
        )
    if present:
        missing = ", ".join(k for k in app_keys if k not in present)
        raise CredentialsError(f"GitHub App credentials incomplete: missing {missing}")
    raise CredentialsError(
        "secret has no GitHub credentials: set github_token, or github_app_id, "
        "github_app_installation_id and github_app_private_key"
    )


@dataclass(frozen=True)
class AccessToken:
    """A bearer token with its expiry (epoch seconds)."""

    token: str
    expires_at: float

    def __repr__(self) -> str:
        return f"AccessToken(expires_at={self.expires_at})"


def parse_timestamp(value: str) -> float:
    """RFC 3339 (GitHub's ``expires_at``) to epoch seconds."""
    return parse_datetime(value).timestamp()


Exchange = Callable[[str], Awaitable[AccessToken]]


class AppTokenSource:
    """Caches an App installation token until shortly before it expires.

    ``exchange(jwt)`` does the POST; it is injected so this class has no HTTP of its own.
    """

    def __init__(
        self,
        app: GitHubApp,
        exchange: Exchange,
        *,
        clock: Callable[[], float] = time.time,
        margin: float = INSTALLATION_TOKEN_MARGIN,
    ) -> None:
        self._app = app
        self._exchange = exchange
        self._clock = clock
        self._margin = margin
        self._token: AccessToken | None = None
        self._lock = asyncio.Lock()

    def invalidate(self) -> None:
        self._token = None

    async def token(self) -> str:
        async with self._lock:
            now = self._clock()
            if self._token is None or self._token.expires_at - self._margin <= now:
                self._token = await self._exchange(self._app.make_jwt(now))
            return self._token.token
