"""The credentials Secret: read once per TTL, past it answered at once and read afresh beside
the caller, and read again at once when GitHub rejects the token it holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from _erworld import SECRET_NAME, World, world_fixture

from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.github.pool import ClientPool
from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient
from gharc.kube.resources import SECRETS
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

SECRET = "creds"


class _GatedSecretReads:
    """The controller's Kubernetes client; Secret reads are counted and wait for ``gate``."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube
        self.secret_gets = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def get(self, resource: Any, name: str, **kwargs: Any) -> Any:
        if resource == SECRETS:
            self.secret_gets += 1
            await self.gate.wait()
        return await self._kube.get(resource, name, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)


@pytest.fixture
async def kube(kubeconfig: str, namespace: str) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_config(kubeconfig=kubeconfig)
    await client.create(
        SECRETS,
        {"metadata": {"name": SECRET, "namespace": namespace}, "stringData": {"token": "v1"}},
    )
    try:
        yield client
    finally:
        await client.close()


async def _rotate(kube: KubeClient, namespace: str, value: str) -> None:
    await kube.merge_patch(SECRETS, SECRET, {"stringData": {"token": value}}, namespace=namespace)


async def test_an_expired_read_is_answered_at_once_and_read_afresh_beside_the_caller(
    kube: KubeClient, namespace: str
) -> None:
    now = [1000.0]
    reads = _GatedSecretReads(kube)
    pool = ClientPool()
    resolver = ClientResolver(
        cast(Any, reads), pool, secret_ttl=30, secret_stale_limit=600, clock=lambda: now[0]
    )
    try:
        assert (await resolver.secret_data(namespace, SECRET))["token"] == "v1"
        await _rotate(kube, namespace, "v2")
        now[0] += 10
        assert (await resolver.secret_data(namespace, SECRET))["token"] == "v1"
        assert reads.secret_gets == 1, "a read within the TTL went to the API server"

        # Past the TTL: the API server is slow; the caller does not wait for it.
        now[0] += 25
        reads.gate.clear()
        for _ in range(3):
            data = await asyncio.wait_for(resolver.secret_data(namespace, SECRET), 10)
            assert data["token"] == "v1"
        assert reads.secret_gets == 2, "one read afresh, however many callers found it old"
        reads.gate.set()
        await resolver.settled()
        assert (await resolver.secret_data(namespace, SECRET))["token"] == "v2"
        assert reads.secret_gets == 2

        # Past the stale limit the caller waits for the read.
        await _rotate(kube, namespace, "v3")
        now[0] += 601
        assert (await resolver.secret_data(namespace, SECRET))["token"] == "v3"
        assert reads.secret_gets == 3

        # A deleted Secret is served once more, then forgotten.
        await kube.delete(SECRETS, SECRET, namespace=namespace)
        now[0] += 31
        assert (await resolver.secret_data(namespace, SECRET))["token"] == "v3"
        await resolver.settled()
        with pytest.raises(kerrors.NotFound):
            await resolver.secret_data(namespace, SECRET)
    finally:
        await resolver.aclose()
        await pool.aclose()


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


async def test_a_rotated_token_is_read_at_the_first_401_not_after_the_ttl(world: World) -> None:
    """The token in the Secret is replaced and the old one revoked while the controller still
    holds the old one (within its 30 s TTL): the next registration fails once with 401 and
    its retry reads the Secret afresh, instead of failing until the TTL runs out."""
    await world.create_ers(replicas=1, patch_id=1)
    await world.wait_runners(1)
    st = world.gh.state
    old = world.gh.token
    new = st.create_pat()
    await world.kube.merge_patch(
        SECRETS, SECRET_NAME, {"stringData": {"github_token": new}}, namespace=world.namespace
    )
    st.revoke_token(old)
    st.expire("admin")
    st.expire("registration")
    world.gh.reset_calls()
    await world.scale(2, 2)

    async def registered() -> bool:
        runners = await world.runners()
        return len([r for r in runners if (r.get("status") or {}).get("runnerId")]) == 2

    await eventually(registered, timeout=25, message="the second runner registered")
    # One attempt is three rejected calls: the JIT request with the expired admin token, the
    # token exchange with the revoked PAT and its forced retry.
    rejected = world.gh.calls("*", status=401)
    assert 1 <= rejected <= 3, f"{rejected} calls were rejected with the revoked token"
