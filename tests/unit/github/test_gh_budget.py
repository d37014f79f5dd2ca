"""The client-side rate budget (G8): GitHub's points, priorities, and waiting out a limit
instead of retrying into it. Time is the event loop's (looptime): no real sleeps."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gharc.github import errors as gherrors
from gharc.github.breaker import BreakerRegistry
from gharc.github.budget import BudgetPolicy, Priority, RateBudget, cost_of, priority_of
from gharc.github.metrics import GitHubMetrics
from gharc.github.transport import CONTROLLER_RETRY, RetryPolicy, Sender, make_http_client

BASE = "http://127.0.0.1:9"
JIT = "/_apis/runtime/runnerscalesets/{id}/generatejitconfig"
AGENTS = "/_apis/distributedtask/pools/0/agents"
SCALE_SET = "/repos/{owner}/{repo}/actions/runner-groups"
RUNNERS = "/orgs/{org}/actions/runners"  # REST: the runner list (cleanup, LOW)
REGISTRATION = "/orgs/{org}/actions/runners/registration-token"  # REST, HIGH


def test_points_and_priorities_follow_github() -> None:
    assert (cost_of("GET"), cost_of("POST"), cost_of("DELETE")) == (1, 5, 5)
    assert cost_of("POST", JIT) == 0  # the Actions service: not REST's points
    assert priority_of("POST", JIT) is Priority.HIGH
    assert priority_of("POST", "/repos/{owner}/{repo}/actions/runners/registration-token") is (
        Priority.HIGH
    )
    assert priority_of("GET", "{messageQueueUrl}") is Priority.HIGH
    assert priority_of("GET", AGENTS) is Priority.LOW
    assert priority_of("DELETE", AGENTS + "/{id}") is Priority.LOW
    assert priority_of("PATCH", SCALE_SET) is Priority.NORMAL


def test_low_priority_stops_first_high_spends_the_rest() -> None:
    now = [0.0]
    budget = RateBudget("gh", BudgetPolicy(points=20, per=20), lambda: now[0])
    spent = {p: 0 for p in Priority}
    for p in (Priority.LOW, Priority.NORMAL, Priority.HIGH):
        while True:
            try:
                budget.take(p, 1)
            except gherrors.RateLimited:
                break
            spent[p] += 1
    # LOW leaves half to the others, NORMAL a fifth to HIGH, HIGH takes what is left.
    assert spent == {Priority.LOW: 10, Priority.NORMAL: 6, Priority.HIGH: 4}
    with pytest.raises(gherrors.RateLimited) as err:
        budget.take(Priority.LOW, 5)
    assert err.value.until == 15.0  # refills at 1 point/s until 10 + 5 are there


def _sender(
    registry: BreakerRegistry, policy: RetryPolicy, answers: list[httpx.Response], sent: list[str]
) -> Sender:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        return answers.pop(0) if answers else httpx.Response(200, json={})

    client = make_http_client(
        metrics=GitHubMetrics(CollectorRegistry()),
        scope="test",
        user_agent="test",
        transport=httpx.MockTransport(handler),
    )
    loop = asyncio.get_running_loop()
    return Sender(client, policy=policy, clock=loop.time, breakers=registry, identity="pat")


@pytest.mark.looptime
async def test_listener_waits_for_the_budget_instead_of_sending() -> None:
    """Writes cost 5 of 10 points (refilled 1/s): the third write waits 2 s of loop time
    for the refill (NORMAL keeps 2 points back), and is sent once, after the wait."""
    loop = asyncio.get_running_loop()
    registry = BreakerRegistry(clock=loop.time, budget=BudgetPolicy(points=10, per=10))
    sent: list[str] = []
    sender = _sender(registry, RetryPolicy(), [], sent)
    start = loop.time()
    for _ in range(2):
        await sender.send("PATCH", f"{BASE}/x", endpoint=SCALE_SET)
    assert loop.time() - start == pytest.approx(2.0)
    assert len(sent) == 2


@pytest.mark.looptime
async def test_exhausted_quota_holds_every_call_of_the_credential() -> None:
    """403 with Remaining 0 and a reset in 100 s: any REST call of the credential waits,
    the Actions service's (another service, another limit) does not."""
    loop = asyncio.get_running_loop()
    registry = BreakerRegistry(clock=loop.time)
    sent: list[str] = []
    reset = loop.time() + 100
    headers = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0"}
    headers["X-RateLimit-Reset"] = str(reset)
    exhausted = httpx.Response(403, headers=headers, json={"message": "API rate limit exceeded"})
    controller = _sender(registry, CONTROLLER_RETRY, [exhausted], sent)
    assert (await controller.send("GET", f"{BASE}/runners", endpoint=RUNNERS)).status_code == 403
    with pytest.raises(gherrors.RateLimited) as err:
        await controller.send("POST", f"{BASE}/token", endpoint=REGISTRATION)
    assert err.value.until == pytest.approx(reset + 1)
    assert len(sent) == 1
    await controller.send("POST", f"{BASE}/jit", endpoint=JIT)
    assert sent == ["GET /runners", "POST /jit"]


@pytest.mark.looptime
async def test_primary_quota_low_keeps_cleanup_back_until_the_reset() -> None:
    """GitHub says 8 of 100 calls are left this hour: a LOW call (runner list) waits for
    the reset (it leaves the last 10 %), a HIGH one (registration token) goes."""
    loop = asyncio.get_running_loop()
    registry = BreakerRegistry(clock=loop.time)
    sent: list[str] = []
    reset = loop.time() + 600
    headers = {
        "X-RateLimit-Limit": "100",
        "X-RateLimit-Remaining": "8",
        "X-RateLimit-Reset": str(reset),
    }
    sender = _sender(registry, CONTROLLER_RETRY, [httpx.Response(200, headers=headers)], sent)
    await sender.send("GET", f"{BASE}/scale-set", endpoint=SCALE_SET)
    with pytest.raises(gherrors.RateLimited) as err:
        await sender.send("GET", f"{BASE}/runners", endpoint=RUNNERS)
    assert err.value.until == reset
    await sender.send("POST", f"{BASE}/token", endpoint=REGISTRATION)
    assert sent == ["GET /scale-set", "POST /token"]


def test_circuit_open_gauge_per_host() -> None:
    now = [0.0]
    registry = BreakerRegistry(clock=lambda: now[0])
    breaker = registry.for_url("https://api.github.com/x", "pat")
    registry.for_url("https://ghes.example/x", "pat")
    for _ in range(5):
        breaker.acquire()
        breaker.release(False)
    [family] = list(registry.collect())
    values = {(s.labels["host"], s.labels["endpoint_class"]): s.value for s in family.samples}
    assert family.name == "gharc_github_circuit_open"
    assert values == {("api.github.com", "other"): 1, ("ghes.example", "other"): 0}


def test_message_long_polls_take_no_probe_slot() -> None:
    """Half-open after an outage, idle listeners' long polls (up to 50 s each) must not
    fill the probe slots their class's other calls (message deletions) need."""
    now = [0.0]
    registry = BreakerRegistry(clock=lambda: now[0])
    breaker = registry.for_call("https://pipelines.example/x", "pat", "GET", "{messageQueueUrl}")
    for _ in range(5):
        breaker.acquire()
        breaker.release(False)
    now[0] = breaker.reopen_at + 2  # half-open, past the priority grace
    polls = [breaker.admit("GET", "{messageQueueUrl}") for _ in range(3)]
    assert polls == [False, False, False] and breaker.in_flight == 0
    assert breaker.admit("DELETE", "{messageQueueUrl}/{message_id}") is True  # still probes
    breaker.release(True)
    for slot in polls:
        breaker.release(None, slot=slot)
    assert not breaker.is_open and breaker.in_flight == 0


@pytest.mark.parametrize("priority", [Priority.HIGH, Priority.NORMAL, Priority.LOW])
def test_actions_service_calls_neither_spend_nor_wait_for_the_rest_quota(
    priority: Priority,
) -> None:
    """The Actions service is not REST: its calls cost no points and do not count against
    the hour's REST quota. Counting them drained a 5,000 quota in a 1,000-job run, and then
    every JIT config waited an hour with runners needed (the bench's 0 -> 400 burst stopped
    at 48 pods)."""
    now = [0.0]
    budget = RateBudget("gh", BudgetPolicy(points=20, per=20), lambda: now[0])
    budget.observe(
        {"x-ratelimit-remaining": "300", "x-ratelimit-limit": "5000", "x-ratelimit-reset": "3600"},
        None,
        sent_at=0.0,
    )
    for _ in range(5000):
        budget.take(priority, cost_of("POST", JIT))
    assert budget.remaining == 300
    budget.take(Priority.HIGH, cost_of("POST", REGISTRATION))
    assert budget.remaining == 299  # a REST call still counts
    with pytest.raises(gherrors.RateLimited):  # and REST's low quota still holds cleanup back
        budget.take(Priority.LOW, cost_of("GET", RUNNERS))
