"""The time source of queues, rate limiters and leases: a seam for tests.

Everything in gharc.kube measures durations on the event loop's monotonic clock, so wall
clock jumps (NTP, suspended VMs) can neither expire a lease early nor stall a backoff, and
``looptime`` can fast-forward all of it in unit tests without patching anything.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "LoopClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale; only differences are meaningful."""
        ...


class LoopClock:
    """The running loop's ``time()`` (monotonic); ``time.monotonic()`` outside a loop."""

    def now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()


class FakeClock:
    """A clock that moves only when told; for rate-limiter tests that need no loop."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
