"""Fixtures for the fake GitHub's own tests: the server and a raw httpx client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sim_helpers import Raw

from testworld.sim.github import FakeGitHubServer


@pytest.fixture
async def gh() -> AsyncIterator[FakeGitHubServer]:
    async with FakeGitHubServer(poll_timeout=0.3) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
        yield client


@pytest.fixture
async def raw(gh: FakeGitHubServer, http: httpx.AsyncClient) -> Raw:
    r = Raw(gh, http)
    await r.connect()
    return r
