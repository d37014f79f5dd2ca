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

A 4xx or a rate limit is a success here: the host answered. Time comes from an injected
clock, so tests need no sleeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

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

    @property
    def is_open(self) -> bool:
        return self.opened > 0 and self.clock() < self.reopen_at

    def acquire(self, *, priority: bool = False) -> None:
        """Admit one call, or raise :class:`CircuitOpen`; pair with :meth:`release`."""
        if self.opened:
            now = self.clock()
            start = self.reopen_at if priority else self.reopen_at + self.policy.priority_grace
            if now < start:
                raise CircuitOpen(f"{self.name}: held back after failures", until=start)
            if self.in_flight >= self.policy.probes:
                raise CircuitOpen(
                    f"{self.name}: recovering, probes in flight",
                    until=now + self.policy.priority_grace,
                )
        self.in_flight += 1

    def release(self, outcome: bool | None) -> None:
        """End one admitted call: True answered, False failed (5xx/unreachable), None
        nothing learnt (cancelled)."""
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


class BreakerRegistry:
    """The breakers of one process (a :class:`~gharc.github.pool.ClientPool`)."""

    def __init__(self, policy: BreakerPolicy | None = None, *, clock: Clock = time.time) -> None:
        self.policy = policy or BreakerPolicy()
        self.clock = clock
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}

    def for_url(self, url: str, identity: str) -> CircuitBreaker:
        parts = urlsplit(url)
        host = f"{parts.hostname or ''}:{parts.port}" if parts.port else parts.hostname or ""
        key = (host, identity)
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = CircuitBreaker(f"GitHub {host}", self.policy, self.clock)
            self._breakers[key] = breaker
        return breaker
