"""Rate limiters for the work queue and the client, with client-go's semantics and numbers.

A controller's failure backoff must be per item (one broken object must not slow the
others) *and* bounded overall (a thousand objects failing at once must not turn into a
thousand requests per second). client-go's default controller limiter is the maximum of
the two: per-item exponential 5 ms doubling to 1000 s, and a 10 qps / burst 100 token
bucket. We reproduce exactly that, because operators have tuned alerts around it.

Hand-written because no asyncio library offers these as reusable parts (see
shared/spec/python-ecosystem.md section 4).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from gharc.kube.clock import Clock, LoopClock
from gharc.kube.turns import TurnQueue

__all__ = [
    "BucketRateLimiter",
    "FairTokenBucket",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "TokenBucket",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """Decides how long an item waits before its next attempt."""

    def when(self, item: T_contra) -> float:
        """Seconds to wait before retrying ``item``; counts this as one more failure."""
        ...

    def forget(self, item: T_contra) -> None:
        """The item succeeded: its next failure starts the backoff from the beginning."""
        ...

    def num_requeues(self, item: T_contra) -> int: ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base_delay * 2**failures`` per item, capped at ``max_delay``."""

    def __init__(self, *, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= 64:  # NB: 2**64 * 5 ms is far past any cap; skip the float overflow risk.
            return self.max_delay
        return min(self.base_delay * (2**exp), self.max_delay)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class TokenBucket:
    """Go's ``rate.Limiter`` reservation model: tokens refill at ``qps`` up to ``burst``.

    ``reserve()`` never blocks; it takes a token (possibly going into debt) and returns how
    long the caller must wait for it, so concurrent callers are spaced ``1/qps`` apart.
    """

    def __init__(self, *, qps: float, burst: int, clock: Clock | None = None) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError("qps and burst must be positive")
        self.qps = qps
        self.burst = burst
        self._clock = clock or LoopClock()
        self._tokens = float(burst)
        self._last: float | None = None

    def _refill(self) -> None:
        """Add the tokens earned since the last look, up to ``burst``."""
        now = self._clock.now()
        if self._last is not None:
            elapsed = max(0.0, now - self._last)
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
        self._last = now

    def reserve(self) -> float:
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> None:
        """Take a token, sleeping until it is due."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


_WHOLE = 1 - 1e-9
"""A token, give or take float rounding (0.1 s at 10 qps must make one, not 0.9999999)."""


class FairTokenBucket(TokenBucket):
    """A client-side QPS limit whose waiting callers are served in turn across keys.

    :class:`TokenBucket`'s tokens (``qps``, ``burst``; never in debt here), but when callers have to
    wait, the next token goes to the key whose turn it is (the KubeClient keys by namespace:
    one tenant), first-in-first-out within a key. With one shared FIFO a tenant's burst of
    400 runners (8,000 requests) put every other tenant's next request behind all of them:
    a 1 s job waited 53 s for its runner. Waiters hold no task: one timer serves them all.
    """

    def __init__(self, *, qps: float, burst: int, clock: Clock | None = None) -> None:
        super().__init__(qps=qps, burst=burst, clock=clock)
        self._waiting: TurnQueue[asyncio.Future[None]] = TurnQueue()
        self._timer: asyncio.TimerHandle | None = None

    async def wait(self, key: Hashable = None) -> None:
        """Take a token for ``key``, waiting for it (and for other keys' turns) if need be."""
        self._refill()
        if not self._waiting and self._tokens >= _WHOLE:
            self._tokens -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.push(key, waiter)
        self._schedule()
        await waiter  # a cancelled waiter is skipped when its turn comes

    def _schedule(self) -> None:
        if self._timer is not None or not self._waiting:
            return
        delay = max(0.001, (1 - self._tokens) / self.qps)  # a floor: rounding never spins
        self._timer = asyncio.get_running_loop().call_later(delay, self._release)

    def _release(self) -> None:
        self._timer = None
        self._refill()
        while self._waiting and self._tokens >= _WHOLE:
            waiter = self._waiting.pop()
            if waiter.done():
                continue  # cancelled while waiting: no token spent
            self._tokens -= 1
            waiter.set_result(None)
        self._schedule()


class BucketRateLimiter(Generic[T]):
    """An overall limit shared by all items; it keeps no per-item state."""

    def __init__(self, *, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self.bucket = TokenBucket(qps=qps, burst=burst, clock=clock)

    def when(self, item: T) -> float:
        return self.bucket.reserve()

    def forget(self, item: T) -> None:
        return None

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest wait any of the limiters asks for (each one still records the attempt)."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("at least one limiter")
        self.limiters = limiters

    def when(self, item: T) -> float:
        # NB: every limiter must see every attempt, so no short-circuiting max() over a generator.
        delays = [limiter.when(item) for limiter in self.limiters]
        return max(delays)

    def forget(self, item: T) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(*, clock: Clock | None = None) -> MaxOfRateLimiter[T]:
    """client-go's DefaultControllerRateLimiter: max(5 ms..1000 s per item, 10 qps, 100 burst)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay=0.005, max_delay=1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
