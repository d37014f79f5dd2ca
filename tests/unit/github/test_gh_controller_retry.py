"""The controllers' retry policy: a rate limit beyond 2 s is raised with the time it lifts,
never slept out inside the call (issue 19 §4)."""

from __future__ import annotations

import httpx
import pytest
from gh_helpers import scripted_http_client

from gharc.github import errors as gherrors
from gharc.github.transport import (
    CONTROLLER_RETRY,
    RetryPolicy,
    Sender,
    error_from_response,
)

URL = "http://127.0.0.1:9/_apis/runtime/runnerscalesets/1/generatejitconfig"


def _sender(policy: RetryPolicy, responses: list[httpx.Response], slept: list[float]) -> Sender:
    def handler(request: httpx.Request) -> httpx.Response:
        return responses.pop(0)

    client = scripted_http_client(handler)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return Sender(client, policy=policy, sleep=sleep, clock=lambda: 1000.0)


def _limited(retry_after: int) -> httpx.Response:
    return httpx.Response(429, headers={"Retry-After": str(retry_after)}, json={"message": "slow"})


async def test_controller_policy_returns_a_long_limit_at_once() -> None:
    slept: list[float] = []
    sender = _sender(CONTROLLER_RETRY, [_limited(30), httpx.Response(200)], slept)
    response = await sender.send("POST", URL, endpoint="jit")
    assert response.status_code == 429 and slept == []
    err = error_from_response(response, 1000.0)
    assert isinstance(err, gherrors.RateLimited) and err.until == 1030.0
    assert gherrors.retry_delay(err, 1000.0) == 30.0


async def test_controller_policy_waits_out_a_short_limit_once() -> None:
    slept: list[float] = []
    sender = _sender(CONTROLLER_RETRY, [_limited(1), httpx.Response(200)], slept)
    assert (await sender.send("POST", URL, endpoint="jit")).status_code == 200
    assert slept == [1.0]


@pytest.mark.parametrize("policy", [RetryPolicy()])
async def test_default_policy_still_waits_long_limits(policy: RetryPolicy) -> None:
    """The listener's long poll keeps waiting (its behaviour is unchanged)."""
    slept: list[float] = []
    sender = _sender(policy, [_limited(30), httpx.Response(200)], slept)
    assert (await sender.send("POST", URL, endpoint="jit")).status_code == 200
    assert slept == [30.0]
