"""Helpers shared by the client tests (imported by name: tests are not a package)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from prometheus_client import CollectorRegistry

from gharc.github import ActionsClient, RetryPolicy
from gharc.github.metrics import GitHubMetrics
from gharc.github.transport import make_http_client

FAST_RETRY = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.005)


class FakeTime:
    """A clock and a sleep that only move when the code under test sleeps."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[float], None] | None = None

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(seconds)


ClientFactory = Callable[..., ActionsClient]


def scripted_http_client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.AsyncClient:
    """The clients' HTTP client (metered, as they build it) over a scripted transport."""
    return make_http_client(
        metrics=GitHubMetrics(CollectorRegistry()),
        scope="test",
        user_agent="test",
        transport=httpx.MockTransport(handler),
    )
