"""The rate budget against the fake GitHub (G8): with the hour's quota low, cleanup and
listings wait for the reset while runner registration goes on; at exhaustion every call
of the credential waits for the reset instead of being retried into the 403."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from gharc.github import errors as gherrors
from gharc.github.auth import PersonalAccessToken
from gharc.github.breaker import BreakerRegistry
from gharc.github.pool import ClientPool
from gharc.github.rest import RestClient
from gharc.github.transport import CONTROLLER_RETRY
from testworld.sim.github import FakeGitHubServer

REG_TOKEN = "*/actions/runners/registration-token"
LIST = "*/actions/runners"


@pytest.fixture
async def gh() -> AsyncIterator[FakeGitHubServer]:
    async with FakeGitHubServer(poll_timeout=0.5) as server:
        yield server


@pytest.fixture
async def rest(gh: FakeGitHubServer) -> AsyncIterator[RestClient]:
    """A REST client as the controllers build it: requeue on long limits, shared breakers."""
    pool = ClientPool(retry=CONTROLLER_RETRY, breakers=BreakerRegistry())
    yield pool.get_rest(gh.config_url(), PersonalAccessToken(gh.token))
    await pool.aclose()


async def test_low_quota_keeps_listings_back_and_registration_going(
    gh: FakeGitHubServer, rest: RestClient
) -> None:
    bucket = gh.state.pats[gh.token].bucket
    bucket.used = bucket.limit - bucket.limit // 12  # 8 % of the hour's quota left
    bucket.reset_at = time.time() + 600
    await rest.create_registration_token(force=True)  # learns Remaining from the answer
    with pytest.raises(gherrors.RateLimited) as err:
        await rest.list_runners()  # LOW: leaves the last 10 % of the quota to the others
    assert err.value.until == pytest.approx(bucket.reset_at, abs=1)
    assert gh.calls(LIST, method="GET") == 0  # never sent
    await rest.create_registration_token(force=True)  # HIGH: still goes
    assert gh.calls(REG_TOKEN, method="POST") == 2


async def test_exhausted_quota_is_waited_for_not_retried(
    gh: FakeGitHubServer, rest: RestClient
) -> None:
    await rest.create_registration_token(force=True)
    gh.state.exhaust_rate_limit(gh.token, reset_in=2.0)
    with pytest.raises(gherrors.RateLimited) as err:
        await rest.create_registration_token(force=True)
    until = err.value.until
    assert until is not None and until >= time.time() + 1
    limited = gh.calls(REG_TOKEN, method="POST", status=403)
    assert limited == 1
    # Until the reset nothing of this credential is sent, whatever its priority.
    for call in (rest.list_runners, lambda: rest.create_registration_token(force=True)):
        with pytest.raises(gherrors.RateLimited):
            await call()
    assert gh.calls(method="POST", status=403) + gh.calls(method="GET", status=403) == 1
    # After the reset (the controller requeues for ``until``) the call goes through.
    await asyncio.sleep(max(0.0, until - time.time()) + 0.1)
    await rest.create_registration_token(force=True)
    assert gh.calls(REG_TOKEN, method="POST", status=201) == 2
