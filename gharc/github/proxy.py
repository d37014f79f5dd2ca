"""An explicit HTTP(S) proxy for one GitHub client (a scale set's ``spec.proxy``).

The process environment (``HTTPS_PROXY``...) is one proxy for the whole controller; a
scale set names its own, and ARC sends the controller's calls for that scale set through
it too (not only the listener's and the runners'). :class:`ProxyTransport` routes each
request like Go's ``httpproxy``: ``http://`` URLs through ``http``, ``https://`` URLs
through ``https`` (CONNECT), hosts matching ``no_proxy`` directly.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

__all__ = ["InvalidProxyUrl", "ProxySettings", "ProxyTransport", "check_proxy_url"]


class InvalidProxyUrl(ValueError):
    """A proxy URL httpx cannot use (scheme, host or port wrong)."""


def check_proxy_url(url: str) -> None:
    """Raise :class:`InvalidProxyUrl` unless ``url`` is ``http(s)://[user:pass@]host[:port]``.

    The message names what is wrong, never the URL itself: it may carry a password.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidProxyUrl("is not a URL (bad port or brackets)") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidProxyUrl(f"scheme must be http or https, not {parts.scheme or 'none'!r}")
    if not parts.hostname:
        raise InvalidProxyUrl("has no host")
    if port == 0:
        raise InvalidProxyUrl("port 0 is not a port")


@dataclass(frozen=True)
class ProxySettings:
    """Proxy URLs (credentials included) and the hosts that bypass them."""

    http: str | None = None
    https: str | None = None
    no_proxy: tuple[str, ...] = ()

    def __repr__(self) -> str:  # the URLs may hold a password
        return f"ProxySettings(identity={self.identity})"

    @property
    def identity(self) -> str:
        """A digest that changes with any URL, password or exclusion (a pool key part)."""
        raw = "\n".join([self.http or "", self.https or "", ",".join(self.no_proxy)])
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def bypasses(self, host: str, port: int | None = None) -> bool:
        """True when ``host`` matches ``no_proxy`` (names, ``.suffix``, IPs, CIDRs, ``*``)."""
        host = host.lower().strip("[]")
        for raw in self.no_proxy:
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return True
            if _matches(entry, host, port):
                return True
        return False

    def proxy_for(self, url: httpx.URL) -> str | None:
        """The proxy URL for a request to ``url``, or None to go directly."""
        if self.bypasses(url.host, url.port):
            return None
        return self.https if url.scheme == "https" else self.http


def _matches(entry: str, host: str, port: int | None) -> bool:
    try:
        network = ipaddress.ip_network(entry, strict=False)
    except ValueError:
        network = None
    if network is not None:
        try:
            return ipaddress.ip_address(host) in network
        except ValueError:
            return False
    name, _, want_port = entry.partition(":") if entry.count(":") == 1 else (entry, "", "")
    if want_port and str(port or "") != want_port:
        return False
    name = name.removeprefix("*").removeprefix(".")
    return host == name or host.endswith("." + name)


class ProxyTransport(httpx.AsyncBaseTransport):
    """Sends each request directly or through the proxy :class:`ProxySettings` picks."""

    def __init__(
        self,
        settings: ProxySettings,
        *,
        verify: Any = True,
        limits: httpx.Limits | None = None,
    ) -> None:
        pool: dict[str, Any] = {"limits": limits} if limits is not None else {}
        self.settings = settings
        self._direct = httpx.AsyncHTTPTransport(verify=verify, **pool)
        self._via: dict[str, httpx.AsyncHTTPTransport] = {}
        for url in {u for u in (settings.http, settings.https) if u}:
            self._via[url] = httpx.AsyncHTTPTransport(verify=verify, proxy=url, **pool)

    def _transports(self) -> Iterable[httpx.AsyncHTTPTransport]:
        return [self._direct, *self._via.values()]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        proxy = self.settings.proxy_for(request.url)
        transport = self._via[proxy] if proxy else self._direct
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self._transports():
            await transport.aclose()
