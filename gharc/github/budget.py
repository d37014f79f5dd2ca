"""A client-side GitHub rate budget per (host, credential), in GitHub's own points (G8).

GitHub limits each credential twice: a primary quota per hour (``X-RateLimit-Limit`` /
``-Remaining`` / ``-Reset`` on every REST answer) and secondary limits counted in points,
where a read (GET, HEAD, OPTIONS) costs 1 and a write 5, at most 900 points a minute. A
client that learns about either only from a 403/429 has already spent the call, and keeps
spending: every caller retries on its own. The budget spends points before sending, so:

* **priorities**: starting runners comes first. JIT configs, registration tokens, job
  acquisition and the listener's message poll (:data:`Priority.HIGH`) may use the whole
  budget; ordinary reads and writes (NORMAL) stop when a fifth of the points is left,
  cleanup and listings (LOW: runner lists, runner removal) at half. Points refill within a
  minute; the hour's quota does not, so its reserves are smaller (NORMAL stops at 5 %, LOW
  at 10 %): cleanup held for an hour would keep finished runners around. Under pressure
  the work that can wait, waits, and a burst of new jobs still gets its runners.
* **waiting, not retrying**: a call the budget refuses raises
  :class:`~gharc.github.errors.RateLimited` with ``until``, the time it may go. The
  controllers requeue for then (ScaleSetReady=False, reason GitHubRateLimited); the
  listener sleeps until then. Nothing is sent meanwhile.
* **what GitHub says wins**: a rate-limit answer (429, or 403 with ``Retry-After``,
  ``X-RateLimit-Remaining: 0`` or a rate-limit message) holds back every call of the
  credential to the same service until it lifts (``Retry-After``, else
  ``X-RateLimit-Reset``): the limit is the credential's, not the caller's, and GitHub asks
  for no requests until then. Before, only an exhausted REST quota did; a 429 on one
  runner's JIT config left the other runners sending theirs into the same limit. When it
  lifts, one call goes first and the others follow its answer (at most ``probe_grace``
  later), so the callers requeued for that instant do not all draw the next 429. The probe
  is a call to the endpoint that drew the 429; neither a long poll (it answers when it
  ends), nor a call to another endpoint (GitHub's secondary limits are by kind of call),
  nor one sent before the probe (a poll from before the 429) stands for its answer. A
  ``Remaining`` that falls into a priority's reserve holds that priority until the reset.

* **REST only**: the Actions service (JIT configs, job acquisition, the message queue,
  ``/_apis/...``) is another service with its own limits, which it enforces with 429 and
  ``Retry-After``. Its calls neither spend REST's points nor count against REST's hour, and
  a low REST quota never holds them: a 1,000-job run makes ~5,000 of them an hour. A
  rate-limit answer holds the service that gave it (:func:`service_of`), not the other.

Time comes from an injected clock, so tests need no sleeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from gharc.github import errors as gherrors
from gharc.github.endpoint_class import is_actions_service

log = logging.getLogger(__name__)

Clock = Callable[[], float]

_READS = frozenset({"GET", "HEAD", "OPTIONS"})


class Priority(IntEnum):
    """Lower goes first (see the module docstring)."""

    HIGH = 0
    NORMAL = 1
    LOW = 2


#: Endpoint templates (as the clients name them for metrics) that start runners or take jobs.
_HIGH_SUFFIXES = (
    "/generatejitconfig",
    "/acquirejobs",
    "/registration-token",
    "/actions/runner-registration",
    "/access_tokens",
    "{messageQueueUrl}",
    "/sessions",
)
#: Cleanup and listings: runner lists and removals (the registration reconcile, scale down).
_LOW_PREFIXES = ("/_apis/distributedtask/pools/0/agents",)
_LOW_SUFFIXES = ("/actions/runners/{runner_id}", "/actions/runners")


def priority_of(method: str, endpoint: str) -> Priority:
    """The priority of one call, from its endpoint template."""
    if endpoint.endswith(_HIGH_SUFFIXES) or "{messageQueueUrl}" in endpoint:
        return Priority.HIGH
    if endpoint.startswith(_LOW_PREFIXES) or endpoint.endswith(_LOW_SUFFIXES):
        return Priority.LOW
    return Priority.NORMAL


def cost_of(method: str, endpoint: str = "") -> int:
    """GitHub's secondary-limit points for REST: 1 for a read, 5 for a write.

    The Actions service (``/_apis/...``, the message queue) is another service whose
    limits GitHub does not publish as points: its calls cost none here, so a burst of JIT
    configs is not paced by REST's 900 points a minute. They still wait out its 429s and
    ``Retry-After``, and a cleanup call still waits while the REST budget is low."""
    if is_actions_service(endpoint):
        return 0
    return 1 if method.upper() in _READS else 5


def service_of(endpoint: str) -> str:
    """``"actions"`` or ``"rest"``: which of the credential's limits a call counts against,
    and so which a rate-limit answer to it holds back."""
    return "actions" if is_actions_service(endpoint) else "rest"


@dataclass(frozen=True)
class BudgetPolicy:
    """``points`` per ``per`` seconds is GitHub's documented secondary limit for REST;
    ``reserve`` is the share of the points, ``quota_reserve`` the share of the hour's
    quota, each priority leaves to the ones above it. ``probe_grace``: how long the others
    wait for the first call after a rate limit lifted (its answer usually comes first)."""

    points: float = 900.0
    per: float = 60.0
    probe_grace: float = 1.0
    reserve: tuple[float, float, float] = (0.0, 0.2, 0.5)
    quota_reserve: tuple[float, float, float] = (0.0, 0.05, 0.1)

    @property
    def rate(self) -> float:
        return self.points / self.per


def header_number(headers: Mapping[str, str], name: str) -> float | None:
    """A numeric response header (``retry-after``, ``x-ratelimit-*``), or None when it is
    missing or not a number: the budget and the retry rules read the same headers, one way."""
    value = headers.get(name)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


@dataclass
class RateBudget:
    """The budget of one (host, credential); see the module docstring."""

    name: str
    policy: BudgetPolicy = field(default_factory=BudgetPolicy)
    clock: Clock = time.time
    level: float = -1.0
    """Points available now (-1: full, set at the first call)."""
    updated: float = 0.0
    held_until: dict[str, float] = field(default_factory=dict)
    """By service (:func:`service_of`): rate limited until then, nothing of the credential
    to that service is sent before it."""
    probe_until: dict[str, float] = field(default_factory=dict)
    """By service: a hold lifted and one call went as a probe; the others wait for its
    answer, at most until then. Without it every caller requeued for the instant the hold
    lifts sends at once and they draw the next 429 together."""
    probe_sent: dict[str, float] = field(default_factory=dict)
    """By service: when the probe went. Only an answer to a call sent then or later says
    the limit has lifted; a long poll sent before the 429 may answer meanwhile, and letting
    it release the others sent every held caller into the next 429."""
    limited_by: dict[str, str] = field(default_factory=dict)
    """By service: the endpoint whose rate-limit answer set the hold. Only a call to it
    probes when the hold lifts, and only its answer releases the others: GitHub's secondary
    limits are by kind of call, so a statistics read answering 200 says nothing about the
    JIT configs that drew the 429 (as the probe it sent every held runner into the next)."""
    remaining: int | None = None
    limit: int | None = None
    reset_at: float = 0.0

    def _refill(self, now: float) -> None:
        if self.level < 0:
            self.level, self.updated = self.policy.points, now
            return
        self.level = min(self.policy.points, self.level + (now - self.updated) * self.policy.rate)
        self.updated = now

    def take(
        self,
        priority: Priority,
        cost: int,
        service: str = "rest",
        *,
        endpoint: str = "",
        probe: bool = True,
    ) -> None:
        """Spend ``cost`` points at ``priority`` on a call to ``endpoint``, or raise
        :class:`RateLimited` with the time the call may be sent. A call that may not
        ``probe`` (a long poll, whose answer comes only when it ends), or to another
        endpoint than the one limited, goes once a hold has lifted without being the probe
        the others wait for."""
        if self.held_until or self.probe_until:
            self._check_hold(service, probe and endpoint == self.limited_by.get(service, ""))
        if cost == 0:
            # The Actions service (JIT configs, acquire, the message queue) is another
            # service: REST's points and hour's quota neither limit nor count its calls.
            return
        now = self.clock()
        self._refill(now)
        if (
            self.remaining is not None
            and self.limit
            and now < self.reset_at
            and self.remaining <= self.policy.quota_reserve[priority] * self.limit
        ):
            # NB: no counts in the message: it becomes status, which must not change
            # from one attempt to the next (see controllers/scaleset/error_reporting.py).
            raise gherrors.RateLimited(
                f"{self.name}: the hour's quota is low; {priority.name.lower()} priority "
                f"calls wait for its reset",
                until=self.reset_at,
            )
        floor = self.policy.reserve[priority] * self.policy.points
        if self.level - cost < floor:
            wait = (floor + cost - self.level) / self.policy.rate
            raise gherrors.RateLimited(
                f"{self.name}: client-side budget spent ({priority.name} calls wait)",
                until=now + wait,
            )
        self.level -= cost
        if self.remaining is not None and now < self.reset_at:
            self.remaining -= 1

    def _check_hold(self, service: str, probe: bool) -> None:
        """Raise :class:`RateLimited` while ``service`` is held or its probe is out; the
        first call after a hold lifts that may ``probe`` is let through as the probe."""
        now = self.clock()
        held = self.held_until.get(service)
        if held is not None:
            if now < held:
                # NB: no counts or times in the message (it becomes status, see below).
                raise gherrors.RateLimited(
                    f"{self.name}: rate limited; calls wait for it", until=held
                )
            if not probe:
                return
            del self.held_until[service]
            self.probe_until[service] = now + self.policy.probe_grace
            self.probe_sent[service] = now
            return
        probe_until = self.probe_until.get(service)
        if probe_until is not None and probe:
            if now < probe_until:
                raise gherrors.RateLimited(
                    f"{self.name}: rate limited; calls wait for it", until=probe_until
                )
            del self.probe_until[service]

    def observe(
        self,
        headers: Mapping[str, str],
        limited_until: float | None,
        service: str = "rest",
        *,
        sent_at: float,
        endpoint: str = "",
    ) -> None:
        """Learn from an answer of ``service`` to a call to ``endpoint`` sent at ``sent_at``: its
        ``X-RateLimit-*`` headers and, for a rate-limit answer, the time it lifts
        (``limited_until``, epoch seconds), which holds every call of the credential to
        that service until then."""
        if service == "rest":  # the Actions service's headers are not REST's hour
            remaining = header_number(headers, "x-ratelimit-remaining")
            limit = header_number(headers, "x-ratelimit-limit")
            reset = header_number(headers, "x-ratelimit-reset")
            if remaining is not None and limit is not None and reset is not None:
                self.remaining, self.limit, self.reset_at = int(remaining), int(limit), reset
        if limited_until is None:
            probe_answer = sent_at >= self.probe_sent.get(service, 0.0)
            if probe_answer and endpoint == self.limited_by.get(service, ""):
                self.probe_until.pop(service, None)  # the probe answered: everyone may go
            return
        if limited_until > self.held_until.get(service, 0.0):
            self.held_until[service] = limited_until
            self.limited_by[service] = endpoint
            self.probe_until.pop(service, None)
            wait = max(0.0, limited_until - self.clock())
            log.warning(
                "%s: rate limited; every %s call of the credential waits %.0fs",
                self.name,
                service,
                wait,
            )
