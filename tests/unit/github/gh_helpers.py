"""Helpers shared by the client tests (imported by name: tests are not a package)."""

from __future__ import annotations

from collections.abc import Callable

from gharc.github import ActionsClient, RetryPolicy

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
