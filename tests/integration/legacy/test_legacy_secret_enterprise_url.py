"""A legacy credentials Secret's ``github_enterprise_url`` is read like the controller's
``--github-enterprise-url``: with or without its ``/api/v3`` suffix (ARC hands it to
go-github's enterprise client, which accepts both), through the one normaliser
``gharc.github.config.server_url``."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest

from gharc.controllers.legacy.githubclients import LegacyGitHub, RunnerScope
from gharc.github.pool import ClientPool
from gharc.kube.client import KubeClient
from gharc.kube.resources import SECRETS
from testworld.sim.github import DEFAULT_ORG, DEFAULT_TOKEN, FakeGitHubServer

pytestmark = pytest.mark.cluster


@pytest.fixture
async def gh() -> AsyncIterator[FakeGitHubServer]:
    async with FakeGitHubServer(port=0, poll_timeout=1.0) as server:
        yield server


@pytest.mark.parametrize("suffix", ["", "/", "/api/v3", "/api/v3/"])
async def test_a_secrets_enterprise_url_works_with_or_without_api_v3(
    kubeconfig: str, namespace: str, gh: FakeGitHubServer, suffix: str
) -> None:
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    pool = ClientPool()
    try:
        data = {"github_token": DEFAULT_TOKEN, "github_enterprise_url": gh.url + suffix}
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        body = {"metadata": {"name": "creds", "namespace": namespace}, "data": encoded}
        await kube.create(SECRETS, body)
        github = LegacyGitHub(kube, pool, "https://github.com", None)
        client = await github.client(namespace, RunnerScope(organization=DEFAULT_ORG), "creds")
        assert await client.list_runners() == []
        assert gh.calls("*/actions/runners", method="GET") == 1
    finally:
        await pool.aclose()
        await kube.close()
