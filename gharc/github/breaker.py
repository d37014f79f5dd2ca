"""Circuit breakers per (GitHub host, credential, endpoint class), shared by every caller.

When GitHub answers 5xx or cannot be reached, each caller retrying on its own multiplies
the load on a service that is already failing (ten pending runners made 164 JIT config
calls in 30 s of 503s). A breaker counts consecutive failures across all callers:

* **closed**: calls go through; ``threshold`` consecutive failures open it.
* **open**: calls fail fast with :class:`~gharc.github.errors.CircuitOpen` carrying the
  time it reopens; the window grows (``base`` doubled per reopening that failed again, at
  most ``cap``) and is reset by a success.
* **half-open** (the window is over): up to ``probes`` calls at a time go through; a success
  closes the breaker, a failure opens it again for the next, longer window. For the first
  ``priority_grace`` seconds only *priority* classes (JIT config, acquire jobs) may probe,
  so the work that starts runners gets the recovered service first; the others are told
  to come back after the grace.

One breaker per endpoint class (:mod:`gharc.github.endpoint_class`), not per host: GitHub
can fail one endpoint while the others answer. With one breaker per (host, credential),
each message poll or statistics read that answered closed it during a JIT config outage,
and it reopened every 2 s (111 JIT config calls in 30 s of 503s); a class's breaker is
closed only by a success of its own class.

A 4xx or a rate limit is a success here: the host answered. Rate limits are the
credential's, not an endpoint's: every breaker of a (host, credential) holds the same
:class:`~gharc.github.budget.RateBudget` (GitHub's points, priorities, and a rate-limit
answer holding every call of the credential to that service until it lifts). One place
decides whether a call may be sent now (:meth:`CircuitBreaker.admit`) and learns from its
answer (:meth:`CircuitBreaker.observe`). The controllers' reconcilers and the in-process
listeners share one :class:`BreakerRegistry` (:meth:`BreakerRegistry.process`), so a
listener's acquire and a reconciler's JIT config draw on the same budget. Time comes from
an injected clock, so tests need no sleeps.
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

from gharc.github import errors as gherrors
from gharc.github.budget import BudgetPolicy, RateBudget, cost_of, priority_of, service_of
from gharc.github.endpoint_class import PRIORITY_CLASSES, EndpointClass, class_of

log = logging.getLogger(__name__)

Clock = Callable[[], float]

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
    """The state of one (host, credential, endpoint class); see the module docstring."""

    name: str
    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    clock: Clock = time.time
    failures: int = 0
    opened: int = 0
    """How many times in a row the breaker opened without a success in between."""
    reopen_at: float = 0.0
    in_flight: int = 0
    budget: RateBudget | None = None
    """The (host, credential)'s, shared by all its endpoint classes."""
    host: str = ""
    endpoint_class: EndpointClass = EndpointClass.OTHER

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
                raise gherrors.CircuitOpen(f"{self.name}: held back after failures", until=start)
            if probe_slot and self.in_flight >= self.policy.probes:
                raise gherrors.CircuitOpen(
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
        a few idle listeners would keep JIT configs from probing for a minute; nor is it
        the rate budget's probe after a 429, for the same reason)."""
        slot = not (method == "GET" and endpoint in LONG_POLL_ENDPOINTS)
        self.acquire(priority=self.endpoint_class in PRIORITY_CLASSES, probe_slot=slot)
        if self.budget is None:
            return slot
        try:
            self.budget.take(
                priority_of(method, endpoint),
                cost_of(method, endpoint),
                service_of(endpoint),
                endpoint=endpoint,
                probe=slot,
            )
        except BaseException:
            self.release(None, slot=slot)
            raise
        return slot

    def observe(
        self,
        headers: Mapping[str, str],
        limited_until: float | None,
        endpoint: str = "",
        *,
        sent_at: float,
    ) -> None:
        """Learn the credential's rate limit from an answer to ``endpoint`` sent at
        ``sent_at`` (see :meth:`RateBudget.observe`): a rate limit holds the credential's
        other callers too."""
        if self.budget is not None:
            self.budget.observe(
                headers, limited_until, service_of(endpoint), sent_at=sent_at, endpoint=endpoint
            )

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

    Also a Prometheus collector: ``gharc_github_circuit_open{host, endpoint_class}`` is how
    many of the host's credentials have that class's breaker open now (0 when all calls go
    through).
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
        self._breakers: dict[tuple[str, str, EndpointClass], CircuitBreaker] = {}
        self._budgets: dict[tuple[str, str], RateBudget] = {}
        self._hosts: dict[str, str] = {}
        """Host (with a non-default port) by URL authority, for :meth:`for_url`."""
        self._classes: dict[tuple[str, str], EndpointClass] = {}
        """Endpoint class by (method, endpoint template): a few dozen templates in all."""

    @classmethod
    def process(cls) -> BreakerRegistry:
        """The registry the controllers and the in-process listeners of this process
        share: one breaker per endpoint class and one budget per (host, credential),
        whoever calls."""
        if cls._process is None:
            cls._process = cls()
        return cls._process

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "gharc_github_circuit_open",
            "GitHub credentials of this host whose circuit breaker for this endpoint class "
            "holds calls back now",
            labels=["host", "endpoint_class"],
        )
        open_by: dict[tuple[str, str], int] = {}
        for (host, _, klass), breaker in list(self._breakers.items()):
            key = (host, klass.value)
            open_by[key] = open_by.get(key, 0) + int(breaker.is_open)
        for (host, klass_name), count in sorted(open_by.items()):
            gauge.add_metric([host, klass_name], count)
        yield gauge

    def for_call(self, url: str, identity: str, method: str, endpoint: str) -> CircuitBreaker:
        """The breaker one call to ``endpoint`` (its template) at ``url`` goes through."""
        klass = self._classes.get((method, endpoint))
        if klass is None:
            klass = class_of(method, endpoint)
            if len(self._classes) < 1024:
                self._classes[(method, endpoint)] = klass
        return self.for_url(url, identity, klass)

    def for_url(
        self, url: str, identity: str, endpoint_class: EndpointClass = EndpointClass.OTHER
    ) -> CircuitBreaker:
        # The host by the URL's authority, parsed once: every GitHub call asks, and
        # urlsplit's hostname/port properties cost more than the breaker's own work.
        authority = url.split("/", 3)[2] if "://" in url else url
        host = self._hosts.get(authority)
        if host is None:
            parts = urlsplit(url)
            host = f"{parts.hostname or ''}:{parts.port}" if parts.port else parts.hostname or ""
            if len(self._hosts) < 1024:
                self._hosts[authority] = host
        key = (host, identity, endpoint_class)
        breaker = self._breakers.get(key)
        if breaker is None:
            budget = self._budgets.get((host, identity))
            if budget is None:
                budget = RateBudget(f"GitHub {host}", self.budget, self.clock)
                self._budgets[(host, identity)] = budget
            breaker = CircuitBreaker(
                f"GitHub {host} ({endpoint_class.value})",
                self.policy,
                self.clock,
                budget=budget,
                host=host,
                endpoint_class=endpoint_class,
            )
            self._breakers[key] = breaker
        return breaker
