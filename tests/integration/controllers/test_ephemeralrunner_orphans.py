"""Registrations and EphemeralRunners are reconciled against GitHub's runner list (G13).

ARC #4396/#4399: GitHub deleted runners' registrations while their pods ran on, idle, for
hours with jobs queued. The fake deletes a registration and keeps the runner process (its
polls get no job, ever). The periodic reconcile must delete such an idle EphemeralRunner
(the set replaces it) but never a busy one, and must remove a registration of the scale
set that no EphemeralRunner holds, both only after a grace period.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from _erworld import World, sweeper_fixture, world_fixture

from gharc.controllers.scaleset import orphans
from gharc.controllers.scaleset.credentials import ClientResolver
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

INTERVAL = 0.5
GRACE = 1.5


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


sweeper = sweeper_fixture(interval=INTERVAL, grace=GRACE)


async def test_zombie_is_replaced_and_a_busy_runner_is_kept(
    world: World, sweeper: orphans.OrphanReconciler
) -> None:
    await world.create_ers(replicas=2, patch_id=1)
    idle, busy = await world.wait_runners(2)
    for er in (idle, busy):
        await world.run_pod(er["metadata"]["name"])
    busy = await world.runner(busy["metadata"]["name"])
    await world.take_job(busy)
    st = world.gh.state
    zombie_id = int(idle["status"]["runnerId"])
    st.delete_registration_keep_process(zombie_id)
    st.delete_registration_keep_process(int(busy["status"]["runnerId"]))
    t0 = asyncio.get_running_loop().time()

    async def replaced() -> bool:
        names = {r["metadata"]["name"] for r in await world.runners(include_deleting=True)}
        return idle["metadata"]["name"] not in names and len(names) == 2

    await eventually(replaced, timeout=30, message="the zombie runner replaced")
    took = asyncio.get_running_loop().time() - t0
    runners = await world.wait_runners(2)
    names = {r["metadata"]["name"] for r in runners}
    assert busy["metadata"]["name"] in names  # busy: never deleted
    new = next(r for r in runners if r["metadata"]["name"] != busy["metadata"]["name"])
    assert int(new["status"]["runnerId"]) in world.registered()
    await world.recorder.seen("RunnerRegistrationGone", "set")
    assert took < 30  # production: interval 60 s, so within two minutes


async def test_orphan_registration_is_removed_after_grace(
    world: World, sweeper: orphans.OrphanReconciler
) -> None:
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    st = world.gh.state
    tenant = st.tenant_from_config_url(world.gh.config_url())
    stray, _ = st.generate_jit_config(tenant, world.scale_set.id, "stray-runner", "_work")
    busy_stray, _ = st.generate_jit_config(tenant, world.scale_set.id, "busy-stray", "_work")
    busy_stray.job = 999_999  # GitHub says it holds a job: never removed
    assert stray.id in world.registered()

    async def removed() -> bool:
        return stray.id not in world.registered()

    await eventually(removed, timeout=30, message="the orphan registration removed")
    assert int(er["status"]["runnerId"]) in world.registered()
    assert busy_stray.id in world.registered()
    await world.recorder.seen("OrphanRegistrationRemoved", "set")
    busy_stray.job = None


async def test_nothing_is_repaired_within_the_grace(world: World) -> None:
    """A fresh runner whose registration is missing (or a registration no runner holds
    yet) may be one in flight: within the grace, passes leave both alone."""
    assert world.cache is not None
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    await world.run_pod(er["metadata"]["name"])
    st = world.gh.state
    st.delete_registration_keep_process(int(er["status"]["runnerId"]))
    tenant = st.tenant_from_config_url(world.gh.config_url())
    stray, _ = st.generate_jit_config(tenant, world.scale_set.id, "in-flight", "_work")
    rec = orphans.OrphanReconciler(
        world.kube, world.cache, ClientResolver(world.kube, world.pool), world.recorder, grace=3600
    )
    for _ in range(3):
        await rec.sweep()
    assert er["metadata"]["name"] in {r["metadata"]["name"] for r in await world.runners()}
    assert stray.id in world.registered()
    assert not {"RunnerRegistrationGone", "OrphanRegistrationRemoved"} & set(
        world.recorder.reasons()
    )
