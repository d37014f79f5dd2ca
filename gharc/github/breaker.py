"""One circuit breaker per (GitHub host, credential), shared by every caller of that pair.

When GitHub answers 5xx or cannot be reached, each caller retrying on its own multiplies
the load on a service that is already failing (ten pending runners made 164 JIT config
calls in 30 s of 503s). The breaker counts consecutive failures across all callers:

* **closed**: calls go through; ``threshold`` consecutive failures open it.
* **open**: calls fail fast with :class:`~gharc.github.errors.CircuitOpen` carrying the
  time it reopens; the window grows (``base`` doubled per reopening that failed again, at
  most ``cap``) and is reset by a success.
* **half-open** (the window is over): up to ``probes`` calls at a time go through; a success
  closes the breaker, a failure opens it again for the next, longer window. For the first
  ``priority_grace`` seconds only *priority* calls (JIT config, acquire jobs) may probe,
  so the work that starts runners gets the recovered service first; the others are told
  to come back after the grace.

A 4xx or a rate limit is a success here: the host answered. Each breaker also holds the
(host, credential)'s :class:`~gharc.github.budget.RateBudget` (GitHub's points, priorities,
waiting out a rate limit): one place decides whether a call may be sent now (:meth:`admit`)
and learns from its answer (:meth:`observe`). The controllers' reconcilers and the
in-process listeners share one :class:`BreakerRegistry` (:meth:`BreakerRegistry.process`),
so a listener's acquire and a reconciler's JIT config draw on the same budget. Time comes
from an injected clock, so tests need no sleeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import urlsplit

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gharc.github.budget import BudgetPolicy, RateBudget, cost_of, priority_of
from gharc.github.errors import CircuitOpen

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: Endpoint templates (as the clients name them for metrics) that probe first.
PRIORITY_ENDPOINTS = frozenset(
    {
        "/_apis/runtime/runnerscalesets/{id}/generatejitconfig",
        "/_apis/runtime/runnerscalesets/{id}/acquirejobs",
    }
)
#: A listener's message poll: held open by the service for up to 50 s.
LONG_POLL_ENDPOINTS = frozenset({"{messageQueueUrl}"})


@dataclass(frozen=True)
class BreakerPolicy:
    """Five failures in a row is an outage, not bad luck (one call's own retries are
    five); windows start short so a blip costs seconds, and are capped so a recovered
    GitHub is found within a minute."""

    threshold: int = 5
    base: float = 2.0
    cap: float = 60.0
    probes: int = 2
    priority_grace: float = 1.0


@dataclass
class CircuitBreaker:
    """The state of one (host, credential); see the module docstring."""

    name: str
    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    clock: Clock = time.time
    failures: int = 0
    opened: int = 0
    """How many times in a row the breaker opened without a success in between."""
    reopen_at: float = 0.0
    in_flight: int = 0
    budget: RateBudget | None = None
    host: str = ""

    @property
    def is_open(self) -> bool:
        return self.opened > 0 and self.clock() < self.reopen_at

    def acquire(self, *, priority: bool = False, probe_slot: bool = True) -> None:
        """Admit one call, or raise :class:`CircuitOpen`; pair with :meth:`release`.
        Without ``probe_slot`` the call takes no probe slot when half-open (a long poll,
        which would hold it for most of a minute) and is not counted in flight."""
        if self.opened:
            now = self.clock()
            start = self.reopen_at if priority else self.reopen_at + self.policy.priority_grace
            if now < start:
                raise CircuitOpen(f"{self.name}: held back after failures", until=start)
            if probe_slot and self.in_flight >= self.policy.probes:
                raise CircuitOpen(
                    f"{self.name}: recovering, probes in flight",
                    until=now + self.policy.priority_grace,
                )
        if probe_slot:
            self.in_flight += 1

    def admit(self, method: str, endpoint: str) -> bool:
        """Admit one call to ``endpoint``: the circuit, then the rate budget; raises
        :class:`CircuitOpen` or :class:`~gharc.github.errors.RateLimited` (with ``until``)
        and spends nothing then. Pair with :meth:`release`, passing what this returns:
        whether the call holds a probe slot (a listener's message long poll does not, or
        a few idle listeners would keep JIT configs from probing for a minute)."""
        slot = not (method == "GET" and endpoint in LONG_POLL_ENDPOINTS)
        self.acquire(priority=endpoint in PRIORITY_ENDPOINTS, probe_slot=slot)
        if self.budget is None:
            return slot
        try:
            self.budget.take(priority_of(method, endpoint), cost_of(method, endpoint))
        except BaseException:
            self.release(None, slot=slot)
            raise
        return slot

    def observe(self, headers: Mapping[str, str], limited_until: float | None) -> None:
        """Learn the credential's rate limit from an answer (see :meth:`RateBudget.observe`)."""
        if self.budget is not None:
            self.budget.observe(headers, limited_until)

    def release(self, outcome: bool | None, *, slot: bool = True) -> None:
        """End one admitted call: True answered, False failed (5xx/unreachable), None
        nothing learnt (cancelled); ``slot`` as :meth:`admit` returned."""
        if slot:
            self.in_flight = max(0, self.in_flight - 1)
        if outcome is True:
            if self.opened:
                log.info("%s answered again: calls resume", self.name)
            self.failures = 0
            self.opened = 0
        elif outcome is False:
            self.failures += 1
            if self.opened or self.failures >= self.policy.threshold:
                self._open()

    def _open(self) -> None:
        now = self.clock()
        if self.opened and now < self.reopen_at:
            return  # a call admitted before it opened: the window stands
        window = min(self.policy.cap, self.policy.base * (2**self.opened))
        self.opened += 1
        self.failures = 0
        self.reopen_at = now + window
        log.warning("%s failing (5xx or unreachable): calls held back for %.0fs", self.name, window)


class BreakerRegistry(Collector):
    """The breakers of one process (of the :class:`~gharc.github.pool.ClientPool` s given it).

    Also a Prometheus collector: ``gharc_github_circuit_open{host}`` is how many of the
    host's credentials have their breaker open now (0 when all calls go through).
    """

    _process: ClassVar[BreakerRegistry | None] = None

    def __init__(
        self,
        policy: BreakerPolicy | None = None,
        *,
        clock: Clock = time.time,
        budget: BudgetPolicy | None = None,
    ) -> None:
        self.policy = policy or BreakerPolicy()
        self.budget = budget or BudgetPolicy()
        self.clock = clock
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}
        self._hosts: dict[str, str] = {}
        """Host (with a non-default port) by URL authority, for :meth:`for_url`."""

    @classmethod
    def process(cls) -> BreakerRegistry:
        """The registry the controllers and the in-process listeners of this process
        share: one breaker and one budget per (host, credential), whoever calls."""
        if cls._process is None:
            cls._process = cls()
        return cls._process

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "gharc_github_circuit_open",
            "GitHub credentials of this host whose circuit breaker holds calls back now",
            labels=["host"],
        )
        open_by_host: dict[str, int] = {}
        for (host, _), breaker in list(self._breakers.items()):
            open_by_host[host] = open_by_host.get(host, 0) + int(breaker.is_open)
        for host, count in sorted(open_by_host.items()):
            gauge.add_metric([host], count)
        yield gauge

    def for_url(self, url: str, identity: str) -> CircuitBreaker:
        # The host by the URL's authority, parsed once: every GitHub call asks, and
        # urlsplit's hostname/port properties cost more than the breaker's own work.
        authority = url.split("/", 3)[2] if "://" in url else url
        host = self._hosts.get(authority)
        if host is None:
            parts = urlsplit(url)
            host = f"{parts.hostname or ''}:{parts.port}" if parts.port else parts.hostname or ""
            if len(self._hosts) < 1024:
                self._hosts[authority] = host
        key = (host, identity)
        breaker = self._breakers.get(key)
        if breaker is None:
            name = f"GitHub {host}"
            budget = RateBudget(name, self.budget, self.clock)
            breaker = CircuitBreaker(name, self.policy, self.clock, budget=budget, host=host)
            self._breakers[key] = breaker
        return breaker
