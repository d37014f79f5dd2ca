"""Scale down spares runners that have not come online yet (ARC #3581, #3516, #3816)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from _erworld import World, make_world

from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    w, close = await make_world(kubeconfig, namespace)  # default start-up timeout: 10 min
    try:
        yield w
    finally:
        await close()


@pytest.fixture
async def short_world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    w, close = await make_world(kubeconfig, namespace, runner_startup_timeout=6.0)
    try:
        yield w
    finally:
        await close()


async def _names(world: World) -> set[str]:
    return {r["metadata"]["name"] for r in await world.runners(include_deleting=True)}


async def test_scale_down_keeps_a_runner_until_it_is_online(world: World) -> None:
    await world.create_ers()
    await world.scale(2, 1)
    online, pending = await world.wait_runners(2)
    await world.run_pod(online["metadata"]["name"])
    # The pending runner's pod waits for a node; the job it was made for may be on its way.
    await world.scale(0, 0)

    async def only_pending_left() -> bool:
        return await _names(world) == {pending["metadata"]["name"]}

    await eventually(only_pending_left, timeout=20, message="the online idle runner retired")
    for _ in range(20):
        assert await only_pending_left(), "a runner that is not online yet was scaled down"
        await asyncio.sleep(0.1)
    assert pending["status"]["runnerId"] in world.registered()
    # Online now, and idle: the normal rule applies.
    await world.run_pod(pending["metadata"]["name"])
    await eventually(
        lambda: _empty(world), timeout=20, message="runner scaled down once it came online"
    )
    assert pending["status"]["runnerId"] not in world.registered()


async def test_a_runner_never_online_goes_after_the_startup_timeout(short_world: World) -> None:
    world = short_world
    await world.create_ers()
    await world.scale(1, 1)
    [stuck] = await world.wait_runners(1)
    await world.scale(0, 0)
    await asyncio.sleep(1)
    assert await _names(world) == {stuck["metadata"]["name"]}
    # No event comes when the timeout ends: the reconciler's own requeue brings it down.
    await eventually(lambda: _empty(world), timeout=20, message="stuck runner scaled down")
    assert world.registered() == set()


async def _empty(world: World) -> bool:
    return not await _names(world)
