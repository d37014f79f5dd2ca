"""Connection settings a lean process can use without kubernetes_asyncio: token, CA, cert.

The pod listener needs the API server's address, its CA and a bearer token (in a pod: the
projected service account token, which the kubelet rotates), nothing else. kubernetes_asyncio
reads those too, but its config package imports its ApiClient and aiohttp (about 20 MiB), so
this module reads the two simple forms itself; hand-written because no small, maintained
library reads a kubeconfig without a whole client attached. Anything it does not cover (exec
plugins, auth providers, basic auth) makes :func:`load` return None, and the caller uses the
full kubernetes_asyncio path instead: nothing is half-supported.
"""

from __future__ import annotations

import base64
import os
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["LeanConfig", "environment_proxy", "load"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0
"""How long a token read from a file is used before the file is read again (client-go: 1 min)."""

_UNSUPPORTED_USER_KEYS = ("exec", "auth-provider", "username", "password")


@dataclass
class LeanConfig:
    """Where the API server is and how to prove who we are."""

    server: str
    ca_file: str | None = None
    ca_data: str | None = None
    """PEM text of the CA bundle (a kubeconfig's ``certificate-authority-data``, decoded)."""
    insecure: bool = False
    tls_server_name: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    proxy: str | None = None
    _cached_token: str | None = field(default=None, repr=False)
    _token_read_at: float = field(default=-1e18, repr=False)

    def bearer_token(self) -> str | None:
        """The token to send now: a token file is re-read at most once a minute."""
        if self.token_file:
            now = time.monotonic()
            if self._cached_token is None or now - self._token_read_at >= TOKEN_REREAD_SECONDS:
                self._cached_token = Path(self.token_file).read_text().strip()
                self._token_read_at = now
            return self._cached_token
        return self.token


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (None when NO_PROXY covers its host)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxies.get(parts.scheme or "https") or None


def load(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool | None = None,
) -> LeanConfig | None:
    """The settings, or None when the kubeconfig needs the full client (see module doc).

    Same choice as :func:`gharc.kube.config.load_configuration`: a kubeconfig (argument or
    ``$KUBECONFIG``) wins; otherwise, in a pod, the service account.
    """
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if in_cluster is None:
        in_cluster = (
            not path
            and "KUBERNETES_SERVICE_HOST" in os.environ
            and (SERVICE_ACCOUNT_DIR / "token").exists()
        )
    if in_cluster:
        return _in_cluster()
    first = path.split(os.pathsep)[0] if path else str(Path.home() / ".kube" / "config")
    return _from_kubeconfig(Path(first), context)


def _in_cluster() -> LeanConfig:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    server = f"https://{host}:{port}"
    return LeanConfig(
        server=server,
        ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        token_file=str(SERVICE_ACCOUNT_DIR / "token"),
        proxy=environment_proxy(server),
    )


def _named(entries: object, name: str, key: str) -> dict[str, object] | None:
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(key)
            return value if isinstance(value, dict) else {}
    return None


def _file_or_data(section: dict[str, object], key: str, base: Path) -> bytes | None:
    data = section.get(f"{key}-data")
    if isinstance(data, str) and data:
        return base64.b64decode(data)
    name = section.get(key)
    if isinstance(name, str) and name:
        return (base / name).read_bytes()
    return None


def _from_kubeconfig(path: Path, context: str | None) -> LeanConfig | None:
    import yaml

    doc = yaml.safe_load(path.read_text()) or {}
    current = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), str(current), "context")
    if not ctx:
        return None
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster")), "cluster")
    user = _named(doc.get("users"), str(ctx.get("user")), "user") or {}
    if not cluster or not cluster.get("server"):
        return None
    if any(user.get(key) for key in _UNSUPPORTED_USER_KEYS):
        return None
    base = path.parent
    ca = _file_or_data(cluster, "certificate-authority", base)
    server = str(cluster["server"])
    token_file = user.get("tokenFile")
    proxy = cluster.get("proxy-url")
    return LeanConfig(
        server=server,
        ca_data=ca.decode() if ca else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
        client_cert_pem=_file_or_data(user, "client-certificate", base),
        client_key_pem=_file_or_data(user, "client-key", base),
        token=str(user["token"]) if user.get("token") else None,
        token_file=str(base / str(token_file)) if token_file else None,
        proxy=str(proxy) if proxy else environment_proxy(server),
    )
