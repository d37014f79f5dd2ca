"""EphemeralRunner: a runner is registered at GitHub at most once per live registration.

The reconciler reads EphemeralRunners and Pods from the shared cache, which may lag the
API server. These tests drive the reconciler with a cache that answers with an older
version of the object, as a lagging informer would, and check that a finished runner is
never registered again and that a lost JIT secret never leaves two registrations.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _erworld import World, jit_data, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.controllers.scaleset.ephemeralrunner import EphemeralRunnerReconciler
from gharc.kube import errors as kerrors
from gharc.kube.reconcile import Request
from gharc.kube.resources import PODS, SECRETS, Resource
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


class FrozenCache:
    """A cache that answers with the objects it was given, whatever the server holds now."""

    def __init__(self, *objects: JSON) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): copy.deepcopy(o) for o in objects}

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None, copy: bool = False
    ) -> JSON:
        obj = self.objects.get((resource.kind, name))
        if obj is None:
            raise kerrors.NotFound(f"{resource.kind} {name} not found")
        return dict(obj)


def reconciler(world: World, cache: FrozenCache) -> EphemeralRunnerReconciler:
    resolver = ClientResolver(world.kube, world.pool)
    return EphemeralRunnerReconciler(
        world.kube,
        cache,  # type: ignore[arg-type]
        world.options,
        resolver,
        world.recorder,
    )


def jit_calls(world: World) -> int:
    return world.gh.calls("*/generatejitconfig", method="POST")


async def test_finished_runner_read_from_a_stale_cache_is_not_registered_again(
    world: World,
) -> None:
    """Issue 19 §3: Succeeded, pod and secret deleted; a reconcile that still sees the
    Running object (and no pod) must not generate a second JIT config."""
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    name = er["metadata"]["name"]
    await world.run_pod(name)
    job = await world.take_job(er)
    world.complete_job(job)  # the ephemeral runner de-registers itself
    stale = await world.runner(name)
    await world.stop()  # from here only the reconcilers below act
    pod = await world.exit_pod(name, 0)
    live = await world.runner(name)

    req = Request(world.namespace, name)
    assert await reconciler(world, FrozenCache(live, pod)).reconcile(req) is None
    assert (await world.runner(name))["status"]["phase"] == "Succeeded"
    assert await world.secrets() == []
    jits, registered = jit_calls(world), world.registered()
    assert jits == 1 and registered == set()

    # The informer still holds the Running object; the pod's delete already reached it.
    await reconciler(world, FrozenCache(stale)).reconcile(req)

    assert jit_calls(world) == jits, "a finished runner was registered again"
    assert world.registered() == set()
    assert await world.secrets() == []
    assert jit_calls(world) == 1, "one registration in the runner's whole life"
    assert [p["metadata"]["name"] for p in await world.pods()] == []


async def test_runner_whose_secret_was_lost_keeps_one_registration(world: World) -> None:
    """A live runner whose JIT secret and pod are gone: the old registration is removed
    before a new one is made, and status names the registration the new secret holds."""
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    name, old_id = er["metadata"]["name"], er["status"]["runnerId"]
    await world.kube.delete(SECRETS, name, namespace=world.namespace)
    await world.kube.delete(PODS, name, namespace=world.namespace)

    async def replaced() -> JSON | None:
        try:
            secret = await world.kube.get(SECRETS, name, namespace=world.namespace)
        except kerrors.NotFound:
            return None
        runner = await world.runner(name)
        new_id = int(jit_data(secret)["runnerId"])
        if new_id == old_id or (runner.get("status") or {}).get("runnerId") != new_id:
            return None
        return runner

    runner = await eventually(replaced, timeout=20, message="new registration in status")
    new_id = runner["status"]["runnerId"]
    assert world.registered() == {new_id}
    assert old_id in world.gh.state.removed_runners


async def test_pod_is_not_created_twice_when_the_cache_lags(world: World) -> None:
    """The runnerId status write wakes the reconciler before its pod reaches the cache: the
    pod it just created is expected, not created again (a 409 and a 5 s requeue)."""
    await world.stop()
    name = "lagging-runner"
    await world.kube.create(
        EPHEMERAL_RUNNERS,
        {
            "metadata": {
                "name": name,
                "namespace": world.namespace,
                "finalizers": [
                    c.FINALIZER_EPHEMERAL_RUNNER,
                    c.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
                ],
            },
            "spec": world.runner_spec(),
        },
    )
    rec = reconciler(world, FrozenCache(await world.runner(name)))
    req = Request(world.namespace, name)
    await rec.reconcile(req)
    live = await world.runner(name)
    assert live["status"]["runnerId"]
    # The status write is cached, the pod is not yet.
    rec.cache = FrozenCache(live)  # type: ignore[assignment]
    await rec.reconcile(req)

    creates = {
        code: n
        for (verb, res, code), n in world.kube.request_counts.items()
        if (verb, res) == ("create", "pods")
    }
    assert creates == {"201": 1}
    assert [p["metadata"]["name"] for p in await world.pods()] == [name]
