"""A runner pod deleted from under its idle runner is unregistered, even when the kubelet
stops the runner before graceful stop runs (legacy.md 4.5 rule 6, B5).

A deletion does not wait for finalizers before the kubelet stops the containers, so the
runner container may already be terminated when the runner-pod controller sees the pod.
An idle runner stopped that way only goes offline and keeps its registration; rule 6 (a
stopped runner has de-registered itself) holds only for a runner that exited after its
job. On a real node this is how a RunnerSet's deletion, through the garbage collector,
left registrations behind (tests/realnode/test_realnode_legacy_runnerset.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_runner_world import World, until, world_fixture

from gharc.api.legacy import constants as c
from gharc.controllers.legacy.githubclients import LegacyGitHub
from gharc.controllers.legacy.pods import RunnerPods
from gharc.controllers.legacy.runnerpod import RunnerPodReconciler
from gharc.kube import errors as kerrors
from gharc.kube.reconcile import Request
from gharc.kube.resources import PODS

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str, api_client: Any) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace, api_client):
        yield w


def runner_terminated(pod: dict[str, Any]) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        if cs.get("name") == c.CONTAINER_RUNNER:
            return bool((cs.get("state") or {}).get("terminated"))
    return False


async def test_an_idle_runner_stopped_by_its_pods_deletion_is_still_unregistered(
    world: World,
) -> None:
    await world.create_deployment(replicas=1)
    [pod] = await world.wait_registered(1)
    name, ns = pod["metadata"]["name"], world.namespace
    assert [r.name for r in world.gh.state.runners.values()] == [name]

    # The kubelet wins the race: no controller runs until the runner container has stopped.
    for ctl in world.controllers:
        await ctl.stop()
    await asyncio.gather(*world.tasks)
    world.controllers, world.tasks = [], []
    await world.kube.delete(PODS, name, namespace=ns)

    async def stopped() -> dict[str, Any] | None:
        live = await world.kube.get(PODS, name, namespace=ns)
        return live if runner_terminated(live) else None

    await until(stopped, timeout=30, message="the runner container stopped by the deletion")
    assert [r.name for r in world.gh.state.runners.values()] == [name]  # offline, registered

    assert world.cache is not None
    github = LegacyGitHub(
        world.kube, world.pool, world.options.github_url, world.options.credentials
    )
    pods = RunnerPods(world.cache)
    reconciler = RunnerPodReconciler(world.kube, world.cache, pods, github, world.options, None)

    async def pod_released() -> bool | None:
        try:
            await world.kube.get(PODS, name, namespace=ns)
        except kerrors.NotFound:
            return True
        await reconciler.reconcile(Request(ns, name))
        return None

    await until(pod_released, timeout=30, message="the pod's finalizer released")
    assert list(world.gh.state.runners.values()) == []
    assert world.remove_calls() == 1
