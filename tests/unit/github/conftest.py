"""Fixtures for client tests: a fake GitHub on 127.0.0.1, isolated metrics, a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from gh_helpers import FAST_RETRY, ClientFactory
from prometheus_client import CollectorRegistry

from gharc.github import ActionsClient, GitHubMetrics, PersonalAccessToken
from gharc.github.auth import Credentials
from gharc.github.config import parse_config_url
from testworld.sim.github import FakeGitHubServer


@pytest.fixture
async def gh() -> AsyncIterator[FakeGitHubServer]:
    async with FakeGitHubServer(poll_timeout=0.5) as server:
        yield server
        assert server.state.unhandled_errors == 0, "the fake hit its last-resort 500"


@pytest.fixture
def metrics() -> GitHubMetrics:
    return GitHubMetrics(CollectorRegistry())


@pytest.fixture
async def make_client(gh: FakeGitHubServer, metrics: GitHubMetrics) -> AsyncIterator[ClientFactory]:
    made: list[ActionsClient] = []

    def make(
        config_url: str | None = None, credentials: Credentials | None = None, **kw: object
    ) -> ActionsClient:
        kw.setdefault("retry", FAST_RETRY)
        kw.setdefault("metrics", metrics)
        client = ActionsClient(
            parse_config_url(config_url or gh.config_url()),
            credentials or PersonalAccessToken(gh.token),
            **kw,  # type: ignore[arg-type]
        )
        made.append(client)
        return client

    yield make
    for c in made:
        await c.aclose()


@pytest.fixture
def client(make_client: ClientFactory) -> ActionsClient:
    return make_client()
