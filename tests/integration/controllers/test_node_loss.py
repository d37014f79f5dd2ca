"""G18 node loss on the real API server: a node goes Ready Unknown with its pods left
Running (deletions never finished), and the runners and the listener on it come back."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _arsworld import running_world
from _erworld import World, world_fixture
from _reconciles import reconcile_count, settled_count
from kubernetes_asyncio import client

from gharc.controllers.scaleset import nodeloss
from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.controllers.scaleset.deps import ScaleSetDeps
from gharc.controllers.scaleset.options import ScaleSetOptions
from gharc.kube import errors as kerrors
from gharc.kube.cache import Cache
from gharc.kube.resources import NODES, PODS
from testworld.setupmanager import SetupManager
from testworld.sim.kubelet import KubeletSimulator
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

TIMEOUT = 1.0
JSON = dict[str, Any]


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


@contextlib.asynccontextmanager
async def node_loss_and_kubelet(world: World, api_client: Any) -> AsyncIterator[Any]:
    """The node loss controller, as the manager runs it (its own cache: Nodes and pods),
    and a kubelet simulator on node ``node-<namespace>``; both stopped and the nodes
    deleted afterwards."""
    cache = Cache(world.kube, namespace=world.namespace)
    manager = SetupManager(world.kube, cache)
    options = ScaleSetOptions(controller_namespace=world.namespace, node_loss_timeout=TIMEOUT)
    deps = ScaleSetDeps(options, ClientResolver(world.kube, world.pool))
    controller = nodeloss.setup(manager, deps)
    assert controller is not None
    await cache.start()
    task = asyncio.create_task(controller.start())
    node = f"node-{world.namespace}"
    kubelet = KubeletSimulator(api_client, namespaces=[world.namespace], node_name=node)
    try:
        assert await controller.wait_started(30)
        await kubelet.start()
        yield kubelet
    finally:
        await kubelet.stop()
        await controller.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await cache.stop()
        for extra in {*kubelet.lost_nodes, kubelet.node_name, node}:
            await world.kube.delete(NODES, extra, missing_ok=True)


async def _pods_on(world: World, node: str) -> dict[str, JSON]:
    pods = await world.kube.list(PODS, namespace=world.namespace)
    return {p["metadata"]["name"]: p for p in pods if (p.get("spec") or {}).get("nodeName") == node}


async def test_runners_of_a_lost_node_are_replaced(world: World, api_client: Any) -> None:
    node = f"node-{world.namespace}"
    async with node_loss_and_kubelet(world, api_client) as kubelet:
        await world.create_ers(replicas=3, patch_id=1)
        runners = await world.wait_runners(3)

        async def all_running() -> bool:
            pods = await _pods_on(world, node)
            return len(pods) == 3 and all(
                (p.get("status") or {}).get("phase") == "Running" for p in pods.values()
            )

        await eventually(all_running, timeout=30, message="3 runner pods Running on the node")
        runners = await world.runners()
        busy, idle, leaving = (r["metadata"]["name"] for r in runners)
        await world.take_job(await world.runner(busy))
        lost = await kubelet.lose_node()
        assert len(lost) == 3
        # A deletion that starts once the node is gone: no kubelet will ever finish it.
        await world.kube.delete(PODS, leaving, namespace=world.namespace)
        assert (await world.kube.get(NODES, node))["status"]["conditions"][0]["status"] == (
            "Unknown"
        )

        async def recovered() -> bool:
            names = {r["metadata"]["name"] for r in await world.runners()}
            if busy in names or len(names) != 3:
                return False  # the busy runner's job is lost: it must be replaced
            on_lost = await _pods_on(world, node)
            on_new = await _pods_on(world, kubelet.node_name)
            running = [p for p in on_new.values() if p["status"].get("phase") == "Running"]
            return not on_lost and len(running) == 3

        await eventually(recovered, timeout=60, message="3 runners Running on a live node")
        assert len((await world.runner(idle))["status"]["failures"]) == 1
        await world.recorder.seen("RunnerFailed", busy)
        await world.recorder.seen("PodFailed", idle)
        with pytest.raises(kerrors.NotFound):
            await world.kube.get(PODS, busy, namespace=world.namespace)


async def test_listener_pod_of_a_lost_node_is_recreated(
    kubeconfig: str, namespace: str, api_client: Any
) -> None:
    """A listener pod (``--listener-mode=Pod``) on a node gone NotReady: marked Failed
    (NodeLost) after the timeout, and the AutoscalingListener controller recreates it."""
    node = f"node-{namespace}"
    core = client.CoreV1Api(api_client)
    await core.create_node(
        {"metadata": {"name": node}, "spec": {}},
    )
    try:
        await core.patch_node_status(node, _ready(node, "True"))
        async with running_world(kubeconfig, namespace, node_loss_timeout=TIMEOUT) as w:
            ars = await w.create_ars("arc")
            pod = await w.wait_listener_pod(ars)
            await core.create_namespaced_pod_binding(
                pod["metadata"]["name"],
                namespace,
                {
                    "metadata": {"name": pod["metadata"]["name"]},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                },
                _preload_content=False,
            )
            await w.run_listener(
                await w.kube.get(PODS, pod["metadata"]["name"], namespace=namespace)
            )
            await core.patch_node_status(node, _ready(node, "Unknown"))
            new = await w.wait_listener_pod(ars, other_than=pod["metadata"]["uid"], timeout=40)
            assert not (new.get("spec") or {}).get("nodeName")
    finally:
        await core.delete_node(node)


def _ready(node: str, status: str) -> JSON:
    ts = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": status,
                    "reason": "KubeletReady" if status == "True" else "NodeStatusUnknown",
                    "lastHeartbeatTime": ts,
                    "lastTransitionTime": ts,
                }
            ]
        }
    }


async def test_a_runner_pods_status_writes_do_not_wake_its_node(
    world: World, api_client: Any
) -> None:
    node = f"node-{world.namespace}"
    async with node_loss_and_kubelet(world, api_client):
        await world.create_ers(replicas=1, patch_id=1)

        async def running() -> JSON | None:
            pods = list((await _pods_on(world, node)).values())
            return pods[0] if pods and pods[0]["status"].get("phase") == "Running" else None

        pod = await eventually(running, timeout=30, message="a runner pod Running on the node")
        before = await settled_count("nodeloss")
        for n in range(3):
            condition = {"type": f"example.com/probe-{n}", "status": "True"}
            await world.kube.patch_status(PODS, pod, {"status": {"conditions": [condition]}})
        await asyncio.sleep(2.0)
        assert reconcile_count("nodeloss") == before, "a pod's status write woke its node"
        # The control: a pod bound to the node still wakes it.
        await world.scale(replicas=2, patch_id=2)
        await eventually(lambda: reconcile_count("nodeloss") > before, timeout=30, message="woken")
