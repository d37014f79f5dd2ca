"""Faults the tests ask for: error bursts, latency, secondary rate limits.

A fault matches requests by route template (``fnmatch`` pattern against the aiohttp
canonical route, e.g. ``*/runnerscalesets/{scale_set_id}/sessions``) and method, and lasts
for ``count`` matching requests and/or until ``until`` (epoch seconds). Stateful faults
(revoked tokens, exhausted rate limits, a deleted scale set, a session conflict) are state
operations instead, see :class:`~testworld.sim.github.state.FakeGitHubState`.

``lost_response`` lets the request do its work and then answers ``status`` (502 unless
told) instead of the real answer: what a client sees when a proxy or the connection drops
the response of a write that GitHub did make (a JIT registration made, its config lost).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

KINDS = ("status", "latency", "secondary_rate_limit", "lost_response")


@dataclass
class Fault:
    id: int
    kind: str
    route: str = "*"
    method: str | None = None
    status: int = 500
    count: int | None = None
    until: float | None = None
    delay: float = 0.0
    retry_after: int = 60
    exception: str | None = None
    """A ``status`` fault's Actions exception type (e.g. ``RunnerScaleSetNotFoundException``,
    which the service answered session creation with for minutes, ARC #3942)."""
    hits: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def active(self, now: float) -> bool:
        if self.count is not None and self.hits >= self.count:
            return False
        return not (self.until is not None and now >= self.until)

    def matches(self, method: str, route: str, now: float) -> bool:
        if not self.active(now):
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return fnmatch.fnmatchcase(route, self.route)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "route": self.route,
            "method": self.method,
            "status": self.status,
            "count": self.count,
            "until": self.until,
            "delay": self.delay,
            "retryAfter": self.retry_after,
            "exception": self.exception,
            "hits": self.hits,
        }


class FaultTable:
    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._next = 1

    def add(
        self,
        kind: str,
        *,
        route: str = "*",
        method: str | None = None,
        status: int | None = None,
        count: int | None = None,
        until: float | None = None,
        delay: float = 0.0,
        retry_after: int = 60,
        exception: str | None = None,
    ) -> Fault:
        if kind not in KINDS:
            raise ValueError(f"fault kind must be one of {', '.join(KINDS)}")
        default_status = {
            "status": 500,
            "latency": 200,
            "secondary_rate_limit": 403,
            "lost_response": 502,
        }[kind]
        fault = Fault(
            self._next,
            kind,
            route,
            method,
            status or default_status,
            count,
            until,
            delay,
            retry_after,
            exception,
        )
        self._next += 1
        self._faults.append(fault)
        return fault

    def match(self, method: str, route: str, now: float) -> list[Fault]:
        """Active faults for this request, consuming one use of each."""
        hits = [f for f in self._faults if f.matches(method, route, now)]
        for f in hits:
            f.hits += 1
        return hits

    def remove(self, fault_id: int) -> bool:
        before = len(self._faults)
        self._faults = [f for f in self._faults if f.id != fault_id]
        return len(self._faults) != before

    def clear(self) -> None:
        self._faults.clear()

    def all(self) -> list[Fault]:
        return list(self._faults)
