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
    world.register_runners = True  # runners created from now on register normally
    await asyncio.sleep(TIMEOUT / 2)
    # Before the timeout nothing is replaced: the runner may still be registering.
    assert [r["metadata"]["name"] for r in await world.runners()] == [stuck_name]

    async def replaced() -> list[dict[str, Any]] | None:
        pods = await world.pods(live_only=False)
        names = {x["metadata"]["name"] for x in pods}
        registered = [
            x for x in pods if c.ANNOTATION_RUNNER_ID in (x["metadata"].get("annotations") or {})
        ]
        return pods if stuck_name not in names and len(registered) == 1 else None

    await until(replaced, timeout=TIMEOUT + 30, interval=0.2, message="replacement")
    assert len(await world.runners()) == 1
    assert world.remove_calls() == 0, "nothing was registered, so nothing to remove"
