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
from typing import Any, cast

import pytest
from _erworld import World, sweeper_fixture, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNER_SETS
from gharc.controllers.scaleset import orphans
from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.kube.resources import SECRETS
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


async def _cached(world: World, sets: int) -> None:
    """Until the cache holds ``sets`` runner sets and the set controller has stopped
    writing them (finalizer, first status): a write between passes is a change."""
    cache = world.cache
    assert cache is not None
    seen: list[tuple[str, ...]] = []

    async def settled() -> bool:
        versions = tuple(
            sorted(
                str(s["metadata"]["resourceVersion"])
                for s in await cache.list(EPHEMERAL_RUNNER_SETS)
            )
        )
        seen.append(versions)
        return len(versions) == sets and seen[-6:] == [versions] * 6

    await eventually(settled, timeout=20, interval=0.2, message="the runner sets settled")


async def test_a_quiet_scale_set_is_looked_at_on_full_passes_only(world: World) -> None:
    """No runner, no registration, its runner set unchanged: no Secret read and no list
    call between full passes (at 1,000 idle sets a look at each every minute was 2,000
    requests a minute); a change to its runner set brings it back at once."""
    assert world.cache is not None
    await world.create_ers(replicas=0, patch_id=0)
    rec = orphans.OrphanReconciler(
        world.kube,
        world.cache,
        ClientResolver(world.kube, world.pool),
        world.recorder,
        full_every=3,
    )
    await _cached(world, 1)
    lists = "*agents*"
    world.gh.reset_calls()
    for _ in range(3):  # full, quiet, quiet
        await rec.sweep()
    assert world.gh.calls(lists, method="GET") == 1
    await rec.sweep()  # the next full pass
    assert world.gh.calls(lists, method="GET") == 2

    # A registration made behind the controller's back waits for a full pass...
    st = world.gh.state
    tenant = st.tenant_from_config_url(world.gh.config_url())
    stray, _ = st.generate_jit_config(tenant, world.scale_set.id, "stray", "_work")
    await rec.sweep()
    assert world.gh.calls(lists, method="GET") == 2
    # ...unless the runner set changes: then the set is looked at on the next pass.
    await world.scale(0, 7)

    cache = world.cache

    async def changed() -> bool:
        [ers] = await cache.list(EPHEMERAL_RUNNER_SETS)
        return int(ers["spec"].get("patchID") or 0) == 7

    await eventually(changed, timeout=10, message="the change cached")
    await rec.sweep()
    assert world.gh.calls(lists, method="GET") == 3
    assert stray.id in world.registered()  # within the grace: seen, not removed yet


async def test_one_list_call_serves_every_scale_set_of_a_scope(world: World) -> None:
    """Three scale sets of one scope, each looked at in a pass: one agent list call (its
    answer lists every registration of the scope)."""
    assert world.cache is not None
    for offset, name in enumerate(("a", "b", "c")):
        ers = await world.create_ers(name, replicas=0, patch_id=0)
        spec = {"ephemeralRunnerSpec": {"runnerScaleSetId": world.scale_set.id + 1000 * offset}}
        await world.kube.merge_patch(
            EPHEMERAL_RUNNER_SETS, name, {"spec": spec}, namespace=world.namespace
        )
        assert ers["metadata"]["name"] == name
    rec = orphans.OrphanReconciler(
        world.kube, world.cache, ClientResolver(world.kube, world.pool), world.recorder
    )
    await _cached(world, 3)
    world.gh.reset_calls()
    await rec.sweep()
    assert world.gh.calls("*agents*", method="GET") == 1


class _SecretReads:
    """The controller's Kubernetes client, counting the Secret reads made through it."""

    def __init__(self, kube: Any) -> None:
        self._kube = kube
        self.secret_gets = 0

    async def get(self, resource: Any, name: str, **kwargs: Any) -> Any:
        if resource == SECRETS:
            self.secret_gets += 1
        return await self._kube.get(resource, name, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)


async def test_a_pass_keeps_the_credentials_past_the_reconciles_ttl_until_github_rejects_them(
    world: World,
) -> None:
    """Each pass re-read every set's Secret (a 30 s TTL, a pass a minute): it now uses one
    up to 10 minutes old, and reads it afresh after GitHub said 401 (a rotated token)."""
    assert world.cache is not None
    await world.create_ers(replicas=0, patch_id=0)
    now = [1000.0]
    kube = _SecretReads(world.kube)
    resolver = ClientResolver(cast(Any, kube), world.pool, clock=lambda: now[0])
    rec = orphans.OrphanReconciler(world.kube, world.cache, resolver, world.recorder, full_every=1)
    await _cached(world, 1)
    await rec.sweep()
    assert kube.secret_gets == 1
    now[0] += 120  # four TTLs of a reconcile
    await rec.sweep()
    assert kube.secret_gets == 1, "the pass read the Secret again within 10 minutes"
    world.gh.add_fault("status", route="*agents*", method="GET", status=401)
    await rec.sweep()
    world.gh.clear_faults()
    await rec.sweep()
    assert kube.secret_gets == 2, "a 401 must make the next pass read the Secret afresh"
