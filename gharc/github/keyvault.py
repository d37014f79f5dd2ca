"""Azure Key Vault as the source of a scale set's GitHub credentials (ARC 0.12+ ``vaultConfig``).

With ``vaultConfig.type: azure_key_vault`` the GitHub credentials never sit in a Kubernetes
Secret: ``githubConfigSecret`` names a Key Vault *secret* whose value is the JSON of the
GitHub config (``github_token``, or ``github_app_id`` + ``github_app_installation_id`` (a
number) + ``github_app_private_key``), as ARC reads it.

Reading it takes two calls, both over plain REST (no Azure SDK, so the image stays small):

1. Azure AD's client-credentials grant with a *certificate*: a JWT (the client assertion)
   signed with the key of the certificate at ``certificatePath``, naming the certificate
   by its SHA-1 thumbprint (``x5t``), is exchanged at
   ``{authority}/{tenantId}/oauth2/v2.0/token`` for an access token to the vault's
   resource. The authority host is ``$AZURE_AUTHORITY_HOST`` when set (the Azure SDKs'
   variable, for sovereign clouds), else the public cloud's.
2. ``GET {url}/secrets/{name}?api-version=7.5`` with that token.

Tokens are kept until five minutes before they expire, per identity and vault resource, so
a controller with many scale sets on one vault asks Azure AD about once an hour.

Errors keep Azure's answer (status, code, message) and say whether retrying can help: a
rejected assertion (401), a missing access policy or role (403), a missing secret (404) or
an unreadable certificate will not heal by themselves, so callers report them instead of
retrying hot; a 429/5xx or a connection failure is worth a retry.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12

from gharc.github.proxy import ProxySettings, ProxyTransport

__all__ = [
    "API_VERSION",
    "DEFAULT_AUTHORITY_HOST",
    "AzureKeyVault",
    "AzureKeyVaultSettings",
    "ClientCertificate",
    "VaultError",
    "app_config_from_secret_value",
    "authority_host",
    "client_assertion",
    "vault_scope",
]

VAULT_TYPE_AZURE_KEY_VAULT = "azure_key_vault"
DEFAULT_AUTHORITY_HOST = "https://login.microsoftonline.com"
API_VERSION = "7.5"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: A token is renewed this long before it expires (Azure's SDKs use the same margin).
REFRESH_MARGIN = 300.0
ASSERTION_LIFETIME = 600
#: Key Vault secret names: 1-127 of letters, digits and dashes.
_SECRET_NAME = re.compile(r"^[0-9A-Za-z-]{1,127}$")
#: Vault DNS suffix -> the resource its tokens are for (public cloud by default).
_SOVEREIGN_SUFFIXES = (
    "vault.azure.cn",
    "vault.usgovcloudapi.net",
    "vault.microsoftazure.de",
)


class VaultError(Exception):
    """A vault read failed; ``permanent`` says whether waiting can fix it.

    ``reason`` is a short CamelCase word for conditions and events; ``status`` and ``code``
    are Azure's HTTP status and error code when Azure answered.
    """

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        permanent: bool,
        status: int | None = None,
        code: str = "",
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.permanent = permanent
        self.status = status
        self.code = code


def authority_host(env: Mapping[str, str] | None = None) -> str:
    """``$AZURE_AUTHORITY_HOST`` (as the Azure SDKs read it) or the public cloud's."""
    value = (os.environ if env is None else env).get("AZURE_AUTHORITY_HOST", "")
    return (value or DEFAULT_AUTHORITY_HOST).rstrip("/")


def vault_scope(vault_url: str) -> str:
    """The OAuth scope of the vault at ``vault_url``: its cloud's Key Vault resource."""
    host = (urlsplit(vault_url).hostname or "").lower()
    for suffix in _SOVEREIGN_SUFFIXES:
        if host.endswith("." + suffix):
            return f"https://{suffix}/.default"
    return "https://vault.azure.net/.default"


@dataclass(frozen=True)
class AzureKeyVaultSettings:
    """``vaultConfig.azureKeyVault`` (or the listener config's ``azure_key_vault``)."""

    url: str
    tenant_id: str
    client_id: str
    certificate_path: str

    @classmethod
    def from_spec(cls, azure: Mapping[str, Any]) -> AzureKeyVaultSettings:
        """From the CRD's camelCase fields."""
        return cls(
            url=str(azure.get("url") or ""),
            tenant_id=str(azure.get("tenantId") or ""),
            client_id=str(azure.get("clientId") or ""),
            certificate_path=str(azure.get("certificatePath") or ""),
        )

    @classmethod
    def from_listener_config(cls, azure: Mapping[str, Any]) -> AzureKeyVaultSettings:
        """From the snake_case keys ARC's listener config uses."""
        return cls(
            url=str(azure.get("url") or ""),
            tenant_id=str(azure.get("tenant_id") or ""),
            client_id=str(azure.get("client_id") or ""),
            certificate_path=str(azure.get("certificate_path") or ""),
        )

    def problems(self) -> list[str]:
        """What keeps these settings from working, before any network call."""
        out = []
        for name, value in (
            ("tenantId", self.tenant_id),
            ("clientId", self.client_id),
            ("certificatePath", self.certificate_path),
        ):
            if not value:
                out.append(f"azureKeyVault.{name} is not set")
        parts = urlsplit(self.url)
        if parts.scheme != "https" or not parts.hostname:
            out.append(f"azureKeyVault.url {self.url!r} is not an https:// URL")
        return out


@dataclass(frozen=True)
class ClientCertificate:
    """The identity's certificate and private key, read from one PEM or PKCS#12 file."""

    certificate: x509.Certificate
    key: rsa.RSAPrivateKey = field(repr=False)

    @classmethod
    def load(cls, path: str) -> ClientCertificate:
        """Read ``path``: PEM with the certificate and its unencrypted key, or PKCS#12."""
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as err:
            raise VaultError(
                "InvalidVaultCertificate",
                f"cannot read the Azure Key Vault certificate {path}: {err.strerror}",
                permanent=True,
            ) from None
        try:
            return cls._parse(data)
        except (ValueError, TypeError) as err:
            raise VaultError(
                "InvalidVaultCertificate",
                f"the Azure Key Vault certificate {path} is not usable: {err}",
                permanent=True,
            ) from None

    @classmethod
    def _parse(cls, data: bytes) -> ClientCertificate:
        key: object
        if b"-----BEGIN" in data:
            certs = x509.load_pem_x509_certificates(data)
            key = serialization.load_pem_private_key(_pem_key_block(data), password=None)
        else:
            key, cert, _ = pkcs12.load_key_and_certificates(data, None)
            if cert is None:
                raise ValueError("the PKCS#12 file holds no certificate")
            certs = [cert]
        if not isinstance(key, rsa.RSAPrivateKey):
            # Azure AD takes RSA certificate credentials only, as the Azure SDKs do.
            raise ValueError("the private key must be RSA (Azure AD accepts RSA certificates only)")
        public = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        for cert in certs:
            own = cert.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            if own == public:
                return cls(cert, key)
        raise ValueError("no certificate in the file matches its private key")

    @property
    def thumbprint(self) -> str:
        """``x5t``: the base64url SHA-1 of the certificate's DER, as Azure AD looks it up."""
        return _b64url(self.certificate.fingerprint(hashes.SHA1()))


def _pem_key_block(data: bytes) -> bytes:
    match = re.search(
        rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", data, re.S
    )
    if match is None:
        raise ValueError("the PEM file holds no private key")
    return match.group(0)


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def token_endpoint(authority: str, tenant_id: str) -> str:
    return f"{authority.rstrip('/')}/{quote(tenant_id, safe='')}/oauth2/v2.0/token"


def client_assertion(
    cert: ClientCertificate,
    *,
    client_id: str,
    audience: str,
    now: float | None = None,
) -> str:
    """The signed JWT Azure AD accepts in place of a client secret."""
    issued = int(time.time() if now is None else now)
    claims = {
        "aud": audience,
        "iss": client_id,
        "sub": client_id,
        "jti": str(uuid.uuid4()),
        "iat": issued,
        "nbf": issued,
        "exp": issued + ASSERTION_LIFETIME,
    }
    headers = {"x5t": cert.thumbprint, "typ": "JWT"}
    return jwt.encode(claims, cert.key, algorithm="RS256", headers=headers)


def app_config_from_secret_value(value: str) -> dict[str, str]:
    """The vault secret's JSON as Secret-like data for :func:`credentials_from_secret_data`.

    ARC decodes the installation id as a JSON number; a string of digits is taken too.
    """
    try:
        loaded = json.loads(value)
    except json.JSONDecodeError as err:
        raise VaultError(
            "InvalidGitHubConfigSecret",
            f"the vault secret is not JSON ({err.msg} at line {err.lineno}); it must hold "
            '{"github_token": ...} or {"github_app_id": ..., "github_app_installation_id": '
            '..., "github_app_private_key": ...}',
            permanent=True,
        ) from None
    if not isinstance(loaded, dict):
        raise VaultError(
            "InvalidGitHubConfigSecret",
            "the vault secret must hold a JSON object with github_token or github_app_*",
            permanent=True,
        )
    out: dict[str, str] = {}
    for key in (
        "github_token",
        "github_app_id",
        "github_app_installation_id",
        "github_app_private_key",
    ):
        item = loaded.get(key)
        if item is None or isinstance(item, bool | dict | list):
            continue
        out[key] = str(item)
    return out


def _azure_error(response: httpx.Response) -> tuple[str, str]:
    """(code, message) from Azure AD's or Key Vault's error body."""
    try:
        body = response.json()
    except ValueError:
        return "", response.text[:200]
    if not isinstance(body, dict):
        return "", ""
    err = body.get("error")
    if isinstance(err, dict):  # Key Vault: {"error": {"code", "message"}}
        return str(err.get("code") or ""), str(err.get("message") or "")
    # Azure AD: {"error": "invalid_client", "error_description": "AADSTS...", ...}
    return str(err or ""), str(body.get("error_description") or "")


@dataclass
class _Token:
    value: str
    expires_at: float


class AzureKeyVault:
    """Reads secrets from Azure Key Vaults with certificate identities; tokens are cached.

    One instance serves every vault and identity of the process: tokens are keyed by
    (authority, tenant, client, scope), certificates by path and modification time, so a
    rotated certificate file is read again.
    """

    def __init__(
        self,
        *,
        authority: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.authority = (authority or authority_host()).rstrip("/")
        self._transport = transport
        self._timeout = timeout
        self._http: dict[str, httpx.AsyncClient] = {}
        self._clock = clock
        self._tokens: dict[tuple[str, str, str, str], _Token] = {}
        self._certs: dict[str, tuple[float, ClientCertificate]] = {}
        self.token_requests = 0
        """How many times Azure AD was asked for a token (a cache measure)."""

    async def aclose(self) -> None:
        for client in self._http.values():
            await client.aclose()
        self._http.clear()

    def _client(self, proxy: ProxySettings | None) -> httpx.AsyncClient:
        """One connection pool per proxy (``vaultConfig.proxy``), direct when None."""
        key = proxy.identity if proxy is not None else ""
        client = self._http.get(key)
        if client is None:
            transport = self._transport
            if transport is None and proxy is not None:
                transport = ProxyTransport(proxy)
            # trust_env=False for a proxy of our own: HTTPS_PROXY must not win over it.
            client = httpx.AsyncClient(
                transport=transport, timeout=self._timeout, trust_env=proxy is None
            )
            self._http[key] = client
        return client

    def _certificate(self, path: str) -> ClientCertificate:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = -1.0
        hit = self._certs.get(path)
        if hit is not None and hit[0] == mtime:
            return hit[1]
        cert = ClientCertificate.load(path)
        self._certs[path] = (mtime, cert)
        return cert

    async def token(
        self, settings: AzureKeyVaultSettings, proxy: ProxySettings | None = None
    ) -> str:
        """An access token to ``settings.url``'s vault, from the cache or Azure AD."""
        scope = vault_scope(settings.url)
        key = (self.authority, settings.tenant_id, settings.client_id, scope)
        hit = self._tokens.get(key)
        now = self._clock()
        if hit is not None and now < hit.expires_at - REFRESH_MARGIN:
            return hit.value
        cert = self._certificate(settings.certificate_path)
        endpoint = token_endpoint(self.authority, settings.tenant_id)
        form = {
            "grant_type": "client_credentials",
            "client_id": settings.client_id,
            "scope": scope,
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": client_assertion(
                cert, client_id=settings.client_id, audience=endpoint, now=now
            ),
        }
        self.token_requests += 1
        response = await self._send("POST", endpoint, "Azure AD", proxy, data=form)
        if response.status_code != 200:
            code, message = _azure_error(response)
            raise VaultError(
                "VaultAuthenticationFailed",
                f"Azure AD refused a token for client {settings.client_id} in tenant "
                f"{settings.tenant_id} ({response.status_code} {code}): {message}",
                permanent=response.status_code in (400, 401, 403),
                status=response.status_code,
                code=code,
            )
        body = response.json()
        value = str(body.get("access_token") or "")
        lifetime = float(body.get("expires_in") or 3600)
        self._tokens[key] = _Token(value, now + lifetime)
        return value

    def forget_token(self, settings: AzureKeyVaultSettings) -> None:
        key = (self.authority, settings.tenant_id, settings.client_id, vault_scope(settings.url))
        self._tokens.pop(key, None)

    async def get_secret(
        self, settings: AzureKeyVaultSettings, name: str, proxy: ProxySettings | None = None
    ) -> str:
        """The current value of secret ``name`` in ``settings.url``'s vault."""
        problems = settings.problems()
        if problems:
            raise VaultError("InvalidVaultConfig", "; ".join(problems), permanent=True)
        if not _SECRET_NAME.match(name):
            raise VaultError(
                "InvalidVaultConfig",
                f"{name!r} is not a Key Vault secret name (1-127 letters, digits and dashes); "
                "githubConfigSecret names the vault secret when vaultConfig is set",
                permanent=True,
            )
        url = f"{settings.url.rstrip('/')}/secrets/{name}?api-version={API_VERSION}"
        token = await self.token(settings, proxy)
        response = await self._send(
            "GET", url, "Azure Key Vault", proxy, headers={"Authorization": f"Bearer {token}"}
        )
        if response.status_code == 401:
            # A token revoked or for another resource: one fresh token, one more try.
            self.forget_token(settings)
            token = await self.token(settings, proxy)
            response = await self._send(
                "GET", url, "Azure Key Vault", proxy, headers={"Authorization": f"Bearer {token}"}
            )
        if response.status_code == 200:
            value = response.json().get("value")
            if not isinstance(value, str):
                raise VaultError(
                    "InvalidGitHubConfigSecret",
                    f"vault secret {name} has no value",
                    permanent=True,
                )
            return value
        code, message = _azure_error(response)
        status = response.status_code
        reason = {
            401: "VaultAccessDenied",
            403: "VaultAccessDenied",
            404: "VaultSecretNotFound",
        }.get(status, "VaultUnavailable")
        raise VaultError(
            reason,
            f"Azure Key Vault {settings.url} secret {name}: {status} {code}: {message}",
            permanent=status in (400, 401, 403, 404),
            status=status,
            code=code,
        )

    async def _send(
        self, method: str, url: str, what: str, proxy: ProxySettings | None, **kwargs: Any
    ) -> httpx.Response:
        try:
            return await self._client(proxy).request(method, url, **kwargs)
        except httpx.HTTPError as err:
            raise VaultError(
                "VaultUnavailable",
                f"{what} at {urlsplit(url).netloc} is unreachable: {type(err).__name__}: {err}",
                permanent=False,
            ) from None
