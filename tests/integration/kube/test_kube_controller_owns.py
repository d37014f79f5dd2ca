"""Controllers wired by the Builder, driven by real informers of the real API server."""

from __future__ import annotations

import asyncio
from typing import Any

from gharc.kube.builder import Builder
from gharc.kube.cache import Cache
from gharc.kube.client import KubeClient
from gharc.kube.handler import owner_reference
from gharc.kube.predicate import GenerationChangedPredicate
from gharc.kube.reconcile import Request, Result
from gharc.kube.resources import CONFIG_MAPS, Resource


class Seen:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        return Result()


async def test_owned_object_events_enqueue_the_controlling_owner(
    kube: KubeClient, namespace: str, widgets: Resource, eventually: Any
) -> None:
    owner = await kube.create(
        widgets, {"metadata": {"name": "boss", "namespace": namespace}, "spec": {"size": 1}}
    )
    other = await kube.create(
        widgets, {"metadata": {"name": "bystander", "namespace": namespace}, "spec": {"size": 1}}
    )
    cache = Cache(kube, namespace=namespace)
    seen = Seen()
    controller = (
        Builder(cache)
        .named("widget-owns-test")
        .for_(widgets, GenerationChangedPredicate())
        .owns(CONFIG_MAPS)
        .complete(seen)
    )
    await cache.start()
    run = asyncio.create_task(controller.start())
    try:
        assert await controller.wait_started(10)
        boss, bystander = Request(namespace, "boss"), Request(namespace, "bystander")
        await eventually(lambda: {boss, bystander} <= set(seen.requests))
        seen.requests.clear()

        # A child controlled by `boss`, and one merely owned (not controlled) by `bystander`.
        child = await kube.create(
            CONFIG_MAPS,
            {
                "metadata": {
                    "name": "child",
                    "namespace": namespace,
                    "ownerReferences": [
                        owner_reference(owner),
                        owner_reference(other, controller=False),
                    ],
                }
            },
        )
        await eventually(lambda: boss in seen.requests)
        await kube.merge_patch(CONFIG_MAPS, child, {"data": {"k": "v"}})
        await eventually(lambda: seen.requests.count(boss) >= 2)
        await kube.delete(CONFIG_MAPS, child)
        await eventually(lambda: seen.requests.count(boss) >= 3)
        assert bystander not in seen.requests, "only the controller owner is enqueued"

        # A status-only change of the owner is filtered by GenerationChangedPredicate ...
        count = seen.requests.count(boss)
        await kube.patch_status(widgets, owner, {"status": {"phase": "Ready"}})
        await asyncio.sleep(0.5)
        assert seen.requests.count(boss) == count
        # ... a spec change is not.
        await kube.merge_patch(widgets, owner, {"spec": {"size": 2}})
        await eventually(lambda: seen.requests.count(boss) == count + 1)
    finally:
        await controller.stop()
        await asyncio.wait_for(run, 10)
        await cache.stop()
