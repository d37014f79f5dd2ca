"""B5's EffectiveTime: after a webhook-driven scale up, a completed ephemeral runner is not
recreated until the autoscaler had its chance to lower the desired count, and is recreated
once the safety delay (10 min in ARC, shortened here) has passed (legacy.md 3.6)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_runner_world import World, until, world_fixture

from gharc.api.resources import RUNNER_DEPLOYMENTS
from gharc.kube import objects

pytestmark = pytest.mark.cluster

DELAY = 6.0


@pytest.fixture
async def world(kubeconfig: str, namespace: str, api_client: Any) -> AsyncIterator[World]:
    async for w in world_fixture(
        kubeconfig, namespace, api_client, recreation_delay=dt.timedelta(seconds=DELAY)
    ):
        yield w


async def test_a_completed_ephemeral_runner_is_not_recreated_before_the_autoscaler_acts(
    world: World,
) -> None:
    await world.create_deployment(replicas=1)
    effective = objects.format_time(dt.datetime.now(dt.UTC) - dt.timedelta(seconds=2))
    await world.kube.merge_patch(
        RUNNER_DEPLOYMENTS, "rd", {"spec": {"effectiveTime": effective}}, namespace=world.namespace
    )
    [pod] = await world.wait_registered(1)
    first = pod["metadata"]["name"]
    world.programs[first].start_job()
    world.programs[first].finish_job()

    async def completed_and_gone() -> bool:
        return not await world.runners()

    await until(completed_and_gone, timeout=30, message="completed runner deleted")
    await asyncio.sleep(DELAY / 3)
    assert await world.runners() == [], "recreated before the autoscaler could scale down"

    async def recreated() -> bool:
        return len(await world.runners()) == 1

    await until(recreated, timeout=DELAY + 20, message="recreated after the safety delay")
