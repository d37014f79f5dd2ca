"""The one place that decides how HTTP calls to GitHub are sent, retried and turned into errors.

* 5xx and connection errors: retried with jittered exponential backoff, bounded attempts;
  with a :class:`~gharc.github.breaker.BreakerRegistry` (the controllers'), every attempt
  also passes the (host, credential, endpoint class) circuit breaker, which fails fast
  with :class:`CircuitOpen` once that class's calls to the host have failed too often
  lately, and the (host, credential)'s rate budget (:mod:`gharc.github.budget`), which
  holds a call back (waited out, or :class:`RateLimited` with ``until``) while GitHub's
  quota or points are spent or a rate-limit answer to any caller has not lifted yet.
* 403/429 rate limits: waited out until ``Retry-After`` / ``X-RateLimit-Reset`` when that is
  within the cap, else :class:`RateLimited` at once (the caller decides, e.g. exit). The
  controllers' cap (:data:`CONTROLLER_RETRY`) is 2 s: they requeue instead of waiting.
* Any other 4xx: returned at once, never retried here (401 refresh is the caller's job).
* With a ``write_gate`` (the controller's: its leader and shard fences), every attempt of a
  call that changes GitHub's state (:func:`~gharc.github.endpoint_class.changes_github`)
  first asks the gate, which raises when this replica can no longer prove it may act, and
  its timeout is cut to the time the gate leaves: a replica that woke from a pause after
  its Lease moved must not register a runner or take a job beside the new leader.

Sleep and clock are injected so tests run on a fake clock instead of real waits. Metrics are
recorded in a transport *below* the HTTP cache, so only calls that reach GitHub count.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import os
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from gharc.github import errors as gherrors
from gharc.github.breaker import BreakerRegistry
from gharc.github.budget import header_number
from gharc.github.endpoint_class import changes_github
from gharc.github.metrics import GitHubMetrics
from gharc.http11 import DirectHTTP

if TYPE_CHECKING:  # hishel (with sqlite3 and msgpack) is imported only by a client that caches
    from hishel import AsyncBaseStorage

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
WriteGate = Callable[[str, str], float]
"""``gate(method, what)``: seconds a write may still take, or raises (a ``ConnectionError``:
nothing was sent) when this process may not act now."""

ENDPOINT_EXT = "gharc_endpoint"
_SECRET_QUERY_KEYS = ("token", "secret", "sig", "code", "key", "password", "jwt")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries; ``max_rate_limit_wait`` caps a single rate-limit wait (seconds)."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_rate_limit_wait: float = 900.0
    max_rate_limit_waits: int = 3

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Full-jitter exponential delay after failed attempt number ``attempt`` (1-based)."""
        cap = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return (rng or random).uniform(cap / 2, cap)


#: The controllers' policy: a reconcile never sleeps out a rate limit longer than this (it
#: raises :class:`RateLimited` with the time it lifts, and the reconciler requeues for
#: then), so no other object waits behind it. The listener keeps the default's long waits.
CONTROLLER_RETRY = RetryPolicy(max_rate_limit_wait=2.0, max_rate_limit_waits=1)


def redact_url(url: str | httpx.URL) -> str:
    """The URL without userinfo and with secret-looking query values replaced."""
    parts = urlsplit(str(url))
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    query = [
        (k, "REDACTED" if any(s in k.lower() for s in _SECRET_QUERY_KEYS) else v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        data = json.loads(response.content or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def is_rate_limited(response: httpx.Response) -> bool:
    if response.status_code not in (403, 429):
        return False
    if response.status_code == 429 or response.headers.get("retry-after") is not None:
        return True
    if response.headers.get("x-ratelimit-remaining") == "0":
        return True
    return "rate limit" in str(_body(response).get("message", "")).lower()


def rate_limit_wait(response: httpx.Response, now: float) -> float:
    """Seconds to wait before the limit lifts (Retry-After wins over X-RateLimit-Reset)."""
    retry_after = header_number(response.headers, "retry-after")
    if retry_after is not None:
        return max(0.0, retry_after)
    reset = header_number(response.headers, "x-ratelimit-reset")
    if reset is not None:
        return max(0.0, reset - now + 1.0)
    return 60.0


def exception_name_of(body: dict[str, Any]) -> str | None:
    """The short Actions exception name (``typeKey``, else the class part of ``typeName``)."""
    key = body.get("typeKey")
    if isinstance(key, str) and key:
        return key
    name = body.get("typeName")
    if isinstance(name, str) and name:
        return name.split(",")[0].strip().rsplit(".", 1)[-1]
    return None


def error_from_response(response: httpx.Response, now: float | None = None) -> gherrors.GitHubError:
    """Map an error response to the typed error; secrets never reach the message."""
    body = _body(response)
    message = body.get("message") if isinstance(body.get("message"), str) else None
    if not message:
        text = (
            response.text.strip() if "json" not in response.headers.get("content-type", "") else ""
        )
        message = text[:200] or response.reason_phrase or "request failed"
    common: dict[str, Any] = {
        "status": response.status_code,
        "request_id": response.headers.get("x-github-request-id")
        or response.headers.get("activityid"),
        "url": redact_url(response.request.url),
        "method": response.request.method,
    }
    if is_rate_limited(response):
        now = time.time() if now is None else now
        return gherrors.RateLimited(
            message,
            reset_at=header_number(response.headers, "x-ratelimit-reset"),
            retry_after=header_number(response.headers, "retry-after"),
            until=now + rate_limit_wait(response, now),
            **common,
        )
    name = exception_name_of(body)
    return gherrors.class_for(response.status_code, name)(message, exception_name=name, **common)


@functools.lru_cache(maxsize=16)
def ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    """System trust, plus ``ca_bundle`` (a file path or PEM text) for GHES private CAs;
    without one, httpx's default (certifi).

    One context per bundle for the whole process, shared by every client: each context
    parses its CA store again (about 1-3 MiB apiece), and a context is safe to share."""
    if not ca_bundle:
        return httpx.create_ssl_context()
    ctx = ssl.create_default_context()
    if "-----BEGIN" in ca_bundle:
        ctx.load_verify_locations(cadata=ca_bundle)
    elif os.path.exists(ca_bundle):
        ctx.load_verify_locations(cafile=ca_bundle)
    else:
        raise ValueError("ca_bundle is neither PEM text nor an existing file")
    return ctx


def observe_request(
    metrics: GitHubMetrics,
    scope: str,
    endpoint: str,
    method: str,
    status: int | str,
    seconds: float,
    headers: httpx.Headers | None,
) -> None:
    """Count and time one request that left the process and note the rate limit left: for
    httpx's requests (:class:`MeteredTransport`) and :class:`DirectHTTP`'s alike."""
    metrics.observe(endpoint, method, status, seconds)
    remaining = headers.get("x-ratelimit-remaining") if headers is not None else None
    if remaining is not None and remaining.isdigit():
        metrics.rate_limit_remaining.labels(scope=scope).set(int(remaining))
        if int(remaining) < 100:
            log.warning("GitHub rate limit low: %s remaining for %s", remaining, scope)


class MeteredTransport(httpx.AsyncBaseTransport):
    """Counts and times each request that actually leaves the process."""

    def __init__(self, inner: httpx.AsyncBaseTransport, metrics: GitHubMetrics, scope: str) -> None:
        self._inner = inner
        self._metrics = metrics
        self._scope = scope

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        endpoint = str(request.extensions.get(ENDPOINT_EXT, "unknown"))
        start = time.perf_counter()
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError:
            self.observe(endpoint, request.method, "error", time.perf_counter() - start, None)
            raise
        self.observe(
            endpoint,
            request.method,
            response.status_code,
            time.perf_counter() - start,
            response.headers,
        )
        return response

    def observe(
        self,
        endpoint: str,
        method: str,
        status: int | str,
        seconds: float,
        headers: httpx.Headers | None,
    ) -> None:
        observe_request(self._metrics, self._scope, endpoint, method, status, seconds, headers)

    async def aclose(self) -> None:
        await self._inner.aclose()


def make_http_client(
    *,
    metrics: GitHubMetrics,
    scope: str,
    user_agent: str,
    ca_bundle: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    cache: AsyncBaseStorage | None = None,
    timeout: float = 30.0,
    limits: httpx.Limits | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` with metrics, optional RFC 9111 cache and env proxies.

    httpx ignores proxy env vars once a transport is given, so HTTPS_PROXY/HTTP_PROXY/
    NO_PROXY are mapped to mounts here (using httpx's own parser).
    """

    def wrap(inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        metered: httpx.AsyncBaseTransport = MeteredTransport(inner, metrics, scope)
        if cache is None:
            return metered
        from gharc.github.cache import cached_transport

        return cached_transport(metered, cache)

    headers = {"User-Agent": user_agent}
    if transport is not None:
        return httpx.AsyncClient(
            transport=wrap(transport), headers=headers, timeout=timeout, trust_env=False
        )
    from httpx._utils import get_environment_proxies  # httpx's NO_PROXY-aware parser

    verify = ssl_context(ca_bundle)
    pool: dict[str, Any] = {"limits": limits} if limits is not None else {}
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    for pattern, proxy in get_environment_proxies().items():
        mounts[pattern] = (
            wrap(httpx.AsyncHTTPTransport(verify=verify, proxy=proxy, **pool)) if proxy else None
        )
    return httpx.AsyncClient(
        transport=wrap(httpx.AsyncHTTPTransport(verify=verify, **pool)),
        mounts=mounts,
        headers=headers,
        timeout=timeout,
        trust_env=False,
    )


#: Set to 1 to send the Actions service's calls through httpx like the REST API's.
ENV_HTTPX_ONLY = "GHARC_GITHUB_HTTPX_ONLY"


def make_direct_http(
    *,
    metrics: GitHubMetrics,
    scope: str,
    user_agent: str,
    ca_bundle: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout: float = 30.0,
    limits: httpx.Limits | None = None,
) -> DirectHTTP | None:
    """The lean sender of :mod:`gharc.http11`, or None where httpx must send: an
    injected transport (tests, the simulator), a proxy from the environment, or
    ``$GHARC_GITHUB_HTTPX_ONLY=1``."""
    if transport is not None or os.environ.get(ENV_HTTPX_ONLY, "") == "1":
        return None
    from httpx._utils import get_environment_proxies

    if any(get_environment_proxies().values()):
        return None
    ssl_context(ca_bundle)  # a bad bundle fails here, at construction, as with httpx
    limits = limits or httpx.Limits()
    return DirectHTTP(
        user_agent=user_agent,
        ssl_context=functools.partial(ssl_context, ca_bundle),
        observe=functools.partial(observe_request, metrics, scope),
        timeout=timeout,
        max_idle=limits.max_keepalive_connections or 20,
        max_connections=limits.max_connections,
    )


class Sender:
    """Sends one logical request with the retry policy; returns the final response."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        policy: RetryPolicy | None = None,
        sleep: Sleep | None = None,
        clock: Clock = time.time,
        rng: random.Random | None = None,
        breakers: BreakerRegistry | None = None,
        identity: str = "",
        direct: DirectHTTP | None = None,
        write_gate: WriteGate | None = None,
    ) -> None:
        self.client = client
        self.direct = direct
        """Sends uncached requests instead of ``client`` when set (see :mod:`.direct`)."""
        self.write_gate = write_gate
        self.breakers = breakers
        self.identity = identity
        self.policy = policy or RetryPolicy()
        self._sleep = sleep or asyncio.sleep
        self.clock = clock
        self._rng = rng

    async def send(
        self,
        method: str,
        url: str,
        *,
        endpoint: str,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        timeout: float | None = None,
        cache_key: str | None = None,
    ) -> httpx.Response:
        attempt = 0
        rate_waits = 0
        gated = self.write_gate is not None and changes_github(method, endpoint)
        while True:
            attempt += 1
            # Asked on every attempt: a retry after a backoff may come too late as well.
            attempt_timeout = self._gate(method, endpoint, timeout) if gated else timeout
            breaker = (
                self.breakers.for_call(url, self.identity, method, endpoint)
                if self.breakers
                else None
            )
            slot = True
            if breaker is not None:
                try:
                    slot = breaker.admit(method, endpoint)
                except (
                    gherrors.RateLimited
                ) as exc:  # the budget: wait it out here, or the caller does
                    wait = max(0.0, (exc.until or 0.0) - self.clock())
                    if not self._may_wait(wait, rate_waits):
                        exc.url, exc.method = redact_url(url), method
                        raise
                    rate_waits += 1
                    log.info("GitHub %s %s: rate budget, waiting %.1fs", method, endpoint, wait)
                    await self._sleep(wait)
                    continue
                except gherrors.CircuitOpen as exc:
                    exc.url, exc.method = redact_url(url), method
                    raise
            outcome: bool | None = None  # None: cancelled, nothing learnt about the host
            failure: httpx.TransportError | None = None
            sent_at = self.clock()
            try:
                if self.direct is not None and cache_key is None:
                    response = await self.direct.request(
                        method,
                        url,
                        endpoint=endpoint,
                        headers=headers,
                        params=params,
                        json_body=json_body,
                        timeout=attempt_timeout,
                    )
                else:
                    response = await self._send_httpx(
                        method,
                        url,
                        endpoint,
                        headers,
                        params,
                        json_body,
                        attempt_timeout,
                        cache_key,
                    )
                outcome = response.status_code < 500
            except httpx.TransportError as exc:
                failure, outcome = exc, False
            finally:
                if breaker is not None:
                    breaker.release(outcome, slot=slot)
            if breaker is not None and failure is None:
                limited = is_rate_limited(response)
                breaker.observe(
                    response.headers,
                    self.clock() + rate_limit_wait(response, self.clock()) if limited else None,
                    endpoint,
                    sent_at=sent_at,
                )
            if failure is not None:
                if attempt >= self.policy.max_attempts:
                    raise gherrors.ConnectionFailed(
                        f"{type(failure).__name__} after {attempt} attempts",
                        url=redact_url(url),
                        method=method,
                    ) from None
                delay = self.policy.backoff(attempt, self._rng)
                log.info(
                    "GitHub %s %s: %s, retry in %.1fs",
                    method,
                    endpoint,
                    type(failure).__name__,
                    delay,
                )
                await self._sleep(delay)
                continue
            if response.status_code >= 500 and attempt < self.policy.max_attempts:
                delay = self.policy.backoff(attempt, self._rng)
                log.info(
                    "GitHub %s %s: %s, retry in %.1fs",
                    method,
                    endpoint,
                    response.status_code,
                    delay,
                )
                await self._sleep(delay)
                continue
            if is_rate_limited(response):
                wait = rate_limit_wait(response, self.clock())
                if self._may_wait(wait, rate_waits):
                    rate_waits += 1
                    log.warning("GitHub rate limit on %s %s: waiting %.0fs", method, endpoint, wait)
                    await self._sleep(wait)
                    continue
            return response

    def _gate(self, method: str, endpoint: str, timeout: float | None) -> float | None:
        """``timeout`` cut to what the write gate leaves; raises when it refuses."""
        assert self.write_gate is not None
        left = self.write_gate(method, f"GitHub {endpoint}")
        if left == math.inf:
            return timeout
        return left if timeout is None else min(timeout, left)

    async def _send_httpx(
        self,
        method: str,
        url: str,
        endpoint: str,
        headers: dict[str, str] | None,
        params: dict[str, Any] | None,
        json_body: Any,
        timeout: float | None,
        cache_key: str | None,
    ) -> httpx.Response:
        extensions: dict[str, Any] = {ENDPOINT_EXT: endpoint}
        if cache_key is not None:
            extensions["caching"] = {"key": cache_key}
        request = self.client.build_request(
            method,
            url,
            headers=headers,
            params=params,
            json=json_body,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            extensions=extensions,
        )
        return await self.client.send(request)

    def _may_wait(self, wait: float, waits_so_far: int) -> bool:
        """Whether this sender sleeps out a rate limit of ``wait`` seconds (the listener)
        rather than raising :class:`RateLimited` for its caller to requeue (controllers)."""
        return wait <= self.policy.max_rate_limit_wait and (
            waits_so_far < self.policy.max_rate_limit_waits
        )
