"""A fake Azure AD + Azure Key Vault on 127.0.0.1 (HTTPS), for the ``vaultConfig`` tests.

It checks what the real services check, and answers their errors in their shapes:

* ``POST /{tenant}/oauth2/v2.0/token`` (Azure AD, client-credentials grant with a
  certificate): the tenant and the application must exist (400 otherwise); the client
  assertion must name a certificate registered for the application by its ``x5t``
  thumbprint, be signed by that certificate's key (RS256), be addressed to this token
  endpoint (``aud``), be issued by and about the application (``iss`` = ``sub`` =
  client id) and be unexpired, else 401 ``invalid_client`` with an ``AADSTS`` code; the
  scope must be the Key Vault resource's ``/.default`` (400 ``invalid_scope``).
* ``GET /secrets/{name}?api-version=...`` (Key Vault): a bearer token this fake issued and
  unexpired (401 with a ``WWW-Authenticate`` challenge otherwise), an access policy with
  ``get`` on secrets for the token's application (403 ``Forbidden``), the secret present
  (404 ``SecretNotFound``).

One server plays both hosts: tests set ``AZURE_AUTHORITY_HOST`` and the vault URL to
:attr:`FakeKeyVault.url` and trust :attr:`FakeKeyVault.ca_file` (``SSL_CERT_FILE``).
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import secrets
import socket
import ssl
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import jwt
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from testworld.certs import TinyCA

__all__ = ["FakeKeyVault", "Identity", "self_signed_identity"]

VAULT_SCOPE = "https://vault.azure.net/.default"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
TOKEN_LIFETIME = 3599


@dataclass(frozen=True)
class Identity:
    """An application's certificate credential: the PEM file ``certificatePath`` points at."""

    tenant_id: str
    client_id: str
    certificate: x509.Certificate
    pem: bytes = field(repr=False)
    """Certificate followed by its unencrypted PKCS#8 key, as ARC's users mount it."""

    @property
    def x5t(self) -> str:
        digest = self.certificate.fingerprint(hashes.SHA1())
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def write(self, directory: str) -> str:
        """Write :attr:`pem` under ``directory``; return the path."""
        path = os.path.join(directory, f"{self.client_id}.pem")
        with open(path, "wb") as fh:
            fh.write(self.pem)
        return path


def self_signed_identity(tenant_id: str, client_id: str) -> Identity:
    """A new RSA key and a self-signed certificate for it (as ``az ad sp create-for-rbac
    --create-cert`` makes)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"app-{client_id}")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=7))
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return Identity(tenant_id, client_id, cert, pem)


@dataclass
class _Issued:
    tenant_id: str
    client_id: str
    expires_at: float


def _aad_error(status: int, error: str, code: str, description: str) -> web.Response:
    """Azure AD's OAuth error body (``error``, ``error_description``, ``error_codes``...)."""
    trace = str(uuid.uuid4())
    body = {
        "error": error,
        "error_description": f"{code}: {description} Trace ID: {trace}",
        "error_codes": [int(code.removeprefix("AADSTS"))],
        "timestamp": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
        "trace_id": trace,
        "correlation_id": str(uuid.uuid4()),
    }
    return web.json_response(body, status=status)


def _kv_error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    """Key Vault's error body (``{"error": {"code", "message"}}``)."""
    body: dict[str, object] = {"error": {"code": code, "message": message}}
    if status == 403:
        body["error"] = {**body["error"], "innererror": {"code": "AccessDenied"}}  # type: ignore[dict-item]
    return web.json_response(body, status=status, headers=headers)


class FakeKeyVault:
    """Azure AD's token endpoint and one Key Vault, served over TLS on 127.0.0.1."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.identities: dict[tuple[str, str], Identity] = {}
        self.readers: set[tuple[str, str]] = set()
        """Applications with an access policy granting ``get`` on secrets."""
        self.secrets: dict[str, str] = {}
        self.calls: Counter[tuple[str, int]] = Counter()
        """(endpoint, status) -> count; endpoint is ``token`` or ``secret``."""
        self._tokens: dict[str, _Issued] = {}
        self._used_jti: set[str] = set()
        self._ca = TinyCA("fake-azure")
        self._dir = tempfile.TemporaryDirectory(prefix="gharc-fake-azure-")
        self.ca_file = os.path.join(self._dir.name, "ca.crt")
        with open(self.ca_file, "wb") as fh:
            fh.write(self._ca.cert_pem)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    # -- the world -------------------------------------------------------------------------

    def register(self, tenant_id: str, client_id: str, *, reader: bool = True) -> Identity:
        """A new application with a certificate credential; ``reader`` grants it ``get``."""
        identity = self_signed_identity(tenant_id, client_id)
        self.identities[(tenant_id, client_id)] = identity
        if reader:
            self.readers.add((tenant_id, client_id))
        return identity

    def expire_tokens(self) -> None:
        """Every issued token expires now (as after an hour)."""
        for issued in self._tokens.values():
            issued.expires_at = 0.0

    # -- serving ---------------------------------------------------------------------------

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self._token)
        app.router.add_get("/secrets/{name}", self._secret)
        return app

    def _tls(self) -> ssl.SSLContext:
        pair = self._ca.issue(self.host, ip_addresses=(self.host,), server=True)
        cert_path = os.path.join(self._dir.name, "tls.crt")
        key_path = os.path.join(self._dir.name, "tls.key")
        with open(cert_path, "wb") as fh:
            fh.write(pair.cert_pem)
        with open(key_path, "wb") as fh:
            fh.write(pair.key_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_path, key_path)
        return context

    async def start(self) -> None:
        context = self._tls()
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, ssl_context=context).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._dir.cleanup()

    async def __aenter__(self) -> FakeKeyVault:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- Azure AD --------------------------------------------------------------------------

    async def _token(self, request: web.Request) -> web.Response:
        response = await self._token_response(request)
        self.calls[("token", response.status)] += 1
        return response

    async def _token_response(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        form = await request.post()
        client_id = str(form.get("client_id") or "")
        if not any(t == tenant for t, _ in self.identities):
            return _aad_error(
                400,
                "invalid_request",
                "AADSTS90002",
                f"Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID.",
            )
        if form.get("grant_type") != "client_credentials":
            return _aad_error(
                400,
                "unsupported_grant_type",
                "AADSTS70003",
                "The app requested an unsupported grant type.",
            )
        identity = self.identities.get((tenant, client_id))
        if identity is None:
            return _aad_error(
                400,
                "unauthorized_client",
                "AADSTS700016",
                f"Application with identifier '{client_id}' was not found in the directory "
                f"'{tenant}'.",
            )
        if form.get("client_assertion_type") != ASSERTION_TYPE:
            return _aad_error(
                401,
                "invalid_client",
                "AADSTS7000218",
                "The request body must contain the following parameter: 'client_assertion' "
                "or 'client_secret'.",
            )
        problem = self._check_assertion(
            str(form.get("client_assertion") or ""), identity, f"{self.url}{request.path}"
        )
        if problem is not None:
            return _aad_error(401, "invalid_client", *problem)
        if form.get("scope") != VAULT_SCOPE:
            return _aad_error(
                400,
                "invalid_scope",
                "AADSTS70011",
                f"The provided request must include a 'scope' input parameter. The provided "
                f"value for the input parameter 'scope' is not valid ({form.get('scope')!r}).",
            )
        token = secrets.token_urlsafe(32)
        self._tokens[token] = _Issued(tenant, client_id, time.time() + TOKEN_LIFETIME)
        return web.json_response(
            {
                "token_type": "Bearer",
                "expires_in": TOKEN_LIFETIME,
                "ext_expires_in": TOKEN_LIFETIME,
                "access_token": token,
            }
        )

    def _check_assertion(
        self, assertion: str, identity: Identity, endpoint: str
    ) -> tuple[str, str] | None:
        """None if Azure AD would accept ``assertion``; else (AADSTS code, description)."""
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.InvalidTokenError:
            return "AADSTS50027", "JWT token is invalid or malformed."
        if header.get("x5t") != identity.x5t:
            return (
                "AADSTS700027",
                "Client assertion failed signature validation. [Reason - The key was not "
                f"found., Thumbprint of key used by client: '{header.get('x5t')}']",
            )
        if header.get("alg") != "RS256":
            return "AADSTS5002730", f"Invalid JWT token. Unsupported key ({header.get('alg')})."
        try:
            claims = jwt.decode(
                assertion,
                identity.certificate.public_key(),  # type: ignore[arg-type]
                algorithms=["RS256"],
                audience=endpoint,
                issuer=identity.client_id,
                options={"require": ["aud", "iss", "sub", "exp", "jti"]},
            )
        except jwt.InvalidSignatureError:
            return "AADSTS700027", "Client assertion contains an invalid signature."
        except jwt.ExpiredSignatureError:
            return "AADSTS700024", "Client assertion is not within its valid time range."
        except jwt.InvalidAudienceError:
            return (
                "AADSTS700024",
                "Client assertion audience claim does not match Realm issuer. "
                f"Expected {endpoint}.",
            )
        except jwt.InvalidIssuerError:
            return "AADSTS700023", "Client assertion issuer does not match the client id."
        except jwt.InvalidTokenError as err:
            return "AADSTS50027", f"JWT token is invalid or malformed ({err})."
        if claims.get("sub") != identity.client_id:
            return "AADSTS700021", "Client assertion application identifier doesn't match."
        if claims["jti"] in self._used_jti:
            return "AADSTS700025", "Client assertion has already been used (replayed jti)."
        self._used_jti.add(claims["jti"])
        return None

    # -- Key Vault -------------------------------------------------------------------------

    async def _secret(self, request: web.Request) -> web.Response:
        response = self._secret_response(request)
        self.calls[("secret", response.status)] += 1
        return response

    def _challenge(self, tenant: str = "common") -> dict[str, str]:
        return {
            "WWW-Authenticate": f'Bearer authorization="{self.url}/{tenant}", '
            'resource="https://vault.azure.net"'
        }

    def _secret_response(self, request: web.Request) -> web.Response:
        if not request.query.get("api-version"):
            return _kv_error(400, "BadParameter", "The 'api-version' query parameter is required.")
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return _kv_error(
                401,
                "Unauthorized",
                "AKV10000: Request is missing a Bearer or PoP token.",
                self._challenge(),
            )
        issued = self._tokens.get(auth.removeprefix("Bearer "))
        if issued is None:
            return _kv_error(401, "Unauthorized", "AKV10032: Invalid issuer.", self._challenge())
        if issued.expires_at <= time.time():
            return _kv_error(
                401,
                "Unauthorized",
                "AKV10022: Token is expired.",
                self._challenge(issued.tenant_id),
            )
        if (issued.tenant_id, issued.client_id) not in self.readers:
            return _kv_error(
                403,
                "Forbidden",
                f"The user, group or application 'appid={issued.client_id};"
                f"iss=https://sts.windows.net/{issued.tenant_id}/' does not have secrets get "
                f"permission on key vault 'fake-vault;location=local'.",
            )
        name = request.match_info["name"]
        value = self.secrets.get(name)
        if value is None:
            return _kv_error(
                404,
                "SecretNotFound",
                f"A secret with (name/id) {name} was not found in this key vault. If you "
                "recently deleted this secret you may be able to recover it using the correct "
                "recovery command.",
            )
        now = int(time.time())
        return web.json_response(
            {
                "value": value,
                "id": f"{self.url}/secrets/{name}/{uuid.uuid4().hex}",
                "attributes": {
                    "enabled": True,
                    "created": now,
                    "updated": now,
                    "recoveryLevel": "Recoverable+Purgeable",
                },
            }
        )
