"""A runner that never registers: graceful stop waits for it up to the registration timeout,
then it is replaced and removed without any RemoveRunner call (legacy.md 4.5 rules 2/5,
4.6 ``regTimeout``; B5)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_runner_world import World, until, world_fixture

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNERS
from gharc.kube.resources import PODS

pytestmark = pytest.mark.cluster

TIMEOUT = 4.0


@pytest.fixture
async def world(kubeconfig: str, namespace: str, api_client: Any) -> AsyncIterator[World]:
    async for w in world_fixture(
        kubeconfig, namespace, api_client, registration_timeout=dt.timedelta(seconds=TIMEOUT)
    ):
        yield w


async def test_an_unregistered_runner_is_replaced_after_the_registration_timeout(
    world: World,
) -> None:
    world.register_runners = False
    await world.create_deployment(replicas=1, ephemeral=False)

    async def running() -> list[dict[str, Any]] | None:
        pods = await world.pods()
        ok = len(pods) == 1 and (pods[0].get("status") or {}).get("phase") == "Running"
        return pods if ok else None

    [stuck] = await until(running, timeout=30, message="first pod running")
    stuck_name = stuck["metadata"]["name"]
    stuck_runner = await world.kube.get(RUNNERS, stuck_name, namespace=world.namespace)
    world.register_runners = True  # runners created from now on register normally
    await asyncio.sleep(TIMEOUT / 2)
    # Before the timeout nothing is replaced: the runner may still be registering.
    assert [r["metadata"]["name"] for r in await world.runners()] == [stuck_name]

    async def replaced() -> list[dict[str, Any]] | None:
        pods = await world.pods()
        names = {x["metadata"]["name"] for x in pods}
        registered = [
            x for x in pods if c.ANNOTATION_RUNNER_ID in (x["metadata"].get("annotations") or {})
        ]
        gone = await world.orphaned(PODS, stuck_name, stuck_runner)
        return pods if gone and stuck_name not in names and len(registered) == 1 else None

    await until(replaced, timeout=TIMEOUT + 30, interval=0.2, message="replacement")
    assert len(await world.runners()) == 1
    # The garbage collector would delete the orphaned pod now; deleting it here runs its
    # finalizer the same way: nothing was registered, so nothing to remove at GitHub.
    await world.kube.delete(PODS, stuck_name, namespace=world.namespace)

    async def pod_gone() -> bool:
        names = {x["metadata"]["name"] for x in await world.pods(live_only=False)}
        return stuck_name not in names

    await until(pod_gone, timeout=30, message="the stuck pod's finalizer done")
    assert world.remove_calls() == 0, "nothing was registered, so nothing to remove"
