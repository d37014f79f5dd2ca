"""The (host, credential, endpoint class) circuit breaker (issue 19 §4, issue 28 §7): during a
GitHub outage every caller of that host shares one backoff, instead of each pending runner
retrying on its own (164 JIT config calls in 30 s of 503s for ten runners), and a success
on another endpoint does not end a JIT config outage's backoff. Time is an injected clock."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gharc.github import errors as gherrors
from gharc.github.breaker import BreakerPolicy, BreakerRegistry, CircuitBreaker
from gharc.github.metrics import GitHubMetrics
from gharc.github.transport import CONTROLLER_RETRY, Sender, make_http_client

POLICY = BreakerPolicy(threshold=3, base=2.0, cap=10.0, probes=2, priority_grace=1.0)
HOST = "http://127.0.0.1:9"
JIT_ENDPOINT = "/_apis/runtime/runnerscalesets/{id}/generatejitconfig"
JIT_URL = f"{HOST}/_apis/runtime/runnerscalesets/1/generatejitconfig"
LIST_ENDPOINT = "/_apis/runtime/runnerscalesets/{id}"
LIST_URL = f"{HOST}/_apis/runtime/runnerscalesets/1"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _breaker(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker("GitHub test", POLICY, clock)


def _fail(breaker: CircuitBreaker, n: int) -> None:
    for _ in range(n):
        breaker.acquire()
        breaker.release(False)


def test_opens_after_threshold_consecutive_failures() -> None:
    clock = Clock()
    b = _breaker(clock)
    _fail(b, 2)
    b.acquire()  # two failures: still closed
    b.release(False)
    with pytest.raises(gherrors.CircuitOpen) as exc:
        b.acquire(priority=True)
    assert exc.value.until == 1002.0
    assert b.is_open


def test_a_success_between_failures_resets_the_count() -> None:
    b = _breaker(Clock())
    _fail(b, 2)
    b.acquire()
    b.release(True)
    _fail(b, 2)
    b.acquire()  # 2 + 2 failures, but not in a row
    b.release(None)


def test_rejects_until_reopen_and_non_priority_waits_the_grace() -> None:
    clock = Clock()
    b = _breaker(clock)
    _fail(b, 3)
    clock.now = 1001.9
    with pytest.raises(gherrors.CircuitOpen) as plain:
        b.acquire()
    assert plain.value.until == 1003.0  # reopen (1002) + grace: JIT and acquire go first
    clock.now = 1002.0
    b.acquire(priority=True)  # a priority probe is let through at reopen
    with pytest.raises(gherrors.CircuitOpen):
        b.acquire()  # others still wait the grace
    clock.now = 1003.0
    b.acquire()  # second probe slot
    with pytest.raises(gherrors.CircuitOpen) as full:
        b.acquire(priority=True)
    assert full.value.until == 1004.0  # probes in flight: back after the grace


def test_failed_probe_reopens_for_a_longer_window_capped() -> None:
    clock = Clock()
    b = _breaker(clock)
    _fail(b, 3)
    windows = []
    for _ in range(5):
        clock.now = b.reopen_at
        start = clock.now
        b.acquire(priority=True)
        b.release(False)  # one failed probe is enough to reopen
        windows.append(b.reopen_at - start)
    assert windows == [4.0, 8.0, 10.0, 10.0, 10.0]


def test_any_answer_below_500_closes_it() -> None:
    clock = Clock()
    b = _breaker(clock)
    _fail(b, 3)
    clock.now = b.reopen_at
    b.acquire(priority=True)
    b.release(True)  # e.g. a 404 or a 429: the host answered
    assert not b.is_open and b.opened == 0
    for _ in range(5):
        b.acquire()  # closed: no probe limit
    # and the next outage starts from the shortest window again
    for _ in range(5):
        b.release(None)
    _fail(b, 3)
    assert b.reopen_at == clock.now + 2.0


def test_a_straggler_failing_during_the_window_does_not_extend_it() -> None:
    clock = Clock()
    b = _breaker(clock)
    b.acquire()  # admitted while closed, answers late
    _fail(b, 3)
    clock.now = 1001.0
    b.release(False)
    assert b.reopen_at == 1002.0


def test_a_cancelled_call_releases_its_slot() -> None:
    clock = Clock()
    b = _breaker(clock)
    _fail(b, 3)
    clock.now = 1003.0
    b.acquire(priority=True)
    b.acquire(priority=True)
    b.release(None)  # cancelled: nothing learnt, the slot is free again
    assert b.is_open is False and b.opened == 1
    b.acquire(priority=True)


def test_registry_shares_one_breaker_per_host_credential_and_class() -> None:
    reg = BreakerRegistry(POLICY, clock=Clock())
    a = reg.for_call(JIT_URL, "cred-a", "POST", JIT_ENDPOINT)
    assert reg.for_call(JIT_URL.replace("/1/", "/7/"), "cred-a", "POST", JIT_ENDPOINT) is a
    stats = reg.for_call(LIST_URL, "cred-a", "GET", LIST_ENDPOINT)
    assert stats is not a and stats.budget is a.budget  # one rate budget per credential
    assert reg.for_call("http://127.0.0.1:10/x", "cred-a", "POST", JIT_ENDPOINT) is not a
    other = reg.for_call(JIT_URL, "cred-b", "POST", JIT_ENDPOINT)
    assert other is not a and other.budget is not a.budget


# -- the Sender ------------------------------------------------------------------------------


def _sender(
    handler: httpx.MockTransport, reg: BreakerRegistry, slept: list[float], clock: Clock
) -> Sender:
    client = make_http_client(
        metrics=GitHubMetrics(CollectorRegistry()),
        scope="test",
        user_agent="test",
        transport=handler,
    )

    async def sleep(seconds: float) -> None:
        slept.append(seconds)  # the clock stands still: every attempt is in one instant

    return Sender(
        client, policy=CONTROLLER_RETRY, sleep=sleep, clock=clock, breakers=reg, identity="c"
    )


async def test_sender_503_storm_stops_at_the_breaker() -> None:
    """Ten callers of a host answering 503: the breaker opens after three failures and
    every later attempt fails fast, instead of 10 x 5 attempts."""
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return httpx.Response(503, json={"message": "down"})

    sender = _sender(httpx.MockTransport(handler), reg, [], clock)
    rejected = 0
    for _ in range(10):
        try:
            await sender.send("POST", JIT_URL, endpoint=JIT_ENDPOINT)
        except gherrors.CircuitOpen as exc:
            rejected += 1
            assert exc.until == clock.now + 2.0 and exc.method == "POST"
    assert len(sent) == 3 and rejected == 10


async def test_sender_priority_probe_first_then_everyone_once_it_answers() -> None:
    """Both classes failed: at the reopening a JIT config probes, a statistics read waits
    the grace, then goes too."""
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    status = [503]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status[0], json={})

    sender = _sender(httpx.MockTransport(handler), reg, [], clock)
    with pytest.raises(gherrors.CircuitOpen):
        await sender.send("GET", LIST_URL, endpoint=LIST_ENDPOINT)
    with pytest.raises(gherrors.CircuitOpen):
        await sender.send("POST", JIT_URL, endpoint=JIT_ENDPOINT)
    clock.now = reg.for_call(LIST_URL, "c", "GET", LIST_ENDPOINT).reopen_at
    status[0] = 200
    with pytest.raises(gherrors.CircuitOpen):
        await sender.send("GET", LIST_URL, endpoint=LIST_ENDPOINT)
    assert (await sender.send("POST", JIT_URL, endpoint=JIT_ENDPOINT)).status_code == 200
    clock.now += POLICY.priority_grace
    assert (await sender.send("GET", LIST_URL, endpoint=LIST_ENDPOINT)).status_code == 200


async def test_sender_cancelled_call_frees_its_probe_slot() -> None:
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    breaker = reg.for_call(JIT_URL, "c", "POST", JIT_ENDPOINT)
    _fail(breaker, 3)
    clock.now = breaker.reopen_at
    started = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.Event().wait()  # never answers
        raise AssertionError

    sender = _sender(httpx.MockTransport(handler), reg, [], clock)
    task = asyncio.create_task(sender.send("POST", JIT_URL, endpoint=JIT_ENDPOINT))
    await started.wait()
    assert breaker.in_flight == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert breaker.in_flight == 0 and breaker.opened == 1
