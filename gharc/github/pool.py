"""One shared client per (config URL, credential identity, CA bundle, proxy).

Controllers reconcile many objects for the same scope; without a pool each would run its own
admin-token exchange, connection pool and REST cache. REST clients (and so registration
tokens and the HTTP cache) are shared per (scope, credential); the cache storage is shared by
the whole pool, keyed per credential. With ``breakers`` (the controllers' pool), all
clients of one (host, credential) share one circuit breaker. A client for a scale set
with ``spec.proxy`` sends everything through that proxy (:mod:`gharc.github.proxy`), not
the process environment's. With ``write_gate`` (the controller's fences), no client sends a
call that changes GitHub's state while the gate refuses (:class:`~gharc.github.transport.Sender`).
"""

from __future__ import annotations

import hashlib
import time

import httpx

from gharc.github.actions import ActionsClient
from gharc.github.auth import Credentials
from gharc.github.breaker import BreakerRegistry
from gharc.github.config import GitHubConfig, parse_config_url
from gharc.github.metrics import GitHubMetrics, default_metrics
from gharc.github.proxy import ProxySettings, ProxyTransport
from gharc.github.rest import DEFAULT_USER_AGENT, RestClient
from gharc.github.transport import Clock, RetryPolicy, Sleep, WriteGate, ssl_context

PoolKey = tuple[str, str, str, str]


class ClientPool:
    """Hands out shared :class:`ActionsClient` and :class:`RestClient` instances."""

    def __init__(
        self,
        *,
        metrics: GitHubMetrics | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep | None = None,
        clock: Clock = time.time,
        limits: httpx.Limits | None = None,
        breakers: BreakerRegistry | None = None,
        write_gate: WriteGate | None = None,
    ) -> None:
        self._metrics = metrics or default_metrics()
        self._limits = limits
        self._kw = {
            "user_agent": user_agent,
            "transport": transport,
            "retry": retry,
            "sleep": sleep,
            "clock": clock,
            "breakers": breakers,
            "write_gate": write_gate,
        }
        from gharc.github.cache import MemoryStorage  # hishel: not for a listener pod

        self._cache = MemoryStorage()
        self._rest: dict[PoolKey, RestClient] = {}
        self._actions: dict[PoolKey, ActionsClient] = {}

    @staticmethod
    def _key(
        config: GitHubConfig,
        credentials: Credentials,
        ca_bundle: str | None,
        proxy: ProxySettings | None = None,
    ) -> PoolKey:
        ca = hashlib.sha256(ca_bundle.encode()).hexdigest()[:16] if ca_bundle else ""
        return (config.config_url, credentials.identity, ca, proxy.identity if proxy else "")

    def _kwargs(
        self, ca_bundle: str | None, proxy: ProxySettings | None, limits: httpx.Limits | None
    ) -> dict[str, object]:
        """Client arguments; a proxy becomes the client's own transport (one per client,
        as each client closes its transport), unless a test transport replaces the network."""
        kw: dict[str, object] = dict(self._kw)
        if proxy is not None and kw["transport"] is None:
            kw["transport"] = ProxyTransport(proxy, verify=ssl_context(ca_bundle), limits=limits)
        return kw

    def get_rest(
        self,
        config: GitHubConfig | str,
        credentials: Credentials,
        *,
        ca_bundle: str | None = None,
        proxy: ProxySettings | None = None,
    ) -> RestClient:
        cfg = parse_config_url(config) if isinstance(config, str) else config
        key = self._key(cfg, credentials, ca_bundle, proxy)
        client = self._rest.get(key)
        if client is None:
            client = RestClient(
                cfg,
                credentials,
                ca_bundle=ca_bundle,
                metrics=self._metrics,
                cache=self._cache,
                **self._kwargs(ca_bundle, proxy, None),  # type: ignore[arg-type]
            )
            self._rest[key] = client
        return client

    def get(
        self,
        config: GitHubConfig | str,
        credentials: Credentials,
        *,
        ca_bundle: str | None = None,
        proxy: ProxySettings | None = None,
    ) -> ActionsClient:
        cfg = parse_config_url(config) if isinstance(config, str) else config
        key = self._key(cfg, credentials, ca_bundle, proxy)
        client = self._actions.get(key)
        if client is None:
            client = ActionsClient(
                cfg,
                credentials,
                ca_bundle=ca_bundle,
                metrics=self._metrics,
                rest=self.get_rest(cfg, credentials, ca_bundle=ca_bundle, proxy=proxy),
                limits=self._limits,
                **self._kwargs(ca_bundle, proxy, self._limits),  # type: ignore[arg-type]
            )
            self._actions[key] = client
        return client

    def __len__(self) -> int:
        return len(self._actions)

    async def aclose(self) -> None:
        for a in self._actions.values():
            await a.aclose()
        for r in self._rest.values():
            await r.aclose()
        self._actions.clear()
        self._rest.clear()
