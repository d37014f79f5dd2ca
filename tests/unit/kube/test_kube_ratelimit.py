"""Rate limiters: client-go's numbers, checked on a clock that moves only when told."""

from __future__ import annotations

import asyncio

import pytest

from gharc.kube.clock import FakeClock
from gharc.kube.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    TokenBucket,
    default_controller_rate_limiter,
)


def test_per_item_backoff_starts_at_5ms_and_doubles() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    assert [limiter.when("a") for _ in range(5)] == pytest.approx(
        [0.005, 0.010, 0.020, 0.040, 0.080]
    )


def test_per_item_backoff_is_capped_at_1000_seconds() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(200)]
    assert max(delays) == 1000.0
    assert delays[-1] == 1000.0
    assert delays.index(1000.0) == 18  # 5 ms * 2**18 = 1310 s > cap


def test_per_item_backoff_is_independent_per_item_and_reset_by_forget() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    for _ in range(3):
        limiter.when("a")
    assert limiter.when("b") == pytest.approx(0.005)
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_token_bucket_allows_the_burst_then_spaces_requests_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=100, clock=clock)
    assert all(bucket.reserve() == 0 for _ in range(100))
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)


def test_token_bucket_refills_with_time_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock)
    for _ in range(5):
        bucket.reserve()
    clock.advance(0.3)
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    assert bucket.reserve() > 0
    clock.advance(3600)
    assert sum(1 for _ in range(10) if bucket.reserve() == 0) == 5, "refill stops at burst"


def test_default_limiter_takes_the_longer_of_item_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock=clock)
    # Within the burst the per-item exponential decides.
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.when("a") == pytest.approx(0.010)
    for i in range(98):
        limiter.when(f"x{i}")
    # Burst exhausted: a fresh item still waits for the bucket (0.1 s > 5 ms).
    assert limiter.when("fresh") == pytest.approx(0.1)
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_bucket_limiter_keeps_no_per_item_state() -> None:
    limiter: BucketRateLimiter[str] = BucketRateLimiter(qps=1, burst=1, clock=FakeClock())
    limiter.when("a")
    assert limiter.num_requeues("a") == 0


@pytest.mark.looptime
async def test_a_fair_bucket_serves_waiting_keys_in_turn() -> None:
    """400 requests of team-a wait for tokens; team-b's one, asked for after them, is served
    second, not 401st; team-a's keep their order; the rate stays the bucket's."""
    from gharc.kube.ratelimit import FairTokenBucket

    bucket = FairTokenBucket(qps=10, burst=1)
    served: list[tuple[str, int, float]] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def request(key: str, i: int) -> None:
        await bucket.wait(key)
        served.append((key, i, loop.time() - start))

    burst = [asyncio.create_task(request("team-a", i)) for i in range(400)]
    await asyncio.sleep(0)
    other = asyncio.create_task(request("team-b", 0))
    await asyncio.gather(*burst, other)
    order = [(k, i) for k, i, _ in served]
    assert order[:4] == [("team-a", 0), ("team-a", 1), ("team-b", 0), ("team-a", 2)]
    assert [i for k, i in order if k == "team-a"] == list(range(400))
    assert served[-1][2] == pytest.approx(40.0, abs=0.2), "10 per second, 401 requests"


@pytest.mark.looptime
async def test_a_cancelled_waiter_spends_no_token() -> None:
    from gharc.kube.ratelimit import FairTokenBucket

    bucket = FairTokenBucket(qps=1, burst=1)
    await bucket.wait("a")  # the burst token
    gone = asyncio.create_task(bucket.wait("a"))
    kept = asyncio.create_task(bucket.wait("b"))
    await asyncio.sleep(0)
    gone.cancel()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await kept
    assert loop.time() - start == pytest.approx(1.0, abs=0.05)
