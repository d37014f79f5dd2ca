"""Issue 28 §7: a breaker per (host, credential, endpoint class), one rate budget per
(host, credential). During a JIT config outage the listeners' statistics reads and message
polls answered, closed the shared breaker, and it reopened every 2 s (111 JIT config calls
in 30 s of 503s); and one runner's 429 on its JIT config did not hold the other runners'.
Time is an injected clock; the senders' sleeps return at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gharc.github import errors as gherrors
from gharc.github.breaker import BreakerPolicy, BreakerRegistry
from gharc.github.budget import BudgetPolicy, Priority, RateBudget
from gharc.github.endpoint_class import EndpointClass, class_of
from gharc.github.metrics import GitHubMetrics
from gharc.github.transport import CONTROLLER_RETRY, Sender, make_http_client

POLICY = BreakerPolicy(threshold=3, base=2.0, cap=10.0, probes=2, priority_grace=1.0)
HOST = "http://127.0.0.1:9"
JIT = "/_apis/runtime/runnerscalesets/{id}/generatejitconfig"
JIT_URL = f"{HOST}/_apis/runtime/runnerscalesets/1/generatejitconfig"
STATS = "/_apis/runtime/runnerscalesets/{id}"
STATS_URL = f"{HOST}/_apis/runtime/runnerscalesets/1"
TOKEN = "/orgs/{org}/actions/runners/registration-token"
TOKEN_URL = f"{HOST}/orgs/o/actions/runners/registration-token"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeGitHub:
    """JIT configs answer ``jit`` (a status and headers); everything else 200."""

    def __init__(self) -> None:
        self.jit: tuple[int, dict[str, str]] = (503, {})
        self.sent: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        if request.url.path.endswith("/generatejitconfig"):
            status, headers = self.jit
            return httpx.Response(status, headers=headers, json={"message": "jit"})
        return httpx.Response(200, json={})

    def jit_calls(self) -> int:
        return sum(1 for s in self.sent if s.endswith("/generatejitconfig"))


def _sender(
    fake: Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]],
    reg: BreakerRegistry,
    clock: Clock,
) -> Sender:
    """One caller (a runner's reconcile, a listener) with the controllers' retry policy;
    ``fake`` may hold an answer back (a long poll, a slow probe)."""
    client = make_http_client(
        metrics=GitHubMetrics(CollectorRegistry()),
        scope="test",
        user_agent="test",
        transport=httpx.MockTransport(fake),
    )

    async def sleep(seconds: float) -> None:
        return None  # the clock stands still: every attempt is in one instant

    return Sender(
        client, policy=CONTROLLER_RETRY, sleep=sleep, clock=clock, breakers=reg, identity="c"
    )


def test_endpoint_classes_follow_the_clients_templates() -> None:
    assert class_of("POST", JIT) is EndpointClass.JIT_CONFIG
    assert class_of("POST", "/_apis/runtime/runnerscalesets/{id}/acquirejobs") == "acquire"
    assert class_of("GET", "{messageQueueUrl}") is EndpointClass.MESSAGE
    assert class_of("DELETE", "{messageQueueUrl}/{message_id}") is EndpointClass.MESSAGE
    sessions = "/_apis/runtime/runnerscalesets/{id}/sessions/{session_id}"
    assert class_of("PATCH", sessions) is EndpointClass.SESSION
    assert class_of("GET", STATS) is EndpointClass.STATISTICS
    assert class_of("PATCH", STATS) is EndpointClass.OTHER  # an update, not a read
    assert class_of("POST", TOKEN) is EndpointClass.REGISTRATION
    assert class_of("POST", "/actions/runner-registration") is EndpointClass.REGISTRATION
    assert class_of("GET", "/_apis/distributedtask/pools/0/agents") is EndpointClass.OTHER


async def test_a_statistics_success_does_not_close_an_open_jit_breaker() -> None:
    """JIT configs fail, statistics reads answer: after the JIT breaker's window a
    statistics read goes through first, and the JIT breaker stays half-open, so its next
    failed probe reopens it for a longer window (one JIT call, not another 3)."""
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    fake = FakeGitHub()
    runners = [_sender(fake, reg, clock) for _ in range(5)]
    listener = _sender(fake, reg, clock)
    with pytest.raises(gherrors.CircuitOpen):
        await runners[0].send("POST", JIT_URL, endpoint=JIT)
    assert fake.jit_calls() == 3
    jit_breaker = reg.for_call(JIT_URL, "c", "POST", JIT)
    assert jit_breaker.is_open
    clock.now = jit_breaker.reopen_at + POLICY.priority_grace  # half-open
    assert (await listener.send("GET", STATS_URL, endpoint=STATS)).status_code == 200
    failed_probe_window = None
    for runner in runners:
        try:
            await runner.send("POST", JIT_URL, endpoint=JIT)
        except gherrors.CircuitOpen as exc:
            failed_probe_window = (exc.until or 0.0) - clock.now
    assert fake.jit_calls() == 3 + 1, fake.sent
    assert failed_probe_window == 4.0  # the second window, not the first again
    [family] = list(reg.collect())
    opened = {s.labels["endpoint_class"]: s.value for s in family.samples}
    assert opened == {"jit_config": 1, "statistics": 0}


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "30"},
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Reset": "1029"},
    ],
    ids=["retry-after", "remaining-0"],
)
async def test_a_429_on_jit_holds_every_jit_caller_of_the_credential(
    headers: dict[str, str],
) -> None:
    """One runner's JIT config answers 429: every other runner of the credential waits
    until it lifts (30 s) instead of sending into the same limit, and then goes. The REST
    API (another service, another limit) is not held."""
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    fake = FakeGitHub()
    fake.jit = (429, headers)
    first, *others = [_sender(fake, reg, clock) for _ in range(5)]
    assert (await first.send("POST", JIT_URL, endpoint=JIT)).status_code == 429
    fake.jit = (201, {})
    for runner in others:
        with pytest.raises(gherrors.RateLimited) as held:
            await runner.send("POST", JIT_URL, endpoint=JIT)
        assert held.value.until == 1030.0
    assert fake.jit_calls() == 1
    assert (await first.send("POST", TOKEN_URL, endpoint=TOKEN)).status_code == 200
    clock.now = 1029.9
    with pytest.raises(gherrors.RateLimited):
        await others[0].send("POST", JIT_URL, endpoint=JIT)
    clock.now = 1030.0
    for runner in others:
        assert (await runner.send("POST", JIT_URL, endpoint=JIT)).status_code == 201
    assert fake.jit_calls() == 1 + len(others)


def test_one_call_probes_when_a_hold_lifts() -> None:
    """Every runner held by a 429 is requeued for the instant it lifts: one call goes, the
    others wait for its answer (at most the probe grace), not all into the next 429."""
    clock = Clock()
    budget = RateBudget("gh", BudgetPolicy(probe_grace=1.0), clock)
    budget.observe({"Retry-After": "4"}, 1004.0, "actions", sent_at=clock.now)
    clock.now = 1004.0
    budget.take(Priority.HIGH, 0, "actions")  # the probe
    with pytest.raises(gherrors.RateLimited) as wait:
        budget.take(Priority.HIGH, 0, "actions")
    assert wait.value.until == 1005.0
    budget.take(Priority.HIGH, 5, "rest")  # the other service is not held
    budget.observe({"Retry-After": "4"}, 1008.0, "actions", sent_at=1004.0)  # another 429
    clock.now = 1007.9
    with pytest.raises(gherrors.RateLimited):
        budget.take(Priority.HIGH, 0, "actions")
    clock.now = 1008.0
    budget.take(Priority.HIGH, 0, "actions")  # the next probe
    budget.observe({}, None, "actions", sent_at=1008.0)  # answered: everyone goes
    for _ in range(3):
        budget.take(Priority.HIGH, 0, "actions")
    budget.observe({"Retry-After": "2"}, 1010.0, "actions", sent_at=clock.now)
    clock.now = 1010.0
    budget.take(Priority.HIGH, 0, "actions")  # a probe that never answers (cancelled)
    clock.now = 1011.0
    budget.take(Priority.HIGH, 0, "actions")  # the grace is over: the others go
    budget.take(Priority.HIGH, 0, "actions")


def test_only_an_answer_sent_after_the_hold_lifts_releases_the_probe_wait() -> None:
    """A listener's long poll sent before a 429 answers while the probe is out: it says
    nothing about the limit, so the others keep waiting for the probe. When it released
    them, every pending runner followed into the next 429 whenever a poll returned."""
    clock = Clock()
    budget = RateBudget("gh", BudgetPolicy(probe_grace=1.0), clock)
    poll_sent = clock.now
    budget.observe({"Retry-After": "4"}, 1004.0, "actions", sent_at=clock.now)
    clock.now = 1004.0
    budget.take(Priority.HIGH, 0, "actions")  # the probe
    clock.now = 1004.2
    budget.observe({}, None, "actions", sent_at=poll_sent)  # the poll from before the hold
    with pytest.raises(gherrors.RateLimited) as wait:
        budget.take(Priority.HIGH, 0, "actions")
    assert wait.value.until == 1005.0
    budget.observe({}, None, "actions", sent_at=1004.0)  # the probe's own answer
    budget.take(Priority.HIGH, 0, "actions")


async def test_a_long_poll_from_before_a_hold_does_not_release_the_held_runners() -> None:
    """The same through the client: the poll's send time travels with its answer."""
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    poll_gate, probe_gate = asyncio.Event(), asyncio.Event()
    jit_status, probes = [429], []

    async def github(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/messages"):
            await poll_gate.wait()
            return httpx.Response(202)
        if jit_status[0] == 201 and not probes:
            probes.append(request)
            await probe_gate.wait()
        return httpx.Response(jit_status[0], headers={"Retry-After": "4"}, json={})

    listener, first, second = (_sender(github, reg, clock) for _ in range(3))
    poll = asyncio.create_task(
        listener.send("GET", f"{HOST}/_services/broker/s/messages", endpoint="{messageQueueUrl}")
    )
    await asyncio.sleep(0)
    assert (await first.send("POST", JIT_URL, endpoint=JIT)).status_code == 429
    clock.now = 1004.0
    jit_status[0] = 201
    probe = asyncio.create_task(first.send("POST", JIT_URL, endpoint=JIT))
    await asyncio.sleep(0.01)
    poll_gate.set()
    assert (await poll).status_code == 202
    with pytest.raises(gherrors.RateLimited):
        await second.send("POST", JIT_URL, endpoint=JIT)
    probe_gate.set()
    assert (await probe).status_code == 201
    assert (await second.send("POST", JIT_URL, endpoint=JIT)).status_code == 201


async def test_a_long_poll_does_not_become_the_probe_when_a_hold_lifts() -> None:
    """A listener's poll is often the first call once a 429's hold lifts. As the probe it
    would answer only when its long poll ends, so after the grace every held runner went
    at once and drew the next 429 (8 runners, 3 holds: 24 JIT calls instead of ~10)."""
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    poll_gate = asyncio.Event()
    jit_status = [429]

    async def github(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/messages"):
            await poll_gate.wait()
            return httpx.Response(202)
        return httpx.Response(jit_status[0], headers={"Retry-After": "4"}, json={})

    listener, first, second = (_sender(github, reg, clock) for _ in range(3))
    assert (await first.send("POST", JIT_URL, endpoint=JIT)).status_code == 429
    clock.now = 1004.0
    poll = asyncio.create_task(
        listener.send("GET", f"{HOST}/_services/broker/s/messages", endpoint="{messageQueueUrl}")
    )
    await asyncio.sleep(0.01)
    assert (await first.send("POST", JIT_URL, endpoint=JIT)).status_code == 429  # the probe
    clock.now = 1005.5  # past the probe grace, the poll still out
    with pytest.raises(gherrors.RateLimited):  # the probe's 429 holds it until 1008
        await second.send("POST", JIT_URL, endpoint=JIT)
    poll_gate.set()
    assert (await poll).status_code == 202


async def test_only_the_limited_endpoint_probes_when_a_hold_lifts() -> None:
    """A 429 on JIT configs holds the whole Actions service, but a statistics read that
    answers 200 once it lifts says nothing about the JIT configs' limit (GitHub's
    secondary limits are by kind of call). As the probe it released every held runner at
    once, each into the next 429 (7 of 8 in one CI run); now it goes without being the
    probe, and the runners wait for a JIT config's answer."""
    clock = Clock()
    reg = BreakerRegistry(POLICY, clock=clock)
    jit_gate = asyncio.Event()
    jit_calls: list[float] = []

    async def github(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/generatejitconfig"):
            jit_calls.append(clock.now)
            if len(jit_calls) == 2:  # the probe: answered when the test says
                await jit_gate.wait()
            return httpx.Response(429, headers={"Retry-After": "4"}, json={})
        return httpx.Response(200, json={})

    listener, first, second = (_sender(github, reg, clock) for _ in range(3))
    assert (await first.send("POST", JIT_URL, endpoint=JIT)).status_code == 429
    clock.now = 1004.0
    assert (await listener.send("GET", STATS_URL, endpoint=STATS)).status_code == 200
    probe = asyncio.create_task(first.send("POST", JIT_URL, endpoint=JIT))
    await asyncio.sleep(0.01)  # the probe is out, unanswered
    with pytest.raises(gherrors.RateLimited):
        await second.send("POST", JIT_URL, endpoint=JIT)
    jit_gate.set()
    assert (await probe).status_code == 429
    assert len(jit_calls) == 2
